#include "sim/engine/fixed_cost_model.h"

#include "sim/base/check.h"

namespace dtsim::engine {

FixedCostModel::FixedCostModel(DurationNs latency, Bandwidth bandwidth)
    : latency_(latency), bandwidth_(bandwidth) {
  DTSIM_CHECK(latency >= DurationNs::Zero(), "negative latency");
  DTSIM_CHECK(bandwidth.bits_per_second() > 0, "bandwidth must be positive");
}

DurationNs FixedCostModel::Cost(const graph::Communication& comm) const {
  if (comm.kind == graph::CommKind::kBarrier) return latency_;
  return latency_ + TransferTime(comm.size, bandwidth_);
}

void FixedCostModel::Start(graph::CommId comm, CommunicationContext& context) {
  context.CompleteAt(comm, context.Now() + Cost(context.graph().comm(comm)));
}

}  // namespace dtsim::engine
