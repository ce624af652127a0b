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

// Each registered algorithm's program (collective_algorithms.cc holds the registry: one entry
// per algorithm with its analytical cost and its program); an error when the algorithm does
// not apply to the request (e.g. uneven placement).
namespace programs {
Expected<FlowProgram> AllReduceRing(const FlowRequest& r);
Expected<FlowProgram> AllReduceTree(const FlowRequest& r);
Expected<FlowProgram> AllReduceHalvingDoubling(const FlowRequest& r);
Expected<FlowProgram> AllReduceHierarchical(const FlowRequest& r);
Expected<FlowProgram> AllReduceNvls(const FlowRequest& r);
Expected<FlowProgram> AllReduceParameterServer(const FlowRequest& r);
Expected<FlowProgram> ReduceScatterRing(const FlowRequest& r);
Expected<FlowProgram> AllGatherRing(const FlowRequest& r);
Expected<FlowProgram> RootedRing(const FlowRequest& r);          // broadcast and reduce
Expected<FlowProgram> RootedBinomialTree(const FlowRequest& r);  // broadcast and reduce
Expected<FlowProgram> AllToAllDirect(const FlowRequest& r);
Expected<FlowProgram> AllToAllHierarchical(const FlowRequest& r);
Expected<FlowProgram> ShiftDirect(const FlowRequest& r);
Expected<FlowProgram> BarrierDissemination(const FlowRequest& r);
Expected<FlowProgram> SendRecvDirect(const FlowRequest& r);
}  // namespace programs

}  // namespace dtsim::network
