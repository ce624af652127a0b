// Flow programs: how an algorithm moves data, step by step, for the flow model. A step waits
// its latency, then starts all its transfers at once and ends when the last one has arrived;
// a step may repeat. The programs move exactly the volumes the analytical formulas count
// (docs/network.md), so the two models agree wherever nothing contends.
//
// A ring (or chain) is one pipeline: NCCL moves its chunks edge to edge through a FIFO of
// NCCL_STEPS slots per peer, each send waiting for a free slot downstream (src/device/
// prims_simple.h, the ring loops of src/device/all_reduce.h and reduce_scatter.h), so every
// edge runs at the rate of the slowest and the ring's 2(p − 1) steps stream back to back.
// Such a step lists the pipeline's edges consecutively (`pipeline` of them per pipeline) and
// the flow model moves each pipeline as one flow crossing all its edges' links at one rate.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "network/cluster.h"
#include "sim/base/status.h"
#include "sim/graph/task.h"

namespace dtsim::network {

class Topology;

struct Transfer {
  int32_t from = 0;
  int32_t to = 0;
  double bytes = 0;
  // Bytes per second this transfer never exceeds, whatever its links leave it: what NCCL's
  // point-to-point channels for the pair move (nccl_p2p.h); 0: no cap.
  double max_rate = 0;
};

struct FlowStep {
  DurationNs latency;
  std::vector<Transfer> transfers;
  int64_t repeat = 1;
  // 0: every transfer is a flow of its own. n > 0: transfers [i·n, (i + 1)·n) are the edges
  // of pipeline i, which moves as one flow: each edge carries the first edge's bytes, all at
  // the rate of the most contended.
  uint32_t pipeline = 0;
};

// The flows a step starts: its transfers one by one, or its pipelines.
size_t FlowCount(const FlowStep& step);
std::span<const Transfer> FlowTransfers(const FlowStep& step, size_t flow);
// The cap on flow `flow`'s rate: the lowest max_rate of its edges, or infinity for none.
double FlowMaxRate(const FlowStep& step, size_t flow);
// What flow `flow` of the step moves over each of its edges.
double FlowBytes(const FlowStep& step, size_t flow);
// Appends the links of every edge of the flow to `path`: a link two edges cross appears
// twice, and carries twice the flow's rate.
void AppendFlowPath(const FlowStep& step, size_t flow, const Topology& topology,
                    std::vector<uint32_t>& path);

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
