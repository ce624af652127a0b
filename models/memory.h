// Per-GPU memory (docs/models.md, "Memory"): parameters, gradients and optimizer state after
// ZeRO, activations after Korthikanti et al. 2022 times the micro-batches a pipeline schedule
// keeps in flight, embedding tables, and temporary buffers, against the GPU's capacity.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "models/activation_offload.h"
#include "models/model_spec.h"
#include "models/ops.h"
#include "models/pipeline_schedules.h"
#include "sim/base/dtype.h"
#include "sim/base/status.h"
#include "sim/base/units.h"

namespace dtsim::models {

// Whose memory behaviour a plan follows where frameworks differ (docs/models.md, "Memory"):
// Megatron-LM/-Core — the fused vocabulary-parallel cross-entropy, gradient buffers allocated
// once — or PyTorch-native training (torchtitan, FSDP2, DDP, autocast) — the loss as
// log_softmax and nll_loss over an fp32 copy of the logits, gradients made by the backward
// pass after zero_grad(set_to_none) freed them, autocast's bf16 copies of fp32 weights.
enum class Framework : uint8_t { kMegatron, kPyTorch, kDeepSpeed };
std::span<const std::string_view> FrameworkNames();  // indexed by Framework
std::string_view FrameworkName(Framework framework);

// Whether a plan trains under PyTorch autocast over fp32 weights: `pytorch` with fp32
// parameters and activations in a lower precision, the parameters not sharded (FSDP gathers
// them in the activations' dtype and runs without autocast). The op decomposition
// (TransformerShard::autocast) and the memory model both follow it.
bool Autocasts(Framework framework, DType param_dtype, DType activations, bool shards_parameters);

// torchtitan's loss_parallel: a PyTorch plan's 1D tensor parallelism leaves the logits sharded
// over the vocabulary into the loss.
bool LossParallel(Framework framework, int tensor_parallel, TensorLayout layout);

// How a plan's loss runs over the logits: Megatron's fused vocabulary-parallel cross-entropy,
// PyTorch's eager log_softmax + nll_loss over an fp32 copy (DeepSpeed's too), PyTorch's
// loss_parallel over vocabulary shards (torchtitan's with tensor parallelism,
// torch/distributed/tensor/parallel/loss.py), or torch.compile's fused kernels
// (TransformerShard::compiled_loss).
enum class LossKernel : uint8_t { kMegatronFused, kEager, kLossParallel, kCompiled };

// The bytes a cross-entropy over `logits` elements (of `dtype`) holds at its peak beside what
// it keeps for the backward pass (counted with the activations: the fp32 softmax, 4 B a logit;
// compiled, the logits themselves, e B):
// - Megatron builds the softmax in place in an fp32 copy of the logits and the gradient in
//   place in the softmax, so only the logits (forward) or the gradient's cast (backward), e;
// - eager PyTorch holds, in backward, nll_loss's dense fp32 gradient and log_softmax's fp32
//   input gradient (8), in forward the logits and their fp32 copy (e + 4);
// - loss_parallel holds in forward the logits, their fp32 copy, the copy less its maxima and
//   their exponentials (e + 12), in backward the one-hot zeros, the exponentials of the saved
//   result and their sum (12);
// - compiled, only the backward's bf16 gradient beside the kept logits (e): the forward's
//   reductions keep a value or two a token.
int64_t LossWorkingBytes(LossKernel kernel, int64_t logits, DType dtype);

// Activation bytes one layer keeps for its backward pass: the sum of its forward ops' saved
// bytes (none), without the core attention's (selective), or only the layer input (full).
int64_t LayerActivationBytes(const LayerOps& layer, Recompute recompute,
                             const TransformerShard& shard, int64_t hidden);

// DeepSpeed's ZeRO settings that bound what it holds besides the shards (its zero_optimization
// section; DeepSpeedZeroConfig's defaults, deepspeed/runtime/zero/config.py), in elements.
struct DeepSpeedZero {
  // contiguous_gradients (default true): the gradient bucket of reduce_bucket_size elements in
  // the parameters' dtype — ZeRO-3's held from the optimizer's construction (stage3.py), ZeRO-1
  // and 2's made by each backward pass, two with overlap_comm (stage_1_and_2.py).
  bool contiguous_gradients = true;
  int64_t reduce_bucket_size = 500'000'000;
  // partitioned_param_coordinator.py: parameters fetched ahead of use (at most
  // stage3_prefetch_bucket_size elements, and no more than stage3_max_live_parameters gathered
  // with them); a module's parameters are not released when it will use them again within
  // stage3_max_reuse_distance elements of the modules run next.
  int64_t prefetch_bucket_size = 50'000'000;
  int64_t max_live_parameters = 1'000'000'000;
  int64_t max_reuse_distance = 1'000'000'000;
};
// The most elements a DeepSpeedZero setting takes from a config: 2^50, a thousand times any
// GPU's memory in bytes, so products with a dtype's size stay far inside int64.
inline constexpr int64_t kMaxDeepSpeedElements = int64_t{1} << 50;

struct MemoryPlan {
  TransformerShard shard;  // micro-batch, sequence, dtype, TP/SP/EP (transformers)
  Recompute recompute = Recompute::kNone;
  int recompute_every = 1;  // the policy on every n-th layer only (RecomputesLayer)
  Framework framework = Framework::kMegatron;
  PipelineSchedule schedule = PipelineSchedule::kOneForwardOneBackward;
  int pipeline_stages = 1;
  int virtual_stages = 1;
  // Megatron-Core's all-to-all overlap: after one more warm-up forward each steady forward runs
  // beside a backward, layer by layer; the micro-batches in flight are as without it, and
  // while a layer's backward runs the paired forward's current layer is kept too.
  bool paired_passes = false;
  int stage = 0;  // which pipeline rank (0 = first: embedding; p − 1 = last: output)
  int64_t microbatches = 1;
  int data_parallel = 1;
  int zero_stage = 0;  // 0..3: optimizer state, + gradients, + parameters sharded over DP
  Optimizer optimizer = Optimizer::kAdam;
  OptimizerState optimizer_state;  // its moments' and master copy's dtypes
  DType param_dtype = DType::kBf16;
  // FP8 parameters (Megatron-Core's --fp8-param-gather, NeMo's fp8_params): the FP8 GEMMs'
  // weights are stored quantized (the row-wise copy is the parameter); the rest in param_dtype.
  bool fp8_params = false;
  DType grad_dtype = DType::kBf16;  // fp32 for Megatron-style main gradients
  int embedding_shards = 1;         // DLRM: tables split over this many ranks
  // DLRM: the embedding parameters (rows × dim) this rank holds, where a sharding plan placed
  // them (strategies/embedding_sharding.h); unset: the tables' over embedding_shards. Of them,
  // the replicated tables' have dense gradients; the sharded tables' are applied in the
  // backward, fused, and never held whole (FBGEMM's table-batched embeddings).
  std::optional<int64_t> embedding_parameters;
  int64_t replicated_embedding_parameters = 0;
  // Layers per model chunk when not L/(p·v) each, in model order (chunk k runs on stage
  // k mod p as its virtual stage k / p; p entries without virtual stages); else empty.
  std::vector<int> chunk_layers;
  DeepSpeedZero deepspeed;  // framework kDeepSpeed
  // The data-parallel reduction overlaps the backward pass (DeepSpeed's overlap_comm: ZeRO-1
  // and 2 double their gradient bucket).
  bool overlap_gradient_reduce = false;
  // Megatron-Core's --cpu-offloading-num-layers: the first N layers' activations go to host
  // memory between their forward and backward, as `offload_handler` schedules the copies
  // (models/activation_offload.h); 0: none.
  int offloaded_layers = 0;
  OffloadHandler offload_handler = OffloadHandler::kSynchronizer;
};

struct MemoryBreakdown {
  int64_t parameter_count = 0;  // parameters this rank holds before ZeRO
  int64_t parameters = 0;       // bytes
  int64_t gradients = 0;
  int64_t optimizer_state = 0;
  // At the peak (EstimateMemory): the activations kept for the backward pass then, and the
  // working set of what runs then (the loss, a layer's backward with what it recomputes, the
  // largest op; gathered ZeRO-3 parameters). `gradients` too is what exists at the peak.
  int64_t activations = 0;
  int64_t temporary = 0;
  // FP8 training: the quantized weight copies (row- and column-wise; only the column-wise
  // under fp8_params, whose row-wise copy is counted in `parameters`)
  int64_t fp8_weights = 0;
  // Outside the allocator: the CUDA context and libraries (GpuSpec::context_memory), set by
  // strategies::EstimateStageMemory. The rest is what PyTorch's allocator hands out.
  int64_t runtime = 0;
  // Outside the allocator too: NCCL's buffers for the rank's communicators (network/
  // nccl_memory.h), set by strategies::EstimateStageMemory.
  int64_t nccl = 0;
  double microbatches_in_flight = 0;
  // Inside the allocator but beyond its tensors: what PyTorch's caching allocator holds
  // reserved at its peak over what is allocated then (max_memory_reserved less
  // max_memory_allocated), where dtsim replays the plan's loop tensor by tensor
  // (models/eager_allocations.h; set by strategies::EstimateStageMemory); not modelled elsewhere.
  int64_t allocator_reserve = 0;
  bool reserve_modelled = false;
  // Where the loop is replayed: what each layer keeps from its forward to its backward, as the
  // replay holds it (models::EagerPeaks::layer_kept; index `layers` the last layer's output),
  // for the timeline's memory track; else empty (LayerKeptBytes).
  std::vector<int64_t> replayed_layer_kept;

  int64_t total() const { return tensors() + allocator_reserve + runtime + nccl; }
  // What the allocator holds: torch.cuda.max_memory_reserved where the reserve is modelled.
  int64_t reserved() const { return tensors() + allocator_reserve; }
  int64_t tensors() const {
    return parameters + gradients + optimizer_state + activations + temporary + fp8_weights;
  }
};

// One transformer layer's parameters on one tensor/expert-parallel rank: column-parallel QKV
// and FC1 and row-parallel projections split t ways (KV heads replicated when fewer than t),
// norms and row-parallel biases replicated, experts split over EP and each expert's FFN
// `expert_tensor_parallel` ways (t, or 1 under MoE parallel folding), the router replicated.
int64_t LayerParameterCount(const TransformerSpec& spec, int tensor_parallel, int expert_parallel,
                            int expert_tensor_parallel, int index);

// The layer indices of virtual stage `chunk` of pipeline rank `stage`: model chunk
// chunk · p + stage, of L/(p·v) layers, or of the given `chunk_layers` (one count per model
// chunk, in model order) its consecutive share.
std::vector<int> ChunkLayerIndices(const TransformerSpec& spec, int pipeline_stages,
                                   int virtual_stages, int stage, int chunk,
                                   std::span<const int> chunk_layers = {});
// The layer indices pipeline rank `stage` holds: its chunks' (ChunkLayerIndices), in order.
std::vector<int> StageLayerIndices(const TransformerSpec& spec, int pipeline_stages,
                                   int virtual_stages, int stage,
                                   std::span<const int> chunk_layers = {});

// The vocabulary tables (V/t × h on a tensor-parallel rank) the last pipeline stage, `stage`,
// holds besides the first stage's embedding: an untied output layer, and a copy of the
// embedding where that stage is not the first and uses it — as a tied output layer, or for
// the multi-token-prediction modules' lookups (Megatron-Core keeps one there and all-reduces
// its gradient with the first stage's).
int OutputTables(const TransformerSpec& spec, int stage);

// The key/value cache an inference server keeps per token over all layers: K and V of every
// KV head (2·kv_heads·head_dim a layer), or under MLA the KV latent and the keys' rotary part
// ((kv_lora_rank + qk_rope_head_dim) a layer; DeepSeek-V2 §2.1.3).
int64_t KvCacheBytesPerToken(const TransformerSpec& spec, DType dtype);

// Parameters one rank of stage `plan.stage` holds (tensor/expert sharded, before ZeRO).
int64_t StageParameterCount(const ModelSpec& model, const MemoryPlan& plan);
// Of those, the local experts' (MoE layers' expert MLPs, 1D tensor parallelism); 0 otherwise.
int64_t StageExpertParameterCount(const ModelSpec& model, const MemoryPlan& plan);

// What a rank of `plan` keeps for the backward pass of one micro-batch, as EstimateMemory
// counts it: transformer layer `index` (its recompute policy's activations, autocast's weight
// copies and fp32 norm inputs), the embedding (first stage) and the output layer (last stage).
// For a timeline's memory track. Precondition: EstimateMemory(model, plan) succeeded.
int64_t LayerKeptBytes(const TransformerSpec& spec, const MemoryPlan& plan, int index);
int64_t EmbeddingKeptBytes(const TransformerSpec& spec, const MemoryPlan& plan);
int64_t OutputKeptBytes(const TransformerSpec& spec, const MemoryPlan& plan);

// Errors when the plan does not fit the model (layers by stages, the shard, ZeRO stage).
Expected<MemoryBreakdown> EstimateMemory(const ModelSpec& model, const MemoryPlan& plan);

}  // namespace dtsim::models
