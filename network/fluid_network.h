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
  // Recomputes the max-min fair rates of all active flows.
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
  };
  struct Flow {
    std::vector<LinkId> path;
    std::vector<uint32_t> slots;  // slots[i]: this flow's index in links_[path[i]].flows
    double remaining = 0;
    double rate = 0;
    uint64_t owner = 0;
    uint32_t active_index = 0;  // position in active_
  };

  void RemoveFlow(FlowId flow);

  std::vector<Link> links_;
  std::vector<Flow> flows_;
  std::vector<FlowId> free_flows_;  // slots to reuse (their path vectors keep their capacity)
  std::vector<FlowId> active_;
  TimeNs now_;
  // Scratch for UpdateRates, kept to avoid reallocating.
  std::vector<double> residual_;
  std::vector<uint32_t> unfrozen_;
  std::vector<uint8_t> frozen_;
};

}  // namespace dtsim::network
