#include "strategies/gradient_reduction.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

namespace dtsim::strategies {

using graph::CommKind;
using graph::TaskId;
using graph::TaskKind;

GradientReducer::GradientReducer(const SimulationConfig& config, const models::OpCostModel& cost,
                                 CompressionPhase phase, graph::TaskGraphBuilder& builder,
                                 models::CostSourceTally& sources)
    : config_(config),
      cost_(cost),
      phase_(phase),
      builder_(builder),
      sources_(sources),
      compression_(MakeCompression(config.compression)) {}

Status GradientReducer::Reduce(const std::vector<GradientTensors>& points,
                               const ReductionGroup& group, StepWaits& waits) {
  const ParallelPlan& plan = config_.plan;
  const int64_t grad_bytes = DTypeBytes(config_.training.grad_dtype);
  const bool compressed = phase_ == CompressionPhase::kCompressed && compression_->Compresses();
  const bool one_buffer = compressed && compression_->ReducesAtStep();
  const bool overlap = plan.overlap_gradient_reduce && !one_buffer;
  if (group.logical.size() < 2) return Status::Ok();
  GradientTensors bucket;
  for (size_t point = 0; point < points.size(); ++point) {
    bucket.Append(points[point]);
    const bool full = !one_buffer && bucket.elements() * grad_bytes >= plan.gradient_bucket.count();
    if ((!full && point + 1 < points.size()) || bucket.elements() == 0) continue;
    const size_t at = overlap ? point : points.size() - 1;
    std::vector<TaskId> after;
    for (std::span<const TaskId> ready : group.ready) after.push_back(ready[at]);
    DTSIM_RETURN_IF_ERROR(ReduceBucket(bucket, group, after, compressed, waits));
    bucket = {};
  }
  return Status::Ok();
}

// One bucket's reduction on each member's "dp" stream, after `after[i]`: the collective
// (reduce-scatter under ZeRO, all-reduce otherwise), or the compression method's steps.
Status GradientReducer::ReduceBucket(const GradientTensors& bucket, const ReductionGroup& group,
                                     const std::vector<TaskId>& after, bool compressed,
                                     StepWaits& waits) {
  const DType grad_dtype = config_.training.grad_dtype;
  const std::vector<int32_t>& members = group.simulated;
  std::vector<ReductionStep> steps;
  if (config_.plan.zero_stage >= 1) {
    steps.push_back({.name = "gradient reduce-scatter",
                     .collective = CommKind::kReduceScatter,
                     .bytes = Bytes(bucket.elements() * DTypeBytes(grad_dtype)),
                     .kernels = {}});
  } else {
    steps = compressed
                ? compression_->Reduce(bucket, static_cast<int>(group.logical.size()), grad_dtype)
                : PlainAllReduce(bucket.elements(), grad_dtype);
  }
  std::vector<std::optional<TaskId>> last(members.size());
  for (const ReductionStep& step : steps) {
    std::vector<TaskId> tasks;
    if (step.collective) {
      // With parameter servers the all-reduces go through them (validated by Resolve).
      const bool to_servers = config_.plan.gradient_sync == GradientSync::kParameterServer &&
                              *step.collective == CommKind::kAllReduce;
      const graph::CommId comm = builder_.AddCollective(*step.collective, step.bytes, members, {},
                                                        to_servers ? "parameter_server" : "");
      if (group.logical.size() != members.size()) builder_.PriceAs(comm, group.logical);
      for (int32_t rank : members) {
        tasks.push_back(builder_.AddCollectiveTask(RoleStream(builder_, rank, StreamRole::kData),
                                                   comm, step.name, kDataCategory));
      }
    } else {
      DurationNs duration;
      for (const models::Op& kernel : step.kernels) {
        DTSIM_ASSIGN_OR_RETURN(const models::OpCost cost,
                               cost_.PriceOrError(kernel, "compression kernel"));
        duration += cost.duration;
        sources_.Add(cost, group.represented);
      }
      for (int32_t rank : members) {
        tasks.push_back(builder_.AddTask(RoleStream(builder_, rank, StreamRole::kData),
                                         TaskKind::kCompute, step.name, kDataCategory, duration));
      }
    }
    for (size_t i = 0; i < members.size(); ++i) {
      if (!last[i]) builder_.AddDependency(tasks[i], after[i]);
      last[i] = tasks[i];
    }
  }
  for (size_t i = 0; i < members.size(); ++i) {
    if (last[i]) waits[members[i]].push_back(*last[i]);
  }
  return Status::Ok();
}

int64_t GradientReducer::ShardOf(int64_t parameters, int64_t holders) const {
  return config_.plan.zero_stage >= 1 ? (parameters + holders - 1) / holders : parameters;
}

// ZeRO-1/2 all-gather the updated shards after the step, dense ones over the data-parallel
// group and the experts' over their expert-data-parallel group; ZeRO-3 gathers them per layer
// before use instead.
std::optional<graph::CommId> GradientReducer::AllGather(const ReductionGroup& over, int64_t shard,
                                                        double fp8_share) {
  const int zero = config_.plan.zero_stage;
  if (zero < 1 || zero >= 3 || over.logical.size() < 2 || shard == 0) return std::nullopt;
  const double e = DTypeBytes(config_.training.dtype);
  const double per_parameter = e - fp8_share * (e - models::Fp8CopyBytes(config_.training.fp8));
  const graph::CommId comm = builder_.AddCollective(
      CommKind::kAllGather,
      Bytes(static_cast<int64_t>(std::llround(static_cast<double>(shard) * per_parameter))),
      over.simulated);
  if (over.logical.size() != over.simulated.size()) builder_.PriceAs(comm, over.logical);
  return comm;
}

double GradientReducer::Fp8ShareOf(int64_t fp8_weights, int64_t parameters) const {
  if (!config_.training.fp8_params || parameters <= 0) return 0;
  return std::min(1.0, static_cast<double>(fp8_weights) / static_cast<double>(parameters));
}

std::map<int32_t, graph::CommId> GradientReducer::ExpertGathers(
    std::span<const ReductionGroup> groups, int64_t expert_parameters, double fp8_share) {
  std::map<int32_t, graph::CommId> gathers;
  const int64_t shard = ShardOf(expert_parameters, config_.plan.ExpertData());
  for (const ReductionGroup& group : groups) {
    const std::optional<graph::CommId> comm = AllGather(group, shard, fp8_share);
    if (!comm) continue;
    for (int32_t rank : group.simulated) gathers.emplace(rank, *comm);
  }
  return gathers;
}

void GradientReducer::Step(const ReductionGroup& group, int64_t parameters, StepWaits& waits,
                           int64_t expert_parameters,
                           const std::map<int32_t, graph::CommId>& expert_gathers,
                           int64_t fp8_weights) {
  const ParallelPlan& plan = config_.plan;
  const int64_t dense_shard = ShardOf(parameters - expert_parameters, plan.WeightReplicas());
  const int64_t expert_shard = ShardOf(expert_parameters, plan.ExpertData());
  const std::optional<models::OpCost> cost = cost_.Price(models::OptimizerOp(
      config_.training.optimizer, dense_shard + expert_shard, config_.training.grad_dtype,
      config_.training.param_dtype, config_.training.optimizer_state));
  const models::OpCost step = cost.value_or(models::OpCost{});
  DurationNs step_time = step.duration;
  if (fp8_weights > 0) {
    const models::Op quantize = models::Fp8WeightQuantizeOp(
        config_.training.dtype, config_.training.fp8, fp8_weights, models::Pass::kOptimizer);
    const models::OpCost weights = cost_.Price(quantize).value_or(models::OpCost{});
    sources_.Add(weights, group.represented);
    step_time += weights.duration;
  }
  const std::optional<graph::CommId> dense_gather =
      AllGather(group, dense_shard, Fp8ShareOf(fp8_weights, parameters));
  for (int32_t rank : group.simulated) {
    const TaskId task =
        builder_.AddTask(RoleStream(builder_, rank, StreamRole::kCompute), TaskKind::kCompute,
                         "optimizer step", kOptimizerCategory, step_time);
    for (TaskId prerequisite : waits[rank]) builder_.AddDependency(task, prerequisite);
    const auto gather_after_step = [&](graph::CommId comm) {
      const TaskId gathered =
          builder_.AddCollectiveTask(RoleStream(builder_, rank, StreamRole::kData), comm,
                                     "parameter all-gather", kDataCategory);
      builder_.AddDependency(gathered, task);
    };
    if (dense_gather) gather_after_step(*dense_gather);
    if (const auto expert = expert_gathers.find(rank); expert != expert_gathers.end()) {
      gather_after_step(expert->second);
    }
  }
  // One step per rank: the simulated ones stand for their class.
  sources_.Add(step, group.represented);
}

Status ReduceAndStep(GradientReducer& reducer, const std::vector<GradientTensors>& points,
                     const ReductionGroup& group) {
  StepWaits waits;
  DTSIM_RETURN_IF_ERROR(reducer.Reduce(points, group, waits));
  int64_t parameters = 0;
  for (const GradientTensors& point : points) parameters += point.elements();
  reducer.Step(group, parameters, waits);
  return Status::Ok();
}

}  // namespace dtsim::strategies
