// Multi-head latent attention, shared experts and dense first layers (DeepSeek-V3): parameters,
// FLOPs and the KV cache per token, each derived in a comment from the released config.
#include <gtest/gtest.h>

#include "models/memory.h"
#include "models/model_spec.h"
#include "models/ops.h"
#include "models/parameters.h"
#include "tests/models/preset_helpers.h"

namespace dtsim::models {
namespace {

TransformerSpec DeepSeekV3() { return PresetTransformer("deepseek-v3"); }

double ForwardModelFlops(const LayerOps& ops, std::string_view prefix) {
  double flops = 0;
  for (const Op& op : ops.forward) {
    if (op.name.starts_with(prefix)) flops += op.model_flops;
  }
  return flops;
}

TEST(MlaTest, AttentionParametersOfDeepSeekV3) {
  // h = 7168, 128 heads: query down 7168·1536 = 11,010,048; query up 1536·128·(128 + 64) =
  // 37,748,736; KV down 7168·(512 + 64) = 4,128,768; KV up 512·128·(128 + 128) = 16,777,216;
  // output 128·128·7168 = 117,440,512; the two latents' RMSNorms 1536 + 512 = 2,048.
  const TransformerSpec spec = DeepSeekV3();
  EXPECT_EQ(AttentionParameters(spec), 187'107'328);
  // On 2 tensor-parallel ranks the up and output projections split, the down ones do not:
  // 11,010,048 + 18,874,368 + 4,128,768 + 8,388,608 + 58,720,256 + 2,048.
  int64_t local = AttentionVectorElements(spec, 2);
  for (const auto& matrix : AttentionMatrices(spec, 2)) local += matrix[0] * matrix[1];
  EXPECT_EQ(local, 101'124'096);
}

TEST(MlaTest, DenseFirstLayersAndSharedExperts) {
  // 3 dense layers (FFN 18,432) then 58 MoE layers of 256 routed experts and one shared one.
  const TransformerSpec spec = DeepSeekV3();
  EXPECT_FALSE(spec.IsMoeLayer(2));
  EXPECT_TRUE(spec.IsMoeLayer(3));
  EXPECT_EQ(spec.MoeLayerCount(), 58);
  // A MoE layer: attention 187,107,328 + 256 routed and 1 shared SwiGLU experts of
  // 3·7168·2048 = 44,040,192 each + the router 7168·256 + two RMSNorms 2·7168.
  EXPECT_EQ(MoeLayerParameters(spec), 187'107'328 + 257LL * 44'040'192 + 7168 * 256 + 2 * 7168);
  EXPECT_EQ(DenseLayerParameters(spec), 187'107'328 + 3LL * 7168 * 18432 + 2 * 7168);
}

TEST(MlaTest, FlopsOfOneLayerAtOneSequence) {
  // One MoE layer, one sequence of s = 4096 on one rank. Projections: 2·s·(parameters of the
  // five matrices) = 2·4096·187,105,280. Core attention (forward, model FLOPs): QKᵀ over the
  // 192-wide query/key heads and PV over the 128-wide values, 2·s²·(192 + 128) per head, 128
  // heads.
  const TransformerSpec spec = DeepSeekV3();
  const TransformerShard shard{.micro_batch = 1,
                               .seq_len = 4096,
                               .dtype = DType::kBf16,
                               .tensor_parallel = 1,
                               .flash_attention = true};
  ASSERT_TRUE(ValidateShard(spec, shard).ok());
  const LayerOps ops = TransformerLayerOps(spec, 3, shard);
  const double s = 4096;
  const double projections =
      ForwardModelFlops(ops, "attn.q_down") + ForwardModelFlops(ops, "attn.q_up") +
      ForwardModelFlops(ops, "attn.kv_down") + ForwardModelFlops(ops, "attn.kv_up") +
      ForwardModelFlops(ops, "attn.proj");
  EXPECT_DOUBLE_EQ(projections, 2 * s * 187'105'280.0);
  EXPECT_DOUBLE_EQ(ForwardModelFlops(ops, "attn.core"), 2 * s * s * (192 + 128) * 128);
  // The shared expert runs every token through 3·7168·2048 weights: 2·s·44,040,192.
  EXPECT_DOUBLE_EQ(ForwardModelFlops(ops, "moe.shared"), 2 * s * 44'040'192.0);
  // On 2 tensor-parallel ranks each down-projection runs whole on both, its model FLOPs
  // counted half on each: the pair sums to the single rank's.
  TransformerShard two = shard;
  two.tensor_parallel = 2;
  const LayerOps half = TransformerLayerOps(spec, 3, two);
  EXPECT_DOUBLE_EQ(2 * ForwardModelFlops(half, "attn.q_down"),
                   ForwardModelFlops(ops, "attn.q_down"));
  EXPECT_DOUBLE_EQ(2 * ForwardModelFlops(half, "attn.core"), ForwardModelFlops(ops, "attn.core"));
}

TEST(MlaTest, KvCachePerTokenAsDeepSeekPublishes) {
  // DeepSeek-V2 §2.1.3 (Table 1): MLA caches the KV latent and the keys' rotary part,
  // (d_c + d_R)·l = (512 + 64)·61 = 35,136 elements a token, 70,272 bytes in BF16 (the "70 KB
  // per token" DeepSeek-V3's inference figures quote). Standard attention caches K and V:
  // Llama 3 70B's 2·8·128·80 = 163,840 elements, 327,680 bytes.
  EXPECT_EQ(KvCacheBytesPerToken(DeepSeekV3(), DType::kBf16), 70'272);
  Expected<ModelSpec> llama = ModelPreset("llama3-70b");
  ASSERT_TRUE(llama.ok());
  EXPECT_EQ(KvCacheBytesPerToken(llama->transformer, DType::kBf16), 327'680);
}

TEST(MlaTest, BadSpecsNameTheField) {
  Json json = Json::parse(R"({"preset": "deepseek-v3", "kv_heads": 8})");
  Expected<ModelSpec> model = ModelFromJson(json, "model");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.error().ToString(),
            "model.kv_heads: multi-head latent attention has a key and value per head (kv_heads "
            "= heads), got 8");
  json = Json::parse(R"({"family": "transformer", "layers": 2, "hidden": 256, "heads": 4,
                         "vocab": 100, "max_seq": 64, "mla": {"kv_lora_rank": 64}})");
  model = ModelFromJson(json, "model");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.error().ToString(), "model.mla.qk_nope_head_dim: missing required field");
}

}  // namespace
}  // namespace dtsim::models

namespace dtsim::models {
namespace {

const Op& ForwardOp(const LayerOps& ops, std::string_view suffix) {
  for (const Op& op : ops.forward) {
    if (op.name.ends_with(suffix)) return op;
  }
  ADD_FAILURE() << "no forward op " << suffix;
  return ops.forward.front();
}

const Op& BackwardOp(const LayerOps& ops, std::string_view suffix) {
  for (const Op& op : ops.backward) {
    if (op.name.ends_with(suffix)) return op;
  }
  ADD_FAILURE() << "no backward op " << suffix;
  return ops.backward.front();
}

// Megatron-Core's MLASelfAttention under tensor parallelism t = 2 with sequence parallelism,
// s = 4096 (T/t = 2048 tokens a rank), BF16.
TEST(MlaTest, UnderSequenceParallelismTheDownProjectionsRunOnTheShard) {
  const TransformerSpec spec = DeepSeekV3();
  TransformerShard shard{.micro_batch = 1,
                         .seq_len = 4096,
                         .dtype = DType::kBf16,
                         .tensor_parallel = 2,
                         .sequence_parallel = true,
                         .flash_attention = true};
  ASSERT_TRUE(ValidateShard(spec, shard).ok());
  const LayerOps ops = TransformerLayerOps(spec, 3, shard);
  // The duplicated down-projections over the rank's 2048 tokens: 2 · 2048 · 7168 · 1536 FLOPs,
  // all of them model FLOPs (the two ranks together project the sequence once).
  const Op& q_down = ForwardOp(ops, "attn.q_down");
  EXPECT_DOUBLE_EQ(q_down.flops, 2.0 * 2048 * 7168 * 1536);
  EXPECT_DOUBLE_EQ(q_down.model_flops, q_down.flops);
  EXPECT_DOUBLE_EQ(ForwardOp(ops, "attn.kv_down").flops, 2.0 * 2048 * 7168 * (512 + 64));
  // The up-projections save their latent's shard, 2048 · 1536 · 2 B (and Q: 4096 tokens × 64
  // heads × 192 × 2 B), and their backward gathers it again beside the dgrad.
  EXPECT_DOUBLE_EQ(ForwardOp(ops, "attn.q_up").saved_bytes,
                   2048.0 * 1536 * 2 + 4096.0 * 64 * 192 * 2);
  EXPECT_EQ(BackwardOp(ops, "attn.q_up.dgrad").regather_bytes, 2048 * 1536 * 2);
  EXPECT_EQ(BackwardOp(ops, "attn.kv_up.dgrad").regather_bytes, 2048 * 512 * 2);
  // Their input gradients are reduced at their widths — the query latent's, then the KV
  // latent's with the rotary part's — after their wgrads; the query's (the last of the block in
  // backward) gathers the previous block's hidden-state gradient with it, the KV's nothing. The
  // down-projections' backward has no collective.
  const Op& q_up_wgrad = BackwardOp(ops, "attn.q_up.wgrad");
  EXPECT_EQ(q_up_wgrad.boundary, Op::Boundary::kTensorReduce);
  EXPECT_EQ(q_up_wgrad.reduce_columns, 1536);
  EXPECT_EQ(q_up_wgrad.gather_columns, 0);
  const Op& kv_up_wgrad = BackwardOp(ops, "attn.kv_up.wgrad");
  EXPECT_EQ(kv_up_wgrad.reduce_columns, 512 + 64);
  EXPECT_EQ(kv_up_wgrad.gather_columns, Op::kNoGather);
  EXPECT_EQ(BackwardOp(ops, "attn.q_down.wgrad").boundary, Op::Boundary::kNone);
  // The MoE block's last reduction gathers the next attention's input: 1536 + 512 + 64.
  EXPECT_EQ(ForwardOp(ops, "moe.combine").gather_columns, 2112);

  // Without sequence parallelism the down-projections run over all 4096 tokens on each rank,
  // half their model FLOPs counted on each, and nothing is re-gathered.
  shard.sequence_parallel = false;
  const LayerOps whole = TransformerLayerOps(spec, 3, shard);
  EXPECT_DOUBLE_EQ(ForwardOp(whole, "attn.q_down").flops, 2.0 * 4096 * 7168 * 1536);
  EXPECT_DOUBLE_EQ(ForwardOp(whole, "attn.q_down").model_flops, 4096.0 * 7168 * 1536);
  EXPECT_EQ(BackwardOp(whole, "attn.q_up.dgrad").regather_bytes, 0);
}

}  // namespace
}  // namespace dtsim::models
