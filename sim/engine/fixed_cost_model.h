// The simplest communication model: every communication takes
//     latency + size / bandwidth
// where size is the bytes per rank of a collective or the message of a send/recv (a barrier
// moves nothing and takes the latency alone). No algorithm, no topology, no contention: it is
// for tests and for `dtsim run` on graphs whose communication cost is not the question. The
// network module's analytical and flow models replace it for real predictions.
#pragma once

#include "sim/base/units.h"
#include "sim/engine/communication.h"

namespace dtsim::engine {

class FixedCostModel final : public CommunicationModel {
 public:
  // Precondition: latency >= 0, bandwidth > 0.
  FixedCostModel(DurationNs latency, Bandwidth bandwidth);

  std::string_view name() const override { return "fixed"; }
  void Start(graph::CommId comm, CommunicationContext& context) override;
  DurationNs Cost(const graph::Communication& comm) const;

 private:
  DurationNs latency_;
  Bandwidth bandwidth_;
};

}  // namespace dtsim::engine
