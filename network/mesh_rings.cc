#include "network/mesh_rings.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <numeric>
#include <utility>

#include "sim/base/check.h"

namespace dtsim::network {
namespace {

// Search steps (orders extended, cycles tried) a subset's search takes at most, keeping the
// best found.
constexpr int64_t kSearchBudget = 200'000;
// Branch-and-bound steps a whole table may take (every subset of a node): once spent, the
// remaining subsets are packed greedily, so no map costs more than a fraction of a second.
constexpr int64_t kTableBudget = 4'000'000;
// Above this many rings (the fewest links a member has to the others) the packing is greedy:
// the branch and bound grows with the ring count (eight GPUs with 8 links a pair: seconds).
constexpr int kExactRings = 8;
// Cycles enumerated at most per subset (8 fully connected GPUs have 5,040 directed ones).
constexpr size_t kMaxCycles = 100'000;

// A directed ring: its members in order and the arcs it uses (from · gpus + to), an arc twice
// when two of its hops run over it.
struct Cycle {
  std::vector<int> order;
  std::vector<int> arcs;
  bool relayed = false;
};

class RingSearch {
 public:
  // `shared` (may be null): the steps left to the table this search is part of.
  RingSearch(std::span<const int> links, int gpus, std::vector<int> members, int64_t* shared)
      : links_(links), gpus_(gpus), members_(std::move(members)), shared_(shared) {}

  // The rings over direct NVLinks (relay false) or also through one intermediate member.
  MeshRings Pack(bool relay) {
    relay_ = relay;
    cycles_.clear();
    std::vector<int> order = {members_.front()};
    std::vector<int> arcs;
    budget_ = kSearchBudget;
    Enumerate(order, arcs, 1U, false);
    std::vector<int> capacity(links_.begin(), links_.end());
    best_ = 0;
    best_set_.clear();
    chosen_.clear();
    const int64_t allowed = shared_ == nullptr ? kSearchBudget : std::min(kSearchBudget, *shared_);
    budget_ = allowed;
    if (allowed <= 0 || Bound(capacity) > kExactRings) {
      Greedy(capacity);
    } else {
      Choose(0, capacity);
      if (shared_ != nullptr) *shared_ -= allowed - std::max<int64_t>(budget_, 0);
    }
    MeshRings out;
    out.rings = best_;
    for (size_t index : best_set_) {
      out.orders.push_back(cycles_[index].order);
      out.relayed = out.relayed || cycles_[index].relayed;
    }
    return out;
  }

 private:
  // The index of arc from → to in a gpus × gpus table.
  size_t Arc(int from, int to) const {
    return static_cast<size_t>(from) * static_cast<size_t>(gpus_) + static_cast<size_t>(to);
  }
  int Links(int from, int to) const { return links_[Arc(from, to)]; }

  // Calls `visit(arcs of the hop, relayed)` for each way from `from` to `to`: the direct links,
  // or (relay only, when there are none) through a member linked to both.
  template <typename Visit>
  void Hops(int from, int to, Visit&& visit) const {
    if (Links(from, to) > 0) {
      visit({from * gpus_ + to}, false);
      return;
    }
    if (!relay_) return;
    for (int via : members_) {
      if (via == from || via == to || Links(from, via) == 0 || Links(via, to) == 0) continue;
      visit({from * gpus_ + via, via * gpus_ + to}, true);
    }
  }

  // Depth-first over the orders that start at the first member.
  void Enumerate(std::vector<int>& order, std::vector<int>& arcs, uint32_t used, bool relayed) {
    if (cycles_.size() >= kMaxCycles || --budget_ < 0) return;
    const int last = order.back();
    if (order.size() == members_.size()) {
      Hops(last, order.front(), [&](std::initializer_list<int> hop, bool via) {
        Cycle cycle{order, arcs, relayed || via};
        cycle.arcs.insert(cycle.arcs.end(), hop);
        cycles_.push_back(std::move(cycle));
      });
      return;
    }
    for (size_t i = 1; i < members_.size(); ++i) {
      if ((used >> i) & 1U) continue;
      const int next = members_[i];
      Hops(last, next, [&](std::initializer_list<int> hop, bool via) {
        order.push_back(next);
        arcs.insert(arcs.end(), hop);
        Enumerate(order, arcs, used | (1U << i), relayed || via);
        arcs.resize(arcs.size() - hop.size());
        order.pop_back();
      });
    }
  }

  // Each ring leaves every member once, so no more rings fit than the fewest links a member
  // has left towards the others.
  int Bound(const std::vector<int>& capacity) const {
    int bound = 1 << 30;
    for (int from : members_) {
      int out = 0;
      for (int to : members_) out += capacity[Arc(from, to)];
      bound = std::min(bound, out);
    }
    return bound;
  }

  // Each cycle in turn, as many times as its links still allow (NCCL's search is greedy too).
  void Greedy(std::vector<int>& capacity) {
    for (size_t i = 0; i < cycles_.size(); ++i) {
      std::vector<std::pair<int, int>> uses;  // (arc, times the cycle crosses it)
      for (int arc : cycles_[i].arcs) {
        auto it = std::find_if(uses.begin(), uses.end(),
                               [&](const std::pair<int, int>& use) { return use.first == arc; });
        if (it == uses.end()) {
          uses.emplace_back(arc, 1);
        } else {
          ++it->second;
        }
      }
      int copies = 1 << 30;
      for (const auto& [arc, times] : uses) {
        copies = std::min(copies, capacity[static_cast<size_t>(arc)] / times);
      }
      for (const auto& [arc, times] : uses) capacity[static_cast<size_t>(arc)] -= copies * times;
      best_set_.insert(best_set_.end(), static_cast<size_t>(copies), i);
      best_ += copies;
    }
  }

  // Branch and bound over multisets of cycles (index order, repeats allowed).
  void Choose(size_t first, std::vector<int>& capacity) {
    const int count = static_cast<int>(chosen_.size());
    if (count > best_) {
      best_ = count;
      best_set_ = chosen_;
    }
    if (--budget_ < 0 || count + Bound(capacity) <= best_) return;
    for (size_t i = first; i < cycles_.size(); ++i) {
      if (--budget_ < 0) return;  // every cycle tried is a step
      const Cycle& cycle = cycles_[i];
      bool fits = true;
      for (int arc : cycle.arcs) fits = --capacity[static_cast<size_t>(arc)] >= 0 && fits;
      if (fits) {
        chosen_.push_back(i);
        Choose(i, capacity);
        chosen_.pop_back();
      }
      for (int arc : cycle.arcs) ++capacity[static_cast<size_t>(arc)];
    }
  }

  std::span<const int> links_;
  int gpus_;
  std::vector<int> members_;
  bool relay_ = false;
  std::vector<Cycle> cycles_;
  std::vector<size_t> chosen_;
  std::vector<size_t> best_set_;
  int best_ = 0;
  int64_t budget_ = 0;
  int64_t* shared_ = nullptr;
};

// PackMeshRings with a table's shared step budget (null: none).
MeshRings Pack(std::span<const int> links, int gpus, uint32_t members, int64_t* shared) {
  DTSIM_CHECK(gpus >= 1 && gpus <= kMaxMeshGpus, "a mesh has 1 to 8 GPUs");
  DTSIM_CHECK(links.size() == static_cast<size_t>(gpus * gpus), "a mesh's links are gpus²");
  std::vector<int> list;
  for (int g = 0; g < gpus; ++g) {
    if ((members >> g) & 1U) list.push_back(g);
  }
  if (list.size() < 2) return {};
  // Links in a common multiple g among the members pack g times the rings of the map divided
  // by g (a DGX-1's 1s and 2s: g = 1; eight GPUs with 8 links a pair: g = 8, 7 rings × 8).
  int g = 0;
  for (int a : list) {
    for (int b : list) g = std::gcd(g, links[static_cast<size_t>(a) * gpus + b]);
  }
  std::vector<int> scaled(links.begin(), links.end());
  if (g > 1) {
    for (int& count : scaled) count /= g;
  }
  RingSearch search(scaled, gpus, list, shared);
  MeshRings rings = search.Pack(false);
  if (rings.rings == 0) rings = search.Pack(true);
  if (rings.rings == 0) return MeshRings{.rings = 1, .host = true, .orders = {list}};
  if (g > 1) {
    const std::vector<std::vector<int>> once = rings.orders;
    for (int copy = 1; copy < g; ++copy) {
      rings.orders.insert(rings.orders.end(), once.begin(), once.end());
    }
    rings.rings *= g;
  }
  return rings;
}

}  // namespace

MeshRings PackMeshRings(std::span<const int> links, int gpus, uint32_t members) {
  return Pack(links, gpus, members, nullptr);
}

std::shared_ptr<const MeshRingTable> BuildMeshRingTable(std::span<const int> links, int gpus) {
  auto table = std::make_shared<MeshRingTable>(size_t{1} << gpus);
  int64_t budget = kTableBudget;
  for (uint32_t members = 0; members < (1U << gpus); ++members) {
    (*table)[members] = Pack(links, gpus, members, &budget);
  }
  return table;
}

}  // namespace dtsim::network
