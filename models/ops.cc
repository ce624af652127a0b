#include "models/ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "sim/base/strings.h"

namespace dtsim::models {
namespace {

constexpr std::array<std::string_view, 18> kKindNames = {
    "gemm",        "flash_attention", "norm",          "softmax", "dropout", "activation",
    "elementwise", "embedding",       "cross_entropy", "router",  "permute", "batch_norm",
    "pool",        "optimizer",       "quantize",      "cast",    "bias",    "rotary"};
constexpr std::array<std::string_view, 5> kFp8RecipeNames = {"none", "delayed", "current",
                                                             "blockwise", "mxfp8"};
constexpr std::array<std::string_view, 4> kPassNames = {"forward", "backward", "recompute",
                                                        "optimizer"};
constexpr std::array<std::string_view, 7> kRecomputeModuleNames = {
    "core_attn", "layernorm", "mla_up_proj", "mlp", "moe", "moe_act", "shared_experts"};
constexpr std::array<std::string_view, 4> kRecomputeNames = {"none", "selective", "full",
                                                             "selective_op"};
constexpr std::array<std::string_view, 3> kTensorLayoutNames = {"1d", "2d", "2.5d"};
constexpr std::array<std::string_view, 2> kOptimizerNames = {"adam", "sgd"};
constexpr std::array<std::string_view, 2> kContextCommNames = {"p2p", "a2a"};

Status Divides(int64_t divisor, int64_t value, std::string_view what, std::string_view by) {
  if (divisor > 0 && value % divisor == 0) return Status::Ok();
  return Error(fmt::format("{} ({}) must divide {} ({})", by, divisor, what, value), "",
               std::to_string(divisor));
}

}  // namespace

std::string_view OpKindName(OpKind kind) { return kKindNames[static_cast<size_t>(kind)]; }
std::string_view PassName(Pass pass) { return kPassNames[static_cast<size_t>(pass)]; }
std::span<const std::string_view> RecomputeNames() { return kRecomputeNames; }

std::span<const std::string_view> RecomputeModuleNames() { return kRecomputeModuleNames; }

std::optional<uint8_t> RecomputeModuleBit(std::string_view name) {
  const auto found = std::find(kRecomputeModuleNames.begin(), kRecomputeModuleNames.end(), name);
  if (found == kRecomputeModuleNames.end()) return std::nullopt;
  return static_cast<uint8_t>(1U << (found - kRecomputeModuleNames.begin()));
}

std::string RecomputeModulesText(uint8_t mask) {
  std::string text;
  for (size_t bit = 0; bit < kRecomputeModuleNames.size(); ++bit) {
    if ((mask & (1U << bit)) == 0) continue;
    if (!text.empty()) text += ", ";
    text += kRecomputeModuleNames[bit];
  }
  return text;
}

int64_t SelectiveFreedBytes(const Op& op, uint8_t mask) {
  if ((op.frees_all_in & mask) != 0) return op.saved_bytes;
  int64_t freed = 0;
  if ((op.frees_input_in & mask) != 0) freed += op.saved_input_bytes;
  if ((op.frees_output_in & mask) != 0) freed += op.saved_bytes - op.saved_input_bytes;
  return freed;
}
std::span<const std::string_view> TensorLayoutNames() { return kTensorLayoutNames; }
std::span<const std::string_view> ContextCommNames() { return kContextCommNames; }

int TensorGrid(TensorLayout layout, int ranks, int depth) {
  if (layout == TensorLayout::k1D || depth < 1) return 1;
  int q = 1;
  while ((q + 1) * (q + 1) * depth <= ranks) ++q;
  return q;
}

int64_t TransformerShard::ActivationElements(int64_t hidden) const {
  if (sequence_parallel) return tokens() / tensor_parallel * hidden;
  return tokens() / batch_split() * (hidden / hidden_split());
}
std::span<const std::string_view> OptimizerNames() { return kOptimizerNames; }
std::span<const std::string_view> Fp8RecipeNames() { return kFp8RecipeNames; }

double Fp8CopyBytes(Fp8Recipe recipe) {
  switch (recipe) {
    case Fp8Recipe::kBlockwise:
      return 1 + 4.0 / 128;
    case Fp8Recipe::kMxfp8:
      return 1 + 1.0 / 32;
    default:
      return 1;
  }
}

double Fp8QuantizeBytes(Fp8Recipe recipe) {
  const double amax_pass = recipe == Fp8Recipe::kCurrent ? 2 : 0;
  return 2 + 2 * Fp8CopyBytes(recipe) + amax_pass;
}

int64_t Fp8WeightElements(const LayerOps& layer) {
  int64_t elements = 0;
  for (const Op& op : layer.forward) elements += op.fp8_weight_elements;
  return elements;
}

Op Fp8WeightQuantizeOp(DType dtype, Fp8Recipe recipe, int64_t elements, Pass pass) {
  return Op::Streaming("fp8.weight_quantize", OpKind::kQuantize, pass, dtype, elements,
                       Fp8QuantizeBytes(recipe));
}

std::string_view RecomputeName(Recompute recompute) {
  return kRecomputeNames[static_cast<size_t>(recompute)];
}

bool RecomputesLayer(int every, int index) { return every <= 1 || (index + 1) % every == 0; }

SelectiveOpSaves PlanSelectiveOp(const LayerOps& layer) {
  SelectiveOpSaves plan{.kept_bytes = std::vector<int64_t>(layer.forward.size(), 0),
                        .recomputed = std::vector<double>(layer.forward.size(), 1.0)};
  int matmuls = 0;
  size_t last_matmul = layer.forward.size();  // the last forward GEMM's index
  for (size_t i = 0; i < layer.forward.size(); ++i) {
    const Op& op = layer.forward[i];
    if (op.kind == OpKind::kFlashAttention && op.output_bytes > 0) {
      plan.kept_bytes[i] = op.output_bytes;
      plan.recomputed[i] = 0;
    }
    if (op.weight_gemm != Op::WeightGemm::kForward) continue;
    const std::vector<int64_t> parts =
        op.matmul_outputs.empty() ? std::vector<int64_t>{op.output_bytes} : op.matmul_outputs;
    int64_t total = 0;
    for (const int64_t part : parts) {
      total += part;
      if (++matmuls % 2 == 1) plan.kept_bytes[i] += part;
    }
    plan.recomputed[i] =
        total > 0 ? static_cast<double>(total - plan.kept_bytes[i]) / static_cast<double>(total)
                  : 1.0;
    // A row-parallel layer's reduce-scatter output, stored beside what its matmul keeps.
    if (op.boundary == Op::Boundary::kTensorReduce)
      plan.kept_bytes[i] += layer.stored_scatter_bytes;
    last_matmul = i;
  }
  if (layer.unread_last_output && last_matmul < layer.forward.size()) {
    plan.kept_bytes[last_matmul] = 0;
  }
  return plan;
}

Op Op::Gemm(std::string name, Pass pass, DType dtype, int64_t m, int64_t n, int64_t k,
            int64_t batch) {
  Op op{.name = std::move(name), .kind = OpKind::kGemm, .pass = pass, .dtype = dtype};
  op.signature = {.op = "gemm", .dtype = dtype, .dims = {}};
  op.signature.SetDim("m", m);
  op.signature.SetDim("n", n);
  op.signature.SetDim("k", k);
  if (batch > 1) op.signature.SetDim("batch", batch);
  const double b = static_cast<double>(batch);
  op.flops = op.model_flops =
      2.0 * b * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  // An FP8 GEMM (Transformer Engine's) writes its output in BF16.
  const double out = dtype == DType::kFp8 ? DTypeBytes(DType::kBf16) : DTypeBytes(dtype);
  op.bytes = b * (DTypeBytes(dtype) * (static_cast<double>(m) * k + static_cast<double>(k) * n) +
                  out * static_cast<double>(m) * n);
  op.matmul = true;
  return op;
}

double FlashAttentionFlops(const traces::OpSignature& signature, bool backward) {
  const auto dim = [&signature](std::string_view name) {
    return static_cast<double>(signature.Dim(name));
  };
  const double seq = dim("seq");
  const int64_t key_count =
      signature.Dim("kv_seq") > 0 ? signature.Dim("kv_seq") : signature.Dim("seq");
  const double keys = static_cast<double>(key_count);
  const double window = dim("window");
  const int64_t chunk = signature.Dim("chunk");
  const double heads = dim("batch") * dim("heads");
  double pairs = heads * seq * keys * (signature.Dim("causal") != 0 ? 0.5 : 1);
  if (window > 0) {
    pairs = heads * (keys * window - window * (window - 1) / 2);
  } else if (chunk > 0) {
    // k chunks of c and one of r (s = k·c + r), each causal: c(c+1)/2 pairs, r(r+1)/2.
    const int64_t whole_chunks = key_count / chunk;
    const auto causal = [](double n) { return n * (n + 1) / 2; };
    pairs = heads * (static_cast<double>(whole_chunks) * causal(static_cast<double>(chunk)) +
                     causal(static_cast<double>(key_count % chunk)));
  }
  const double d = dim("head_dim");
  const double dv = signature.Dim("v_head_dim") > 0 ? dim("v_head_dim") : d;
  return (backward ? 2 * (3 * d + 2 * dv) : 2 * (d + dv)) * pairs;
}

Op Op::Streaming(std::string name, OpKind kind, Pass pass, DType dtype, int64_t elements,
                 double bytes_per_element, double flops_per_element) {
  Op op{.name = std::move(name), .kind = kind, .pass = pass, .dtype = dtype};
  std::string op_name(OpKindName(kind));
  if (pass == Pass::kBackward) op_name += "_bwd";
  op.signature = {.op = std::move(op_name), .dtype = dtype, .dims = {}};
  op.signature.SetDim("elements", elements);
  op.bytes = static_cast<double>(elements) * bytes_per_element;
  op.flops = static_cast<double>(elements) * flops_per_element;
  return op;
}

namespace {

// 2D/2.5D: t = q²·d with the grid dividing the batch and every split dimension.
Status ValidateGrid(const TransformerSpec& spec, const TransformerShard& shard) {
  const int t = shard.tensor_parallel;
  const int d = shard.tensor_depth;
  const int q = shard.grid();
  if (shard.tensor_layout == TensorLayout::k2D && (d != 1 || q * q != t)) {
    return Error(
        fmt::format("2D tensor parallelism needs a square number of ranks (q×q), not {}", t), "",
        std::to_string(t));
  }
  if (d < 1 || q * q * d != t) {
    return Error(
        fmt::format("2.5D tensor parallelism needs q×q×depth ranks, not {} with depth {}", t, d),
        "", std::to_string(t));
  }
  if (shard.sequence_parallel || shard.expert_parallel > 1 || spec.moe.enabled()) {
    return Error(
        "2D and 2.5D tensor parallelism are built for dense transformers without "
        "sequence or expert parallelism",
        "", std::to_string(t));
  }
  DTSIM_RETURN_IF_ERROR(Divides(q, spec.heads, "heads", "the tensor grid side q"));
  DTSIM_RETURN_IF_ERROR(Divides(q, spec.kv_heads, "kv_heads", "the tensor grid side q"));
  DTSIM_RETURN_IF_ERROR(Divides(q, spec.hidden, "hidden", "the tensor grid side q"));
  DTSIM_RETURN_IF_ERROR(Divides(q, spec.ffn_hidden, "ffn_hidden", "the tensor grid side q"));
  return Divides(int64_t{q} * d, shard.micro_batch, "the micro-batch",
                 "q × depth (the grid splits the batch)");
}

}  // namespace

Status ValidateExpertTensor(const TransformerShard& shard) {
  const int etp = shard.expert_tensor();
  if (etp != 1 && etp != shard.tensor_parallel) {
    return Error(fmt::format("expert tensor parallelism is built as the tensor-parallel size ({}) "
                             "or 1 (MoE parallel folding), not {}",
                             shard.tensor_parallel, etp),
                 "", std::to_string(etp));
  }
  if (shard.folded_experts() && !shard.sequence_parallel) {
    return Error(
        "MoE parallel folding (expert tensor parallel size 1 under tensor parallelism) needs "
        "parallelism.tensor.sequence_parallel, as Megatron-Core requires: each rank routes its "
        "own shard of the tokens",
        "", std::to_string(etp));
  }
  return Status::Ok();
}

// Context parallelism: 2c load-balanced chunks of the sequence, flash attention (Transformer
// Engine's context-parallel attention is fused), and for a2a the rank's heads split c ways.
Status ValidateContext(const TransformerSpec& spec, const TransformerShard& shard) {
  const int c = shard.context_parallel;
  if (c == 1) return Status::Ok();
  if (shard.tensor_layout != TensorLayout::k1D) {
    return Error("context parallelism is built with 1D tensor parallelism only", "",
                 std::to_string(c));
  }
  if (!shard.flash_attention) {
    return Error(
        "context parallelism needs flash attention (training.flash_attention: true), as "
        "Transformer Engine's context-parallel attention is fused",
        "", std::to_string(c));
  }
  // Transformer Engine runs sliding windows under context parallelism only with a2a (or
  // all-gather) CP: each a2a rank attends the whole sequence for its heads, so the window applies
  // as without CP; the p2p ring's causal chunk pairs do not. Attention chunks likewise.
  if (spec.sliding_window > 0 && shard.context_comm != ContextComm::kAllToAll) {
    return Error(
        fmt::format("{} under context parallelism needs \"comm\": \"a2a\" (Transformer "
                    "Engine runs windows with a2a or all-gather context parallelism, not the p2p "
                    "ring; dtsim prices attention chunks so too)",
                    spec.chunked_attention ? "chunked attention" : "sliding-window attention"),
        "comm", Quote(ContextCommNames()[static_cast<size_t>(shard.context_comm)]));
  }
  DTSIM_RETURN_IF_ERROR(Divides(int64_t{2} * c, shard.seq_len, "the sequence length",
                                "2 × context parallel size (load-balanced chunks)"));
  if (shard.context_comm == ContextComm::kAllToAll) {
    const int64_t t = shard.tensor_parallel;
    DTSIM_RETURN_IF_ERROR(Divides(c, spec.heads / t, "the heads of a tensor-parallel rank",
                                  "context parallel size (a2a splits heads)"));
    DTSIM_RETURN_IF_ERROR(Divides(c, std::max<int64_t>(1, spec.kv_heads / t),
                                  "the KV heads of a tensor-parallel rank",
                                  "context parallel size (a2a splits heads)"));
  }
  return Status::Ok();
}

Status ValidateShard(const TransformerSpec& spec, const TransformerShard& shard) {
  const int t = shard.tensor_parallel;
  if (shard.micro_batch < 1 || shard.seq_len < 1 || t < 1 || shard.expert_parallel < 1 ||
      shard.context_parallel < 1) {
    return Error(fmt::format(
        "micro-batch, sequence length and parallel sizes must be positive "
        "(b={}, s={}, t={}, ep={}, cp={})",
        shard.micro_batch, shard.seq_len, t, shard.expert_parallel, shard.context_parallel));
  }
  DTSIM_RETURN_IF_ERROR(ValidateContext(spec, shard));
  if (shard.tensor_layout != TensorLayout::k1D && spec.mla.enabled()) {
    return Error(
        "multi-head latent attention on a 2D/2.5D grid is not built yet (use 1D tensor "
        "parallelism)");
  }
  if (shard.tensor_layout != TensorLayout::k1D && spec.mtp_layers > 0) {
    return Error(
        "multi-token prediction on a 2D/2.5D grid is not built yet (use 1D tensor parallelism, "
        "or \"mtp_layers\": 0)");
  }
  if (shard.tensor_layout != TensorLayout::k1D) return ValidateGrid(spec, shard);
  DTSIM_RETURN_IF_ERROR(Divides(t, spec.heads, "heads", "tensor parallel size"));
  if (spec.mtp_layers > 0) {
    DTSIM_RETURN_IF_ERROR(
        Divides(t, spec.hidden, "hidden (eh_proj's output)", "tensor parallel size"));
  }
  if (spec.kv_heads % t != 0 && t % spec.kv_heads != 0) {
    return Error(fmt::format("tensor parallel size ({}) must divide kv_heads ({}) or be a "
                             "multiple of it (KV heads are then replicated)",
                             t, spec.kv_heads),
                 "", std::to_string(t));
  }
  DTSIM_RETURN_IF_ERROR(Divides(t, spec.ffn_hidden, "ffn_hidden", "tensor parallel size"));
  if (spec.moe.enabled()) {
    DTSIM_RETURN_IF_ERROR(ValidateExpertTensor(shard));
    DTSIM_RETURN_IF_ERROR(
        Divides(shard.expert_tensor(), spec.MoeFfnHidden(), "expert ffn_hidden",
                shard.folded_experts() ? "expert tensor parallel size" : "tensor parallel size"));
    if (spec.moe.shared_experts > 0) {
      DTSIM_RETURN_IF_ERROR(Divides(t, spec.SharedFfnHidden(), "the shared experts' ffn_hidden",
                                    "tensor parallel size"));
    }
    DTSIM_RETURN_IF_ERROR(
        Divides(shard.expert_parallel, spec.moe.experts, "experts", "expert parallel size"));
  }
  if (shard.sequence_parallel) {
    DTSIM_RETURN_IF_ERROR(Divides(t, shard.local_seq(),
                                  shard.context_parallel > 1
                                      ? "a context-parallel rank's tokens of a sequence"
                                      : "the sequence length",
                                  "tensor parallel size (sequence parallel)"));
  }
  return Status::Ok();
}

namespace {

// The part of a fused weight GEMM that its unkept matmuls make up: the same m and k over
// `share` of its n (the output columns), with its FLOPs and traffic (Op::Gemm's formulas).
Op PartOfGemm(const Op& op, double share) {
  const int64_t m = op.signature.Dim("m");
  const int64_t n = op.signature.Dim("n");
  const int64_t k = op.signature.Dim("k");
  const int64_t batch = std::max<int64_t>(op.signature.Dim("batch"), 1);
  const auto part_n = std::max<int64_t>(1, std::llround(static_cast<double>(n) * share));
  Op part = Op::Gemm(op.name, op.pass, op.dtype, m, part_n, k, batch);
  const double scale = n > 0 ? static_cast<double>(part_n) / static_cast<double>(n) : share;
  part.model_flops = op.model_flops * scale;  // keeps a MoE expert's model share
  part.kind = op.kind;
  part.weight_gemm = op.weight_gemm;
  part.boundary = op.boundary;
  part.expert = op.expert;
  part.activation_block = op.activation_block;
  part.weight_block = op.weight_block * part_n / std::max<int64_t>(n, 1);
  return part;
}

}  // namespace

std::vector<Op> RecomputeOps(const LayerOps& layer, Recompute recompute) {
  std::vector<Op> ops;
  if (recompute == Recompute::kNone) return ops;
  const std::vector<double> share = recompute == Recompute::kSelectiveOp
                                        ? PlanSelectiveOp(layer).recomputed
                                        : std::vector<double>(layer.forward.size(), 1.0);
  for (size_t i = 0; i < layer.forward.size(); ++i) {
    if (recompute == Recompute::kSelective &&
        (layer.forward[i].reruns_in & layer.selective_modules) == 0) {
      continue;
    }
    if (share[i] <= 0) continue;  // selective op checkpointing kept its outputs
    Op again = share[i] < 1 ? PartOfGemm(layer.forward[i], share[i]) : layer.forward[i];
    again.pass = Pass::kRecompute;
    again.saved_bytes = 0;
    ops.push_back(std::move(again));
  }
  return ops;
}

int OptimizerStateBytes(Optimizer optimizer, DType param_dtype, OptimizerState state) {
  const int moments = optimizer == Optimizer::kAdam ? 2 : 1;
  return moments * DTypeBytes(state.moments) +
         (param_dtype == DType::kFp32 ? 0 : DTypeBytes(state.master));
}

Op OptimizerOp(Optimizer optimizer, int64_t parameters, DType grad_dtype, DType param_dtype,
               OptimizerState state) {
  // Mixed-precision Adam reads the master weight and both moments, the gradient, and writes
  // the three states and the bf16/fp16 weight: with fp32 states 4·3·2 + g + 2 bytes per
  // parameter, about 12 FLOPs; with fp32 parameters the weight is the state (no copy to
  // write): 4·3·2 + g. SGD with momentum: the weight and momentum read and written, the
  // gradient (+ the low-precision copy). 16-bit states (OptimizerState) halve their share.
  const double grad = DTypeBytes(grad_dtype);
  const double copy = param_dtype == DType::kFp32 ? 0 : DTypeBytes(param_dtype);
  const double weight = param_dtype == DType::kFp32 ? 4 : 0;
  const double states = OptimizerStateBytes(optimizer, param_dtype, state) + weight;
  const bool adam = optimizer == Optimizer::kAdam;
  const std::string_view name = kOptimizerNames[static_cast<size_t>(optimizer)];
  Op op = Op::Streaming(fmt::format("optimizer.{}", name), OpKind::kOptimizer, Pass::kOptimizer,
                        DType::kFp32, parameters, 2 * states + grad + copy, adam ? 12 : 4);
  op.signature.op = std::string(name);
  return op;
}

double TotalFlops(const std::vector<Op>& ops) {
  double sum = 0;
  for (const Op& op : ops) sum += op.flops;
  return sum;
}

double TotalModelFlops(const std::vector<Op>& ops) {
  double sum = 0;
  for (const Op& op : ops) sum += op.model_flops;
  return sum;
}

int64_t TotalSavedBytes(const std::vector<Op>& ops) {
  int64_t sum = 0;
  for (const Op& op : ops) sum += op.saved_bytes;
  return sum;
}

}  // namespace dtsim::models
