// Flows sharing links max-min fairly (a fluid model): each flow crosses a path of links, each
// link has a capacity in bytes per second, and every flow gets the max-min fair rate — no link
// over capacity, and no flow's rate can grow without shrinking a flow whose rate is not larger
// (Bertsekas & Gallager, Data Networks, §6.5). A path may cross a link more than once (a
// pipeline whose edges share it): the link then carries the flow's rate once per crossing. Rates
// are recomputed by progressive filling whenever the set of flows changes; between changes every
// flow moves at its rate.
//
// Costs follow the change, not the traffic in flight: a flow's bytes are settled only when its
// rate changes, its finish time sits in a heap, and a rate update recomputes only the flows a
// change can affect. So Advance is O(1), NextCompletion amortized O(log F), TakeCompleted
// O(k log F) for k completions.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <tuple>
#include <vector>

#include "sim/base/time.h"

namespace dtsim::network {

class FluidNetwork {
 public:
  using LinkId = uint32_t;
  using FlowId = uint32_t;

  // Precondition: capacity > 0 (bytes per second).
  LinkId AddLink(double capacity);
  size_t link_count() const { return links_.size(); }
  // Whether any active flow crosses the link.
  bool busy(LinkId link) const { return !links_[link].flows.empty(); }

  // A flow of `bytes` over `path` (at least one link), starting at the last Advance() time.
  // Its rate is 0 until the next UpdateRates(). `owner` is returned with it on completion.
  // `max_rate` (bytes per second, > 0) caps its rate whatever the links leave it — what one
  // connection can drive (NCCL's channels for a point-to-point transfer); the rest of its
  // links' capacity goes to the other flows, max-min fairly.
  FlowId StartFlow(std::span<const LinkId> path, double bytes, uint64_t owner,
                   double max_rate = kUncapped);
  static constexpr double kUncapped = std::numeric_limits<double>::infinity();
  // Makes room for `flows` more flows at once (a step of an all-to-all starts p(p − 1)), so
  // the flow table grows once instead of doubling its way there, copying itself each time.
  void ReserveFlows(size_t flows);

  // Moves every active flow forward to `now` at its current rate. Time may only go back on a
  // network with no active flows.
  void Advance(TimeNs now);
  // Recomputes the max-min fair rates of the active flows. Only the flows that share links,
  // directly or through other flows, with a flow started or removed since the last call can
  // change rate (max-min fairness separates over such components), so only they are recomputed.
  void UpdateRates();
  // When the first active flow will finish at current rates (TimeNs::Max() if none): the
  // nanosecond at or after which it has nothing left to send.
  TimeNs NextCompletion();
  // Removes and returns the owners of flows finished by the last Advance() time, in an order
  // that depends only on the calls made (earliest first while few are due at once).
  std::vector<uint64_t> TakeCompleted();

  size_t active_flows() const { return active_.size(); }
  // (owner, bytes left) of every active flow, in no particular order.
  std::vector<std::pair<uint64_t, double>> ActiveFlows() const;
  // Removes every active flow.
  void Clear();
  double rate(FlowId flow) const { return flows_[flow].rate; }
  // Bytes left at the last Advance() time.
  double remaining(FlowId flow) const;

 private:
  // A flow crossing a link, and which hop of its path the crossing is (a pipeline's path may
  // cross a link more than once), so that removing another flow moves it in O(1).
  struct Crossing {
    FlowId flow;
    uint32_t hop;
  };
  struct Link {
    double capacity = 0;
    std::vector<Crossing> flows;  // active flows crossing it, once per crossing
    // UpdateRates scratch: capacity not yet given out, and flows crossing it still unfrozen.
    double residual = 0;
    uint32_t unfrozen = 0;
    uint64_t seen = 0;  // the UpdateRates (or dirtying) epoch that last visited it
  };
  // One link of a flow's path, and the crossing's index in that link's list of flows.
  struct Hop {
    LinkId link;
    uint32_t slot;
  };
  struct Flow {  // 80 bytes: the 32-bit fields first, so no padding falls between them
    // Its path: hops_[first, first + length). A reused slot keeps its span when the new path
    // fits (`capacity`); otherwise it takes a new, larger one at the end of hops_.
    uint32_t first = 0;
    uint32_t length = 0;
    uint32_t capacity = 0;
    uint32_t version = 0;       // bumped when finish changes or the slot is reused
    uint32_t active_index = 0;  // position in active_
    bool frozen = false;        // UpdateRates scratch: its rate is final
    double remaining = 0;       // bytes left at `since`
    TimeNs since;               // when `rate` was set
    double rate = 0;
    TimeNs finish = TimeNs::Max();  // at this rate
    uint64_t owner = 0;
    double new_rate = 0;  // UpdateRates scratch: the rate it is given
    uint64_t seen = 0;    // the UpdateRates epoch that last visited it
  };
  static_assert(sizeof(Flow) <= 80,
                "the flow record grew: a million-flow all-to-all touches all of it");

  std::span<Hop> HopsOf(const Flow& flow) { return {hops_.data() + flow.first, flow.length}; }
  std::span<const Hop> HopsOf(const Flow& flow) const {
    return {hops_.data() + flow.first, flow.length};
  }
  // Gives the flow a span of `length` hops, reusing its own when large enough.
  void ReserveHops(Flow& flow, uint32_t length);
  void RemoveFlow(FlowId flow);
  // UpdateRates: gives an unfrozen flow its final rate and takes it from its links.
  void FreezeAt(FlowId flow, double rate);
  void MarkDirty(LinkId link);
  // Settles the flow's bytes at now_, gives it `rate` and files its new finish time.
  void SetRate(FlowId flow, double rate);
  // The finish heap from the active flows alone (no stale entries).
  void RebuildFinishes();

  std::vector<Link> links_;
  std::vector<Flow> flows_;
  std::vector<FlowId> free_flows_;  // slots to reuse (they keep their span of hops_)
  // Every flow's path in one array (one allocation for a million flows, not two each).
  std::vector<Hop> hops_;
  std::vector<FlowId> active_;
  TimeNs now_;
  // Links whose flows changed since the last UpdateRates (each once: Link::seen == epoch_).
  std::vector<LinkId> dirty_links_;
  uint64_t epoch_ = 1;  // bumped by every UpdateRates
  // UpdateRates scratch, kept to avoid reallocating: the component to recompute, the heap of
  // (share, link).
  std::vector<LinkId> component_links_;
  std::vector<FlowId> component_flows_;
  // UpdateRates' progressive filling: (share, link) entries, and (cap, kCapEntry | flow) for
  // capped flows, smallest first; ties go to links, then to the lower id.
  static constexpr uint64_t kCapEntry = uint64_t{1} << 32;
  std::vector<std::pair<double, uint64_t>> heap_;
  std::vector<double> max_rates_;  // per flow slot: its cap (kUncapped: none)
  // Finish times of active flows, earliest first; an entry whose version differs from its
  // flow's is stale and skipped (and all of them dropped when they outnumber the live ones).
  struct Finish {
    TimeNs at;
    FlowId flow = 0;
    uint32_t version = 0;
    bool operator>(const Finish& other) const {
      return std::tie(at, flow, version) > std::tie(other.at, other.flow, other.version);
    }
  };
  std::vector<Finish> finishes_;
};

}  // namespace dtsim::network
