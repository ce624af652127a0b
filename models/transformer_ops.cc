// The op decomposition of a transformer on one rank (docs/models.md, "Ops"). Saved-activation
// bytes follow Korthikanti et al. 2022, §4.1: every tensor a backward op needs is attributed
// to the forward op that produces (or first reads) it, so the layer's sum is their formula.
#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "models/eager_kernels.h"
#include "models/layer_builder.h"
#include "models/ops.h"
#include "models/recompute_modules.h"

namespace dtsim::models {
namespace {

using Boundary = Op::Boundary;

// The sizes of one rank's share of a layer: 1D Megatron splits heads and FFN t ways (and, with
// sequence parallelism, the replicated ops' tokens); 2D/2.5D split the batch q (q·d) ways and
// the hidden dimension, heads and FFN q ways, and run each weight GEMM as q SUMMA steps.
struct Shape {
  int64_t b, s, tokens, replicated_tokens;  // s: the rank's s/c tokens of a sequence (CP);
                                            // replicated_tokens: T/t under sequence parallel
  int64_t width;                            // hidden elements per token on this rank: h (1D) or h/q
  // Per rank: Q's heads × head_dim, K's kv_heads × head_dim, V's kv_heads × v_head_dim and
  // the attention output's heads × v_head_dim (head_dim = v_head_dim but under MLA).
  int64_t heads, kv_heads, head_dim, v_head_dim, q, kv, v, o, ffn;
  int64_t steps;  // GEMM steps of a weight: 1, or q (SUMMA)
  // The width the next attention block's input is all-gathered at under sequence parallelism
  // (Op::gather_columns): the hidden size, or MLA's latents (TransformerSpec::
  // AttentionInputColumns).
  int64_t attention_gather;
  // The attention kernel's queries and keys per sequence and its heads: s, s and the rank's
  // heads; under context parallelism p2p, s/c queries against all s keys over the ring; a2a,
  // the whole sequence with the heads split c ways more.
  int64_t q_len, kv_len, attn_heads, attn_kv_heads;
  int64_t window;  // sliding-window attention: keys a query attends to; 0: all
  bool chunked;    // `window` is an attention chunk (TransformerSpec::chunked_attention)
  double e;        // bytes per activation element
  DType dtype;
  bool flash, dropout, causal;
  bool autocast;  // PyTorch autocast over fp32 weights (TransformerShard::autocast)
  // Under sequence parallelism, the column-parallel linears after a norm save their input
  // gathered whole and do not gather it again in backward (TransformerShard::
  // saves_gathered_inputs); else they save the shard.
  bool saves_gathered;
  bool eager_modules;    // TransformerShard::eager_modules
  bool compiled_loss;    // TransformerShard::compiled_loss
  bool compiled_blocks;  // TransformerShard::compiled_blocks
  bool rms_norm;         // the norms are RMSNorm (else LayerNorm, one ATen kernel eager too)
  bool bias;             // the linear layers have biases
  Fp8Recipe fp8;         // the linear layers' GEMMs in FP8 (1D only)

  // Bytes per element a linear layer saves its input with for the weight gradient: BF16, or
  // under FP8 the column-wise FP8 copy Transformer Engine keeps.
  double input_e() const { return fp8 != Fp8Recipe::kNone ? Fp8CopyBytes(fp8) : e; }
};

// An FP8 linear's casts: its input's `input` elements quantized on this rank (under sequence
// parallelism the shard, before the all-gather) and the `grad` elements of its output gradient;
// none without FP8.
std::optional<LayerBuilder::Fp8Casts> Casts(const Shape& x, int64_t input, int64_t grad) {
  if (x.fp8 == Fp8Recipe::kNone) return std::nullopt;
  return LayerBuilder::Fp8Casts{
      .input_elements = input, .grad_elements = grad, .bytes_per_element = Fp8QuantizeBytes(x.fp8)};
}

Shape MakeShape(const TransformerSpec& spec, const TransformerShard& shard) {
  const int split = shard.column_split();
  Shape x{};
  x.b = shard.micro_batch / shard.batch_split();
  x.s = shard.local_seq();
  x.tokens = x.b * x.s;
  x.replicated_tokens = shard.sequence_parallel ? x.tokens / shard.tensor_parallel : x.tokens;
  x.width = spec.hidden / shard.hidden_split();
  x.heads = spec.heads / split;
  // KV heads split t ways, or replicated when there are fewer than t (grouped-query attention).
  x.kv_heads = std::max<int64_t>(1, spec.kv_heads / split);
  x.head_dim = spec.head_dim();
  x.v_head_dim = spec.v_head_dim();
  x.q = x.heads * x.head_dim;
  x.kv = x.kv_heads * x.head_dim;
  x.v = x.kv_heads * x.v_head_dim;
  x.o = x.heads * x.v_head_dim;
  x.ffn = spec.ffn_hidden / split;
  x.steps = shard.hidden_split();
  x.attention_gather = spec.AttentionInputColumns();
  const bool a2a = shard.context_comm == ContextComm::kAllToAll;
  const int64_t head_split = a2a ? shard.context_parallel : 1;
  x.q_len = a2a ? shard.seq_len : x.s;
  x.kv_len = shard.seq_len;
  x.attn_heads = x.heads / head_split;
  x.attn_kv_heads = std::max<int64_t>(1, x.kv_heads / head_split);
  x.dtype = shard.dtype;
  x.e = DTypeBytes(shard.dtype);
  x.flash = shard.flash_attention;
  x.dropout = shard.dropout;
  x.causal = spec.causal;
  x.autocast = shard.autocast;
  x.saves_gathered = shard.saves_gathered_inputs && x.replicated_tokens < x.tokens;
  x.eager_modules = shard.eager_modules;
  x.compiled_loss = shard.compiled_loss;
  x.compiled_blocks = shard.compiled_blocks;
  x.rms_norm = spec.norm == Norm::kRmsNorm;
  x.bias = spec.linear_bias;
  x.fp8 = shard.fp8;
  return x;
}

// PyTorch eager under autocast over fp32 weights (docs/models.md, "PyTorch eager under
// autocast"): the kernels it launches that a Megatron-style decomposition fuses away or never
// needs. Matmuls run in the activations' dtype, norms and the residual stream in fp32.
constexpr double kFp32Bytes = 4;

// A copy between fp32 and the activations' dtype: read one, write the other.
double CastBytes(const Shape& x) { return kFp32Bytes + x.e; }

// A gradient accumulated into another in fp32 (autograd's add where two uses of a tensor meet):
// read both, write one. Its signature is the forward add's, `elementwise fp32`, which an op
// table measures as x + y (a residual add's own backward, `elementwise_bwd`, launches nothing).
Op Fp32Accumulation(std::string name, int64_t elements) {
  Op op = Op::Streaming(std::move(name), OpKind::kElementwise, Pass::kBackward, DType::kFp32,
                        elements, 3 * kFp32Bytes);
  op.signature.op = OpKindName(OpKind::kElementwise);
  return op;
}

// What a linear of `name` (a `weight`-element matrix, a `bias`-column bias or none, over the
// rank's tokens, its input `inputs` wide) launches around its matmuls under autocast, added
// before them: the cast of an fp32 input (`fp32_input`: a norm's output or the residual stream;
// its gradient cast back in backward), and the casts of its weight and bias to the activations'
// dtype — every forward, autocast's cast cache lasting one autocast region — whose gradients are
// cast back to fp32 for the fp32 .grad (ToCopyBackward), the bias's first summed over the tokens
// (addmm's backward: a reduction kernel of its own).
void AutocastLinear(LayerBuilder& layer, std::string_view name, const Shape& x, int64_t inputs,
                    int64_t weight, int64_t bias, bool fp32_input) {
  if (!x.autocast) return;
  const std::string linear(name);
  if (fp32_input) {
    layer.Stream(linear + ".input_cast", OpKind::kCast, x.dtype, x.replicated_tokens * inputs,
                 CastBytes(x), CastBytes(x), 0);
  }
  layer.Stream(linear + ".weight_cast", OpKind::kCast, x.dtype, weight, CastBytes(x), CastBytes(x),
               0);
  if (bias == 0) return;
  Op reduction = Op::Streaming(layer.Name(linear) + ".bias_grad", OpKind::kBias, Pass::kBackward,
                               x.dtype, x.tokens * bias, x.e);
  reduction.signature.SetDim("columns", bias);
  std::vector<Op> backward;
  backward.push_back(std::move(reduction));
  backward.push_back(Op::Streaming(layer.Name(linear) + ".bias_cast.bwd", OpKind::kCast,
                                   Pass::kBackward, x.dtype, bias, CastBytes(x)));
  layer.Forward(Op::Streaming(layer.Name(linear) + ".bias_cast", OpKind::kCast, Pass::kForward,
                              x.dtype, bias, CastBytes(x)),
                0, std::move(backward));
}

// A linear's bias columns on this rank: its output width, or none.
int64_t BiasColumns(const Shape& x, int64_t columns) { return x.bias ? columns : 0; }

// The tokens a column-parallel linear after a norm saves its input for: the rank's sequence
// shard under sequence parallelism (all of them under DTensor's, Shape::saves_gathered).
int64_t SavedInputTokens(const Shape& x) {
  return x.saves_gathered ? x.tokens : x.replicated_tokens;
}

// A column-parallel linear after a norm under sequence parallelism saved its input as the
// rank's sequence shard (T/t tokens); its backward all-gathers it again for the weight
// gradient, beside the dgrad GEMM: Megatron-Core's LinearWithGradAccumulationAndAsyncCommunication
// (tensor_parallel/layers.py: the async _all_gather_base before grad_output.matmul(weight)) and
// Transformer Engine's LayerNormLinear (the backward gather_along_first_dim of ln_out), in the
// saved copy's dtype (FP8 under FP8).
void RegatherSequenceShard(LayerBuilder& layer, const Shape& x, int64_t columns = 0) {
  if (x.replicated_tokens == x.tokens) return;  // no sequence parallelism
  layer.RegatherInput(static_cast<int64_t>(std::ceil(
      x.input_e() * static_cast<double>(x.replicated_tokens * (columns > 0 ? columns : x.width)))));
}

// A norm over `elements` that saves its input (Korthikanti: "two LayerNorm inputs, 2·e·sbh" per
// layer). Under autocast it reads and writes fp32 (the memory model widens what it keeps:
// models/memory.cc). `in_block`: a transformer block's norm, which torch.compile of the blocks
// fuses (training.compile "model"); the final norm outside them stays eager.
void NormOver(LayerBuilder& layer, std::string_view name, const Shape& x, int64_t elements,
              bool in_block = true) {
  const double e = x.autocast ? kFp32Bytes : x.e;
  // Eager PyTorch's RMSNorm is six kernels (models/eager_kernels.h); LayerNorm is one.
  const bool eager = x.eager_modules && x.rms_norm && !(in_block && x.compiled_blocks);
  const StreamBytes bytes = RmsNormBytes(e, eager);
  layer.Stream(name, OpKind::kNorm, x.autocast ? DType::kFp32 : x.dtype, elements, bytes.forward,
               bytes.backward, x.e * elements);
}

// A norm over the hidden state (the sequence shard under sequence parallelism).
void NormOp(LayerBuilder& layer, std::string_view name, const Shape& x, bool in_block = true) {
  NormOver(layer, name, x, x.replicated_tokens * x.width, in_block);
}

// Under autocast the branch (in the activations' dtype) is added to the fp32 residual stream:
// the add promotes to fp32. In backward the stream's gradient is cast for the branch, and the
// branch's gradient (its norm's, fp32) accumulated into the stream's. Dropout, when trained
// with, is a kernel of its own on the branch.
void AutocastResidualAdd(LayerBuilder& layer, std::string_view name, const Shape& x,
                         int64_t elements) {
  const std::string add(name);
  if (x.dropout) {
    layer.Stream(add + ".dropout", OpKind::kDropout, x.dtype, elements, 2 * x.e + 1, 2 * x.e + 1,
                 elements);
  }
  std::vector<Op> backward;
  backward.push_back(Op::Streaming(layer.Name(add) + ".grad_cast", OpKind::kCast, Pass::kBackward,
                                   x.dtype, elements, CastBytes(x)));
  backward.push_back(Fp32Accumulation(layer.Name(add) + ".bwd", elements));
  layer.Forward(Op::Streaming(layer.Name(add), OpKind::kElementwise, Pass::kForward, DType::kFp32,
                              elements, x.e + 2 * kFp32Bytes),
                0, std::move(backward));
}

// Dropout (when trained with it) fused with the residual add: reads the branch and the
// residual, writes the sum and a 1-byte mask it saves.
void ResidualAdd(LayerBuilder& layer, std::string_view name, const Shape& x) {
  const int64_t elements = x.replicated_tokens * x.width;
  if (x.autocast) {
    AutocastResidualAdd(layer, name, x, elements);
    return;
  }
  if (x.dropout) {
    layer.Stream(name, OpKind::kDropout, x.dtype, elements, 3 * x.e + 1, 2 * x.e + 1, elements);
  } else {
    layer.Stream(name, OpKind::kElementwise, x.dtype, elements, 3 * x.e, 3 * x.e, 0);
  }
}

// Under context parallelism the rank's share of the sequence's attention: p2p runs it as c
// ring steps (1/c each; the strategy splits the op), a2a on the whole sequence with 1/c of the
// heads; either way 1/c of the pairs, the causal half balanced by the 2c chunks.
// The query-key pairs the rank's attention scores, for model FLOPs: b · heads · q_len · kv_len
// unmasked; with a window w < s each query's last w keys, s·w a head (the unmasked analogue);
// with chunks of c < s the chunks' own pairs, k·c² + r² a head for s = k·c + r (attention within
// each chunk, unmasked). What a causal, windowed or chunked kernel executes is
// FlashAttentionFlops' (models/ops.h).
double PairsOf(const Shape& x) {
  const double per_head = static_cast<double>(x.b) * x.attn_heads;
  if (x.window > 0 && x.window < x.kv_len && x.chunked) {
    const int64_t whole_chunks = x.kv_len / x.window;
    const double c = static_cast<double>(x.window);
    const double r = static_cast<double>(x.kv_len % x.window);
    return per_head * (static_cast<double>(whole_chunks) * c * c + r * r);
  }
  if (x.window > 0 && x.window < x.kv_len) {
    return per_head * static_cast<double>(x.kv_len) * static_cast<double>(x.window);
  }
  return per_head * static_cast<double>(x.q_len) * static_cast<double>(x.kv_len);
}

Op FlashOp(const Shape& x, Pass pass, std::string name) {
  const double pairs = PairsOf(x);
  const bool forward = pass == Pass::kForward;
  Op op{.name = std::move(name), .kind = OpKind::kFlashAttention, .pass = pass, .dtype = x.dtype};
  op.signature = {
      .op = forward ? "flash_attention" : "flash_attention_bwd", .dtype = x.dtype, .dims = {}};
  op.signature.SetDim("batch", x.b);
  op.signature.SetDim("heads", x.attn_heads);
  op.signature.SetDim("kv_heads", x.attn_kv_heads);
  op.signature.SetDim("seq", x.q_len);
  if (x.kv_len != x.q_len) op.signature.SetDim("kv_seq", x.kv_len);
  if (x.window > 0 && x.window < x.kv_len)
    op.signature.SetDim(x.chunked ? "chunk" : "window", x.window);
  op.signature.SetDim("head_dim", x.head_dim);
  if (x.v_head_dim != x.head_dim) op.signature.SetDim("v_head_dim", x.v_head_dim);
  op.signature.SetDim("causal", x.causal ? 1 : 0);
  // Forward: QKᵀ (2·s²·d) and PV (2·s²·d_v), 4·s²·d per head when d_v = d. Backward: QKᵀ
  // again, dQ and dK (2·s²·d each), dP and dV (2·s²·d_v each): 10·s²·d executed; the MFU
  // convention counts backward as twice forward.
  const double d = static_cast<double>(x.head_dim);
  const double dv = static_cast<double>(x.v_head_dim);
  op.flops = FlashAttentionFlops(op.signature, !forward);
  op.model_flops = (forward ? 1 : 2) * 2 * (d + dv) * pairs;
  // The rank's Q, K, V and output (the same bytes whether split by sequence or by heads); a
  // p2p ring reads every K/V block once, c blocks of s/c.
  const double qkv = static_cast<double>(x.tokens) * (x.q + x.kv + x.v) * x.e;
  const double out = static_cast<double>(x.tokens) * x.o * x.e;
  const double stats = 4.0 * x.b * x.attn_heads * x.q_len;  // fp32 log-sum-exp per row
  op.bytes = forward ? qkv + out + stats : 2 * qkv + 2 * out + stats;
  if (forward) op.output_bytes = static_cast<int64_t>(out + stats);
  op.matmul = true;
  return op;
}

// QK norm (TransformerSpec::qk_norm): Megatron-Core's q_layernorm and k_layernorm over each of
// the rank's query and key heads (SelfAttention.get_query_key_value_tensors), between the QKV
// projection and the rotary embedding. Each saves its input — the projection's queries or keys
// as they came out, beside the normalized copies the attention keeps — as the block's norms do
// (their fp32 row statistics, 4 B per head and token, left out likewise).
void QkNorm(LayerBuilder& layer, const Shape& x) {
  NormOver(layer, "attn.q_norm", x, x.tokens * x.q);
  NormOver(layer, "attn.k_norm", x, x.tokens * x.kv);
}

// Rotary position embeddings turn the rank's queries and keys (not the values) between their
// projection and the attention kernel, whose saved inputs they become (no bytes kept of their
// own; selective recompute does not re-run them, full recompute does): one fused kernel, or
// eager PyTorch's three (models/eager_kernels.h; the tensors models/eager_llama.cc replays).
void Rotary(LayerBuilder& layer, const Shape& x) {
  const int64_t elements = x.tokens * (x.q + x.kv);
  const StreamBytes bytes = RotaryBytes(x.e, x.eager_modules && !x.compiled_blocks);
  layer.Stream("attn.rotary", OpKind::kRotary, x.dtype, elements, bytes.forward, bytes.backward, 0);
}

// Q, K and V are saved by the QKV projection that produces them (Korthikanti: "Q and K
// 2·e·sbh, V e·sbh"), so that selective recompute, which drops and re-runs everything here,
// keeps them.
void CoreAttention(LayerBuilder& layer, const Shape& x) {
  const int64_t batch = x.b * x.heads;
  if (x.flash) {
    std::vector<Op> backward;
    backward.push_back(FlashOp(x, Pass::kBackward, layer.Name("attn.core.bwd")));
    // Keeps only the fp32 row statistics besides Q, K, V and the output.
    layer.Forward(FlashOp(x, Pass::kForward, layer.Name("attn.core")),
                  4.0 * x.b * x.attn_heads * x.q_len, std::move(backward));
    return;
  }
  const int64_t scores = batch * x.s * x.s;
  // QKᵀ; backward dQ = dS·K and dK = dSᵀ·Q.
  std::vector<Op> scores_backward;
  scores_backward.push_back(Op::Gemm(layer.Name("attn.scores.dq"), Pass::kBackward, x.dtype, x.s,
                                     x.head_dim, x.s, batch));
  scores_backward.push_back(Op::Gemm(layer.Name("attn.scores.dk"), Pass::kBackward, x.dtype, x.s,
                                     x.head_dim, x.s, batch));
  layer
      .Forward(
          Op::Gemm(layer.Name("attn.scores"), Pass::kForward, x.dtype, x.s, x.s, x.head_dim, batch),
          0, std::move(scores_backward))
      .core_attention = true;
  // Softmax saves its output; dropout its 1-byte mask and its output: Korthikanti's
  // (2e + 1)·a·s²·b. Without dropout the softmax output is what PV reads.
  layer.Stream("attn.softmax", OpKind::kSoftmax, x.dtype, scores, 2 * x.e, 3 * x.e, x.e * scores)
      .core_attention = true;
  if (x.dropout) {
    layer
        .Stream("attn.dropout", OpKind::kDropout, x.dtype, scores, 2 * x.e + 1, 2 * x.e + 1,
                (x.e + 1) * scores)
        .core_attention = true;
  }
  // PV; backward dP = dO·Vᵀ and dV = Pᵀ·dO.
  std::vector<Op> context_backward;
  context_backward.push_back(Op::Gemm(layer.Name("attn.context.dp"), Pass::kBackward, x.dtype, x.s,
                                      x.s, x.v_head_dim, batch));
  context_backward.push_back(Op::Gemm(layer.Name("attn.context.dv"), Pass::kBackward, x.dtype, x.s,
                                      x.v_head_dim, x.s, batch));
  layer
      .Forward(Op::Gemm(layer.Name("attn.context"), Pass::kForward, x.dtype, x.s, x.v_head_dim, x.s,
                        batch),
               0, std::move(context_backward))
      .core_attention = true;
}

// Multi-head latent attention's projections (DeepSeek-V2 §2.1) as Megatron-Core runs them
// under tensor parallelism (MLASelfAttention with Transformer Engine, since core_r0.10): the
// down-projections to the query latent and to the KV latent with the keys' shared rotary part
// are `duplicated` TELinear modules — whole on every rank, over the rank's tokens: its sequence
// shard under sequence parallelism (each rank 1/t of the tokens: model FLOPs counted whole),
// else all of them (model FLOPs 1/t each). The latent norms are fused into the up-projections
// (TELayerNormColumnParallelLinear), which are column-parallel over the rank's heads: under SP
// they all-gather the normed latent shard (and the rotary part is gathered on its own), so the
// attention block gathers q_lora + kv_lora + rope elements a token, not h (the gather is the
// previous block's boundary: Op::gather_columns), re-gathers the saved latent shards for their
// weight gradients, and reduces their input gradients — latents again — before the
// down-projections' backward, which then needs no collective; without SP those reductions are
// all-reduces. Saved: the input once, the up-projections' latent inputs (the shard under SP),
// and Q, K, V for the core attention. Not modelled: the all-reduce over the tensor group of
// the duplicated down-projections' weight gradients (each rank's is over its shard), which
// Megatron runs once a step in finalize_model_grads beside the norms' (docs/strategies.md).
void LatentProjections(LayerBuilder& layer, const Shape& x, const MlaSpec& mla, int t,
                       bool gather_input_gradient) {
  const bool sp = x.replicated_tokens < x.tokens;
  const int64_t down_tokens = x.replicated_tokens;  // the shard under SP, else every token
  const double down_share = sp ? 1.0 : 1.0 / t;
  const int64_t kv_latent = mla.kv_lora_rank + mla.qk_rope_head_dim;
  const auto latent_norm = [&](std::string_view name, int64_t rank) {
    const int64_t elements = x.replicated_tokens * rank;
    layer.Stream(name, OpKind::kNorm, x.dtype, elements, 2 * x.e, 3 * x.e, x.e * elements);
  };
  // An up-projection from a `rank`-wide latent: saves its input (the shard under SP, which its
  // backward gathers again), reduces its input gradient in backward over `reduced` columns, and
  // gathers the previous block's output gradient there when `last` (the backward's last
  // tensor-parallel boundary of the block) and that block needs it gathered.
  const auto up = [&](std::string_view name, int64_t rank, int64_t columns, int64_t outputs,
                      int64_t reduced, bool last) {
    layer.Linear(name, x.dtype, x.tokens, columns, rank,
                 x.input_e() * static_cast<double>(x.replicated_tokens * rank) +
                     x.e * static_cast<double>(x.tokens * outputs),
                 1, 1.0, Casts(x, x.replicated_tokens * rank, x.tokens * columns));
    RegatherSequenceShard(layer, x, rank);
    layer.Boundaries(Boundary::kNone, Boundary::kTensorReduce);
    layer.BoundaryWidths(
        {}, {.reduce = reduced, .gather = last && gather_input_gradient ? 0 : Op::kNoGather});
  };
  const int64_t input = x.replicated_tokens * x.width;  // the shard under SP
  const int64_t q_latent = mla.q_lora_rank > 0 ? mla.q_lora_rank : x.width;
  if (mla.q_lora_rank > 0) {
    layer.Linear("attn.q_down", x.dtype, down_tokens, mla.q_lora_rank, x.width,
                 x.input_e() * static_cast<double>(input), 1, down_share,
                 Casts(x, input, down_tokens * mla.q_lora_rank));
    latent_norm("attn.q_norm", mla.q_lora_rank);
    up("attn.q_up", mla.q_lora_rank, x.q, x.q, q_latent, /*last=*/true);
  } else {
    // Without a query latent the query projection is column-parallel over the hidden state.
    up("attn.q", x.width, x.q, x.q, q_latent, /*last=*/true);
  }
  // Its input is q_down's (or the query projection's), saved there once; under FP8 Transformer
  // Engine quantizes it for this module too.
  layer.Linear("attn.kv_down", x.dtype, down_tokens, kv_latent, x.width, 0, 1, down_share,
               Casts(x, input, down_tokens * kv_latent));
  latent_norm("attn.kv_norm", mla.kv_lora_rank);
  const int64_t kv_up = x.heads * (mla.qk_nope_head_dim + mla.v_head_dim);
  // The rotary part's gradient is reduced with the KV latent's (its own gather in forward).
  up("attn.kv_up", mla.kv_lora_rank, kv_up, x.kv + x.v, kv_latent, /*last=*/false);
}

// The sequence-parallel all-gathers at an attention block's two ends: of its output, for the
// MLP block after it, and in backward of the previous block's output gradient — none next to
// a MoE block without shared experts (TransformerSpec::RoutedOnlyMlp), which takes and returns
// the rank's shard.
struct AttentionGathers {
  bool output = true;
  bool input_gradient = true;
};

void Attention(LayerBuilder& layer, const Shape& x, const TransformerSpec& spec, int t,
               AttentionGathers gathers) {
  const double tokens = static_cast<double>(x.tokens);
  NormOp(layer, "attn.norm", x);
  if (spec.mla.enabled()) {
    LatentProjections(layer, x, spec.mla, t, gathers.input_gradient);
  } else {
    // Saves its input (the sequence shard under sequence parallelism, which the backward
    // all-gathers again) and its outputs Q, K, V for the core attention's backward.
    const int64_t qkv = x.q + x.kv + x.v;
    // PyTorch's modules repeat grouped-query keys and values to every query head first, and
    // the attention kernel saves the copies.
    const int64_t repeats = x.eager_modules ? x.heads / x.kv_heads : 1;
    const int64_t saved_qkv = x.q + repeats * (x.kv + x.v);
    AutocastLinear(layer, "attn.qkv", x, x.width, x.width * qkv * x.steps, BiasColumns(x, qkv),
                   /*fp32_input=*/true);
    Op& projection =
        layer.Linear("attn.qkv", x.dtype, x.tokens, qkv, x.width,
                     x.input_e() * SavedInputTokens(x) * x.width + x.e * tokens * saved_qkv,
                     x.steps, 1.0, Casts(x, x.replicated_tokens * x.width, x.tokens * qkv));
    // Rotary models are written with separate q, k, v projections (Llama's wq, wk, wv in
    // torchtitan and Hugging Face); GPT-2-style ones with one (c_attn).
    if (spec.position == PositionEmbedding::kRotary) {
      const auto bytes = [&](int64_t columns) {
        return static_cast<int64_t>(x.e * tokens * static_cast<double>(columns));
      };
      projection.matmul_outputs = {bytes(x.q), bytes(x.kv), bytes(x.v)};
    }
    if (!x.saves_gathered) RegatherSequenceShard(layer, x);
    layer.Boundaries(Boundary::kNone, Boundary::kTensorReduce);  // column-parallel: g in backward
    if (!gathers.input_gradient) layer.BoundaryWidths({}, {.gather = Op::kNoGather});
    if (spec.qk_norm) QkNorm(layer, x);
    if (spec.position == PositionEmbedding::kRotary) Rotary(layer, x);
  }
  CoreAttention(layer, x);
  AutocastLinear(layer, "attn.proj", x, x.o, x.o * x.width * x.steps, BiasColumns(x, x.width),
                 /*fp32_input=*/false);
  layer.Linear("attn.proj", x.dtype, x.tokens, x.width, x.o, x.input_e() * tokens * x.o, x.steps,
               1.0, Casts(x, x.tokens * x.o, x.tokens * x.width));
  layer.Boundaries(Boundary::kTensorReduce, Boundary::kNone);  // row-parallel: f in forward
  if (!gathers.output) layer.BoundaryWidths({.gather = Op::kNoGather}, {});
  if (spec.post_norms) NormOp(layer, "attn.post_norm", x);
  ResidualAdd(layer, "attn.residual", x);
}

// A tensor-parallel MLP of `ffn` (the rank's share) named `prefix`.fc1/.act/.fc2: the dense
// layers' (`shared` false) with their own reductions (column-parallel fc1: its input gradient in
// backward; row-parallel fc2: its output in forward), or a MoE layer's shared experts, whose
// input the router saves (the same tensor). Without sequence parallelism the shared experts'
// output and input gradient join the routed experts' in the MoE block's all-reduces; under it
// (`reduces`) they gather, re-gather and reduce-scatter on their own as Megatron-Core's
// SharedExpertMLP does (a column- and a row-parallel linear over the layer's shard), and the
// MoE block gathers for the next layer (`shared`: no gather after fc2's reduce-scatter).
void Mlp(LayerBuilder& layer, const Shape& x, bool swiglu, std::string_view prefix, int64_t ffn,
         bool shared, bool reduces) {
  const double tokens = static_cast<double>(x.tokens);
  const std::string name(prefix);
  const int64_t width = swiglu ? 2 * ffn : ffn;  // SwiGLU: gate and up in one GEMM
  const double input = x.input_e() * static_cast<double>(SavedInputTokens(x) * x.width);
  AutocastLinear(layer, name + ".fc1", x, x.width, x.width * width * x.steps, BiasColumns(x, width),
                 /*fp32_input=*/!shared);
  Op& fc1 = layer.Linear(name + ".fc1", x.dtype, x.tokens, width, x.width, shared ? 0 : input,
                         x.steps, 1.0, Casts(x, x.replicated_tokens * x.width, x.tokens * width));
  // SwiGLU's gate and up are two matmuls as PyTorch models write them (w1 and w3, gate_proj and
  // up_proj), gate first.
  if (swiglu) fc1.matmul_outputs = {fc1.output_bytes / 2, fc1.output_bytes / 2};
  if (reduces) {
    if (!x.saves_gathered) RegatherSequenceShard(layer, x);
    layer.Boundaries(Boundary::kNone, Boundary::kTensorReduce);
  }
  // GeLU saves its input (e·sbf); SwiGLU reads 2f and writes f, saving both halves — and as
  // PyTorch's modules write it (silu, then the product) silu's output too, in two kernels
  // where uncompiled (models/eager_kernels.h).
  const int64_t elements = x.tokens * ffn;
  const int64_t saved = swiglu && x.eager_modules ? width + ffn : width;
  const StreamBytes bytes = swiglu ? SwigluBytes(x.e, x.eager_modules && !x.compiled_blocks)
                                   : StreamBytes{2 * x.e, 3 * x.e};
  layer.Stream(name + ".act", OpKind::kActivation, x.dtype, elements, bytes.forward, bytes.backward,
               x.e * tokens * saved);
  AutocastLinear(layer, name + ".fc2", x, ffn, ffn * x.width * x.steps, BiasColumns(x, x.width),
                 /*fp32_input=*/false);
  layer.Linear(name + ".fc2", x.dtype, x.tokens, x.width, ffn, x.input_e() * tokens * ffn, x.steps,
               1.0, Casts(x, x.tokens * ffn, x.tokens * x.width));
  if (reduces) {
    layer.Boundaries(Boundary::kTensorReduce, Boundary::kNone);
    // The next attention's input, or for shared experts none: the MoE block gathers it.
    layer.BoundaryWidths({.gather = shared ? Op::kNoGather : x.attention_gather}, {});
  }
}

void DenseMlp(LayerBuilder& layer, const Shape& x, bool swiglu) {
  Mlp(layer, x, swiglu, "mlp", x.ffn, /*shared=*/false, /*reduces=*/true);
}

// Expert MLP: router, top-k, dispatch into a capacity-padded [experts, capacity, h] buffer,
// the local experts as grouped GEMMs, combine. Tokens cross ranks by the exchanges the strategy
// inserts between dispatch/combine and the experts (Op::Boundary::kExpertDispatch and
// kExpertCombine). As Megatron-Core's MoELayer with the alltoall dispatcher runs it under
// sequence parallelism (which it requires with tensor parallelism; token_dispatcher.py,
// MoEAlltoAllTokenDispatcher, core_r0.8 on): each rank routes its own shard of the tokens, the
// all-to-all over the expert-parallel group moves those, and when the experts split over the
// tensor group (etp = t) the group all-gathers the tokens it received (the dispatcher's
// gather_from_sequence_parallel_region over tp_group), runs each expert's FFN 1/t wide on all
// of them and reduce-scatters the partial outputs back before the all-to-all home
// (reduce_scatter_to_sequence_parallel_region); under MoE parallel folding (etp = 1) whole
// experts take the tokens as they arrive. The block's output is then the rank's shard: the next
// layer's input is gathered after the combine, and in backward the block hands back the shard's
// gradient, gathered only for the attention's output projection before it. The shared experts
// are an MLP over the shard with their own gathers (Mlp). Without sequence parallelism every
// tensor-parallel rank routes all the tokens (the same ones) through its 1/t of each expert, and
// the block all-reduces its output and input gradient like an MLP.
void MoeMlp(LayerBuilder& layer, const Shape& x, const TransformerSpec& spec,
            const TransformerShard& shard) {
  const MoeSpec& moe = spec.moe;
  const bool sp = shard.sequence_sharded();
  const int64_t ep = shard.expert_parallel;
  const int64_t local_experts = moe.experts / ep;
  const int64_t tokens = shard.moe_tokens();  // MoE layers are 1D: no batch split
  // Capacity per expert of the tokens one rank sends: ceil(k·T·c / E) (Switch Transformer
  // Eq. 3, top-k as Megatron and DeepSpeed do; c = 1 dropless and balanced); each local expert
  // receives it from ep ranks, and from each rank of the expert-tensor group it gathers over.
  const int64_t capacity = moe.Capacity(tokens);
  const int64_t rows = ep * capacity * shard.expert_gather();  // tokens per local expert
  const int64_t processed = local_experts * rows;
  const int64_t ffn = spec.MoeFfnHidden() / shard.expert_tensor();
  const bool swiglu = spec.gated_mlp();
  const int64_t width = swiglu ? 2 * ffn : ffn;
  const double routed = static_cast<double>(moe.top_k) * static_cast<double>(tokens);

  if (moe.shared_experts > 0) {
    Mlp(layer, x, swiglu, "moe.shared", spec.SharedFfnHidden() / shard.tensor_parallel,
        /*shared=*/true, /*reduces=*/sp);
  }
  // The router saves its input: the tokens it routes (the shard under SP).
  layer.Linear("moe.router", x.dtype, tokens, moe.experts, x.width,
               x.e * x.replicated_tokens * x.width);
  if (!sp) {
    layer.Boundaries(Boundary::kNone, Boundary::kTensorReduce);
  } else if (moe.shared_experts == 0) {
    // The block's input gradient is the shard's; the attention's output projection before it
    // takes it gathered (with shared experts, their fc1's reduction gathers it).
    layer.Boundaries(Boundary::kNone, Boundary::kTensorReduce);
    layer.BoundaryWidths({}, {.reduce = Op::kNoReduce});
  }
  layer.Stream("moe.topk", OpKind::kRouter, x.dtype, tokens * moe.experts, 8, 8,
               4.0 * static_cast<double>(tokens * moe.experts));
  const int64_t buffer = moe.experts * capacity * x.width;
  layer.Stream("moe.dispatch", OpKind::kPermute, x.dtype, buffer, 2 * x.e, 2 * x.e, 0);
  layer.Boundaries(Boundary::kExpertDispatch, Boundary::kNone);  // tokens to their experts
  // MFU counts routed tokens only; the padded capacity is executed work.
  const double share =
      routed * static_cast<double>(shard.expert_gather()) / static_cast<double>(processed);
  layer.Linear("moe.expert.fc1", x.dtype, rows, width, x.width,
               x.input_e() * static_cast<double>(processed) * x.width, local_experts, share,
               Casts(x, processed * x.width, processed * width));
  layer.MarkExpert();
  layer.Boundaries(Boundary::kNone, Boundary::kExpertCombine);  // gradients back to the tokens
  layer.Stream("moe.expert.act", OpKind::kActivation, x.dtype, processed * ffn,
               swiglu ? 3 * x.e : 2 * x.e, swiglu ? 5 * x.e : 3 * x.e,
               x.e * static_cast<double>(processed) * width);
  layer.MarkExpert();
  layer.Linear("moe.expert.fc2", x.dtype, rows, x.width, ffn,
               x.input_e() * static_cast<double>(processed) * ffn, local_experts, share,
               Casts(x, processed * ffn, processed * x.width));
  layer.MarkExpert();
  layer.Boundaries(Boundary::kExpertCombine, Boundary::kNone);  // tokens back to their ranks
  layer.Stream("moe.combine", OpKind::kPermute, x.dtype, buffer, 2 * x.e, 2 * x.e, x.e * buffer);
  // Without SP the block's all-reduce; under it only the next attention's gather.
  layer.Boundaries(Boundary::kTensorReduce, Boundary::kExpertDispatch);
  layer.BoundaryWidths({.reduce = sp ? Op::kNoReduce : 0, .gather = x.attention_gather}, {});
}

// A multi-token-prediction module's input (Megatron-Core's MultiTokenPredictionLayer): the
// shared embedding of the tokens shifted by its depth (a vocabulary-parallel lookup and its
// tensor-parallel reduction), enorm and hnorm over it and the previous hidden states, their
// concatenation, and eh_proj, a column-parallel 2h → h linear whose output Megatron gathers
// over the tensor-parallel group (and scatters back to the sequence shard). Its gathers are
// priced as one tensor-parallel reduction each way: the same bus bytes as Megatron's under
// sequence parallelism (forward: all-gathers of the 2h input and the h/t output; backward: the
// scatter's all-gather and the input gradient's reduce-scatter), a third more without it.
void MtpInput(LayerBuilder& layer, const Shape& x, int split) {
  const int64_t elements = x.tokens * x.width;
  Op lookup = Op::Streaming("mtp.embedding", OpKind::kEmbedding, Pass::kForward, x.dtype, elements,
                            2 * x.e);
  lookup.bytes += 8.0 * x.tokens;
  std::vector<Op> grad;  // accumulated into the shared table's gradient (the output's)
  grad.push_back(Op::Streaming("mtp.embedding.grad", OpKind::kEmbedding, Pass::kBackward, x.dtype,
                               elements, 2 * x.e));
  layer.Forward(std::move(lookup), 8.0 * x.tokens, std::move(grad));
  layer.Boundaries(Boundary::kTensorReduce, Boundary::kTensorReduce);
  NormOp(layer, "mtp.enorm", x);
  NormOp(layer, "mtp.hnorm", x);
  const int64_t concatenated = 2 * x.replicated_tokens * x.width;
  layer.Stream("mtp.concat", OpKind::kElementwise, x.dtype, concatenated, 2 * x.e, 2 * x.e, 0);
  layer.Linear("mtp.eh_proj", x.dtype, x.tokens, x.width / split, 2 * x.width,
               x.input_e() * static_cast<double>(concatenated), x.steps, 1.0,
               Casts(x, concatenated, x.tokens * x.width / split));
  layer.Boundaries(Boundary::kTensorReduce, Boundary::kTensorReduce);
}

}  // namespace

LayerOps TransformerLayerOps(const TransformerSpec& spec, int layer_index,
                             const TransformerShard& shard) {
  Shape x = MakeShape(spec, shard);
  x.window = spec.WindowOf(layer_index);
  x.chunked = spec.chunked_attention;
  LayerBuilder layer("");
  if (spec.IsMtpLayer(layer_index)) MtpInput(layer, x, shard.column_split());
  const bool sp = shard.sequence_sharded();
  const AttentionGathers gathers{.output = !sp || !spec.RoutedOnlyMlp(layer_index),
                                 .input_gradient = !sp || !spec.FollowsRoutedOnlyMlp(layer_index)};
  Attention(layer, x, spec, shard.column_split(), gathers);
  NormOp(layer, "mlp.norm", x);
  if (spec.IsMoeLayer(layer_index)) {
    MoeMlp(layer, x, spec, shard);
  } else {
    DenseMlp(layer, x, spec.gated_mlp());
  }
  if (spec.post_norms) NormOp(layer, "mlp.post_norm", x);
  ResidualAdd(layer, "mlp.residual", x);
  LayerOps ops = std::move(layer).Finish();
  TagRecomputeModules(ops);
  ops.selective_modules = shard.recompute_modules;
  if (x.eager_modules && sp) {
    ops.stored_scatter_bytes =
        static_cast<int64_t>(x.e * static_cast<double>(x.replicated_tokens * x.width));
  }
  ops.unread_last_output = shard.compiled_blocks && !spec.IsMoeLayer(layer_index);
  return ops;
}

LayerOps EmbeddingOps(const TransformerSpec& spec, const TransformerShard& shard) {
  const Shape x = MakeShape(spec, shard);
  const int split = shard.column_split();
  LayerBuilder layer("");
  const int64_t elements = x.tokens * x.width;
  const int64_t table = spec.PaddedVocab(split) / split * x.width;
  // Under autocast the embeddings stay fp32 (their tables are, and no autocast op touches
  // them): the residual stream starts in fp32.
  const DType dtype = x.autocast ? DType::kFp32 : x.dtype;
  const double e = x.autocast ? kFp32Bytes : x.e;
  // Vocabulary-parallel lookup: each rank gathers the rows of its V/t shard (others zero) and
  // the strategy all-reduces (reduce-scatters) the result. Saves the int64 token ids.
  Op lookup =
      Op::Streaming("embedding.lookup", OpKind::kEmbedding, Pass::kForward, dtype, elements, 2 * e);
  lookup.bytes += 8.0 * x.tokens;
  std::vector<Op> grad;
  // The gradient of the V/t × h table: zeroed, then the token rows accumulated into it.
  grad.push_back(Op::Streaming("embedding.grad", OpKind::kEmbedding, Pass::kBackward, dtype,
                               table + elements, 2 * e));
  if (x.autocast && spec.tied_embeddings) {
    // The output layer's gradient of the shared table reached .grad first (its backward runs
    // first); this one is added to it (autograd's AccumulateGrad: an fp32 add over the table).
    grad.push_back(Fp32Accumulation("embedding.grad_accumulate", table));
  }
  layer.Forward(std::move(lookup), 8.0 * x.tokens, std::move(grad));
  if (spec.position == PositionEmbedding::kLearned) {
    layer.Stream("embedding.position", OpKind::kElementwise, dtype, elements, 3 * e, 3 * e, 0);
  }
  if (spec.token_types > 0) {
    layer.Stream("embedding.token_type", OpKind::kElementwise, dtype, elements, 3 * e, 3 * e, 0);
  }
  if (spec.embedding_norm) NormOp(layer, "embedding.norm", x);
  if (x.dropout) {
    const int64_t local = x.replicated_tokens * x.width;
    layer.Stream("embedding.dropout", OpKind::kDropout, dtype, local, 2 * e + 1, 2 * e + 1, local);
  }
  return std::move(layer).Finish();
}

LayerOps OutputOps(const TransformerSpec& spec, const TransformerShard& shard) {
  const Shape x = MakeShape(spec, shard);
  // The output layer is a column-parallel linear too (Megatron-Core's GPTModel.output_layer, a
  // tensor_parallel.ColumnParallelLinear), so under SP its backward re-gathers the shard it
  // saved, beside its dgrad; it runs in BF16 under FP8, so the shard moves at 2 B an element.
  Shape unquantized = x;
  unquantized.fp8 = Fp8Recipe::kNone;
  const int split = shard.column_split();
  const int64_t vocab = spec.PaddedVocab(split) / split;
  LayerBuilder layer("");
  if (spec.final_norm) NormOp(layer, "output.norm", x, /*in_block=*/false);
  if (spec.lm_head_transform) {  // BERT: dense h→h, GeLU, norm before the logits
    AutocastLinear(layer, "output.transform", x, x.width, x.width * x.width * x.steps,
                   BiasColumns(x, x.width), /*fp32_input=*/true);
    layer.Linear("output.transform", x.dtype, x.tokens, x.width, x.width, x.e * x.tokens * x.width,
                 x.steps);
    layer.Stream("output.transform_act", OpKind::kActivation, x.dtype, x.tokens * x.width, 2 * x.e,
                 3 * x.e, x.e * x.tokens * x.width);
    NormOp(layer, "output.transform_norm", x);
  }
  if (spec.pooler) {  // under autocast its casts (h² + h elements) are left out
    layer.Linear("output.pooler", x.dtype, x.b, x.width, x.width, x.e * x.b * x.width, x.steps);
  }
  AutocastLinear(layer, "output.logits", x, x.width, vocab * x.width * x.steps, 0,
                 /*fp32_input=*/true);
  layer.Linear("output.logits", x.dtype, x.tokens, vocab, x.width,
               x.e * SavedInputTokens(x) * x.width, x.steps);
  if (!x.saves_gathered) RegatherSequenceShard(layer, unquantized);
  // Vocabulary-parallel cross-entropy in fp32: reads the logits, keeps the fp32 softmax for the
  // backward (the 4·s·b·V term of Korthikanti's output-layer memory). PyTorch's in bf16 or
  // fp16, under autocast or not (FSDP2's bf16 parameters), is F.cross_entropy(logits.float()):
  // the fp32 copy (e + 4 B a logit), log_softmax (4 + 4) in forward; in backward nll_loss's
  // dense fp32 gradient (4), log_softmax's backward (4 + 4 + 4) and the copy back (4 + e).
  // loss_parallel over vocabulary shards and fp32 logits (no copy) are priced as the fused
  // kernel.
  // Compiled (torch.compile, TransformerShard::compiled_loss): inductor's looped reductions read
  // the bf16 logits twice (their maxima, then the sum of exponentials) and keep them for the
  // backward (e B a logit), whose one kernel reads them and writes the bf16 gradient (e + e).
  const int64_t logits = x.tokens * vocab;
  const bool eager_loss = x.autocast || (x.eager_modules && split == 1 && x.dtype != DType::kFp32);
  double loss_forward = eager_loss ? x.e + 3 * kFp32Bytes : x.e + 4;
  double loss_backward = eager_loss ? 5 * kFp32Bytes + x.e : 4 + x.e;
  double loss_kept = kFp32Bytes;
  if (x.compiled_loss) {
    loss_forward = loss_backward = 2 * x.e;
    loss_kept = x.e;
  }
  layer.Stream("output.cross_entropy", OpKind::kCrossEntropy, x.dtype, logits, loss_forward,
               loss_backward, loss_kept * static_cast<double>(logits));
  // Each multi-token-prediction module's head: its final norm, the shared output layer and a
  // loss of its own (Megatron-Core applies the output layer to every module's hidden states).
  for (int depth = 0; depth < spec.mtp_layers; ++depth) {
    NormOp(layer, "output.mtp_norm", x);
    layer.Linear("output.mtp_logits", x.dtype, x.tokens, vocab, x.width,
                 x.e * x.replicated_tokens * x.width, x.steps);
    RegatherSequenceShard(layer, unquantized);
    // Its input gradient's tensor-parallel reduction (the main head's is OutputComms').
    layer.Boundaries(Boundary::kNone, Boundary::kTensorReduce);
    layer.Stream("output.mtp_cross_entropy", OpKind::kCrossEntropy, x.dtype, logits, x.e + 4,
                 4 + x.e, 4.0 * logits);
  }
  return std::move(layer).Finish();
}

}  // namespace dtsim::models
