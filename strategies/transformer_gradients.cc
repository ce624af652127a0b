#include "strategies/transformer_gradients.h"

#include <algorithm>
#include <array>
#include <map>
#include <numeric>

#include "strategies/categories.h"
#include "strategies/deepspeed_zero3.h"
#include "strategies/gradient_reduction.h"
#include "strategies/layer_gradients.h"
#include "strategies/parameter_gathers.h"

namespace dtsim::strategies {
namespace {

// `ranks` with, per simulated member, where each gradient point is ready in its stage's last
// backward; every rank of the group runs each reduction (with symmetric ranks, every rank of
// the stage).
ReductionGroup Reduction(const SimulationConfig& config,
                         const std::vector<GradientReady>& stage_ready, const RankGroup& ranks) {
  const bool symmetric = config.ranks == RanksMode::kSymmetric;
  ReductionGroup group{.simulated = ranks.simulated,
                       .logical = ranks.logical,
                       .ready = {},
                       .represented = symmetric ? static_cast<int64_t>(config.plan.DataIndices()) *
                                                      config.plan.tensor
                                                : static_cast<int64_t>(ranks.simulated.size())};
  for (const auto& [dp, member] : ranks.simulated_at) {
    group.ready.emplace_back(stage_ready[static_cast<size_t>(dp)].at[static_cast<size_t>(member)]);
  }
  return group;
}

// Megatron keeps a tied embedding on the first and the last stage — or, with multi-token
// prediction, the embedding the MTP modules look up — and all-reduces its gradient between the
// two before the step: in finalize_model_grads (megatron/core/distributed/
// finalize_model_grads.py, _allreduce_word_embedding_grads), which the pipeline schedule calls
// once its last backward pass and its last send are done and which runs the data-parallel
// reduction first. Adds to `waits`, per rank, what its step waits for.
void TiedEmbeddingReduce(const SimulationConfig& config,
                         const std::vector<std::vector<GradientReady>>& ready,
                         graph::TaskGraphBuilder& builder, StepWaits& waits) {
  const models::TransformerSpec& spec = config.model.transformer;
  const ParallelPlan& plan = config.plan;
  if ((!spec.tied_embeddings && spec.mtp_layers == 0) || plan.pipeline < 2) return;
  const int last = plan.pipeline - 1;
  const std::array<int64_t, 2> table = EmbeddingGradients(spec, plan).matrices.front();
  const int64_t bytes = table[0] * table[1] * DTypeBytes(config.training.grad_dtype);
  const size_t simulated_tensor = ready.front().front().at.size();
  for (size_t dp = 0; dp < ready.front().size(); ++dp) {
    for (size_t tp = 0; tp < simulated_tensor; ++tp) {
      const std::vector<int32_t> pair = {
          plan.Rank(static_cast<int>(dp), 0, static_cast<int>(tp)),
          plan.Rank(static_cast<int>(dp), last, static_cast<int>(tp))};
      const graph::CommId comm =
          builder.AddCollective(graph::CommKind::kAllReduce, Bytes(bytes), pair);
      // Ready after the embedding's backward (first stage: the last gradient point) and the
      // output layer's (last stage: the first), or the last MTP module's lookup (the point
      // after the output layer's and the MTP modules' backward: they come first).
      const std::vector<graph::TaskId>& last_stage = ready.back()[dp].at[tp];
      const std::array<graph::TaskId, 2> after = {
          ready.front()[dp].at[tp].back(),
          last_stage[std::min(last_stage.size() - 1, static_cast<size_t>(spec.mtp_layers))]};
      for (size_t i = 0; i < 2; ++i) {
        // The end of the rank's schedule: its last compute and pipeline sends (the data-parallel
        // buckets come first on its stream). A tool that runs one communication at a time per
        // GPU (ASTRA-sim) would otherwise start the last stage's all-reduce before the last
        // send the first stage is waiting for, and neither would finish.
        std::vector<graph::TaskId> schedule_end = {after[i]};
        for (const StreamRole role :
             {StreamRole::kCompute, StreamRole::kSendForward, StreamRole::kSendBackward}) {
          const graph::TaskId tail = builder.LastTask(pair[i], StreamName(role));
          if (tail.valid()) schedule_end.push_back(tail);
        }
        const graph::TaskId task = builder.AddCollectiveTask(
            RoleStream(builder, pair[i], StreamRole::kData), comm, "tied embedding", kDataCategory);
        for (const graph::TaskId end : schedule_end) builder.AddDependency(task, end);
        waits[pair[i]].push_back(task);
      }
    }
  }
}

// The weight elements of FP8 GEMMs one rank of `stage` quantizes at the optimizer step (0
// without FP8, and under ZeRO-3's gathers, which cast each layer when they gather it).
int64_t StageFp8WeightElements(const SimulationConfig& config, int stage) {
  if (config.training.fp8 == models::Fp8Recipe::kNone || ParameterGathers::Gathers(config)) {
    return 0;
  }
  const models::TransformerSpec& spec = config.model.transformer;
  const ParallelPlan& plan = config.plan;
  const models::TransformerShard shard = ShardOf(config);
  int64_t elements = 0;
  for (int index : models::StageLayerIndices(spec, plan.pipeline, plan.virtual_stages, stage,
                                             plan.chunk_layers)) {
    elements += models::Fp8WeightElements(models::TransformerLayerOps(spec, index, shard));
  }
  return elements;
}

int64_t Elements(const std::vector<GradientTensors>& points) {
  int64_t elements = 0;
  for (const GradientTensors& point : points) elements += point.elements();
  return elements;
}

}  // namespace

// Data-parallel gradient reduction (GradientReducer) of each stage's gradients, bucketed in the
// order the last backward produces them; then, as Megatron's finalize step does, the tied
// embedding's all-reduce between the first and last stages (queued behind the buckets, so that
// waiting for the embedding's gradient, the first stage's last, holds none of them back); then
// the optimizer step.
Status ReduceTransformerGradients(const ResolvedConfig& config, const models::OpCostModel& cost,
                                  CompressionPhase phase, const StageCollectives& collectives,
                                  const std::vector<std::vector<GradientReady>>& ready,
                                  graph::TaskGraphBuilder& builder,
                                  models::CostSourceTally& sources) {
  const ParallelPlan& plan = config.plan;
  GradientReducer reducer(config, cost, phase, builder, sources);
  StepWaits waits;
  struct StepArgs {
    ReductionGroup data;
    int64_t parameters = 0;
    int64_t expert_parameters = 0;
    size_t stage = 0;
    int64_t fp8_weights = 0;
  };
  std::vector<StepArgs> steps;
  // Per stage, its expert-data-parallel groups (the ranks holding the same experts).
  std::vector<std::vector<ReductionGroup>> expert_groups(static_cast<size_t>(plan.pipeline));
  for (int stage = 0; stage < plan.pipeline; ++stage) {
    const std::vector<GradientReady>& stage_ready = ready[static_cast<size_t>(stage)];
    const auto simulated_tensor = static_cast<int>(stage_ready.front().at.size());
    const int64_t expert_params = Elements(stage_ready.front().expert_tensors);
    const int64_t stage_params = Elements(stage_ready.front().tensors) + expert_params;
    const int64_t fp8_weights = StageFp8WeightElements(config, stage);
    for (int tp = 0; tp < std::min(simulated_tensor, collectives.WeightPeers()); ++tp) {
      // Dense gradients over the whole data-parallel group and its context-parallel peers,
      // which hold the same weights (with 2.5D, of every depth layer: Tesseract's depth
      // all-reduce of weight gradients, folded into data parallelism).
      std::vector<int> all(static_cast<size_t>(plan.DataIndices()));
      std::iota(all.begin(), all.end(), 0);
      StepArgs& step = steps.emplace_back();
      step.data = Reduction(config, stage_ready, collectives.RanksOver(stage, tp, all));
      step.parameters = stage_params;
      step.expert_parameters = plan.experts_apart() ? expert_params : 0;
      step.stage = static_cast<size_t>(stage);
      step.fp8_weights = fp8_weights;
      // DeepSpeed before 0.5.5 reduced each gradient in the backward (ParameterGathers).
      if (!SynchronizedZero3(config)) {
        DTSIM_RETURN_IF_ERROR(reducer.Reduce(stage_ready.front().tensors, step.data, waits));
      }
    }
    // The experts' over the ranks holding the same experts (expert-data parallelism, D·C/EP
    // ranks; t·D·C/EP under MoE parallel folding).
    if (!plan.experts_apart()) continue;
    for (const RankGroup& holders : collectives.ExpertDataGroups(stage)) {
      ReductionGroup& group = expert_groups[static_cast<size_t>(stage)].emplace_back(
          Reduction(config, stage_ready, holders));
      DTSIM_RETURN_IF_ERROR(reducer.Reduce(stage_ready.front().expert_tensors, group, waits));
    }
  }
  TiedEmbeddingReduce(config, ready, builder, waits);
  std::vector<std::map<int32_t, graph::CommId>> expert_gathers;
  for (int stage = 0; stage < plan.pipeline; ++stage) {
    const std::vector<GradientReady>& stage_ready = ready[static_cast<size_t>(stage)];
    const int64_t expert_params = Elements(stage_ready.front().expert_tensors);
    const int64_t stage_params = Elements(stage_ready.front().tensors) + expert_params;
    expert_gathers.push_back(reducer.ExpertGathers(
        expert_groups[static_cast<size_t>(stage)], plan.experts_apart() ? expert_params : 0,
        reducer.Fp8ShareOf(StageFp8WeightElements(config, stage), stage_params)));
  }
  for (const StepArgs& step : steps) {
    reducer.Step(step.data, step.parameters, waits, step.expert_parameters,
                 expert_gathers[step.stage], step.fp8_weights);
  }
  return Status::Ok();
}

}  // namespace dtsim::strategies
