// Ops: the compute a model runs, one record per kernel-sized piece of work, with the FLOPs,
// bytes and saved activations a cost or memory model needs (docs/models.md, "Ops").
// Decompositions are functions of micro-batch, sequence length and sharding, so a strategy can
// ask for the ops of one tensor-parallel shard of one layer, or of one expert.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/model_spec.h"
#include "sim/base/dtype.h"
#include "sim/base/status.h"
#include "traces/op_cost_table.h"

namespace dtsim::models {

enum class OpKind : uint8_t {
  kGemm,            // (batch ×) m×k · k×n; dims m, n, k, batch
  kFlashAttention,  // fused attention (forward or backward kernel)
  kNorm,            // LayerNorm / RMSNorm
  kSoftmax,         // scale + mask + softmax over attention scores
  kDropout,
  kActivation,   // GeLU, SwiGLU, ReLU
  kElementwise,  // residual add, bias, scale
  kEmbedding,    // lookup (forward) or gradient accumulation (backward)
  kCrossEntropy,
  kRouter,   // MoE top-k selection over the router's logits
  kPermute,  // MoE token dispatch / combine within a rank
  kBatchNorm,
  kPool,
  kOptimizer,
  kQuantize,  // FP8: a BF16 tensor cast to FP8 with its scales, row- and column-wise
  kCast,      // autocast: a copy between fp32 and the activations' dtype, either way
  kBias,      // a linear's bias: its gradient (backward only), a sum over the tokens
  kRotary,    // rotary position embeddings applied to the queries and keys
};

enum class Pass : uint8_t { kForward, kBackward, kRecompute, kOptimizer };

std::string_view OpKindName(OpKind kind);
std::string_view PassName(Pass pass);

struct Op {
  std::string name;  // "attn.qkv", "mlp.fc1.dgrad", ...
  OpKind kind = OpKind::kElementwise;
  Pass pass = Pass::kForward;
  DType dtype = DType::kBf16;
  traces::OpSignature signature;  // the key of measured op-cost tables
  double flops = 0;         // arithmetic the kernel executes (a causal flash kernel skips half)
  double model_flops = 0;   // what MFU counts: matmuls only, attention unmasked (SC'21 convention)
  double bytes = 0;         // HBM traffic: each input read and each output written once
  bool matmul = false;      // runs on the tensor cores
  int64_t saved_bytes = 0;  // forward ops: activation bytes kept until the backward pass
  bool core_attention = false;  // scores/softmax/dropout: dropped by selective recompute
  // Selective recompute by module (RecomputeModule bits): the modules whose recompute re-runs
  // this forward op, and those whose recompute frees its saved bytes — all of them (a module's
  // inner tensors), or only the part that is its input (`saved_input_bytes`) or the rest, its
  // output (a CheckpointWithoutOutput module's output, which this op saves as its input, or
  // which it saves for its consumer). SelectiveFreedBytes sums them.
  uint8_t reruns_in = 0;
  uint8_t frees_all_in = 0;
  uint8_t frees_input_in = 0;
  uint8_t frees_output_in = 0;
  int64_t saved_input_bytes = 0;
  // The GEMMs of a weight (LayerBuilder::Linear) name their role and the operand blocks a
  // strategy that distributes the GEMM itself (SUMMA) moves: the input activation block
  // (tokens × in elements) and the weight block (in × out), per step of `batch` steps.
  enum class WeightGemm : uint8_t { kNone, kForward, kDgrad, kWgrad };
  WeightGemm weight_gemm = WeightGemm::kNone;
  int64_t activation_block = 0;
  int64_t weight_block = 0;
  // The collective 1D tensor and expert parallelism put right after the op, set where the op
  // is made: Megatron's f/g (the tensor-parallel reduction after the row-parallel GEMM in
  // forward and after the column-parallel GEMM's weight gradient in backward) and the expert
  // exchanges: kExpertDispatch, the all-to-all that carries tokens to their experts and then,
  // when the experts split over the tensor group under sequence parallelism, the all-gather of
  // the tokens the group received (after the dispatch in forward, after the combine's backward);
  // kExpertCombine, the reduce-scatter of the experts' partial outputs over that group and then
  // the all-to-all back (after the last expert GEMM, after the first one's backward). 2D/2.5D
  // grids have none.
  enum class Boundary : uint8_t { kNone, kTensorReduce, kExpertDispatch, kExpertCombine };
  Boundary boundary = Boundary::kNone;
  // A tensor-parallel boundary's widths in elements per token where they are not the hidden
  // size (0): the reduced tensor's (a multi-latent attention's latents, whose gradients Megatron
  // reduces at its up-projections' inputs; kNoReduce: none, the boundary only gathers — a
  // sequence-parallel MoE block's routed tokens come back as the rank's shard) and, under
  // sequence parallelism, the width of the shard all-gathered with it for the next
  // column-parallel consumer (MLA gathers its latents, not the hidden state; kNoGather: none,
  // when another boundary of the block gathers or the consumer takes the shard).
  static constexpr int64_t kNoGather = -1;
  static constexpr int64_t kNoReduce = -1;
  int64_t reduce_columns = 0;
  int64_t gather_columns = 0;
  // A column-parallel linear's dgrad under sequence parallelism: the bytes each rank gives the
  // all-gather that re-assembles the layer's input for its weight gradient — the linear saved
  // only its sequence shard — which runs beside this GEMM; the wgrad waits for it (Megatron-
  // Core's LinearWithGradAccumulationAndAsyncCommunication.backward, Transformer Engine's
  // Linear and LayerNormLinear backward). 0: none.
  int64_t regather_bytes = 0;
  bool expert = false;  // an expert's GEMM or activation: its work follows the routed tokens
  int64_t fp8_weight_elements = 0;  // an FP8 GEMM's forward: the weight elements it quantizes
  // A weight GEMM's or flash attention kernel's forward: the bytes of its outputs (a GEMM's
  // product, in the activation dtype; the kernel's output and fp32 row statistics), what
  // selective op checkpointing keeps of it (SelectiveOpSaves).
  int64_t output_bytes = 0;
  // A weight GEMM dtsim fuses that PyTorch models run as separate matmuls (Llama-style q, k, v
  // projections; SwiGLU's gate and up): each one's output bytes in forward order, for selective
  // op checkpointing's count of matmuls. Empty: one matmul.
  std::vector<int64_t> matmul_outputs;

  // The ops' matmul-ness and FLOPs, for GEMMs: 2·m·n·k·batch.
  static Op Gemm(std::string name, Pass pass, DType dtype, int64_t m, int64_t n, int64_t k,
                 int64_t batch = 1);
  // An op that reads and writes element arrays: bytes = elements · bytes_per_element.
  static Op Streaming(std::string name, OpKind kind, Pass pass, DType dtype, int64_t elements,
                      double bytes_per_element, double flops_per_element = 1);
};

// FP8 training as Transformer Engine runs it (docs/strategies.md, "FP8"): the GEMMs of the
// transformer layers' linear layers in FP8 with BF16 outputs, everything else in BF16. The
// recipe is how tensors are scaled: delayed (per tensor, from the amax history), current (per
// tensor, from this tensor's amax: one more pass over it), blockwise (DeepSeek-V3's 1×128 and
// 128×128 blocks), mxfp8 (32-element blocks with E8M0 scales, Blackwell).
enum class Fp8Recipe : uint8_t { kNone, kDelayed, kCurrent, kBlockwise, kMxfp8 };
std::span<const std::string_view> Fp8RecipeNames();  // indexed by Fp8Recipe: "none", "delayed", …
// The FLOPs a flash attention kernel of `signature` executes, forward or (`backward`) backward:
// 2·(d + d_v) a query-key pair forward (QKᵀ and PV), 2·(3d + 2d_v) backward (QKᵀ again, dQ, dK,
// dP, dV), over the pairs its mask leaves — half of seq × kv_seq under the causal mask, all
// without it, s·w − w(w − 1)/2 of a head's with a window of w over s keys, k·c(c + 1)/2 +
// r(r + 1)/2 with chunks of c (s = k·c + r, each chunk causal: Llama 4's chunked attention).
double FlashAttentionFlops(const traces::OpSignature& signature, bool backward);

// HBM bytes per element to quantize a BF16 tensor: read it (2), write FP8 row- and column-wise
// (1 + 1) and their scales (blockwise 4 B per 128, mxfp8 1 B per 32, each way); current scaling
// reads it once more for its amax (2).
double Fp8QuantizeBytes(Fp8Recipe recipe);
// Bytes per element of one FP8 copy (one direction) with its scales.
double Fp8CopyBytes(Fp8Recipe recipe);

// Activation recompute (docs/models.md, "Memory"): none; selective, Megatron's (Korthikanti et
// al.: the core attention re-run); full (each layer's forward re-run from its input);
// selective_op, PyTorch's selective activation checkpointing as torchtitan's "op" policy
// configures it (SelectiveOpSaves).
enum class Recompute { kNone, kSelective, kFull, kSelectiveOp };
std::string_view RecomputeName(Recompute recompute);
std::span<const std::string_view> RecomputeNames();  // indexed by Recompute
// The modules Megatron-Core's selective recompute re-runs (TransformerConfig.recompute_modules,
// --recompute-modules; v0.13+), as bits of a mask: Recompute::kSelective re-runs the modules of
// TransformerShard::recompute_modules, by default the core attention alone (Korthikanti's
// selective recompute). Each keeps its input; layernorm, mla_up_proj and moe_act also drop the
// output their consumer saves (Megatron-Core's CheckpointWithoutOutput) and recompute it.
enum RecomputeModule : uint8_t {
  kRecomputeCoreAttn = 1 << 0,       // "core_attn": scores, softmax, dropout, context
  kRecomputeLayerNorm = 1 << 1,      // "layernorm": the two pre-norms
  kRecomputeMlaUpProj = 1 << 2,      // "mla_up_proj": MLA's query and key/value up-projections
  kRecomputeMlp = 1 << 3,            // "mlp": a dense layer's MLP
  kRecomputeMoe = 1 << 4,            // "moe": a MoE layer's block (router to combine)
  kRecomputeMoeAct = 1 << 5,         // "moe_act": the experts' activation
  kRecomputeSharedExperts = 1 << 6,  // "shared_experts": a MoE layer's shared experts
};
std::span<const std::string_view> RecomputeModuleNames();  // bit i of the mask is name i
// The bit of the module named `name` ("mlp"), if one is.
std::optional<uint8_t> RecomputeModuleBit(std::string_view name);
// "core_attn, mlp": the modules of `mask`, in RecomputeModuleNames' order.
std::string RecomputeModulesText(uint8_t mask);
// Whether the recompute policy applies to transformer layer `index` (0-based, model order) when
// it applies to every `every`-th layer: always for 1; else to layers every − 1, 2·every − 1, …,
// as torchtitan's per-layer checkpointing frequency (selective_ac_option n) wraps blocks n, 2n,
// … counted from 1. (torchtitan counts a pipeline rank's blocks; the two agree whenever each
// rank's layer count is a multiple of `every`.) The other layers keep all their activations.
bool RecomputesLayer(int every, int index);

// How tensor parallelism cuts a layer (docs/strategies.md, "Tensor parallelism"):
// 1D Megatron splits heads, FFN and vocabulary t ways; 2D (Optimus/SUMMA) on a q×q grid splits
// the batch q ways and every weight q×q; 2.5D (Tesseract) on q×q×d also splits the batch over
// the d depth layers, which hold replicas of the q×q weight blocks.
enum class TensorLayout : uint8_t { k1D, k2D, k2p5D };
std::span<const std::string_view> TensorLayoutNames();  // "1d", "2d", "2.5d"
// The side q of a 2D/2.5D grid of `ranks` = q²·depth (the largest q with q²·depth ≤ ranks, so
// a size that is not q²·depth shows as a mismatch); 1 for 1D.
int TensorGrid(TensorLayout layout, int ranks, int depth);

// How context parallelism runs attention over a sequence split across c ranks (Megatron-Core
// with Transformer Engine; docs/strategies.md, "Context parallelism"): p2p, a ring that passes
// K/V blocks to the next rank while it computes on the block it holds; a2a, all-to-alls that
// trade the sequence split for a head split around a whole-sequence attention (DeepSpeed
// Ulysses).
enum class ContextComm : uint8_t { kP2p, kAllToAll };
std::span<const std::string_view> ContextCommNames();  // indexed by ContextComm: "p2p", "a2a"

// How one rank sees one transformer layer.
struct TransformerShard {
  int64_t micro_batch = 1;
  int64_t seq_len = 0;
  DType dtype = DType::kBf16;
  int tensor_parallel = 1;  // ranks of the tensor-parallel group: t, q² or q²·d
  TensorLayout tensor_layout = TensorLayout::k1D;
  int tensor_depth = 1;            // 2.5D: d
  bool sequence_parallel = false;  // 1D: norms, dropout, residuals on s/t tokens
  int expert_parallel = 1;         // experts split over this many ranks
  // Expert tensor parallelism (Megatron-Core's expert_tensor_parallel_size): each expert's FFN
  // split this many ways; 0, the tensor-parallel size. 1 with t > 1 is MoE parallel folding:
  // the MoE block takes the rank's sequence-parallel shard of the tokens and whole experts,
  // its expert-parallel group spanning tensor and data ranks.
  int expert_tensor_parallel = 0;
  // Context parallelism: each sequence split over c ranks in 2c load-balanced chunks, so a rank
  // holds s/c tokens of it (1D only; needs flash attention).
  int context_parallel = 1;
  ContextComm context_comm = ContextComm::kP2p;
  bool flash_attention = false;
  bool dropout = true;               // GPT/BERT train with dropout; LLaMA-style models without
  Fp8Recipe fp8 = Fp8Recipe::kNone;  // 1D only: the linear layers' GEMMs in FP8
  // PyTorch eager under autocast over fp32 weights (models::Autocasts): each linear casts its
  // weights and fp32 inputs, norms and the residual stream run in fp32, bias gradients are
  // reductions of their own (docs/models.md, "PyTorch eager under autocast").
  bool autocast = false;
  // What Recompute::kSelective re-runs (RecomputeModule bits; LayerOps::selective_modules).
  uint8_t recompute_modules = kRecomputeCoreAttn;
  // Sequence parallelism as PyTorch's DTensor runs it (framework pytorch: torchtitan's
  // apply_tp): the column-parallel linears after a norm (q/k/v, the MLP's first, the output
  // layer) save their input gathered whole, where Megatron-Core saves the sequence shard and
  // gathers it again in backward.
  bool saves_gathered_inputs = false;
  // The blocks as PyTorch models write them (framework pytorch: torchtitan's Llama, Hugging
  // Face's): SwiGLU as w2(silu(w1 x) * w3 x), whose silu output the product saves besides both
  // halves (Megatron-Core's fused kernel recomputes it), and grouped-query keys and values
  // repeated to every query head (repeat_kv) before the attention kernel saves them.
  bool eager_modules = false;
  // The loss compiled by torch.compile (training.compile "loss", framework pytorch without
  // loss_parallel): inductor's fused cross-entropy over the bf16 logits, which it keeps for the
  // backward in place of log_softmax's fp32 output, and whose backward writes the bf16 gradient
  // without fp32 intermediates (docs/models.md, "torch.compile").
  bool compiled_loss = false;
  // The blocks compiled by torch.compile (training.compile "model"): of what torchtitan's op
  // policy stores, AOTAutograd's partitioner keeps only what the backward reads — not a dense
  // block's last matmul output, which only the residual add reads (LayerOps::
  // unread_last_output). Their fused kernels are not modelled.
  bool compiled_blocks = false;

  // The rank's tokens of a micro-batch: b · s/c.
  int64_t local_seq() const { return seq_len / context_parallel; }
  int64_t tokens() const { return micro_batch * local_seq(); }
  int expert_tensor() const {
    return expert_tensor_parallel > 0 ? expert_tensor_parallel : tensor_parallel;
  }
  // Whether experts split fewer ways than the tensor-parallel group (MoE parallel folding).
  bool folded_experts() const { return expert_tensor() != tensor_parallel; }
  // Whether the rank's activations between blocks are its sequence shard (1D, t > 1, SP).
  bool sequence_sharded() const { return sequence_parallel && tensor_parallel > 1; }
  // Tokens the rank routes in a MoE block: its sequence-parallel shard b·s/(c·t) under sequence
  // parallelism (Megatron-Core's MoELayer routes hidden_states as the layer holds them), else
  // all b·s/c of the micro-batch, which every tensor-parallel rank routes alike.
  int64_t moe_tokens() const { return sequence_sharded() ? tokens() / tensor_parallel : tokens(); }
  // Ways the tokens an expert-parallel all-to-all brings are all-gathered before the experts:
  // the expert-tensor group's size under sequence parallelism (the alltoall dispatcher's
  // gather_from_sequence_parallel_region over tp_group), else 1.
  int expert_gather() const { return sequence_sharded() ? expert_tensor() : 1; }
  int grid() const { return TensorGrid(tensor_layout, tensor_parallel, tensor_depth); }
  // Ways heads, FFN columns and the vocabulary divide: t (1D) or q.
  int column_split() const { return tensor_layout == TensorLayout::k1D ? tensor_parallel : grid(); }
  // Ways the hidden dimension of activations and weight rows divide: 1 (1D) or q.
  int hidden_split() const { return grid(); }
  // Ways the micro-batch divides: 1 (1D), q (2D) or q·d (2.5D).
  int batch_split() const { return tensor_layout == TensorLayout::k1D ? 1 : grid() * tensor_depth; }
  // Ways every weight divides: t (1D, the split matrices) or q² (2D/2.5D, all of them).
  int weight_split() const { return column_split() * hidden_split(); }
  // Elements of one rank's share of a [tokens, hidden] activation (a layer's input): all of
  // it (1D), the sequence shard (1D with SP), [b/(q·d)·s, h/q] (2D/2.5D).
  int64_t ActivationElements(int64_t hidden) const;
};

// Errors when the shard does not divide the model: heads, KV heads (or t a multiple of them),
// FFN by t (the vocabulary is padded, TransformerSpec::PaddedVocab); the sequence by t under
// sequence parallelism; experts by EP. 2D/2.5D: t = q²·d, q dividing heads, KV heads, FFN and
// hidden, q·d the micro-batch; no sequence or expert parallelism. Context parallelism: c
// divides the sequence into 2c chunks (and s/c by t under sequence parallelism); a2a needs c to
// divide the rank's heads and KV heads.
Status ValidateShard(const TransformerSpec& spec, const TransformerShard& shard);
// The expert tensor size is the tensor-parallel size or 1 (MoE parallel folding, which takes
// the sequence-parallel shard of the tokens, as Megatron-Core requires); part of ValidateShard.
Status ValidateExpertTensor(const TransformerShard& shard);
// The context-parallel part of ValidateShard (which calls it).
Status ValidateContext(const TransformerSpec& spec, const TransformerShard& shard);

// The ops of one layer on one rank: forward in execution order, backward in execution order
// (the reverse of the layer's dataflow).
struct LayerOps {
  std::vector<Op> forward;
  std::vector<Op> backward;
  // The modules Recompute::kSelective re-runs (TransformerShard::recompute_modules).
  uint8_t selective_modules = kRecomputeCoreAttn;
  // Under DTensor's sequence parallelism (TransformerShard::eager_modules), the output of each
  // row-parallel layer's reduce-scatter (the rank's sequence shard): torchtitan's op policy
  // stores it (_c10d_functional.reduce_scatter_tensor is on its save list); 0 elsewhere.
  int64_t stored_scatter_bytes = 0;
  // Whether the op policy's stored output of the layer's last matmul (a dense MLP's down
  // projection, which only the residual add reads) and of its reduce-scatter is read by no
  // backward, and so not kept where the block is compiled (TransformerShard::compiled_blocks):
  // the partitioner saves only what the backward reads. A MoE layer's expert outputs are read by
  // the combine's backward (for the router's gradient).
  bool unread_last_output = false;
};

// Of `op`'s saved bytes, those selective recompute of the modules in `mask` frees.
int64_t SelectiveFreedBytes(const Op& op, uint8_t mask);

// The weight elements of `layer`'s FP8 GEMMs on this rank (0 without FP8): what Transformer
// Engine quantizes once per iteration and keeps row- and column-wise.
int64_t Fp8WeightElements(const LayerOps& layer);
// Quantizing `elements` weight elements row- and column-wise ("fp8.weight_quantize"): once per
// iteration after the optimizer step, or under ZeRO-3 each time a layer is gathered.
Op Fp8WeightQuantizeOp(DType dtype, Fp8Recipe recipe, int64_t elements, Pass pass);

// Selective op checkpointing as torchtitan's "op" policy configures it
// (torchtitan/models/llama3/infra/parallelize.py, _save_list and _custom_policy, over
// torch.utils.checkpoint's create_selective_checkpoint_contexts): a layer keeps its input and
// the outputs of its matmuls and flash attention kernels, except every second matmul of the
// layer (the 2nd, 4th, … in forward order), and its row-parallel layers' reduce-scatter
// outputs (LayerOps::stored_scatter_bytes), and recomputes everything else in backward. Matmuls
// are counted as PyTorch runs them (Op::matmul_outputs: a fused GEMM of separate projections
// counts each). Per op of `layer.forward`: the bytes it keeps, and the share of it recomputed
// (0: kept whole; 1: all of it; between: the fused GEMM's matmuls not kept, by output size).
// Under torch.compile of the block (LayerOps::unread_last_output) its last matmul's output and
// reduce-scatter output are stored by the policy but not kept: the partitioner saves only what
// the backward reads.
struct SelectiveOpSaves {
  std::vector<int64_t> kept_bytes;
  std::vector<double> recomputed;
};
SelectiveOpSaves PlanSelectiveOp(const LayerOps& layer);

// Precondition: ValidateShard passed.
LayerOps TransformerLayerOps(const TransformerSpec& spec, int layer_index,
                             const TransformerShard& shard);
// The first stage's input: token (+ position, segment) embedding, its norm and dropout.
LayerOps EmbeddingOps(const TransformerSpec& spec, const TransformerShard& shard);
// The last stage's output: final norm, (BERT head,) logits over V/t and the loss.
LayerOps OutputOps(const TransformerSpec& spec, const TransformerShard& shard);
// The forward ops a backward pass re-runs first: all of `layer` (full), only its core
// attention (selective), none. Their pass is kRecompute and they save nothing.
std::vector<Op> RecomputeOps(const LayerOps& layer, Recompute recompute);

enum class Optimizer { kAdam, kSgd };
std::span<const std::string_view> OptimizerNames();  // indexed by Optimizer
// The dtypes of an optimizer's state: its moments (Adam's two, SGD's momentum) and the master
// copy it keeps of low-precision parameters (fp32 parameters are their own). fp32 by default;
// Apex's DistributedFusedAdam (`dtype`) and Megatron-Core's precision-aware optimizer
// (`main_params_dtype`, `exp_avg_dtype`, `exp_avg_sq_dtype`) can keep them in 16 bits.
struct OptimizerState {
  DType master = DType::kFp32;
  DType moments = DType::kFp32;
};
// The optimizer's state per parameter: its moments, and the master copy unless the parameters
// are fp32 (Adam with the defaults: 8 + 4 bytes).
int OptimizerStateBytes(Optimizer optimizer, DType param_dtype, OptimizerState state = {});
// The optimizer step over `parameters` local parameters; grads of `grad_dtype`, parameters
// stored as `param_dtype` (fp32: the optimizer's fp32 state is the weight, no copy to write).
Op OptimizerOp(Optimizer optimizer, int64_t parameters, DType grad_dtype, DType param_dtype,
               OptimizerState state = {});

// ResNet and DLRM: the whole model's forward and backward ops for a micro-batch of images or
// samples (data parallel: no sharding of the dense part). DLRM embedding ops carry the table
// index in their name ("embedding.table7") so a strategy can place tables.
LayerOps ResNetOps(const ResNetSpec& spec, int64_t micro_batch, DType dtype);
LayerOps DlrmOps(const DlrmSpec& spec, int64_t micro_batch, DType dtype);

// One table's embedding-bag work on one rank for one micro-batch: `rows_read` rows gathered and
// summed into `outputs` pooled vectors (table-wise: every sample of the global batch; row-wise:
// each sample's partial sum over the rank's rows; replicated: the rank's own samples).
struct TableLookup {
  int table = 0;
  int64_t rows_read = 0;
  int64_t outputs = 0;
};
// Their forward bags ("embedding.table7") and backward sparse updates with the optimizer fused
// in, as FBGEMM's table-batched embedding kernel runs it: each touched row read and written
// with `state_bytes` of optimizer state per element read and written too.
LayerOps DlrmEmbeddingOps(const DlrmSpec& spec, std::span<const TableLookup> lookups, DType dtype,
                          double state_bytes);

// Sums over op lists.
double TotalFlops(const std::vector<Op>& ops);
double TotalModelFlops(const std::vector<Op>& ops);
int64_t TotalSavedBytes(const std::vector<Op>& ops);

}  // namespace dtsim::models
