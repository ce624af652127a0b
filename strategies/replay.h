// `replay`: simulates the replay graph of a trace (traces/replay_graph.h) with the measured
// durations — collectives take the time their NCCL kernels took — and compares every
// ProfilerStep's simulated duration with the measured one (docs/replay.md).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/base/status.h"
#include "sim/engine/simulator.h"
#include "sim/graph/task_times.h"
#include "traces/replay_graph.h"

namespace dtsim::strategies {

struct ReplayStepResult {
  int64_t number = 0;
  DurationNs measured;
  DurationNs simulated;
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
};

// Simulates `graph` with every collective taking the duration given for it (zero past the
// end of `comm_durations`): how a Chakra trace of another tool replays (traces/chakra_graph.h).
Expected<MeasuredRun> SimulateMeasured(const graph::TaskGraph& graph,
                                       const std::vector<DurationNs>& comm_durations);

}  // namespace dtsim::strategies
