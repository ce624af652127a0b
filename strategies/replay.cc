#include "strategies/replay.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "sim/engine/communication.h"

namespace dtsim::strategies {
namespace {

// Every collective takes the duration its NCCL kernel took in the trace.
class MeasuredCommunicationModel final : public engine::CommunicationModel {
 public:
  explicit MeasuredCommunicationModel(const std::vector<DurationNs>& durations)
      : durations_(durations) {}
  std::string_view name() const override { return "measured"; }
  void Start(graph::CommId comm, engine::CommunicationContext& context) override {
    const DurationNs duration =
        comm.value() < durations_.size() ? durations_[comm.value()] : DurationNs::Zero();
    context.CompleteAt(comm, context.Now() + duration);
  }

 private:
  const std::vector<DurationNs>& durations_;
};

}  // namespace

double ReplayStepResult::Error() const {
  if (measured.ns() == 0) return 0;
  return static_cast<double>(simulated.ns() - measured.ns()) / static_cast<double>(measured.ns());
}

Expected<MeasuredRun> SimulateMeasured(const graph::TaskGraph& graph,
                                       const std::vector<DurationNs>& comm_durations) {
  MeasuredCommunicationModel model(comm_durations);
  engine::Simulator simulator(graph, model);
  DTSIM_RETURN_IF_ERROR(simulator.Run());
  return MeasuredRun{.summary = simulator.Summarize(), .times = simulator.times()};
}

Expected<ReplayResult> SimulateReplay(const traces::ReplayGraph& replay) {
  DTSIM_ASSIGN_OR_RETURN(MeasuredRun run, SimulateMeasured(replay.graph, replay.comm_durations));
  ReplayResult result;
  result.summary = run.summary;
  result.times = std::move(run.times);
  double error_sum = 0;
  for (const traces::ReplayStep& step : replay.steps) {
    ReplayStepResult row;
    row.number = step.number;
    row.measured = step.measured;
    if (step.begin.valid() && step.end.valid()) {
      row.simulated =
          result.times.task_start[step.end.value()] - result.times.task_start[step.begin.value()];
    }
    error_sum += std::abs(row.Error());
    result.steps.push_back(row);
  }
  int64_t drift_sum = 0;
  for (uint32_t task = 0; task < replay.graph.task_count(); ++task) {
    if (replay.task_device_event[task] == traces::kNone) continue;
    const DurationNs drift =
        result.times.task_start[task] - (TimeNs::Zero() + replay.measured_start[task]);
    const DurationNs magnitude(std::abs(drift.ns()));
    result.max_start_drift = std::max(result.max_start_drift, magnitude);
    drift_sum += magnitude.ns();
    ++result.gpu_ops;
  }
  if (result.gpu_ops > 0) result.mean_start_drift = DurationNs(drift_sum / result.gpu_ops);
  if (!result.steps.empty()) {
    result.mean_absolute_error = error_sum / static_cast<double>(result.steps.size());
  }
  return result;
}

}  // namespace dtsim::strategies
