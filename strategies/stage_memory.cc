#include "strategies/stage_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "models/eager_allocations.h"
#include "sim/base/quantity.h"
#include "strategies/compression.h"
#include "strategies/diloco_sync.h"
#include "strategies/embedding_sharding.h"
#include "strategies/layer_gradients.h"
#include "strategies/stage_communicators.h"

namespace dtsim::strategies {

models::MemoryPlan MemoryPlanOf(const ResolvedConfig& config, int stage) {
  const ParallelPlan& plan = config.plan;
  models::MemoryPlan memory{.shard = ShardOf(config),
                            .recompute = config.training.recompute,
                            .recompute_every = config.training.recompute_every,
                            .framework = config.training.framework,
                            .schedule = plan.schedule,
                            .pipeline_stages = plan.pipeline,
                            .virtual_stages = plan.virtual_stages,
                            .paired_passes = plan.expert_overlap,
                            .stage = stage,
                            .microbatches = config.Microbatches(),
                            // The ranks ZeRO shards over: data-parallel replicas and their
                            // context-parallel peers.
                            .data_parallel = plan.DataIndices(),
                            .zero_stage = plan.zero_stage,
                            .optimizer = config.training.optimizer,
                            .optimizer_state = config.training.optimizer_state,
                            .param_dtype = config.training.param_dtype,
                            .fp8_params = config.training.fp8_params,
                            .grad_dtype = config.training.grad_dtype,
                            .chunk_layers = plan.chunk_layers,
                            .deepspeed = config.training.deepspeed,
                            .overlap_gradient_reduce = plan.overlap_gradient_reduce,
                            .offloaded_layers = config.training.activation_offload_layers,
                            .offload_handler = config.training.activation_offload_v1
                                                   ? models::OffloadHandler::kV1
                                                   : models::OffloadHandler::kSynchronizer};
  if (config.model.family == models::ModelFamily::kDlrm) {
    // The rank holding the most of the tables (the memory check's worst case).
    const EmbeddingLayout layout = LayoutEmbeddings(
        config.model.dlrm, plan.embedding_sharding, plan.data, config.training.micro_batch,
        config.training.dtype, config.cluster.gpus_per_node);
    int64_t most = 0;
    for (const RankEmbeddings& rank : layout.ranks) most = std::max(most, rank.parameters);
    memory.embedding_parameters = most;
    memory.replicated_embedding_parameters = layout.replicated_parameters;
  }
  return memory;
}

namespace {

// A stage's memory at the replayed loop's peak (models::ReplayEagerTraining): its gradients and
// the iteration's tensors then, and the caching allocator's reserve over them.
void ApplyReplayedPeak(const models::EagerPeaks& peaks, models::MemoryBreakdown& memory) {
  // The parameters and the optimizer's state stay the analytic ones (what the replay holds
  // besides is DDP's gradient buckets, counted with the gradients, and the batch and buffers:
  // kilobytes). The activations are what the blocks hold at the peak, the working set the rest
  // of the iteration's tensors then (the loss, gradients in flight, and the slack of blocks the
  // allocator handed out unsplit).
  // A pipeline stage's receive buffers (held from the first step on) are activations.
  const int64_t iteration = peaks.allocated - peaks.held_at_peak - peaks.grads_at_peak;
  memory.gradients = peaks.grads_at_peak + peaks.bucket_bytes;
  memory.activations = peaks.blocks_at_peak + peaks.pipeline_buffer_bytes;
  memory.temporary = iteration - peaks.blocks_at_peak;
  memory.allocator_reserve = peaks.reserved - peaks.allocated;
  memory.reserve_modelled = true;
  memory.replayed_layer_kept = peaks.layer_kept;
}

// Whether the config names a PyTorch release before `release` (framework_version; none: the
// latest modelled).
bool PyTorchBefore(const TrainingConfig& training, std::array<int, 3> release) {
  return training.framework == models::Framework::kPyTorch &&
         training.framework_release != std::array<int, 3>{0, 0, 0} &&
         training.framework_release < release;
}

}  // namespace

std::optional<models::EagerRun> EagerLoopOf(const ResolvedConfig& config) {
  const TrainingConfig& training = config.training;
  const ParallelPlan& plan = config.plan;
  // One GPU unsharded, FSDP2 over every rank (zero_stage 3 on data parallelism alone, or on
  // data × context with PyTorch's ring attention as torchtitan runs it, beside 1D tensor
  // parallelism with sequence parallelism — torchtitan's 2D — or not, under pipelining or
  // not), or DDP (zero_stage 0 on data parallelism alone).
  const bool tensor_2d = plan.tensor > 1 && plan.tensor_layout == models::TensorLayout::k1D &&
                         plan.sequence_parallel && plan.DataIndices() > 1;
  const bool fsdp = plan.zero_stage == 3 && (plan.tensor == 1 || tensor_2d) &&
                    (plan.context == 1 || plan.context_comm == models::ContextComm::kP2p);
  const bool ddp = plan.zero_stage == 0 && plan.data == plan.world() && plan.world() > 1;
  if (config.model.family != models::ModelFamily::kTransformer ||
      training.framework != models::Framework::kPyTorch || plan.expert != 1 ||
      ((plan.world() != 1 || plan.zero_stage != 0) && !fsdp && !ddp) || !training.flash_attention ||
      training.dropout || training.dtype != DType::kBf16 || training.param_dtype != DType::kFp32 ||
      training.grad_dtype != DType::kFp32 || training.fp8 != models::Fp8Recipe::kNone ||
      training.optimizer != models::Optimizer::kAdam ||
      training.recompute == models::Recompute::kSelective || config.compression.method != "none") {
    return std::nullopt;
  }
  // Under a pipeline the schedule's every micro-batch (the stage's receive buffers are made for
  // each); else at most kMaxEagerReplayMicroBatches, past which the allocations repeat.
  const int64_t microbatches =
      plan.pipeline > 1
          ? config.Microbatches()
          : std::min<int64_t>(config.Microbatches(), models::kMaxEagerReplayMicroBatches);
  models::EagerPipeline pipeline{.stages = plan.pipeline,
                                 .schedule = plan.schedule,
                                 .chunks = plan.virtual_stages,
                                 .merge_outputs = PyTorchBefore(training, {2, 10, 0})};
  for (int chunk = 0; plan.pipeline > 1 && chunk < plan.virtual_stages; ++chunk) {
    for (int stage = 0; stage < plan.pipeline; ++stage) {
      pipeline.chunk_layers.push_back(static_cast<int>(
          models::ChunkLayerIndices(config.model.transformer, plan.pipeline, plan.virtual_stages,
                                    stage, chunk, plan.chunk_layers)
              .size()));
    }
  }
  return models::EagerRun{.micro_batch = training.micro_batch,
                          .seq_len = training.seq_len,
                          .recompute = training.recompute,
                          .recompute_every = training.recompute_every,
                          .micro_batches = static_cast<int>(
                              std::min<int64_t>(microbatches, std::numeric_limits<int>::max())),
                          .expandable_segments = training.expandable_segments,
                          // FSDP2 as torchtitan runs it, clipping the gradients' norm.
                          .fsdp_ranks = fsdp ? plan.DataIndices() : 0,
                          .reshard_after_forward = training.reshard_after_forward,
                          .fsdp_root_kept = PyTorchBefore(training, {2, 8, 0}),
                          .context_ranks = plan.context,
                          .tensor_ranks = plan.tensor,
                          .pipeline = std::move(pipeline),
                          .clip_grad_norm = fsdp,
                          .compiled_loss = CompilesLoss(config),
                          .compiled_blocks = (training.compile & kCompileModel) != 0,
                          .ddp = ddp};
}

bool ReplaysPipelinedLoop(const ResolvedConfig& config) {
  return config.plan.pipeline > 1 && EagerLoopOf(config).has_value();
}

Expected<std::vector<models::MemoryBreakdown>> EstimateStageMemory(const ResolvedConfig& config,
                                                                   MemoryReplay replay) {
  const ParallelPlan& plan = config.plan;
  if (plan.layer_split == ParallelPlan::LayerSplit::kBalanced && plan.chunk_layers.empty()) {
    return Error("balanced stages have no layer counts until Simulate balances them",
                 "parallelism.pipeline.layers", "balanced");
  }
  const std::unique_ptr<GradientCompression> compression = MakeCompression(config.compression);
  std::vector<models::MemoryBreakdown> stages;
  for (int stage = 0; stage < plan.pipeline; ++stage) {
    const models::MemoryPlan memory_plan = MemoryPlanOf(config, stage);
    DTSIM_ASSIGN_OR_RETURN(models::MemoryBreakdown memory,
                           models::EstimateMemory(config.model, memory_plan));
    memory.runtime = config.gpu.context_memory.count();
    memory.nccl = StageNcclBuffers(config, stage).total();
    // Error-feedback residuals of gradient compression count as optimizer state.
    if (compression->Compresses() && plan.DataIndices() > 1) {
      memory.optimizer_state += compression->StateBytes(
          ModelGradients(config, stage), plan.DataIndices(), config.training.grad_dtype);
    }
    stages.push_back(memory);
  }
  // Where dtsim replays the plan's loop tensor by tensor (a model it does not replay keeps the
  // analytic estimate and leaves the allocator's reserve unmodelled), the peak is the
  // replay's: the gradients and the iteration's tensors live then, and the reserve over them.
  // Under a pipeline each stage's rank is replayed.
  if (replay == MemoryReplay::kAll || plan.pipeline == 1) {
    if (std::optional<models::EagerRun> loop = EagerLoopOf(config)) {
      for (int stage = 0; stage < plan.pipeline; ++stage) {
        loop->pipeline.rank = stage;
        if (const Expected<models::EagerPeaks> peaks =
                models::ReplayEagerTraining(config.model.transformer, *loop);
            peaks.ok()) {
          ApplyReplayedPeak(*peaks, stages[static_cast<size_t>(stage)]);
        }
      }
    }
  }
  // DiLoCo's outer parameters and momentum are the outer optimizer's state, held all along.
  if (config.diloco) {
    for (models::MemoryBreakdown& memory : stages) {
      memory.optimizer_state += OuterStateBytes(config, memory.parameter_count);
    }
  }
  return stages;
}

namespace {

// "parameters 5.9 GiB, …, CUDA context 0.7 GiB, NCCL buffers 1.0 GiB": what a stage's memory is
// made of, for the message when it does not fit.
std::string Composition(const models::MemoryBreakdown& memory) {
  std::string text = fmt::format(
      "parameters {}, gradients {}, optimizer state {}, activations {}, temporary {}",
      FormatGiB(memory.parameters), FormatGiB(memory.gradients), FormatGiB(memory.optimizer_state),
      FormatGiB(memory.activations), FormatGiB(memory.temporary));
  if (memory.fp8_weights > 0) text += ", FP8 weight copies " + FormatGiB(memory.fp8_weights);
  text += ", CUDA context " + FormatGiB(memory.runtime);
  if (memory.nccl > 0) text += ", NCCL buffers " + FormatGiB(memory.nccl);
  if (memory.reserve_modelled) text += ", allocator reserve " + FormatGiB(memory.allocator_reserve);
  return text;
}

}  // namespace

Expected<std::vector<models::MemoryBreakdown>> StageMemory(const ResolvedConfig& config) {
  DTSIM_ASSIGN_OR_RETURN(std::vector<models::MemoryBreakdown> stages, EstimateStageMemory(config));
  for (size_t stage = 0; stage < stages.size(); ++stage) {
    const models::MemoryBreakdown& memory = stages[stage];
    if (memory.total() > config.gpu.memory.count()) {
      return Error(
          fmt::format("the plan does not fit: pipeline stage {} needs {} per GPU, {} has {} ({})",
                      stage, FormatGiB(memory.total()), config.gpu.name,
                      FormatGiB(config.gpu.memory.count()), Composition(memory)),
          "parallelism", FormatGiB(memory.total()));
    }
  }
  return stages;
}

}  // namespace dtsim::strategies
