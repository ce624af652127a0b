// Sliding-window attention (GPT-OSS, Mistral, Gemma 3's pattern): the attention op's FLOPs on
// windowed and full layers, derived in comments, which layers a pattern windows, and the checks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "models/model_spec.h"
#include "models/ops.h"

namespace dtsim::models {
namespace {

const Op& Core(const LayerOps& ops) {
  for (const Op& op : ops.forward) {
    if (op.name == "attn.core") return op;
  }
  ADD_FAILURE() << "no attn.core";
  return ops.forward.front();
}

TEST(SlidingWindowTest, GptOssAlternatesWindowedAndFullLayers) {
  Expected<ModelSpec> model = ModelPreset("gpt-oss-120b");
  ASSERT_TRUE(model.ok());
  const TransformerSpec& spec = model->transformer;
  EXPECT_EQ(spec.WindowOf(0), 128);
  EXPECT_EQ(spec.WindowOf(1), 0);
  EXPECT_NE(spec.LayerKind(0), spec.LayerKind(1));
  const TransformerShard shard{.micro_batch = 1,
                               .seq_len = 4096,
                               .dtype = DType::kBf16,
                               .tensor_parallel = 1,
                               .flash_attention = true};
  ASSERT_TRUE(ValidateShard(spec, shard).ok());
  const double s = 4096, w = 128, heads = 64, d = 64;
  // Windowed layer 0: each query scores its last w keys — s·w pairs a head, 2·(d + d_v) FLOPs
  // a pair forward (QKᵀ and PV): model FLOPs 2·128·64·4096·128; the causal kernel executes
  // Σ_i min(i + 1, w) = s·w − w(w − 1)/2 pairs of them.
  const LayerOps layer0 = TransformerLayerOps(spec, 0, shard);
  const Op& windowed = Core(layer0);
  EXPECT_DOUBLE_EQ(windowed.model_flops, 2 * (d + d) * heads * s * w);
  EXPECT_DOUBLE_EQ(windowed.flops, 2 * (d + d) * heads * (s * w - w * (w - 1) / 2));
  EXPECT_EQ(windowed.signature.Dim("window"), 128);
  // Full layer 1: s² pairs a head, half of them executed under the causal mask.
  const LayerOps layer1 = TransformerLayerOps(spec, 1, shard);
  const Op& full = Core(layer1);
  EXPECT_DOUBLE_EQ(full.model_flops, 2 * (d + d) * heads * s * s);
  EXPECT_DOUBLE_EQ(full.flops, full.model_flops / 2);
  EXPECT_EQ(full.signature.Dim("window"), 0);
  // A window no shorter than the sequence is full attention.
  TransformerShard short_sequence = shard;
  short_sequence.seq_len = 128;
  const LayerOps short_layer = TransformerLayerOps(spec, 0, short_sequence);
  const Op& whole = Core(short_layer);
  EXPECT_DOUBLE_EQ(whole.flops, whole.model_flops / 2);
}

// Under a2a context parallelism (c = 2) a rank attends the whole sequence with 1/c of the
// heads: GPT-OSS's windowed layer scores 32 heads × s·w pairs, its full layer 32 heads × s².
TEST(SlidingWindowTest, ContextParallelA2aKeepsTheWindow) {
  Expected<ModelSpec> model = ModelPreset("gpt-oss-120b");
  ASSERT_TRUE(model.ok());
  const TransformerSpec& spec = model->transformer;
  const TransformerShard cp{.micro_batch = 1,
                            .seq_len = 4096,
                            .dtype = DType::kBf16,
                            .tensor_parallel = 1,
                            .context_parallel = 2,
                            .context_comm = ContextComm::kAllToAll,
                            .flash_attention = true};
  ASSERT_TRUE(ValidateShard(spec, cp).ok());
  const double s = 4096, w = 128, heads = 64.0 / 2, d = 64;
  const LayerOps layer0 = TransformerLayerOps(spec, 0, cp);
  const Op& windowed = Core(layer0);
  EXPECT_DOUBLE_EQ(windowed.model_flops, 2 * (d + d) * heads * s * w);
  EXPECT_DOUBLE_EQ(windowed.flops, 2 * (d + d) * heads * (s * w - w * (w - 1) / 2));
  EXPECT_EQ(windowed.signature.Dim("heads"), 32);
  EXPECT_EQ(windowed.signature.Dim("seq"), 4096);
  const LayerOps layer1 = TransformerLayerOps(spec, 1, cp);
  EXPECT_DOUBLE_EQ(Core(layer1).model_flops, 2 * (d + d) * heads * s * s);
}

TEST(SlidingWindowTest, ChecksNameTheField) {
  Expected<ModelSpec> model = ModelPreset("gpt-oss-120b");
  ASSERT_TRUE(model.ok());
  const TransformerShard cp{.micro_batch = 1,
                            .seq_len = 4096,
                            .dtype = DType::kBf16,
                            .tensor_parallel = 1,
                            .context_parallel = 2,
                            .flash_attention = true};
  Status status = ValidateShard(model->transformer, cp);  // p2p, the default
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.error().ToString(),
              testing::HasSubstr("sliding-window attention under context parallelism needs "
                                 "\"comm\": \"a2a\""));
  const Json bert = Json::parse(R"({"preset": "bert-base", "sliding_window": 128})");
  Expected<ModelSpec> encoder = ModelFromJson(bert, "model");
  ASSERT_FALSE(encoder.ok());
  EXPECT_EQ(encoder.error().ToString(),
            "model.sliding_window: sliding-window attention is built for causal (decoder) "
            "models, got 128");
}

// Gemma 3's 5:1 (Hugging Face's sliding_window_pattern 6, Megatron-Core's
// window_attn_skip_freq 6): layers 5, 11, … keep full attention, the rest are windowed; a list
// places them one a layer (Qwen2's first max_window_layers full).
TEST(SlidingWindowTest, PatternsPlaceTheFullLayers) {
  const Json every_sixth = Json::parse(R"({"preset": "llama3-8b", "sliding_window": 1024,
                                            "sliding_window_pattern": 6})");
  Expected<ModelSpec> gemma_like = ModelFromJson(every_sixth, "model");
  ASSERT_TRUE(gemma_like.ok()) << gemma_like.error().ToString();
  std::vector<int> full;
  for (int i = 0; i < 32; ++i) {
    if (gemma_like->transformer.WindowOf(i) == 0) full.push_back(i);
  }
  EXPECT_THAT(full, testing::ElementsAre(5, 11, 17, 23, 29));
  EXPECT_EQ(gemma_like->transformer.WindowOf(30), 1024);

  const Json listed = Json::parse(R"({"preset": "llama3-8b", "layers": 4, "sliding_window": 64,
                                       "sliding_window_pattern": [0, 0, 1, 1]})");
  Expected<ModelSpec> qwen_like = ModelFromJson(listed, "model");
  ASSERT_TRUE(qwen_like.ok()) << qwen_like.error().ToString();
  EXPECT_EQ(qwen_like->transformer.WindowOf(1), 0);
  EXPECT_EQ(qwen_like->transformer.WindowOf(2), 64);
  // Windowed and full layers price apart.
  EXPECT_NE(qwen_like->transformer.LayerKind(1), qwen_like->transformer.LayerKind(2));

  // No pattern: every layer windowed (Mistral).
  const Json mistral = Json::parse(R"({"preset": "llama3-8b", "sliding_window": 4096})");
  Expected<ModelSpec> every = ModelFromJson(mistral, "model");
  ASSERT_TRUE(every.ok());
  EXPECT_EQ(every->transformer.WindowOf(31), 4096);
}

TEST(SlidingWindowTest, PatternErrorsNameTheField) {
  const auto error = [](const char* text) {
    Expected<ModelSpec> model = ModelFromJson(Json::parse(text), "model");
    return model.ok() ? std::string("ok") : model.error().ToString();
  };
  EXPECT_THAT(error(R"({"preset": "llama3-8b", "sliding_window": 64,
                        "sliding_window_pattern": 1})"),
              testing::HasSubstr("model.sliding_window_pattern: 1 would keep every layer full"));
  EXPECT_EQ(error(R"({"preset": "llama3-8b", "sliding_window": 64,
                      "sliding_window_pattern": [1, 0]})"),
            "model.sliding_window_pattern: expected one flag a layer (1 windowed, 0 full): 32 "
            "layers, 2 flags");
  EXPECT_EQ(error(R"({"preset": "llama3-8b", "sliding_window": 64,
                      "sliding_window_pattern": []})"),
            "model.sliding_window_pattern: expected one flag a layer (1 windowed, 0 full), got "
            "[]");
  EXPECT_THAT(error(R"({"preset": "llama3-8b", "layers": 2, "sliding_window": 64,
                        "sliding_window_pattern": [1, 2]})"),
              testing::HasSubstr("model.sliding_window_pattern[1]"));
  EXPECT_THAT(error(R"({"preset": "llama3-8b", "sliding_window_pattern": 2})"),
              testing::HasSubstr("model.sliding_window_pattern: places windows, but the model "
                                 "has none: give sliding_window too"));
  EXPECT_THAT(error(R"({"preset": "llama3-8b", "sliding_window": 64,
                        "sliding_window_every": 2})"),
              testing::HasSubstr("model.sliding_window_every: replaced by "
                                 "sliding_window_pattern"));
}

}  // namespace
}  // namespace dtsim::models
