#include "network/fluid_network.h"

#include <algorithm>
#include <cmath>
#include <queue>

#include "sim/base/check.h"

namespace dtsim::network {
namespace {

// A flow with less than this many bytes left is complete: the remainders of exact
// completions are rounding noise of rate x time in doubles.
constexpr double kDoneBytes = 1e-3;

}  // namespace

FluidNetwork::LinkId FluidNetwork::AddLink(double capacity) {
  DTSIM_CHECK(capacity > 0, "link capacity must be positive");
  links_.push_back({.capacity = capacity});
  return static_cast<LinkId>(links_.size() - 1);
}

FluidNetwork::FlowId FluidNetwork::StartFlow(std::span<const LinkId> path, double bytes,
                                             uint64_t owner) {
  DTSIM_CHECK(!path.empty(), "a flow needs at least one link");
  FlowId id;
  if (free_flows_.empty()) {
    id = static_cast<FlowId>(flows_.size());
    flows_.emplace_back();
  } else {
    id = free_flows_.back();
    free_flows_.pop_back();
  }
  Flow& flow = flows_[id];
  flow.path.assign(path.begin(), path.end());
  flow.remaining = bytes;
  flow.rate = 0;
  flow.owner = owner;
  flow.active_index = static_cast<uint32_t>(active_.size());
  active_.push_back(id);
  flow.slots.clear();
  for (LinkId link : path) {
    DTSIM_CHECK(link < links_.size(), "unknown link");
    flow.slots.push_back(static_cast<uint32_t>(links_[link].flows.size()));
    links_[link].flows.push_back(id);
  }
  return id;
}

void FluidNetwork::Advance(TimeNs now) {
  const double seconds = static_cast<double>((now - now_).ns()) * 1e-9;
  now_ = now;
  if (seconds <= 0) return;
  for (FlowId id : active_) flows_[id].remaining -= flows_[id].rate * seconds;
}

// Progressive filling: repeatedly take the link whose residual capacity split among its
// unfrozen flows is smallest, give those flows that share, and freeze them. A link's share
// never decreases as flows elsewhere freeze (each frozen flow takes at most the current
// minimum), so stale heap entries are detected by recomputing and simply pushed again.
void FluidNetwork::UpdateRates() {
  residual_.assign(links_.size(), 0);
  unfrozen_.assign(links_.size(), 0);
  frozen_.assign(flows_.size(), 0);
  using Entry = std::pair<double, LinkId>;  // (share, link)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  for (LinkId l = 0; l < links_.size(); ++l) {
    if (links_[l].flows.empty()) continue;
    residual_[l] = links_[l].capacity;
    unfrozen_[l] = static_cast<uint32_t>(links_[l].flows.size());
    heap.emplace(residual_[l] / unfrozen_[l], l);
  }
  while (!heap.empty()) {
    const auto [share, link] = heap.top();
    heap.pop();
    if (unfrozen_[link] == 0) continue;
    const double current = std::max(0.0, residual_[link]) / unfrozen_[link];
    if (current > share) {
      heap.emplace(current, link);
      continue;
    }
    for (FlowId id : links_[link].flows) {
      if (frozen_[id]) continue;
      frozen_[id] = 1;
      flows_[id].rate = current;
      for (LinkId other : flows_[id].path) {
        residual_[other] -= current;
        --unfrozen_[other];
      }
    }
  }
}

TimeNs FluidNetwork::NextCompletion() const {
  TimeNs first = TimeNs::Max();
  for (FlowId id : active_) {
    const Flow& flow = flows_[id];
    if (flow.remaining <= kDoneBytes) return now_;
    if (flow.rate <= 0) continue;
    const double ns = std::ceil(flow.remaining / flow.rate * 1e9);
    first = std::min(first, now_ + DurationNs(static_cast<int64_t>(ns)));
  }
  return first;
}

std::vector<uint64_t> FluidNetwork::TakeCompleted() {
  std::vector<uint64_t> owners;
  for (size_t i = 0; i < active_.size();) {
    const FlowId id = active_[i];
    if (flows_[id].remaining <= kDoneBytes) {
      owners.push_back(flows_[id].owner);
      RemoveFlow(id);  // moves the last active flow into slot i
    } else {
      ++i;
    }
  }
  return owners;
}

std::vector<std::pair<uint64_t, double>> FluidNetwork::ActiveFlows() const {
  std::vector<std::pair<uint64_t, double>> flows;
  flows.reserve(active_.size());
  for (FlowId id : active_) flows.emplace_back(flows_[id].owner, flows_[id].remaining);
  return flows;
}

void FluidNetwork::Clear() {
  while (!active_.empty()) RemoveFlow(active_.back());
}

// O(path length): each link's list is unordered; the removed flow's slot takes the list's last
// flow, whose slot for that link is updated.
void FluidNetwork::RemoveFlow(FlowId id) {
  Flow& flow = flows_[id];
  for (size_t i = 0; i < flow.path.size(); ++i) {
    std::vector<FlowId>& on_link = links_[flow.path[i]].flows;
    const FlowId last = on_link.back();
    on_link[flow.slots[i]] = last;
    Flow& moved = flows_[last];
    for (size_t j = 0; j < moved.path.size(); ++j) {
      if (moved.path[j] == flow.path[i] && moved.slots[j] == on_link.size() - 1) {
        moved.slots[j] = flow.slots[i];
        break;
      }
    }
    on_link.pop_back();
  }
  const FlowId moved = active_.back();
  active_[flow.active_index] = moved;
  flows_[moved].active_index = flow.active_index;
  active_.pop_back();
  free_flows_.push_back(id);
}

}  // namespace dtsim::network
