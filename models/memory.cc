#include "models/memory.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <optional>
#include <vector>

#include "models/activation_offload.h"
#include "models/parameters.h"

namespace dtsim::models {
namespace {

int64_t LocalMlpParameters(const TransformerSpec& spec, int64_t ffn, int t) {
  const int64_t local = ffn / t;
  if (spec.gated_mlp()) {
    return 3 * spec.hidden * local + (spec.linear_bias ? 2 * local + spec.hidden : 0);
  }
  return 2 * spec.hidden * local + (spec.linear_bias ? local + spec.hidden : 0);
}

}  // namespace

std::vector<int> ChunkLayerIndices(const TransformerSpec& spec, int pipeline_stages,
                                   int virtual_stages, int stage, int chunk,
                                   std::span<const int> chunk_layers) {
  const int model_chunk = chunk * pipeline_stages + stage;
  std::vector<int> layers;
  if (!chunk_layers.empty()) {
    const int first = std::accumulate(chunk_layers.begin(), chunk_layers.begin() + model_chunk, 0);
    layers.resize(static_cast<size_t>(chunk_layers[static_cast<size_t>(model_chunk)]));
    std::iota(layers.begin(), layers.end(), first);
  } else {
    const int per_chunk = spec.layers / (pipeline_stages * virtual_stages);
    layers.resize(static_cast<size_t>(per_chunk));
    std::iota(layers.begin(), layers.end(), model_chunk * per_chunk);
  }
  // The multi-token-prediction modules follow the last layer on the last model chunk.
  if (model_chunk == pipeline_stages * virtual_stages - 1) {
    for (int index = spec.layers; index < spec.AllLayers(); ++index) layers.push_back(index);
  }
  return layers;
}

std::vector<int> StageLayerIndices(const TransformerSpec& spec, int pipeline_stages,
                                   int virtual_stages, int stage,
                                   std::span<const int> chunk_layers) {
  std::vector<int> layers;
  for (int chunk = 0; chunk < virtual_stages; ++chunk) {
    const std::vector<int> part =
        ChunkLayerIndices(spec, pipeline_stages, virtual_stages, stage, chunk, chunk_layers);
    layers.insert(layers.end(), part.begin(), part.end());
  }
  return layers;
}

int OutputTables(const TransformerSpec& spec, int stage) {
  const bool embedding_copy = stage != 0 && (spec.tied_embeddings || spec.mtp_layers > 0);
  return (spec.tied_embeddings ? 0 : 1) + (embedding_copy ? 1 : 0);
}

int64_t KvCacheBytesPerToken(const TransformerSpec& spec, DType dtype) {
  const int64_t per_layer = spec.mla.enabled()
                                ? spec.mla.kv_lora_rank + spec.mla.qk_rope_head_dim
                                : int64_t{spec.kv_heads} * (spec.head_dim() + spec.v_head_dim());
  return per_layer * spec.layers * DTypeBytes(dtype);
}

int64_t LayerParameterCount(const TransformerSpec& spec, int t, int ep, int etp, int index) {
  const int64_t h = spec.hidden;
  int64_t params = AttentionVectorElements(spec, t) + LayerNormParameters(spec);
  for (const std::array<int64_t, 2>& matrix : AttentionMatrices(spec, t)) {
    params += matrix[0] * matrix[1];
  }
  if (spec.IsMoeLayer(index)) {
    params += spec.moe.experts / ep * LocalMlpParameters(spec, spec.MoeFfnHidden(), etp) +
              h * spec.moe.experts;
    if (spec.moe.shared_experts > 0) params += LocalMlpParameters(spec, spec.SharedFfnHidden(), t);
  } else {
    params += LocalMlpParameters(spec, spec.ffn_hidden, t);
  }
  // A multi-token-prediction module: eh_proj (2h × h, column-parallel) and its enorm, hnorm
  // and final norm (replicated).
  if (spec.IsMtpLayer(index)) params += 2 * h * (h / t) + 3 * NormParameters(spec);
  return params;
}

namespace {

std::vector<int> StageLayers(const TransformerSpec& spec, const MemoryPlan& plan) {
  return StageLayerIndices(spec, plan.pipeline_stages, plan.virtual_stages, plan.stage,
                           plan.chunk_layers);
}

bool IsFirstStage(const MemoryPlan& plan) { return plan.stage == 0; }
bool IsLastStage(const MemoryPlan& plan) { return plan.stage == plan.pipeline_stages - 1; }

// One vocabulary table's shard on a rank of t-way (1D) tensor parallelism: the embedding's, or
// an output layer's.
int64_t VocabShard(const TransformerSpec& spec, int t) {
  return spec.PaddedVocab(t) / t * spec.hidden;
}

int64_t TransformerStageParameters(const TransformerSpec& spec, const MemoryPlan& plan) {
  if (plan.shard.tensor_layout != TensorLayout::k1D) {
    // 2D/2.5D: every weight, bias and norm is split q×q (Optimus; ColossalAI's Linear2D,
    // LayerNorm2D, VocabParallelEmbedding2D), the same blocks on every depth layer.
    MemoryPlan whole = plan;
    whole.shard.tensor_layout = TensorLayout::k1D;
    whole.shard.tensor_parallel = 1;
    whole.shard.tensor_depth = 1;
    const int64_t split = plan.shard.weight_split();
    return (TransformerStageParameters(spec, whole) + split - 1) / split;
  }
  const int t = plan.shard.tensor_parallel;
  int64_t params = 0;
  for (int index : StageLayers(spec, plan)) {
    params +=
        LayerParameterCount(spec, t, plan.shard.expert_parallel, plan.shard.expert_tensor(), index);
  }
  const int64_t vocab_shard = VocabShard(spec, t);
  if (IsFirstStage(plan)) {
    params += vocab_shard + spec.token_types * spec.hidden;
    if (spec.position == PositionEmbedding::kLearned) params += spec.max_seq * spec.hidden;
    if (spec.embedding_norm) params += NormParameters(spec);
  }
  if (IsLastStage(plan)) {
    if (spec.final_norm) params += NormParameters(spec);
    // An untied output layer, or the tied embedding's copy on a last stage that is not first,
    // and the embedding's copy multi-token prediction keeps there when untied.
    params += OutputTables(spec, plan.stage) * vocab_shard;
    if (spec.pooler) params += spec.hidden * spec.hidden + spec.hidden;
    if (spec.lm_head_transform) {
      params +=
          spec.hidden * spec.hidden + spec.hidden + NormParameters(spec) + spec.PaddedVocab(t) / t;
    }
  }
  return params;
}

Status CheckPlan(const ModelSpec& model, const MemoryPlan& plan) {
  if (plan.pipeline_stages < 1 || plan.virtual_stages < 1 || plan.stage < 0 ||
      plan.stage >= plan.pipeline_stages || plan.microbatches < 1 || plan.data_parallel < 1 ||
      plan.embedding_shards < 1) {
    return Error(fmt::format("invalid plan: stages={} virtual={} stage={} microbatches={} dp={}",
                             plan.pipeline_stages, plan.virtual_stages, plan.stage,
                             plan.microbatches, plan.data_parallel));
  }
  if (plan.zero_stage < 0 || plan.zero_stage > 3) {
    return Error("ZeRO stage must be 0, 1, 2 or 3", "", std::to_string(plan.zero_stage));
  }
  if (model.family != ModelFamily::kTransformer) return Status::Ok();
  const TransformerSpec& spec = model.transformer;
  const int chunks = plan.pipeline_stages * plan.virtual_stages;
  if (!plan.chunk_layers.empty()) {
    const bool negative = std::any_of(plan.chunk_layers.begin(), plan.chunk_layers.end(),
                                      [](int count) { return count < 0; });
    if (std::ssize(plan.chunk_layers) != chunks || negative ||
        std::accumulate(plan.chunk_layers.begin(), plan.chunk_layers.end(), 0) != spec.layers) {
      return Error(fmt::format("chunk layer counts must be one per model chunk ({}), none "
                               "negative, adding up to the layers ({})",
                               chunks, spec.layers),
                   "", fmt::format("{}", fmt::join(plan.chunk_layers, ", ")));
    }
  } else if (spec.layers % chunks != 0) {
    return Error(fmt::format("pipeline stages × virtual stages ({}) must divide layers ({})",
                             chunks, spec.layers),
                 "", std::to_string(chunks));
  }
  return ValidateShard(spec, plan.shard);
}

int64_t MaxOpBytes(const LayerOps& ops, int64_t current) {
  for (const std::vector<Op>* list : {&ops.forward, &ops.backward}) {
    for (const Op& op : *list) current = std::max(current, static_cast<int64_t>(op.bytes));
  }
  return current;
}

// The decomposition the memory model reads: without autocast's kernels (TransformerShard::
// autocast), whose tensors — the weights' copies, the fp32 residual stream — it counts itself
// (TransformerLayerMemory), so that their traffic is not taken for memory a working set holds.
TransformerShard MemoryShard(const MemoryPlan& plan) {
  TransformerShard shard = plan.shard;
  shard.autocast = false;
  return shard;
}

// ZeRO-3 over more than one rank: parameters sharded, gathered layer by layer.
bool ShardsParameters(const MemoryPlan& plan) {
  return plan.zero_stage == 3 && plan.data_parallel * plan.shard.tensor_depth > 1;
}

// One layer's parameters on this rank before ZeRO: its tensor/expert shard (1D), or 1/q² of
// it on a 2D/2.5D grid.
int64_t LayerParametersOnRank(const TransformerSpec& spec, const MemoryPlan& plan, int index) {
  if (plan.shard.tensor_layout == TensorLayout::k1D) {
    return LayerParameterCount(spec, plan.shard.tensor_parallel, plan.shard.expert_parallel,
                               plan.shard.expert_tensor(), index);
  }
  return LayerParameterCount(spec, 1, plan.shard.expert_parallel, 1, index) / plan.shard.grid();
}

// The dtype ZeRO-3 gathers parameters in: theirs, but the activations' where PyTorch keeps
// fp32 shards (FSDP2's MixedPrecisionPolicy casts before the all-gather).
DType GatheredDType(const MemoryPlan& plan) {
  return plan.framework == Framework::kPyTorch ? plan.shard.dtype : plan.param_dtype;
}

// What one layer of the stage holds for a micro-batch: the activations it keeps until its
// backward pass, the working set of that backward (the activations it recomputes and its
// largest op's operands), and the parameters it holds (for its gradients' share).
struct LayerMemory {
  int64_t kept = 0;
  int64_t working = 0;
  int64_t parameters = 0;
};

// PyTorch autocast over fp32 weights. Not under ZeRO-3: FSDP gathers the weights in the
// activations' dtype (the gathered layers count them) and runs without autocast.
bool Autocasts(const MemoryPlan& plan) {
  return Autocasts(plan.framework, plan.param_dtype, plan.shard.dtype, ShardsParameters(plan));
}

LayerMemory TransformerLayerMemory(const TransformerSpec& spec, const MemoryPlan& plan, int index) {
  const LayerOps layer = TransformerLayerOps(spec, index, MemoryShard(plan));
  const bool recomputes =
      plan.recompute != Recompute::kNone && RecomputesLayer(plan.recompute_every, index);
  const Recompute recompute = recomputes ? plan.recompute : Recompute::kNone;
  LayerMemory memory;
  memory.kept = LayerActivationBytes(layer, recompute, plan.shard, spec.hidden);
  // Recomputing restores what the policy dropped: all a layer without recompute keeps.
  memory.working =
      MaxOpBytes(layer, 0) +
      (recomputes
           ? LayerActivationBytes(layer, Recompute::kNone, plan.shard, spec.hidden) - memory.kept
           : 0);
  memory.parameters = LayerParametersOnRank(spec, plan, index);
  if (Autocasts(plan)) {
    // Each matmul casts its weight to the activations' dtype and keeps the copy for its
    // backward; a recomputed layer casts again while it recomputes. And the residual stream is
    // fp32: the embedding's output is (its weight is), the residual adds promote to it, and the
    // norms run in fp32 — so the norms' inputs kept (the layer input, and the second norm's
    // where the layer does not recompute) take 4 B an element, not e.
    const int64_t e = DTypeBytes(plan.shard.dtype);
    const int64_t weights = memory.parameters * e;
    const int64_t widened = plan.shard.ActivationElements(spec.hidden) * (4 - e);
    if (recomputes) {
      memory.kept += widened;
      memory.working += weights + widened;
    } else {
      memory.kept += weights + 2 * widened;
    }
  }
  // FSDP: the layer's unsharded gradients in the activations' dtype and their copy in the
  // gradients' dtype that is reduce-scattered (torchtitan's reduce_dtype fp32). Under
  // pipelining they accumulate instead (AddGatheredParameters).
  if (plan.framework == Framework::kPyTorch && ShardsParameters(plan) &&
      plan.pipeline_stages == 1) {
    memory.working +=
        memory.parameters * (DTypeBytes(plan.shard.dtype) + DTypeBytes(plan.grad_dtype));
  }
  return memory;
}

// The kernel the plan's loss runs (LossKernel).
LossKernel LossKernelOf(const MemoryPlan& plan) {
  if (plan.framework == Framework::kMegatron) return LossKernel::kMegatronFused;
  if (LossParallel(plan.framework, plan.shard.tensor_parallel, plan.shard.tensor_layout)) {
    return LossKernel::kLossParallel;
  }
  return plan.shard.compiled_loss ? LossKernel::kCompiled : LossKernel::kEager;
}

// The output layer's working set: the loss's (LossWorkingBytes, per head) or its largest
// other op's.
int64_t OutputWorkingBytes(const LayerOps& output, const MemoryPlan& plan) {
  int64_t working = 0;
  for (const std::vector<Op>* list : {&output.forward, &output.backward}) {
    for (const Op& op : *list) {
      working = std::max(
          working,
          op.kind == OpKind::kCrossEntropy
              ? LossWorkingBytes(LossKernelOf(plan), op.signature.Dim("elements"), plan.shard.dtype)
              : static_cast<int64_t>(op.bytes));
    }
  }
  return working;
}

// One rank's memory at a point of the iteration, and the largest over the points visited.
struct Peak {
  int64_t activations = 0;
  int64_t working = 0;
  int64_t gradients = 0;

  void Visit(int64_t activations_now, int64_t working_now, int64_t gradients_now) {
    if (activations_now + working_now + gradients_now <= activations + working + gradients) {
      return;
    }
    activations = activations_now;
    working = working_now;
    gradients = gradients_now;
  }
};

// The peak over one micro-batch's backward pass through the stage, the other micro-batches
// in flight keeping theirs: the loss (last stage), then each layer in reverse order with the
// activations of the layers before it, its own, and its working set. Gradients exist from the
// start (Megatron's buffers; PyTorch after an earlier micro-batch's backward, or in DDP's
// buckets) or, in PyTorch with one micro-batch and no DDP buckets, only as the backward pass
// makes them: the layers behind it, shared out by their parameters.
void TransformerActivations(const TransformerSpec& spec, const MemoryPlan& plan,
                            MemoryBreakdown& memory) {
  std::vector<LayerMemory> layers;
  std::vector<int> indices;  // each entry's layer index
  int64_t per_microbatch = 0;
  int64_t layer_parameters = 0;
  // The multi-token-prediction modules run on the last chunk, whose backward follows its
  // forward: one micro-batch's in flight, as the output layer's.
  int64_t mtp = 0;
  int64_t fp8_weights = 0;
  int64_t largest_fp8_layer = 0;
  // A layer's memory depends on its index only through its kind and whether it recomputes:
  // each pair is decomposed once (a search estimates the memory of 10⁴–10⁵ plans).
  struct Priced {
    LayerMemory memory;
    int64_t fp8 = 0;
  };
  std::array<std::array<std::optional<Priced>, 2>, TransformerSpec::kLayerKinds> priced;
  for (int index : StageLayers(spec, plan)) {
    std::optional<Priced>& known = priced[static_cast<size_t>(spec.LayerKind(index))]
                                         [RecomputesLayer(plan.recompute_every, index) ? 1 : 0];
    if (!known) {
      known = Priced{.memory = TransformerLayerMemory(spec, plan, index),
                     .fp8 = Fp8WeightElements(TransformerLayerOps(spec, index, MemoryShard(plan)))};
    }
    const LayerMemory& layer = known->memory;
    if (spec.IsMtpLayer(index)) {
      mtp += layer.kept;
    } else {
      per_microbatch += layer.kept;
    }
    layers.push_back(layer);
    indices.push_back(index);
    layer_parameters += layer.parameters;
    const int64_t fp8 = known->fp8;
    fp8_weights += fp8;
    largest_fp8_layer = std::max(largest_fp8_layer, fp8);
  }
  // FP8: Transformer Engine keeps each FP8 weight quantized row- and column-wise (for the
  // forward and dgrad GEMMs, and the wgrad's transpose) from the first micro-batch on; the
  // per-tensor scaling state (a few fp32 per tensor) is negligible and not counted. Under
  // ZeRO-3 the weights exist only while gathered, so only the two gathered layers' copies do.
  if (ShardsParameters(plan)) fp8_weights = std::min(fp8_weights, 2 * largest_fp8_layer);
  const double copy = static_cast<double>(fp8_weights) * Fp8CopyBytes(plan.shard.fp8);
  memory.fp8_weights = static_cast<int64_t>(std::ceil(2 * copy));
  if (plan.fp8_params) {
    // FP8 parameters (never sharded: CheckFp8Params): the row-wise copy is the weight, which
    // takes its quantized bytes in place of param_dtype's.
    memory.parameters -= fp8_weights * DTypeBytes(plan.param_dtype);
    memory.parameters += static_cast<int64_t>(std::ceil(copy));
    memory.fp8_weights = static_cast<int64_t>(std::ceil(copy));
  }

  int64_t embedding = 0;
  int64_t embedding_working = 0;
  if (IsFirstStage(plan)) {
    embedding = EmbeddingKeptBytes(spec, plan);
    embedding_working = MaxOpBytes(EmbeddingOps(spec, MemoryShard(plan)), 0);
    per_microbatch += embedding;
  }
  const double in_flight = memory.microbatches_in_flight;
  const auto others =
      static_cast<int64_t>(std::ceil(static_cast<double>(per_microbatch) * (in_flight - 1)));
  const bool lazy_gradients = plan.framework == Framework::kPyTorch && plan.microbatches == 1 &&
                              !(plan.data_parallel > 1 && plan.zero_stage < 2);
  const double parameters = static_cast<double>(std::max<int64_t>(memory.parameter_count, 1));
  auto gradients_after = [&](int64_t parameters_behind) {
    if (!lazy_gradients) return memory.gradients;
    return static_cast<int64_t>(std::ceil(static_cast<double>(memory.gradients) *
                                          static_cast<double>(parameters_behind) / parameters));
  };

  // Activation offloading: what the first `entries` layers keep that is in host memory while
  // layer `now` runs its backward (spec.layers: the loss), as Transformer Engine copies it out
  // and back (models/activation_offload.h).
  const std::vector<int> anchors =
      OffloadAnchors(spec.layers, plan.offloaded_layers, plan.offload_handler);
  auto offloaded = [&](size_t entries, int now) {
    int64_t away = 0;
    for (size_t i = 0; i < entries && !anchors.empty(); ++i) {
      if (!spec.IsMtpLayer(indices[i]) && !OffloadedLayerResident(anchors, indices[i], now)) {
        away += layers[i].kept;
      }
    }
    return away;
  };

  // Each steady forward beside a backward (Megatron-Core's all-to-all overlap), when the
  // stage has a steady state: while a layer's backward runs, the paired forward has made its
  // layers so far and the backward freed as many after this one — net, the forward's current
  // layer, the stage's largest — and on the first stage its embedding, which it runs before
  // the backward begins (before the loss's backward too); at the embedding's backward, which
  // ends the pair, the forward's whole chunk pass (1/v of the stage's micro-batch).
  int64_t paired = 0;
  int64_t paired_loss = 0;
  int64_t paired_end = 0;
  if (plan.paired_passes && in_flight < static_cast<double>(plan.microbatches)) {
    for (const LayerMemory& layer : layers) paired = std::max(paired, layer.kept);
    paired += embedding;
    paired_loss = embedding;
    paired_end = (per_microbatch + mtp) / std::max(plan.virtual_stages, 1) +
                 (IsLastStage(plan) ? OutputKeptBytes(spec, plan) : 0);
  }
  Peak peak;
  // The multi-token-prediction modules' activations too: their backward comes first (the
  // reverse walk subtracts them as it passes them).
  int64_t kept = others + per_microbatch + mtp;
  int64_t behind = 0;  // parameters whose gradients the backward pass has made
  if (IsLastStage(plan)) {
    // The last stage runs each micro-batch's backward right after its forward: one in flight.
    const LayerOps output = OutputOps(spec, MemoryShard(plan));
    peak.Visit(
        kept + OutputKeptBytes(spec, plan) + paired_loss - offloaded(layers.size(), spec.layers),
        OutputWorkingBytes(output, plan), gradients_after(0));
    behind = memory.parameter_count - layer_parameters;  // the output layer's, first
  }
  for (size_t i = layers.size(); i-- > 0;) {
    peak.Visit(kept + paired - offloaded(i + 1, indices[i]), layers[i].working,
               gradients_after(behind));
    kept -= layers[i].kept;
    behind += layers[i].parameters;
  }
  if (IsFirstStage(plan)) {
    peak.Visit(kept + paired_end, embedding_working, gradients_after(behind));
  }
  memory.activations = peak.activations;
  memory.temporary = peak.working;
  memory.gradients = peak.gradients;
}

// DeepSpeed's ZeRO-3 at the turn from forward to backward, where its coordinator holds the most
// (deepspeed/runtime/zero/partitioned_param_coordinator.py, which fetches and releases each
// module's parameters around it): the output layer in use (and the final norm), every layer it
// did not release after its forward because the layer runs again, in backward, within
// max_reuse_distance elements of the modules in between (those after it in forward, the output
// layer, those after it again in backward: 2 × what follows it), and the backward's prefetch of
// the layers before them — prefetch_bucket_size elements (up to a parameter more), and no more
// than max_live_parameters leaves room for. Layers counted whole on the rank (elements before
// ZeRO), as the coordinator counts ds_numel; each later layer releases what it kept after its
// backward, so the turn is the most.
int64_t DeepSpeedGathered(const TransformerSpec& spec, const MemoryPlan& plan) {
  const DeepSpeedZero& zero = plan.deepspeed;
  int64_t live = 0;
  if (IsLastStage(plan)) {
    const int tables = OutputTables(spec, plan.stage);
    const int64_t vocab_shard = VocabShard(spec, plan.shard.tensor_parallel);
    live += (tables > 0 ? tables : (IsFirstStage(plan) ? 1 : 0)) * vocab_shard +
            (spec.final_norm ? NormParameters(spec) : 0);
  }
  const std::vector<int> layers = StageLayers(spec, plan);
  int64_t after = live;  // what runs between a layer's forward and its backward, once each way
  size_t kept = layers.size();
  while (kept > 0 && 2 * after < zero.max_reuse_distance) {
    const int64_t layer = LayerParametersOnRank(spec, plan, layers[kept - 1]);
    live += layer;
    after += layer;
    --kept;
  }
  int64_t rest = 0;  // the layers released after their forward, to be fetched again
  for (size_t i = 0; i < kept; ++i) rest += LayerParametersOnRank(spec, plan, layers[i]);
  const int64_t room = std::max<int64_t>(0, zero.max_live_parameters - live);
  return live + std::min({rest, zero.prefetch_bucket_size, room});
}

// ZeRO-3's gathered parameters: the layer being computed and the one prefetched (on a grid
// every weight is split q×q: the whole layer over q²). FSDP2 (PyTorch) also keeps the root
// module's — the embedding, final norm and output layer: the stage's parameters outside its
// layers — gathered from the forward pass's start to the backward's end. Under pipelining it
// reshards nothing between micro-batches (torchtitan: reshard_after_forward off; the pipeline
// stage turns off resharding after backward and gradient sync but for the last micro-batch):
// the whole stage stays gathered, and its unsharded gradients accumulate in the gradients'
// dtype (FSDP2's reduce_dtype) until the last micro-batch reduce-scatters them. DeepSpeed's
// ZeRO-3 (1D tensor parallelism) holds what its coordinator keeps (DeepSpeedGathered).
void AddGatheredParameters(const TransformerSpec& spec, const MemoryPlan& plan,
                           MemoryBreakdown& memory) {
  const int64_t gathered_bytes = DTypeBytes(GatheredDType(plan));
  if (plan.framework == Framework::kDeepSpeed && plan.shard.tensor_layout == TensorLayout::k1D &&
      ShardsParameters(plan)) {
    memory.temporary += DeepSpeedGathered(spec, plan) * gathered_bytes;
    return;
  }
  if (plan.framework == Framework::kPyTorch && plan.pipeline_stages > 1) {
    memory.temporary += memory.parameter_count * gathered_bytes;
    memory.gradients += memory.parameter_count * DTypeBytes(plan.grad_dtype);
    return;
  }
  int64_t gathered = 2 * LayerParametersOnRank(spec, plan, 0);
  if (plan.framework == Framework::kPyTorch) {
    int64_t layers = 0;
    for (int index : StageLayers(spec, plan)) layers += LayerParametersOnRank(spec, plan, index);
    gathered += memory.parameter_count - layers;
  }
  memory.temporary += gathered * gathered_bytes;
}

}  // namespace

namespace {
constexpr std::array<std::string_view, 3> kFrameworkNames = {"megatron", "pytorch", "deepspeed"};
}  // namespace

std::span<const std::string_view> FrameworkNames() { return kFrameworkNames; }

std::string_view FrameworkName(Framework framework) {
  return kFrameworkNames[static_cast<size_t>(framework)];
}

bool Autocasts(Framework framework, DType param_dtype, DType activations, bool shards_parameters) {
  return framework == Framework::kPyTorch && param_dtype == DType::kFp32 &&
         activations != DType::kFp32 && !shards_parameters;
}

bool LossParallel(Framework framework, int tensor_parallel, TensorLayout layout) {
  return framework == Framework::kPyTorch && tensor_parallel > 1 && layout == TensorLayout::k1D;
}

int64_t LossWorkingBytes(LossKernel kernel, int64_t logits, DType dtype) {
  const int64_t e = DTypeBytes(dtype);
  switch (kernel) {
    case LossKernel::kMegatronFused:
    case LossKernel::kCompiled:
      return logits * e;
    case LossKernel::kLossParallel:
      return logits * (e + 12);
    case LossKernel::kEager:
      break;
  }
  return logits * std::max<int64_t>(e + 4, 8);
}

int64_t LayerActivationBytes(const LayerOps& layer, Recompute recompute,
                             const TransformerShard& shard, int64_t hidden) {
  // Full: only the layer's input is kept: 2·s·b·h for 2-byte activations (÷t with SP, ÷q²·d on
  // a 2D/2.5D grid).
  const int64_t input = shard.ActivationElements(hidden) * DTypeBytes(shard.dtype);
  if (recompute == Recompute::kFull) return input;
  if (recompute == Recompute::kSelectiveOp) {
    // The input and the outputs of the ops the policy saves.
    int64_t bytes = input;
    for (const int64_t kept : PlanSelectiveOp(layer).kept_bytes) bytes += kept;
    return bytes;
  }
  int64_t bytes = 0;
  for (const Op& op : layer.forward) {
    bytes += op.saved_bytes;
    if (recompute == Recompute::kSelective)
      bytes -= SelectiveFreedBytes(op, layer.selective_modules);
  }
  return bytes;
}

int64_t LayerKeptBytes(const TransformerSpec& spec, const MemoryPlan& plan, int index) {
  return TransformerLayerMemory(spec, plan, index).kept;
}

int64_t EmbeddingKeptBytes(const TransformerSpec& spec, const MemoryPlan& plan) {
  return TotalSavedBytes(EmbeddingOps(spec, MemoryShard(plan)).forward);
}

int64_t OutputKeptBytes(const TransformerSpec& spec, const MemoryPlan& plan) {
  return TotalSavedBytes(OutputOps(spec, MemoryShard(plan)).forward);
}

int64_t StageExpertParameterCount(const ModelSpec& model, const MemoryPlan& plan) {
  if (model.family != ModelFamily::kTransformer || plan.shard.tensor_layout != TensorLayout::k1D) {
    return 0;
  }
  const TransformerSpec& spec = model.transformer;
  int64_t params = 0;
  for (int index : StageLayers(spec, plan)) {
    if (!spec.IsMoeLayer(index)) continue;
    params += spec.moe.experts / plan.shard.expert_parallel *
              LocalMlpParameters(spec, spec.MoeFfnHidden(), plan.shard.expert_tensor());
  }
  return params;
}

int64_t StageParameterCount(const ModelSpec& model, const MemoryPlan& plan) {
  switch (model.family) {
    case ModelFamily::kTransformer:
      return TransformerStageParameters(model.transformer, plan);
    case ModelFamily::kDlrm: {
      const ParameterCount count = CountParameters(model);
      if (plan.embedding_parameters) return count.layers + *plan.embedding_parameters;
      return count.layers + (count.embedding + plan.embedding_shards - 1) / plan.embedding_shards;
    }
    case ModelFamily::kResNet:
      return CountParameters(model).total;
  }
  return 0;
}

// DeepSpeed's gradient bucket (contiguous_gradients): ZeRO-3's, held throughout (stage3.py);
// ZeRO-1 and 2's, made by each backward pass and freed by the optimizer's step, two with
// overlap_comm (stage_1_and_2.py) — under a pipeline made only after the backward passes
// (reduce_gradients), when the activations are gone, so not at the peak.
int64_t DeepSpeedBucketBytes(const MemoryPlan& plan) {
  if (plan.framework != Framework::kDeepSpeed || plan.zero_stage == 0 ||
      !plan.deepspeed.contiguous_gradients) {
    return 0;
  }
  int buckets = 1;
  if (plan.zero_stage < 3) {
    if (plan.pipeline_stages > 1) return 0;
    if (plan.overlap_gradient_reduce) buckets = 2;
  }
  return buckets * plan.deepspeed.reduce_bucket_size * DTypeBytes(plan.param_dtype);
}

Expected<MemoryBreakdown> EstimateMemory(const ModelSpec& model, const MemoryPlan& plan) {
  DTSIM_RETURN_IF_ERROR(CheckPlan(model, plan));
  MemoryBreakdown memory;
  memory.parameter_count = StageParameterCount(model, plan);
  // ZeRO (Rajbhandari et al. SC'20 §5): stage 1 shards the optimizer state over the N
  // data-parallel ranks, stage 2 also the gradients, stage 3 also the parameters. Expert
  // weights are held by N/EP ranks each (the expert-data-parallel group) and shard over those,
  // as DeepSpeed-MoE shards them.
  const auto experts = static_cast<double>(StageExpertParameterCount(model, plan));
  const double dense = static_cast<double>(memory.parameter_count) - experts;
  // The ranks holding the same dense weights: the replicas, times a 2.5D grid's depth layers.
  const double n = static_cast<double>(plan.data_parallel) * plan.shard.tensor_depth;
  // Experts split t_e·EP ways of the t·n ranks (t_e = t but under MoE parallel folding).
  const double expert_n =
      n * plan.shard.tensor_parallel / (plan.shard.expert_tensor() * plan.shard.expert_parallel);
  auto shard = [&](double bytes_per_parameter, int from_stage) {
    const bool sharded = plan.zero_stage >= from_stage;
    return static_cast<int64_t>(std::ceil(
        (sharded ? dense / n + experts / expert_n : dense + experts) * bytes_per_parameter));
  };
  memory.parameters = shard(DTypeBytes(plan.param_dtype), 3);
  memory.gradients = shard(DTypeBytes(plan.grad_dtype), 2);
  memory.optimizer_state =
      shard(OptimizerStateBytes(plan.optimizer, plan.param_dtype, plan.optimizer_state), 1);
  if (model.family == ModelFamily::kDlrm && plan.embedding_parameters) {
    // A sharded table's gradient is applied in the backward row by row, never held whole.
    const int64_t sparse = *plan.embedding_parameters - plan.replicated_embedding_parameters;
    memory.gradients -=
        static_cast<int64_t>(static_cast<double>(sparse) * DTypeBytes(plan.grad_dtype));
  }
  memory.microbatches_in_flight = MicrobatchesInFlight(
      plan.schedule, plan.pipeline_stages, plan.stage, plan.virtual_stages, plan.microbatches);
  switch (model.family) {
    case ModelFamily::kTransformer:
      TransformerActivations(model.transformer, plan, memory);
      if (plan.zero_stage == 3) AddGatheredParameters(model.transformer, plan, memory);
      break;
    case ModelFamily::kResNet:
    case ModelFamily::kDlrm: {
      const LayerOps ops = model.family == ModelFamily::kResNet
                               ? ResNetOps(model.resnet, plan.shard.micro_batch, plan.shard.dtype)
                               : DlrmOps(model.dlrm, plan.shard.micro_batch, plan.shard.dtype);
      memory.activations = TotalSavedBytes(ops.forward);
      memory.temporary = MaxOpBytes(ops, 0);
      memory.microbatches_in_flight = 1;
      break;
    }
  }
  memory.gradients += DeepSpeedBucketBytes(plan);  // beside whatever the peak holds
  return memory;
}

}  // namespace dtsim::models
