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
