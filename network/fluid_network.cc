#include "network/fluid_network.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "sim/base/check.h"

namespace dtsim::network {
namespace {

// A flow with less than this many bytes left is complete: the remainders of exact
// completions are rounding noise of rate x time in doubles.
constexpr double kDoneBytes = 1e-3;
// The smallest span of hops_ a flow slot takes: a switched route's longest path.
constexpr uint32_t kMinHopSpan = 4;

// Room for `more` elements past the end, growing geometrically as push_back would: a bare
// reserve(size + more) on every step of a simulation would reallocate (and copy) each time.
template <typename T>
void ReserveMore(std::vector<T>& vector, size_t more) {
  const size_t needed = vector.size() + more;
  if (needed > vector.capacity()) vector.reserve(std::max(needed, 2 * vector.capacity()));
}

}  // namespace

FluidNetwork::LinkId FluidNetwork::AddLink(double capacity) {
  DTSIM_CHECK(capacity > 0, "link capacity must be positive");
  links_.push_back({.capacity = capacity});
  return static_cast<LinkId>(links_.size() - 1);
}

FluidNetwork::FlowId FluidNetwork::StartFlow(std::span<const LinkId> path, double bytes,
                                             uint64_t owner, double max_rate) {
  DTSIM_CHECK(!path.empty(), "a flow needs at least one link");
  DTSIM_CHECK(max_rate > 0, "a flow's rate cap is positive");
  FlowId id;
  if (free_flows_.empty()) {
    id = static_cast<FlowId>(flows_.size());
    flows_.emplace_back();
    max_rates_.push_back(kUncapped);
  } else {
    id = free_flows_.back();
    free_flows_.pop_back();
  }
  max_rates_[id] = max_rate;
  Flow& flow = flows_[id];
  ReserveHops(flow, static_cast<uint32_t>(path.size()));
  flow.remaining = bytes;
  flow.since = now_;
  flow.rate = 0;
  flow.finish = TimeNs::Max();
  ++flow.version;
  flow.owner = owner;
  flow.active_index = static_cast<uint32_t>(active_.size());
  active_.push_back(id);
  Hop* hop = hops_.data() + flow.first;
  for (uint32_t index = 0; index < path.size(); ++index) {
    const LinkId link = path[index];
    DTSIM_CHECK(link < links_.size(), "unknown link");
    Link& on = links_[link];
    *hop++ = {link, static_cast<uint32_t>(on.flows.size())};
    on.flows.push_back({id, index});
    MarkDirty(link);
  }
  if (bytes <= kDoneBytes) SetRate(id, 0);  // nothing to send: finished now
  return id;
}

void FluidNetwork::ReserveFlows(size_t flows) {
  ReserveMore(active_, flows);
  if (flows <= free_flows_.size()) return;
  const size_t new_slots = flows - free_flows_.size();
  ReserveMore(flows_, new_slots);
  ReserveMore(max_rates_, new_slots);
  ReserveMore(hops_, kMinHopSpan * new_slots);  // exact for switched routes
}

// Spans come in powers of two of at least four hops (a switched route has at most four), so
// a slot moves to a new span at most a few times in its life and the spans it leaves behind
// total less than the one it holds: hops_ stays within a small factor of the largest number of
// flows ever active at once times their longest path, and is never repacked.
void FluidNetwork::ReserveHops(Flow& flow, uint32_t length) {
  flow.length = length;
  if (length <= flow.capacity) return;
  const uint32_t capacity = std::bit_ceil(std::max(length, kMinHopSpan));
  DTSIM_CHECK(hops_.size() + capacity <= UINT32_MAX, "too many flow hops");
  flow.first = static_cast<uint32_t>(hops_.size());
  flow.capacity = capacity;
  hops_.resize(hops_.size() + capacity);
}

void FluidNetwork::Advance(TimeNs now) {
  DTSIM_CHECK(now >= now_ || active_.empty(), "time went back with flows in flight");
  now_ = now;
}

double FluidNetwork::remaining(FlowId id) const {
  const Flow& flow = flows_[id];
  return flow.remaining - flow.rate * static_cast<double>((now_ - flow.since).ns()) * 1e-9;
}

void FluidNetwork::SetRate(FlowId id, double rate) {
  Flow& flow = flows_[id];
  flow.remaining = remaining(id);
  flow.since = now_;
  flow.rate = rate;
  if (flow.remaining <= kDoneBytes) {
    flow.finish = now_;
  } else if (rate > 0) {
    flow.finish = now_ + ClampedNs(std::ceil(flow.remaining / rate * 1e9));
  } else {
    flow.finish = TimeNs::Max();
  }
  ++flow.version;
  if (flow.finish == TimeNs::Max()) return;
  finishes_.push_back({flow.finish, id, flow.version});
  std::push_heap(finishes_.begin(), finishes_.end(), std::greater<Finish>());
  // A rate that rises leaves a stale entry later than the new one, dropped only when its time
  // comes; long contended flows could pile them up, so past twice the live ones they go.
  if (finishes_.size() > 2 * active_.size() + 1024) RebuildFinishes();
}

void FluidNetwork::RebuildFinishes() {
  finishes_.clear();
  for (FlowId id : active_) {
    const Flow& flow = flows_[id];
    if (flow.finish != TimeNs::Max()) finishes_.push_back({flow.finish, id, flow.version});
  }
  std::make_heap(finishes_.begin(), finishes_.end(), std::greater<Finish>());
}

// A link is marked with the current epoch when dirtied. UpdateRates visits under the next epoch
// and leaves epoch_ one past it, so a dirty mark is never mistaken for a visit or vice versa.
void FluidNetwork::MarkDirty(LinkId link) {
  if (links_[link].seen == epoch_) return;
  links_[link].seen = epoch_;
  dirty_links_.push_back(link);
}

void FluidNetwork::FreezeAt(FlowId id, double rate) {
  Flow& flow = flows_[id];
  if (flow.frozen) return;
  flow.frozen = true;
  flow.new_rate = rate;
  for (const Hop& hop : HopsOf(flow)) {
    links_[hop.link].residual -= rate;
    --links_[hop.link].unfrozen;
  }
}

// First the component: every busy link reachable from a dirty one through the flows crossing
// them. Then progressive filling on it: repeatedly take the link whose residual capacity split
// among its unfrozen flows is smallest, give those flows that share, and freeze them. A link's
// share never decreases as flows elsewhere freeze (each frozen flow takes at most the current
// minimum), so stale heap entries are detected by recomputing and simply pushed again. A flow
// with a rate cap is an entry of its own at its cap: popped before every link whose share is
// larger, it freezes at its cap (the same as a private link of that capacity).
// O((F·path + B) log B) for the component's F flows on B links; the arithmetic is the same as
// a recomputation of every flow, so rates do not depend on what was dirty.
void FluidNetwork::UpdateRates() {
  const uint64_t epoch = ++epoch_;
  ++epoch_;  // the epoch of the dirty marks that follow this call
  component_links_.clear();
  component_flows_.clear();
  for (LinkId l : dirty_links_) {
    if (links_[l].flows.empty() || links_[l].seen == epoch) continue;
    links_[l].seen = epoch;
    component_links_.push_back(l);
  }
  dirty_links_.clear();
  for (size_t next = 0; next < component_links_.size(); ++next) {
    for (const Crossing crossing : links_[component_links_[next]].flows) {
      const FlowId id = crossing.flow;
      Flow& flow = flows_[id];
      if (flow.seen == epoch) continue;
      flow.seen = epoch;
      flow.frozen = false;
      flow.new_rate = 0;
      component_flows_.push_back(id);
      for (const Hop& hop : HopsOf(flow)) {
        if (links_[hop.link].seen == epoch) continue;
        links_[hop.link].seen = epoch;
        component_links_.push_back(hop.link);
      }
    }
  }
  using Entry = std::pair<double, uint64_t>;  // see heap_
  heap_.clear();
  for (LinkId l : component_links_) {
    Link& link = links_[l];
    link.residual = link.capacity;
    link.unfrozen = static_cast<uint32_t>(link.flows.size());
    heap_.emplace_back(link.residual / link.unfrozen, l);
  }
  for (FlowId id : component_flows_) {
    if (max_rates_[id] != kUncapped) heap_.emplace_back(max_rates_[id], kCapEntry | id);
  }
  const auto later = std::greater<Entry>();
  std::make_heap(heap_.begin(), heap_.end(), later);
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    const auto [share, key] = heap_.back();
    heap_.pop_back();
    if ((key & kCapEntry) != 0) {
      // A capped flow reaches its cap before any of its links fills (shares only grow as
      // flows freeze, and every link entry still queued is at least this cap).
      FreezeAt(static_cast<FlowId>(key & ~kCapEntry), share);
      continue;
    }
    const auto l = static_cast<LinkId>(key);
    const Link& link = links_[l];
    if (link.unfrozen == 0) continue;
    const double current = std::max(0.0, link.residual) / link.unfrozen;
    if (current > share) {
      heap_.emplace_back(current, l);
      std::push_heap(heap_.begin(), heap_.end(), later);
      continue;
    }
    for (const Crossing crossing : link.flows) FreezeAt(crossing.flow, current);
  }
  // A flow whose rate is unchanged keeps its bytes and finish time as they are (a flow new
  // since the last update has rate 0 and no finish, so it always gets one).
  for (FlowId id : component_flows_) {
    if (flows_[id].new_rate != flows_[id].rate || flows_[id].finish == TimeNs::Max()) {
      SetRate(id, flows_[id].new_rate);
    }
  }
}

TimeNs FluidNetwork::NextCompletion() {
  const auto later = std::greater<Finish>();
  while (!finishes_.empty()) {
    const Finish& first = finishes_.front();
    if (flows_[first.flow].version == first.version) return first.at;
    std::pop_heap(finishes_.begin(), finishes_.end(), later);
    finishes_.pop_back();
  }
  return TimeNs::Max();
}

// Completions come off the heap one by one. When many finish at once (the p(p-1) flows of an
// all-to-all step) popping each costs O(log F) scattered reads, so past a few the active flows
// are swept in order instead and the heap is rebuilt from those left: O(F), sequential.
std::vector<uint64_t> FluidNetwork::TakeCompleted() {
  constexpr int kPopsBeforeSweep = 64;
  std::vector<uint64_t> owners;
  const auto later = std::greater<Finish>();
  for (int popped = 0; NextCompletion() <= now_; ++popped) {
    if (popped == kPopsBeforeSweep) {
      for (size_t i = 0; i < active_.size();) {
        const FlowId id = active_[i];
        if (flows_[id].finish <= now_) {
          owners.push_back(flows_[id].owner);
          RemoveFlow(id);  // moves the last active flow into slot i
        } else {
          ++i;
        }
      }
      RebuildFinishes();
      break;
    }
    const FlowId id = finishes_.front().flow;
    std::pop_heap(finishes_.begin(), finishes_.end(), later);
    finishes_.pop_back();
    owners.push_back(flows_[id].owner);
    RemoveFlow(id);
  }
  return owners;
}

std::vector<std::pair<uint64_t, double>> FluidNetwork::ActiveFlows() const {
  std::vector<std::pair<uint64_t, double>> flows;
  flows.reserve(active_.size());
  for (FlowId id : active_) flows.emplace_back(flows_[id].owner, remaining(id));
  return flows;
}

void FluidNetwork::Clear() {
  while (!active_.empty()) RemoveFlow(active_.back());
  finishes_.clear();
}

// O(path length): each link's list is unordered; the removed crossing's slot takes the list's
// last crossing, whose hop (found through the crossing, O(1)) learns its new slot. That hop may
// be a later one of this same flow (a pipeline crossing the link again): it is read afresh.
void FluidNetwork::RemoveFlow(FlowId id) {
  Flow& flow = flows_[id];
  for (const Hop& hop : HopsOf(flow)) {
    MarkDirty(hop.link);
    std::vector<Crossing>& on_link = links_[hop.link].flows;
    const Crossing last = on_link.back();
    on_link[hop.slot] = last;
    hops_[flows_[last.flow].first + last.hop].slot = hop.slot;
    on_link.pop_back();
  }
  const FlowId moved = active_.back();
  active_[flow.active_index] = moved;
  flows_[moved].active_index = flow.active_index;
  active_.pop_back();
  ++flow.version;  // its heap entries, if any, are stale
  flow.finish = TimeNs::Max();
  free_flows_.push_back(id);
}

}  // namespace dtsim::network
