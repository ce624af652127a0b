// Data-parallel gradient reduction and the optimizer step, shared by every plan builder:
// gradients fill buckets in the order the last backward pass produces them and each bucket is
// reduced on the ranks' "dp" stream — an all-reduce, ZeRO's reduce-scatter, or a gradient
// compression method's kernels and collectives — then each rank steps its optimizer
// (docs/strategies.md, "Data parallelism").
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "models/cost_model.h"
#include "sim/base/status.h"
#include "sim/graph/builder.h"
#include "strategies/categories.h"
#include "strategies/compression.h"
#include "strategies/config.h"

namespace dtsim::strategies {

// Ranks that hold the same weights and reduce their gradients together.
struct ReductionGroup {
  std::vector<int32_t> simulated;  // the members in the graph
  std::vector<int32_t> logical;    // all members: what collectives are priced over
  // Per simulated member, per gradient point: the task after which its gradients are ready.
  std::vector<std::span<const graph::TaskId>> ready;
  int64_t represented = 0;  // ranks the simulated members stand for (for the cost tally)
};

// Per rank, the tasks its optimizer step waits for.
using StepWaits = std::map<int32_t, std::vector<graph::TaskId>>;

class GradientReducer {
 public:
  GradientReducer(const SimulationConfig& config, const models::OpCostModel& cost,
                  CompressionPhase phase, graph::TaskGraphBuilder& builder,
                  models::CostSourceTally& sources);

  // Buckets `points` (the gradients ready at each point, in order) up to
  // plan.gradient_bucket bytes; each bucket's reduction starts once its last gradient is ready
  // (overlapping the rest of the backward, as PyTorch DDP and Megatron's overlap_grad_reduce
  // do), or after the whole backward without overlap. ZeRO-1/2 reduce-scatter. Compressed
  // (phase kCompressed), each bucket goes through the method's steps; the 1-bit optimizers
  // reduce one buffer at the step. Adds each member's last reduction to `waits`.
  Status Reduce(const std::vector<GradientTensors>& points, const ReductionGroup& group,
                StepWaits& waits);

  // The optimizer step over `parameters` local parameters on each simulated member, after its
  // waits (its shard of them under ZeRO, whose stages 1 and 2 all-gather the updated
  // parameters after it). When experts are held apart (ParallelPlan::experts_apart)
  // `expert_parameters` of them are the local experts', sharded under ZeRO over their
  // expert-data-parallel group and all-gathered there by `expert_gathers` (ExpertGathers).
  // Under FP8 the step also quantizes the `fp8_weights` updated weight elements of FP8 GEMMs
  // (row- and column-wise), which Transformer Engine does once per iteration, in the first
  // micro-batch's forward, and caches. With FP8 parameters (training.fp8_params) ZeRO-1/2
  // gather those weights quantized (Fp8ShareOf).
  void Step(const ReductionGroup& group, int64_t parameters, StepWaits& waits,
            int64_t expert_parameters = 0,
            const std::map<int32_t, graph::CommId>& expert_gathers = {}, int64_t fp8_weights = 0);

  // ZeRO-1/2's all-gathers of the updated expert shards, one per expert-data-parallel group
  // of `groups` (each simulated rank in one): per simulated rank, the one it joins. None without
  // ZeRO-1/2 or experts. `fp8_share`: as AllGather's.
  std::map<int32_t, graph::CommId> ExpertGathers(std::span<const ReductionGroup> groups,
                                                 int64_t expert_parameters, double fp8_share = 0);

  // The share of a rank's `parameters` that FP8 parameters store quantized: its `fp8_weights`
  // FP8 GEMM weight elements over all, with training.fp8_params; else 0.
  double Fp8ShareOf(int64_t fp8_weights, int64_t parameters) const;

 private:
  // The local shard of `parameters` spread over `holders` ranks under ZeRO (all of it without).
  int64_t ShardOf(int64_t parameters, int64_t holders) const;
  // ZeRO-1/2's gather of `shard` updated parameters, in the activations' dtype but for the
  // `fp8_share` of them gathered quantized (FP8 parameters, as Megatron-Core's
  // --fp8-param-gather and NeMo's fp8_params gather them: Fp8CopyBytes each).
  std::optional<graph::CommId> AllGather(const ReductionGroup& over, int64_t shard,
                                         double fp8_share);
  Status ReduceBucket(const GradientTensors& bucket, const ReductionGroup& group,
                      const std::vector<graph::TaskId>& after, bool compressed, StepWaits& waits);

  const SimulationConfig& config_;
  const models::OpCostModel& cost_;
  CompressionPhase phase_;
  graph::TaskGraphBuilder& builder_;
  models::CostSourceTally& sources_;
  std::unique_ptr<GradientCompression> compression_;
};

// The end of a data-parallel model's iteration (a ResNet, a DLRM's dense part): `points`
// reduced over `group` as their gradients are ready, then the optimizer step over all of them.
Status ReduceAndStep(GradientReducer& reducer, const std::vector<GradientTensors>& points,
                     const ReductionGroup& group);

}  // namespace dtsim::strategies
