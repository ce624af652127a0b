// Flow programs: how an algorithm moves data, step by step, for the flow model. A step waits
// its latency, then starts all its transfers at once and ends when the last one has arrived;
// a step may repeat. The programs move exactly the volumes the analytical formulas count
// (docs/network.md), so the two models agree wherever nothing contends.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "network/cluster.h"
#include "sim/base/status.h"
#include "sim/graph/task.h"

namespace dtsim::network {

struct Transfer {
  int32_t from = 0;
  int32_t to = 0;
  double bytes = 0;
};

struct FlowStep {
  DurationNs latency;
  std::vector<Transfer> transfers;
  int64_t repeat = 1;
};

using FlowProgram = std::vector<FlowStep>;

struct FlowRequest {
  graph::CommKind kind = graph::CommKind::kAllReduce;
  Bytes size;
  std::span<const int32_t> ranks;  // the group, in its order; for send/recv {source, dest}
  int32_t root = -1;
  const ClusterSpec* cluster = nullptr;
};

// The program; an error when the algorithm does not apply (e.g. uneven placement) or has no
// program (every registered algorithm has one; a test keeps it so).
Expected<FlowProgram> BuildFlowProgram(std::string_view name, const FlowRequest& request);

}  // namespace dtsim::network
