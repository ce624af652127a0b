// Local attention: sliding windows (GPT-OSS, Mistral, Gemma 3's pattern) and Llama 4's attention
// chunks — the attention op's FLOPs on local and full layers, derived in comments, which layers
// a pattern makes local, the Llama 4 presets, and the checks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "models/model_spec.h"
#include "models/ops.h"
#include "models/parameters.h"

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
                                 "has none: give sliding_window (or attention_chunk) too"));
  EXPECT_THAT(error(R"({"preset": "llama3-8b", "sliding_window": 64,
                        "sliding_window_every": 2})"),
              testing::HasSubstr("model.sliding_window_every: replaced by "
                                 "sliding_window_pattern"));
}

TransformerShard Shard(int64_t seq_len) {
  return {.micro_batch = 1,
          .seq_len = seq_len,
          .dtype = DType::kBf16,
          .tensor_parallel = 8,
          .flash_attention = true};
}

// Llama 4 Scout on TP 8: 5 of its 40 heads a rank, head dim 128. Layers 0-2 chunked (8,192
// tokens), layer 3 full.
TEST(ChunkedAttentionTest, ChunksAreCausalEachOnTheirOwn) {
  Expected<ModelSpec> model = ModelPreset("llama4-scout-17b-16e");
  ASSERT_TRUE(model.ok());
  const TransformerSpec& spec = model->transformer;
  EXPECT_TRUE(spec.chunked_attention);
  EXPECT_EQ(spec.WindowOf(0), 8192);
  EXPECT_EQ(spec.WindowOf(3), 0);
  EXPECT_EQ(spec.WindowedLayers(), 36);
  const TransformerShard shard = Shard(20480);
  ASSERT_TRUE(ValidateShard(spec, shard).ok());
  // s = 20,480 = 2 chunks of c = 8,192 and one of r = 4,096. Model FLOPs count each chunk's
  // pairs unmasked, 2·c² + r² a head; the kernel executes each chunk causally,
  // 2·c(c+1)/2 + r(r+1)/2; 2·(d + d_v) = 512 FLOPs a pair forward.
  const double c = 8192, r = 4096, heads = 5, d = 128, s = 20480;
  const LayerOps layer0 = TransformerLayerOps(spec, 0, shard);
  const Op& chunked = Core(layer0);
  EXPECT_DOUBLE_EQ(chunked.model_flops, 2 * (d + d) * heads * (2 * c * c + r * r));
  EXPECT_DOUBLE_EQ(chunked.flops, 2 * (d + d) * heads * (2 * c * (c + 1) / 2 + r * (r + 1) / 2));
  EXPECT_EQ(chunked.signature.Dim("chunk"), 8192);
  EXPECT_EQ(chunked.signature.Dim("window"), 0);
  // Backward: 2·(3d + 2d_v) = 1,280 FLOPs a pair over the same pairs.
  double backward = 0;
  for (const Op& op : layer0.backward) {
    if (op.kind == OpKind::kFlashAttention) backward += op.flops;
  }
  EXPECT_DOUBLE_EQ(backward, 2 * (3 * d + 2 * d) * heads * (2 * c * (c + 1) / 2 + r * (r + 1) / 2));
  // Full layer 3: s² pairs a head, half executed under the causal mask.
  const LayerOps layer3 = TransformerLayerOps(spec, 3, shard);
  const Op& full = Core(layer3);
  EXPECT_DOUBLE_EQ(full.model_flops, 2 * (d + d) * heads * s * s);
  EXPECT_DOUBLE_EQ(full.flops, full.model_flops / 2);
  // A sequence no longer than a chunk is plain causal attention.
  const LayerOps short_layer = TransformerLayerOps(spec, 0, Shard(8192));
  const Op& whole = Core(short_layer);
  EXPECT_DOUBLE_EQ(whole.flops, whole.model_flops / 2);
  EXPECT_EQ(whole.signature.Dim("chunk"), 0);
}

// Maverick: 128 experts on every second layer (1, 3, …), dense MLPs of 16,384 between; 17B
// parameters a token either way.
TEST(ChunkedAttentionTest, LlamaFourPresets) {
  Expected<ModelSpec> maverick = ModelPreset("llama4-maverick-17b-128e");
  ASSERT_TRUE(maverick.ok());
  const TransformerSpec& t = maverick->transformer;
  EXPECT_FALSE(t.IsMoeLayer(0));
  EXPECT_TRUE(t.IsMoeLayer(1));
  EXPECT_EQ(t.MoeLayerCount(), 24);
  // Attention 48·(2·5120·5120 + 2·5120·1024) = 3,019,898,880; MoE layers 24·(128 + 1)·3·5120·
  // 8192 + routers 24·5120·128; dense 24·3·5120·16384; norms 48·2·5120 + 5120 (no QK norm:
  // use_qk_norm false in its config); embeddings 2·202048·5120.
  const double attention = 48.0 * (2 * 5120.0 * 5120 + 2 * 5120.0 * 1024);
  const double moe = 24.0 * 129 * 3 * 5120 * 8192 + 24.0 * 5120 * 128;
  const double dense = 24.0 * 3 * 5120 * 16384;
  const double norms = 48.0 * 2 * 5120 + 5120;
  const double embeddings = 2.0 * 202048 * 5120;
  EXPECT_DOUBLE_EQ(static_cast<double>(CountParameters(*maverick).total),
                   attention + moe + dense + norms + embeddings);
}

TEST(ChunkedAttentionTest, ChecksNameTheField) {
  Expected<ModelSpec> model = ModelPreset("llama4-scout-17b-16e");
  ASSERT_TRUE(model.ok());
  TransformerShard cp = Shard(16384);
  cp.tensor_parallel = 4;   // a2a splits the 40 heads TP × CP = 8 ways
  cp.context_parallel = 2;  // p2p, the default
  const Status status = ValidateShard(model->transformer, cp);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.error().ToString(),
              testing::HasSubstr("chunked attention under context parallelism needs \"comm\": "
                                 "\"a2a\""));
  cp.context_comm = ContextComm::kAllToAll;
  EXPECT_TRUE(ValidateShard(model->transformer, cp).ok());
  const auto error = [](const char* json) {
    Expected<ModelSpec> m = ModelFromJson(Json::parse(json), "model");
    return m.ok() ? std::string() : m.error().ToString();
  };
  EXPECT_EQ(error(R"({"preset": "llama3-8b", "sliding_window": 128, "attention_chunk": 256})"),
            "model.attention_chunk: a model has sliding windows or attention chunks: give one or "
            "the other");
  EXPECT_EQ(error(R"({"preset": "bert-base", "attention_chunk": 128})"),
            "model.attention_chunk: chunked attention is built for causal (decoder) models, got "
            "128");
  // A window replaces a preset's chunks, and chunks a preset's window.
  Expected<ModelSpec> windowed = ModelFromJson(
      Json::parse(R"({"preset": "llama4-scout-17b-16e", "sliding_window": 4096})"), "model");
  ASSERT_TRUE(windowed.ok());
  EXPECT_FALSE(windowed->transformer.chunked_attention);
  Expected<ModelSpec> chunked =
      ModelFromJson(Json::parse(R"({"preset": "gpt-oss-120b", "attention_chunk": 4096})"), "model");
  ASSERT_TRUE(chunked.ok());
  EXPECT_TRUE(chunked->transformer.chunked_attention);
  EXPECT_EQ(chunked->transformer.window_full_every, 2);
}

}  // namespace
}  // namespace dtsim::models
