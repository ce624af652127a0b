// QK norm (TransformerSpec::qk_norm; Megatron-Core's --qk-layernorm, Qwen3, Gemma 3): its
// parameters, the bytes each layer keeps for it under each recompute policy, where it runs in
// the layer, and what reads it — each expectation derived in its comment.
#include <gtest/gtest.h>

#include <string>

#include "models/eager_allocations.h"
#include "models/hf_config.h"
#include "models/memory.h"
#include "models/model_spec.h"
#include "models/ops.h"
#include "models/parameters.h"
#include "tests/models/preset_helpers.h"

namespace dtsim::models {
namespace {

// Hidden 1,024, 16 heads of 64 over 4 key-value heads, RMSNorm (Llama 3's preset at a toy size).
TransformerSpec Toy(bool qk_norm) {
  TransformerSpec spec = ToyLlama(2, 512);
  spec.hidden = 1024;
  spec.heads = 16;
  spec.kv_heads = 4;
  spec.qk_norm = qk_norm;
  return spec;
}

TEST(QkNormTest, OneWeightVectorOverHeadDimForQueriesAndKeysOnEveryRank) {
  // RMSNorm: a weight of head_dim = 64 for the queries and one for the keys, 2 · 64 = 128 a
  // layer, whatever the tensor-parallel split (the heads share them; every rank holds both).
  // LayerNorm adds a bias to each: 4 · 64 = 256.
  for (const int t : {1, 2, 4}) {
    EXPECT_EQ(
        LayerParameterCount(Toy(true), t, 1, t, 0) - LayerParameterCount(Toy(false), t, 1, t, 0),
        128)
        << "t = " << t;
  }
  TransformerSpec with = Toy(true);
  TransformerSpec without = Toy(false);
  with.norm = without.norm = Norm::kLayerNorm;
  EXPECT_EQ(AttentionParameters(with) - AttentionParameters(without), 256);
}

TEST(QkNormTest, KeepsTheProjectedQueriesAndKeysUnlessTheLayerIsRecomputed) {
  // b = 2, s = 512 on 2 tensor-parallel ranks, bf16: the rank's 8 query heads and 2 key heads
  // of 64 are q = 512 and kv = 128 elements a token; the norms save their inputs, 1,024 tokens
  // · (512 + 128) · 2 B = 1,310,720 B a layer more. Megatron's selective recompute re-runs the
  // core attention only, so it keeps them too; full recompute keeps the layer input alone.
  const TransformerShard shard{
      .micro_batch = 2, .seq_len = 512, .dtype = DType::kBf16, .tensor_parallel = 2};
  const LayerOps with = TransformerLayerOps(Toy(true), 0, shard);
  const LayerOps without = TransformerLayerOps(Toy(false), 0, shard);
  constexpr int64_t kSaved = 1024 * (512 + 128) * 2;
  for (const Recompute policy : {Recompute::kNone, Recompute::kSelective}) {
    EXPECT_EQ(LayerActivationBytes(with, policy, shard, 1024) -
                  LayerActivationBytes(without, policy, shard, 1024),
              kSaved);
  }
  EXPECT_EQ(LayerActivationBytes(with, Recompute::kFull, shard, 1024),
            LayerActivationBytes(without, Recompute::kFull, shard, 1024));
}

TEST(QkNormTest, RunsBetweenTheProjectionAndTheRotaryEmbedding) {
  const TransformerShard shard{.micro_batch = 1, .seq_len = 256};
  const LayerOps layer = TransformerLayerOps(Toy(true), 0, shard);
  std::string order;
  for (const Op& op : layer.forward) {
    for (const char* name : {"attn.qkv", "attn.q_norm", "attn.k_norm", "attn.rotary"}) {
      if (op.name.ends_with(name)) order += std::string(name) + " ";
    }
  }
  EXPECT_EQ(order, "attn.qkv attn.q_norm attn.k_norm attn.rotary ");
}

TEST(QkNormTest, LatentAttentionRefusesItAndTheEagerReplayLeavesItToTheAnalyticModel) {
  Expected<ModelSpec> mla =
      ModelFromJson(Json::parse(R"({"preset": "deepseek-v3", "qk_norm": true})"), "model");
  ASSERT_FALSE(mla.ok());
  EXPECT_NE(mla.error().ToString().find("model.qk_norm"), std::string::npos)
      << mla.error().ToString();
  // The replay has no QK norm: it says so, and the memory model prices the plan analytically.
  TransformerSpec spec = Toy(true);
  spec.tied_embeddings = true;
  const Expected<EagerPeaks> peaks =
      ReplayEagerTraining(spec, EagerRun{.micro_batch = 1, .seq_len = 256});
  ASSERT_FALSE(peaks.ok());
  EXPECT_NE(peaks.error().ToString().find("QK norms"), std::string::npos)
      << peaks.error().ToString();
}

TEST(QkNormTest, QwenThreeConfigsAndPresetsHaveIt) {
  Expected<Json> qwen3 = ModelJsonFromHfConfig(Json::parse(R"({"model_type": "qwen3",
      "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
      "num_key_value_heads": 2, "vocab_size": 128, "max_position_embeddings": 64,
      "intermediate_size": 128, "head_dim": 32})"));
  ASSERT_TRUE(qwen3.ok()) << qwen3.error().ToString();
  EXPECT_EQ((*qwen3)["qk_norm"], true);
  Expected<Json> llama = ModelJsonFromHfConfig(Json::parse(R"({"model_type": "llama",
      "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
      "vocab_size": 128, "max_position_embeddings": 64, "intermediate_size": 128})"));
  ASSERT_TRUE(llama.ok()) << llama.error().ToString();
  EXPECT_FALSE(llama->contains("qk_norm"));
  EXPECT_TRUE(PresetTransformer("qwen3-30b-a3b").qk_norm);
  EXPECT_FALSE(PresetTransformer("llama3-8b").qk_norm);
}

}  // namespace
}  // namespace dtsim::models
