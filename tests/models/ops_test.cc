// Analytic checks of the op decomposition: FLOPs per iteration against Narayanan et al. SC'21
// and activation bytes per layer against Korthikanti et al. 2022 (Table 2).
#include "models/ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "models/eager_kernels.h"
#include "models/memory.h"
#include "models/model_spec.h"

namespace dtsim::models {
namespace {

TransformerSpec Preset(const char* name) {
  Expected<ModelSpec> model = ModelPreset(name);
  EXPECT_TRUE(model.ok()) << name;
  return model->transformer;
}

struct IterationFlops {
  double model = 0;     // forward + backward
  double hardware = 0;  // + the recomputed forward
};

// One iteration of `global_batch` sequences through every layer and the output layer, summed
// over the t ranks of one tensor-parallel group (each computes 1/t of every op).
IterationFlops Iteration(const TransformerSpec& spec, int64_t global_batch, int64_t micro_batch,
                         int t, bool sequence_parallel, Recompute recompute) {
  const TransformerShard shard{.micro_batch = micro_batch,
                               .seq_len = spec.max_seq,
                               .dtype = DType::kFp16,
                               .tensor_parallel = t,
                               .sequence_parallel = sequence_parallel};
  EXPECT_TRUE(ValidateShard(spec, shard).ok());
  IterationFlops flops;
  for (int layer = 0; layer < spec.layers; ++layer) {
    const LayerOps ops = TransformerLayerOps(spec, layer, shard);
    flops.model += TotalModelFlops(ops.forward) + TotalModelFlops(ops.backward);
    flops.hardware += TotalModelFlops(RecomputeOps(ops, recompute));
  }
  const LayerOps output = OutputOps(spec, shard);
  const LayerOps embedding = EmbeddingOps(spec, shard);
  flops.model += TotalModelFlops(output.forward) + TotalModelFlops(output.backward) +
                 TotalModelFlops(embedding.forward) + TotalModelFlops(embedding.backward);
  flops.hardware += flops.model;
  const double scale = static_cast<double>(global_batch / micro_batch) * t;
  return {flops.model * scale, flops.hardware * scale};
}

struct Sc21Row {
  const char* preset;
  int64_t global_batch;
  int t;
};

// Narayanan et al. SC'21 Table 1 (global batch and TP size per row).
const Sc21Row kSc21[] = {{"megatron-1.7b", 512, 1},    {"megatron-3.6b", 512, 2},
                         {"megatron-7.5b", 512, 4},    {"megatron-18.4b", 1024, 8},
                         {"megatron-39.1b", 1536, 8},  {"megatron-76.1b", 1792, 8},
                         {"megatron-145.6b", 2304, 8}, {"megatron-310.1b", 2160, 8},
                         {"megatron-529.6b", 2520, 8}, {"megatron-1t", 3072, 8}};

TEST(OpsTest, Sc21FlopsWithFullRecomputeAndModelFlops) {
  for (const Sc21Row& row : kSc21) {
    const TransformerSpec spec = Preset(row.preset);
    const double B = row.global_batch, s = spec.max_seq, l = spec.layers, h = spec.hidden,
                 V = spec.vocab;
    // Per layer forward: GEMMs 24·B·s·h² and attention 4·B·s²·h; backward twice forward; the
    // logits 2·B·s·h·V forward, 6·B·s·h·V with backward; full recompute runs each layer's
    // forward again (not the logits). Hence (SC'21 §5.1, Eq. 3 and its no-recompute form):
    const double hardware = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
    const double model = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
    for (bool sp : {false, true}) {
      const IterationFlops got = Iteration(spec, row.global_batch, 1, row.t, sp, Recompute::kFull);
      EXPECT_NEAR(got.hardware / hardware, 1.0, 1e-12) << row.preset << " sp=" << sp;
      EXPECT_NEAR(got.model / model, 1.0, 1e-12) << row.preset << " sp=" << sp;
    }
  }
}

TEST(OpsTest, FlashAttentionKeepsModelFlopsAndHalvesExecutedCausalWork) {
  const TransformerSpec spec = Preset("megatron-22b");
  TransformerShard shard{
      .micro_batch = 4, .seq_len = 2048, .dtype = DType::kBf16, .tensor_parallel = 8};
  const LayerOps unfused = TransformerLayerOps(spec, 0, shard);
  shard.flash_attention = true;
  const LayerOps flash = TransformerLayerOps(spec, 0, shard);
  EXPECT_DOUBLE_EQ(TotalModelFlops(flash.forward), TotalModelFlops(unfused.forward));
  EXPECT_DOUBLE_EQ(TotalModelFlops(flash.backward), TotalModelFlops(unfused.backward));
  // Forward attention 4·b·(a/t)·s²·d, executed at half for a causal mask; backward counts
  // 8·b·(a/t)·s²·d for MFU and executes 10·b·(a/t)·s²·d (QKᵀ recomputed inside), halved.
  const double pairs = 4.0 * (64 / 8) * 2048.0 * 2048 * 96;
  const Op& core = flash.forward[2];
  ASSERT_EQ(core.name, "attn.core");
  EXPECT_DOUBLE_EQ(core.model_flops, 4 * pairs);
  EXPECT_DOUBLE_EQ(core.flops, 2 * pairs);
  const auto it = std::find_if(flash.backward.begin(), flash.backward.end(),
                               [](const Op& op) { return op.name == "attn.core.bwd"; });
  ASSERT_NE(it, flash.backward.end());
  const Op& core_backward = *it;
  EXPECT_DOUBLE_EQ(core_backward.model_flops, 8 * pairs);
  EXPECT_DOUBLE_EQ(core_backward.flops, 5 * pairs);
}

// s·b·h·(…) bytes per layer, Korthikanti et al. 2022 Table 2 (2-byte activations, 1-byte
// dropout masks, f = 4h).
struct ActivationCase {
  int t;
  bool sp;
  Recompute recompute;
  double (*per_sbh)(double a, double s, double h, double t);
};

const ActivationCase kActivationCases[] = {
    {1, false, Recompute::kNone,
     [](double a, double s, double h, double) { return 34 + 5 * a * s / h; }},
    {8, false, Recompute::kNone,
     [](double a, double s, double h, double t) { return 10 + 24 / t + 5 * a * s / (h * t); }},
    {8, true, Recompute::kNone,
     [](double a, double s, double h, double t) { return (34 + 5 * a * s / h) / t; }},
    {8, false, Recompute::kSelective, [](double, double, double, double t) { return 10 + 24 / t; }},
    {8, true, Recompute::kSelective, [](double, double, double, double t) { return 34 / t; }},
    {8, false, Recompute::kFull, [](double, double, double, double) { return 2.0; }},
    {8, true, Recompute::kFull, [](double, double, double, double t) { return 2 / t; }},
};

TEST(OpsTest, ActivationBytesPerLayerMatchKorthikanti) {
  for (const char* name : {"megatron-22b", "gpt3-175b", "megatron-529.6b", "megatron-1t"}) {
    const TransformerSpec spec = Preset(name);
    for (const ActivationCase& c : kActivationCases) {
      const TransformerShard shard{.micro_batch = 4,
                                   .seq_len = 2048,
                                   .dtype = DType::kFp16,
                                   .tensor_parallel = c.t,
                                   .sequence_parallel = c.sp};
      const LayerOps layer = TransformerLayerOps(spec, 0, shard);
      const double sbh = 2048.0 * 4 * spec.hidden;
      const double expected = sbh * c.per_sbh(spec.heads, 2048, spec.hidden, c.t);
      EXPECT_EQ(LayerActivationBytes(layer, c.recompute, shard, spec.hidden),
                static_cast<int64_t>(expected))
          << name << " t=" << c.t << " sp=" << c.sp << " " << RecomputeName(c.recompute);
    }
  }
}

TEST(OpsTest, FlashAttentionDropsTheScoreTensors) {
  const TransformerSpec spec = Preset("megatron-22b");
  const TransformerShard shard{.micro_batch = 1,
                               .seq_len = 4096,
                               .dtype = DType::kBf16,
                               .tensor_parallel = 1,
                               .flash_attention = true};
  // 34·s·b·h without the (2e + 1)·a·s²·b term, plus fp32 row statistics 4·a·s·b.
  const double expected = 34.0 * 4096 * 6144 + 4.0 * 64 * 4096;
  EXPECT_EQ(LayerActivationBytes(TransformerLayerOps(spec, 0, shard), Recompute::kNone, shard,
                                 spec.hidden),
            static_cast<int64_t>(expected));
}

TEST(OpsTest, BackwardGemmsDoubleTheForward) {
  const TransformerSpec spec = Preset("llama3-8b");  // GQA + SwiGLU
  const TransformerShard shard{.micro_batch = 2,
                               .seq_len = 1024,
                               .dtype = DType::kBf16,
                               .tensor_parallel = 4,
                               .dropout = false};
  const LayerOps layer = TransformerLayerOps(spec, 0, shard);
  EXPECT_DOUBLE_EQ(TotalModelFlops(layer.backward), 2 * TotalModelFlops(layer.forward));
  // GEMM FLOPs per token and rank: 2·(h·(q + 2kv) + q·h + 3·h·f)/t, q = h, kv = h/4.
  const double h = 4096, f = 14336, tokens = 2048;
  const double gemms = 2 * tokens * (h * (h + 2 * h / 4) + h * h + 3 * h * f) / 4;
  const double attention = 4 * 2 * (32 / 4) * 1024.0 * 1024 * 128;
  EXPECT_DOUBLE_EQ(TotalModelFlops(layer.forward), gemms + attention);
}

TEST(OpsTest, MoeCountsRoutedTokensAndExecutesCapacity) {
  const TransformerSpec spec = Preset("mixtral-8x7b");
  const TransformerShard shard{.micro_batch = 1,
                               .seq_len = 4096,
                               .dtype = DType::kBf16,
                               .expert_parallel = 8,
                               .dropout = false};
  const LayerOps layer = TransformerLayerOps(spec, 0, shard);
  double expert_model = 0, expert_executed = 0;
  for (const Op& op : layer.forward) {
    if (op.name.starts_with("moe.expert.fc")) {
      expert_model += op.model_flops;
      expert_executed += op.flops;
    }
  }
  // top-2 of 4096 tokens through SwiGLU experts: 2·(k·T)·3·h·f; capacity factor 1 pads nothing
  // (ceil(2·4096/8) = 1024 tokens per expert and source rank, 8 sources, 1 local expert).
  const double routed = 2.0 * (2 * 4096) * 3 * 4096 * 14336;
  EXPECT_DOUBLE_EQ(expert_model, routed);
  EXPECT_DOUBLE_EQ(expert_executed, routed);
}

TEST(OpsTest, ShardValidationNamesTheMismatch) {
  const TransformerSpec spec = Preset("llama2-70b");  // 64 heads, 8 KV heads
  Status bad = ValidateShard(spec, {.micro_batch = 1, .seq_len = 4096, .tensor_parallel = 3});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().ToString().find("must divide heads (64)"), std::string::npos)
      << bad.error().ToString();
  // t = 16 > 8 KV heads: replicated, allowed.
  EXPECT_TRUE(ValidateShard(spec, {.micro_batch = 1, .seq_len = 4096, .tensor_parallel = 16}).ok());
  Status sp = ValidateShard(
      spec, {.micro_batch = 1, .seq_len = 4100, .tensor_parallel = 8, .sequence_parallel = true});
  ASSERT_FALSE(sp.ok());
  EXPECT_NE(sp.error().ToString().find("sequence length (4100)"), std::string::npos);
}

TEST(OpsTest, OptimizerStepTrafficFollowsTheStateDtypes) {
  // Adam over 1,000 parameters with fp32 gradients: fp32 states beside bf16 weights read and
  // write master, m, v (2 × 12 B), read the gradient (4) and write the bf16 weight (2): 30 B a
  // parameter. bf16 moments and master: 2 × 6 + 4 + 2 = 18. fp32 weights (no copy, the weight
  // is the state) with bf16 moments: 2 × (4 + 4) + 4 = 20.
  EXPECT_DOUBLE_EQ(OptimizerOp(Optimizer::kAdam, 1000, DType::kFp32, DType::kBf16).bytes, 30'000);
  EXPECT_DOUBLE_EQ(OptimizerOp(Optimizer::kAdam, 1000, DType::kFp32, DType::kBf16,
                               {.master = DType::kBf16, .moments = DType::kBf16})
                       .bytes,
                   18'000);
  EXPECT_DOUBLE_EQ(OptimizerOp(Optimizer::kAdam, 1000, DType::kFp32, DType::kFp32,
                               {.master = DType::kFp32, .moments = DType::kBf16})
                       .bytes,
                   20'000);
}

// Megatron-Core's selective recompute by module (--recompute-modules). Llama 3 8B, one rank,
// one sequence of 8,192 tokens in bf16 with flash attention: the MLP saves fc1's input
// 8,192 × 4,096 × 2 = 67,108,864 B, SwiGLU's input (gate and up) 8,192 × 28,672 × 2 =
// 469,762,048 and fc2's input 8,192 × 14,336 × 2 = 234,881,024; recomputing "mlp" keeps the
// module's input (the pre-norm's) and frees those three, 771,751,936 B, re-running the norm
// and the MLP. "layernorm" frees the two pre-norms' outputs the GEMMs after them save (QKV's and
// fc1's inputs, 67,108,864 each) and re-runs the norms. "core_attn" under flash attention frees
// nothing (the kernel keeps only its statistics), as Korthikanti's selective does.
TEST(OpsTest, MegatronCoreRecomputeModulesFreeWhatTheyRecompute) {
  const TransformerSpec spec = Preset("llama3-8b");
  TransformerShard shard{.seq_len = 8192, .flash_attention = true, .dropout = false};
  const LayerOps plain = TransformerLayerOps(spec, 0, shard);
  const int64_t none = LayerActivationBytes(plain, Recompute::kNone, shard, spec.hidden);
  EXPECT_EQ(LayerActivationBytes(plain, Recompute::kSelective, shard, spec.hidden), none);
  const auto names = [](const std::vector<Op>& ops) {
    std::vector<std::string> out;
    for (const Op& op : ops) out.push_back(op.name);
    return out;
  };
  shard.recompute_modules = kRecomputeMlp;
  const LayerOps mlp = TransformerLayerOps(spec, 0, shard);
  EXPECT_EQ(none - LayerActivationBytes(mlp, Recompute::kSelective, shard, spec.hidden),
            771'751'936);
  EXPECT_EQ(names(RecomputeOps(mlp, Recompute::kSelective)),
            (std::vector<std::string>{"mlp.norm", "mlp.fc1", "mlp.act", "mlp.fc2"}));
  shard.recompute_modules = kRecomputeLayerNorm;
  const LayerOps norms = TransformerLayerOps(spec, 0, shard);
  EXPECT_EQ(none - LayerActivationBytes(norms, Recompute::kSelective, shard, spec.hidden),
            2 * 67'108'864);
  EXPECT_EQ(names(RecomputeOps(norms, Recompute::kSelective)),
            (std::vector<std::string>{"attn.norm", "mlp.norm"}));
  EXPECT_EQ(RecomputeModulesText(kRecomputeCoreAttn | kRecomputeMlp | kRecomputeMoeAct),
            "core_attn, mlp, moe_act");
}

// DeepSeek-V3's fourth layer (MoE, MLA) on one rank over 4,096 tokens: 256 experts top-8,
// dropless and balanced, so each expert takes ⌈8 · 4,096 / 256⌉ = 128 rows, 32,768 in all, of
// FFN 2,048. "moe_act" re-runs the experts' SwiGLU and frees its output, fc2's saved input:
// 32,768 × 2,048 × 2 = 134,217,728 B. "shared_experts" re-runs the shared expert (FFN 2,048)
// and frees its SwiGLU's input, 4,096 × 4,096 × 2 = 33,554,432, and fc2's, 4,096 × 2,048 × 2 =
// 16,777,216. "mla_up_proj" re-runs the two up-projections and frees what they save for the
// core attention: Q (128 heads × 192) and the keys' non-rotary part and V (128 × (128 + 128);
// the rotary key is the KV down-projection's, shared by the heads): 4,096 × 128 × 448 × 2 =
// 469,762,048. "moe" re-runs the block from the shared experts and router on.
TEST(OpsTest, MoeAndLatentAttentionModules) {
  const TransformerSpec spec = Preset("deepseek-v3");
  TransformerShard shard{.seq_len = 4096, .flash_attention = true, .dropout = false};
  const int layer = 3;
  const int64_t none = LayerActivationBytes(TransformerLayerOps(spec, layer, shard),
                                            Recompute::kNone, shard, spec.hidden);
  const auto freed = [&](uint8_t modules) {
    shard.recompute_modules = modules;
    return none - LayerActivationBytes(TransformerLayerOps(spec, layer, shard),
                                       Recompute::kSelective, shard, spec.hidden);
  };
  EXPECT_EQ(freed(kRecomputeMoeAct), 134'217'728);
  EXPECT_EQ(freed(kRecomputeSharedExperts), 33'554'432 + 16'777'216);
  EXPECT_EQ(freed(kRecomputeMlaUpProj), 469'762'048);
  EXPECT_EQ(freed(kRecomputeMlp), 0);  // a MoE layer has no dense MLP
  shard.recompute_modules = kRecomputeMlaUpProj | kRecomputeMoe;
  std::vector<std::string> again;
  for (const Op& op :
       RecomputeOps(TransformerLayerOps(spec, layer, shard), Recompute::kSelective)) {
    again.push_back(op.name);
  }
  EXPECT_EQ(again.front(), "attn.q_up");
  EXPECT_EQ(again[1], "attn.kv_up");
  EXPECT_EQ(again[2], "moe.shared.fc1");
  EXPECT_EQ(again.back(), "moe.combine");
}

}  // namespace
}  // namespace dtsim::models

namespace dtsim::models {
namespace {

const Op* FindOp(const std::vector<Op>& ops, const std::string& name) {
  const auto it =
      std::find_if(ops.begin(), ops.end(), [&](const Op& op) { return op.name == name; });
  return it == ops.end() ? nullptr : &*it;
}

// Llama 3 8B's rotary embeddings on one of two tensor-parallel ranks, micro-batch 1 of 4,096
// tokens: the rank's 16 query heads and 4 key heads of 128, 4,096 · (16 + 4) · 128 =
// 10,485,760 elements, between the projection and the attention. Fused (Megatron-Core,
// compiled blocks) 2e = 4 bytes an element each way: 41,943,040 B; eager as torchtitan writes
// it (fp32 copy, complex product, cast back) 2e + 16 = 20: 209,715,200 B. Nothing saved;
// selective recompute leaves it out, full recompute re-runs it. GPT-3 (learned positions) has
// none.
TEST(OpsTest, RotaryEmbeddingsAreTheirOwnOp) {
  const TransformerSpec llama = Preset("llama3-8b");
  TransformerShard shard{.micro_batch = 1,
                         .seq_len = 4096,
                         .tensor_parallel = 2,
                         .flash_attention = true,
                         .dropout = false};
  const auto rotary = [&](const TransformerShard& s) {
    const LayerOps ops = TransformerLayerOps(llama, 0, s);
    const Op* forward = FindOp(ops.forward, "attn.rotary");
    const Op* backward = FindOp(ops.backward, "attn.rotary.bwd");
    EXPECT_NE(forward, nullptr);
    EXPECT_NE(backward, nullptr);
    if (forward == nullptr || backward == nullptr) return std::pair(0.0, 0.0);
    EXPECT_EQ(forward->kind, OpKind::kRotary);
    EXPECT_EQ(forward->signature.Key(), "rotary bf16 elements=10485760");
    EXPECT_EQ(forward->saved_bytes, 0);
    return std::pair(forward->bytes, backward->bytes);
  };
  EXPECT_EQ(rotary(shard), std::pair(41'943'040.0, 41'943'040.0));
  TransformerShard eager = shard;
  eager.eager_modules = true;
  EXPECT_EQ(rotary(eager), std::pair(209'715'200.0, 209'715'200.0));
  eager.compiled_blocks = true;
  EXPECT_EQ(rotary(eager), std::pair(41'943'040.0, 41'943'040.0));

  const LayerOps ops = TransformerLayerOps(llama, 0, shard);
  const auto recomputes = [&](Recompute recompute) {
    const std::vector<Op> again = RecomputeOps(ops, recompute);
    return std::any_of(again.begin(), again.end(),
                       [](const Op& op) { return op.kind == OpKind::kRotary; });
  };
  EXPECT_FALSE(recomputes(Recompute::kSelective));
  EXPECT_TRUE(recomputes(Recompute::kFull));

  const LayerOps gpt = TransformerLayerOps(Preset("gpt3-175b"), 0, shard);
  EXPECT_TRUE(std::none_of(gpt.forward.begin(), gpt.forward.end(),
                           [](const Op& op) { return op.kind == OpKind::kRotary; }));
}

}  // namespace
}  // namespace dtsim::models

namespace dtsim::models {
namespace {

// torchtitan's Llama blocks eager (9dec370: RMSNorm as x.float(), pow, mean, ·rsqrt, type_as,
// ·weight; SwiGLU as silu(w1 x) * w3 x) against compiled (training.compile "model": inductor
// fuses each into one kernel, as Megatron-Core's are). Llama 3 8B, one rank, 4,096 tokens:
// a norm over 4,096 · 4,096 = 16,777,216 elements moves 36 B an element forward in bf16
// (float 2 + 4, pow 4 + 4, mean 4, ·rsqrt 4 + 4, type_as 4 + 2, ·weight 2 + 2) and 92 backward
// (·weight 12, type_as 6, ·rsqrt 24, mean 4, pow 28, the two gradients summed 12, float 6);
// fused 2e = 4 and 3e = 6. SwiGLU over 4,096 · 14,336 = 58,720,256 outputs: eager 5e = 10 and
// 9e = 18, fused 3e = 6 and 5e = 10. The final norm is outside the blocks: eager either way.
// Under autocast (fp32 norms) the casts are no-ops: 28 forward, 92 backward.
TEST(OpsTest, EagerNormsAndSwigluMoveWhatTheirKernelsMove) {
  EXPECT_EQ(RmsNormBytes(2, true), (StreamBytes{36, 92}));
  EXPECT_EQ(RmsNormBytes(4, true), (StreamBytes{28, 92}));
  EXPECT_EQ(RmsNormBytes(2, false), (StreamBytes{4, 6}));
  EXPECT_EQ(SwigluBytes(2, true), (StreamBytes{10, 18}));
  EXPECT_EQ(SwigluBytes(2, false), (StreamBytes{6, 10}));
  EXPECT_EQ(RotaryBytes(2, true), (StreamBytes{20, 20}));
  EXPECT_EQ(RotaryBytes(2, false), (StreamBytes{4, 4}));
  const TransformerSpec llama = Preset("llama3-8b");
  TransformerShard shard{.micro_batch = 1,
                         .seq_len = 4096,
                         .flash_attention = true,
                         .dropout = false,
                         .eager_modules = true};
  const auto bytes = [](const LayerOps& ops, const std::string& name) {
    const Op* forward = FindOp(ops.forward, name);
    const Op* backward = FindOp(ops.backward, name + ".bwd");
    EXPECT_NE(forward, nullptr) << name;
    EXPECT_NE(backward, nullptr) << name;
    return forward && backward ? std::pair(forward->bytes, backward->bytes) : std::pair(0.0, 0.0);
  };
  const double norm = 16'777'216, act = 58'720'256;
  LayerOps eager = TransformerLayerOps(llama, 0, shard);
  EXPECT_EQ(bytes(eager, "attn.norm"), std::pair(36 * norm, 92 * norm));
  EXPECT_EQ(bytes(eager, "mlp.norm"), std::pair(36 * norm, 92 * norm));
  EXPECT_EQ(bytes(eager, "mlp.act"), std::pair(10 * act, 18 * act));
  EXPECT_EQ(bytes(OutputOps(llama, shard), "output.norm"), std::pair(36 * norm, 92 * norm));

  shard.compiled_blocks = true;
  const LayerOps compiled = TransformerLayerOps(llama, 0, shard);
  EXPECT_EQ(bytes(compiled, "attn.norm"), std::pair(4 * norm, 6 * norm));
  EXPECT_EQ(bytes(compiled, "mlp.act"), std::pair(6 * act, 10 * act));
  EXPECT_EQ(bytes(OutputOps(llama, shard), "output.norm"), std::pair(36 * norm, 92 * norm));

  shard.compiled_blocks = false;
  shard.autocast = true;
  EXPECT_EQ(bytes(TransformerLayerOps(llama, 0, shard), "attn.norm"),
            std::pair(28 * norm, 92 * norm));
  // Megatron-Core's modules (no eager_modules) and LayerNorm (one ATen kernel eager too) are
  // fused either way.
  shard.autocast = false;
  shard.eager_modules = false;
  EXPECT_EQ(bytes(TransformerLayerOps(llama, 0, shard), "attn.norm"),
            std::pair(4 * norm, 6 * norm));
  shard.eager_modules = true;
  const TransformerSpec gpt = Preset("gpt3-1.3b");
  const double gpt_norm = 4096.0 * gpt.hidden;
  EXPECT_EQ(bytes(TransformerLayerOps(gpt, 0, shard), "attn.norm"),
            std::pair(4 * gpt_norm, 6 * gpt_norm));
}

}  // namespace
}  // namespace dtsim::models
