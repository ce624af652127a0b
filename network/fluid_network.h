// Flows sharing links max-min fairly (a fluid model): each flow crosses a path of links, each
// link has a capacity in bytes per second, and every flow gets the max-min fair rate — no link
// over capacity, and no flow's rate can grow without shrinking a flow whose rate is not larger
// (Bertsekas & Gallager, Data Networks, §6.5). Rates are recomputed by progressive filling
// whenever the set of flows changes; between changes every flow moves at its rate.
#pragma once

#include <cstdint>
#include <span>
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

  // A flow of `bytes` over `path` (at least one link), starting at the last Advance() time.
  // Its rate is 0 until the next UpdateRates(). `owner` is returned with it on completion.
  FlowId StartFlow(std::span<const LinkId> path, double bytes, uint64_t owner);

  // Moves every active flow forward to `now` at its current rate.
  void Advance(TimeNs now);
  // Recomputes the max-min fair rates of the active flows. Only the flows that share links,
  // directly or through other flows, with a flow started or removed since the last call can
  // change rate (max-min fairness separates over such components), so only they are recomputed.
  void UpdateRates();
  // When the first active flow will finish at current rates (TimeNs::Max() if none).
  TimeNs NextCompletion() const;
  // Removes and returns the owners of flows with nothing left to send (after Advance()).
  std::vector<uint64_t> TakeCompleted();

  size_t active_flows() const { return active_.size(); }
  // (owner, bytes left) of every active flow, in no particular order.
  std::vector<std::pair<uint64_t, double>> ActiveFlows() const;
  // Removes every active flow.
  void Clear();
  double rate(FlowId flow) const { return flows_[flow].rate; }
  double remaining(FlowId flow) const { return flows_[flow].remaining; }

 private:
  struct Link {
    double capacity = 0;
    std::vector<FlowId> flows;  // active flows crossing it
    uint32_t busy_index = 0;    // position in busy_links_ while it has flows
    // UpdateRates scratch: capacity not yet given out, and flows crossing it still unfrozen.
    double residual = 0;
    uint32_t unfrozen = 0;
    uint64_t seen = 0;  // the UpdateRates (or dirtying) epoch that last visited it
  };
  struct Flow {
    std::vector<LinkId> path;
    std::vector<uint32_t> slots;  // slots[i]: this flow's index in links_[path[i]].flows
    double remaining = 0;
    double rate = 0;
    uint64_t owner = 0;
    uint32_t active_index = 0;  // position in active_
    bool frozen = false;        // UpdateRates scratch: its rate is final
    uint64_t seen = 0;          // the UpdateRates epoch that last visited it
  };

  void RemoveFlow(FlowId flow);
  void MarkDirty(LinkId link);

  std::vector<Link> links_;
  std::vector<Flow> flows_;
  std::vector<FlowId> free_flows_;  // slots to reuse (their path vectors keep their capacity)
  std::vector<FlowId> active_;
  // Links with at least one active flow: UpdateRates touches only these, so its cost follows
  // the traffic in flight, not the size of the cluster.
  std::vector<LinkId> busy_links_;
  TimeNs now_;
  // Links whose flows changed since the last UpdateRates (each once: Link::seen == dirty_epoch_).
  std::vector<LinkId> dirty_links_;
  uint64_t epoch_ = 1;        // bumped by every UpdateRates
  // UpdateRates scratch, kept to avoid reallocating: the component to recompute, the heap of
  // (share, link).
  std::vector<LinkId> component_links_;
  std::vector<FlowId> component_flows_;
  std::vector<std::pair<double, LinkId>> heap_;
};

}  // namespace dtsim::network
