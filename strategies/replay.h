// `replay`: simulates the replay graph of a trace (traces/replay_graph.h) with the measured
// durations — collectives take the time their NCCL kernels took — and compares every
// ProfilerStep's simulated duration with the measured one (docs/replay.md).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "models/gpu.h"
#include "network/cluster.h"
#include "network/cluster_model.h"
#include "sim/base/json_reader.h"
#include "sim/base/status.h"
#include "sim/engine/simulator.h"
#include "sim/graph/task_times.h"
#include "strategies/compression.h"
#include "strategies/replay_path.h"
#include "traces/replay_graph.h"

namespace dtsim::strategies {

struct ReplayStepResult {
  uint32_t trace = 0;  // the job index of the trace it is a step of
  int64_t number = 0;
  DurationNs measured;
  DurationNs simulated;
  StepPath path;  // where its simulated time goes
  // (simulated - measured) / measured; 0 for a zero-length measured step.
  double Error() const;
};

struct ReplayResult {
  engine::RunSummary summary;
  graph::TaskTimes times;
  std::vector<ReplayStepResult> steps;
  double mean_absolute_error = 0;  // over the steps, as a fraction; 0 without steps
  // How far each GPU op's simulated start is from its measured start (the op-level check,
  // also for traces without steps).
  int64_t gpu_ops = 0;
  DurationNs max_start_drift;
  DurationNs mean_start_drift;
};

Expected<ReplayResult> SimulateReplay(const traces::ReplayGraph& replay);

struct MeasuredRun {
  engine::RunSummary summary;
  graph::TaskTimes times;
  network::CommMethods methods;  // on a cluster: how the network model ran each communication
};

// Simulates `graph` with every collective taking the duration given for it (zero past the
// end of `comm_durations`): how a Chakra trace of another tool replays (traces/chakra_graph.h).
Expected<MeasuredRun> SimulateMeasured(const graph::TaskGraph& graph,
                                       const std::vector<DurationNs>& comm_durations);

// Simulates `graph` with its collectives and point-to-point transfers priced by the default
// network model on `cluster` (sized to the ranks they are priced over unless it gives its node
// count): how a what-if re-prices communication, and how a Chakra trace's collectives get a
// cost (`dtsim replay --network`).
Expected<MeasuredRun> SimulateOnCluster(const graph::TaskGraph& graph,
                                        network::ClusterSpec cluster);

// A what-if on a replay (docs/replay.md): what the trace would have done with faster kernels,
// without or with more overlap on the GPU, with its collectives priced by the network model on a
// cluster, or with the data-parallel world scaled.
struct ReplayWhatIf {
  std::vector<traces::KernelSpeedup> speedups;
  bool serialize_gpu_streams = false;
  // Collectives launched on a stream that also computes move to a stream of their own, so
  // the work after them no longer waits for them (traces::ReplayOptions::overlap_collectives).
  bool overlap_collectives = false;
  // Collectives re-priced by the analytical network model on this cluster (sized to the
  // largest group when it gives no node count) instead of taking their measured time.
  std::optional<network::ClusterSpec> cluster;
  // Collectives over the traced world priced over this many ranks (needs `cluster`).
  int32_t data_parallel = 0;
  // The cluster the trace ran on (needs `cluster`): each collective's measured time splits into
  // its transfer there (the model's price, at most the measured time) and waiting for peers,
  // the rest, which stays before it while `cluster` prices the transfer anew.
  std::optional<network::ClusterSpec> traced_cluster;
  // Gradient compression of the all-reduces over the traced world, in its compressed phase:
  // each becomes the method's steps (strategies/compression.h) with their kernels priced by
  // the roofline model on `gpu` (needs `cluster` for the new collectives).
  std::optional<CompressionConfig> compression;
  std::optional<models::GpuSpec> gpu;

  bool empty() const {
    return speedups.empty() && !serialize_gpu_streams && !overlap_collectives && !cluster &&
           data_parallel == 0 && !compression && !traced_cluster;
  }
  // "gemm ÷1.5, GPU streams serialized, collectives on dgx-a100 (analytical), ..."
  std::string Describe() const;
};

// A what-if from JSON (docs/replay.md, "What-ifs from a file"), strict:
//   {"speedups": ["gemm=1.5", ...], "overlap": "as_traced" | "none" | "collectives",
//    "network": PRESET | {cluster}, "data_parallel": N, "compression": METHOD | {section},
//    "gpu": PRESET | {gpu}}
// Errors carry the JSON path under `path`.
Expected<ReplayWhatIf> ReplayWhatIfFromJson(const Json& value, const std::string& path);

struct WhatIfStep {
  uint32_t trace = 0;  // the job index of the trace it is a step of
  int64_t number = 0;
  DurationNs measured;
  DurationNs replayed;  // the replay with measured durations
  DurationNs what_if;
  // Where each goes; `sped_up` counts the what-if's kernel classes on both.
  StepPath replayed_path, what_if_path;
  // (what_if - replayed) / replayed; 0 for a zero-length step.
  double Change() const;
};

struct WhatIfResult {
  traces::ReplayGraph graph;  // the what-if's graph
  engine::RunSummary summary;
  graph::TaskTimes times;
  std::string communication_model;  // "measured" or "analytical"
  network::CommMethods methods;     // analytical: how it ran each communication
  std::vector<WhatIfStep> steps;
  DurationNs replayed_span;
  DurationNs what_if_span;
};

// Replays the job `job` (one trace per rank) as measured and under `what_if`, step by step.
// `replayed` is its default replay graph (BuildReplayGraph(job)) and `replay` its simulated
// result (SimulateReplay(replayed)).
Expected<WhatIfResult> SimulateWhatIf(std::span<const traces::Trace* const> job,
                                      const traces::ReplayGraph& replayed,
                                      const ReplayResult& replay, const ReplayWhatIf& what_if);
// One trace, a job of one.
Expected<WhatIfResult> SimulateWhatIf(const traces::Trace& trace,
                                      const traces::ReplayGraph& replayed,
                                      const ReplayResult& replay, const ReplayWhatIf& what_if);

}  // namespace dtsim::strategies
