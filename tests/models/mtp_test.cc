// Multi-token prediction (DeepSeek-V3 §2.2, Megatron-Core's MTP block): the module's parameters,
// its ops (a layer of the last layer's kind behind its own input), the output layer's extra
// heads, where the modules sit in the pipeline and what the last stage holds for them; each
// expectation derived in a comment from DeepSeek-V3's released config.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "models/memory.h"
#include "models/model_spec.h"
#include "models/ops.h"
#include "models/parameters.h"
#include "tests/models/preset_helpers.h"

namespace dtsim::models {
namespace {

TransformerSpec DeepSeekV3() { return PresetTransformer("deepseek-v3"); }

double ForwardModelFlops(const LayerOps& ops, std::string_view prefix = "") {
  double flops = 0;
  for (const Op& op : ops.forward) {
    if (op.name.starts_with(prefix)) flops += op.model_flops;
  }
  return flops;
}

TransformerShard Shard(int tensor_parallel) {
  return {.micro_batch = 1,
          .seq_len = 4096,
          .dtype = DType::kBf16,
          .tensor_parallel = tensor_parallel,
          .flash_attention = true};
}

TEST(MtpTest, DeepSeekV3ModuleParameters) {
  // One module: a MoE layer (11,507,286,016: mla_test's MoeLayerParameters), eh_proj
  // 2·7168 × 7168 = 102,760,448 and enorm, hnorm and its final norm, 3·7168 = 21,504:
  // 11,610,067,968. The main model stays 671B as published.
  const TransformerSpec spec = DeepSeekV3();
  ASSERT_EQ(spec.mtp_layers, 1);
  EXPECT_EQ(MoeLayerParameters(spec), 11'507'286'016);
  const ParameterCount count = CountParameters(ModelSpec{.transformer = spec});
  EXPECT_EQ(count.mtp, 11'610'067'968);
  EXPECT_NEAR(static_cast<double>(count.total) / 671e9, 1.0, 0.001);
  // The released checkpoint (685B: 671B + the 14B module) stores the module with its own
  // copies of the embedding and the output layer, 2 · 129,280 · 7168 = 1,853,358,080 more.
  const double checkpoint =
      static_cast<double>(count.total + count.mtp) + 2.0 * spec.vocab * spec.hidden;
  EXPECT_NEAR(checkpoint / 685e9, 1.0, 0.001);
}

TEST(MtpTest, ModuleIsALayerOfTheLastKindBehindItsInput) {
  const TransformerSpec spec = DeepSeekV3();
  EXPECT_TRUE(spec.IsMtpLayer(61));
  EXPECT_FALSE(spec.IsMtpLayer(60));
  EXPECT_TRUE(spec.IsMoeLayer(61));  // the last layer, 60, is a MoE layer
  EXPECT_EQ(spec.LayerKind(61), TransformerSpec::kMtpKind);
  EXPECT_EQ(spec.AllLayers(), 62);
  // Forward on one rank, s = 4096: the MoE layer's FLOPs, plus eh_proj's 2·s·(2·7168)·7168.
  const LayerOps layer = TransformerLayerOps(spec, 60, Shard(1));
  const LayerOps module = TransformerLayerOps(spec, 61, Shard(1));
  const double s = 4096;
  EXPECT_DOUBLE_EQ(ForwardModelFlops(module, "mtp.eh_proj"), 2 * s * 2 * 7168 * 7168);
  EXPECT_DOUBLE_EQ(ForwardModelFlops(module),
                   ForwardModelFlops(layer) + ForwardModelFlops(module, "mtp.eh_proj"));
  EXPECT_EQ(module.forward.front().name, "mtp.embedding");
  // On 2 tensor-parallel ranks eh_proj is column-parallel: half its GEMM on each.
  const LayerOps half = TransformerLayerOps(spec, 61, Shard(2));
  EXPECT_DOUBLE_EQ(2 * ForwardModelFlops(half, "mtp.eh_proj"),
                   ForwardModelFlops(module, "mtp.eh_proj"));
}

TEST(MtpTest, OutputLayerRunsEveryModulesHead) {
  // Each module adds a logits GEMM over the V/t = 129,280 rows (a multiple of 128):
  // 2·s·7168·129,280 forward, and its loss over s × V logits.
  TransformerSpec spec = DeepSeekV3();
  const LayerOps with = OutputOps(spec, Shard(1));
  spec.mtp_layers = 0;
  const LayerOps without = OutputOps(spec, Shard(1));
  const double s = 4096;
  EXPECT_DOUBLE_EQ(ForwardModelFlops(with) - ForwardModelFlops(without), 2 * s * 7168 * 129'280);
  // Saved for backward: the norm's and the GEMM's input (2·s·h B each) and the fp32 softmax
  // (4·s·V B).
  int64_t saved = 0;
  for (const Op& op : with.forward) saved += op.saved_bytes;
  for (const Op& op : without.forward) saved -= op.saved_bytes;
  EXPECT_EQ(saved, 2 * 2 * 4096 * 7168 + int64_t{4} * 4096 * 129'280);
}

TEST(MtpTest, ModulesRunOnTheLastModelChunk) {
  // 61 layers as Megatron-Bridge's DeepSeek-V3 recipe splits them on 8 × 4 chunks: 1, 2, …, 2
  // and the loss alone; the module joins the loss ("…|mL").
  const TransformerSpec spec = DeepSeekV3();
  std::vector<int> counts(32, 2);
  counts.front() = 1;
  counts.back() = 0;
  EXPECT_EQ(ChunkLayerIndices(spec, 8, 4, 7, 3, counts), std::vector<int>{61});
  EXPECT_EQ(ChunkLayerIndices(spec, 8, 4, 6, 3, counts), (std::vector<int>{59, 60}));
  const std::vector<int> first = StageLayerIndices(spec, 8, 4, 0, counts);
  EXPECT_EQ(std::count(first.begin(), first.end(), 61), 0);
  // Uniform: 60 layers on 4 stages hold 15 each, the last stage one more index.
  TransformerSpec even = spec;
  even.layers = 60;
  EXPECT_EQ(StageLayerIndices(even, 4, 1, 3).size(), 16u);
  EXPECT_EQ(StageLayerIndices(even, 4, 1, 3).back(), 60);
}

TEST(MtpTest, LastStageKeepsAnEmbeddingForTheModules) {
  TransformerSpec spec = DeepSeekV3();  // untied
  EXPECT_EQ(OutputTables(spec, 7), 2);  // the output layer and the embedding's copy
  EXPECT_EQ(OutputTables(spec, 0), 1);  // one stage: the embedding is there already
  spec.tied_embeddings = true;
  EXPECT_EQ(OutputTables(spec, 7), 1);  // the tied copy serves both
  EXPECT_EQ(OutputTables(spec, 0), 0);
  spec.mtp_layers = 0;
  spec.tied_embeddings = false;
  EXPECT_EQ(OutputTables(spec, 7), 1);
  // The last of 8 stages on TP 2 × EP 8 holds, with the module, its layer (MoE: attention on 2
  // ranks 101,124,096 + 256/8 = 32 local experts, each split over the 2 tensor-parallel ranks,
  // of 22,020,096 + the router 1,835,008 + the shared expert's half 22,020,096 + two norms
  // 14,336), eh_proj's half 51,380,224, three norms 21,504, and the embedding's V/t × h =
  // 64,640 · 7168 = 463,339,520.
  const ModelSpec with{.transformer = DeepSeekV3()};
  ModelSpec without = with;
  without.transformer.mtp_layers = 0;
  TransformerShard shard = Shard(2);
  shard.expert_parallel = 8;
  const MemoryPlan plan{.shard = shard, .pipeline_stages = 8, .stage = 7, .chunk_layers = {}};
  EXPECT_EQ(StageParameterCount(with, plan) - StageParameterCount(without, plan),
            101'124'096 + 32LL * 22'020'096 + 1'835'008 + 22'020'096 + 14'336 + 51'380'224 +
                21'504 + 463'339'520);
}

TEST(MtpTest, ModuleActivationsCountOnceAsTheOutputLayers) {
  // 60 layers on 2 stages × 2 virtual stages, 8 micro-batches: the last stage keeps more than
  // one micro-batch of its layers in flight, but the module runs in its last chunk, whose
  // backward follows its forward: one micro-batch of the module's and its head's saved bytes.
  TransformerSpec spec = DeepSeekV3();
  spec.layers = 60;
  const ModelSpec with{.transformer = spec};
  ModelSpec without = with;
  without.transformer.mtp_layers = 0;
  TransformerShard shard = Shard(2);
  shard.expert_parallel = 8;
  const MemoryPlan plan{.shard = shard,
                        .schedule = PipelineSchedule::kInterleaved,
                        .pipeline_stages = 2,
                        .virtual_stages = 2,
                        .stage = 1,
                        .microbatches = 8};
  const Expected<MemoryBreakdown> a = EstimateMemory(with, plan);
  const Expected<MemoryBreakdown> b = EstimateMemory(without, plan);
  ASSERT_TRUE(a.ok()) << a.error().ToString();
  ASSERT_TRUE(b.ok()) << b.error().ToString();
  EXPECT_GT(a->microbatches_in_flight, 1);
  int64_t head = 0;
  for (const Op& op : OutputOps(with.transformer, shard).forward) head += op.saved_bytes;
  for (const Op& op : OutputOps(without.transformer, shard).forward) head -= op.saved_bytes;
  EXPECT_EQ(a->activations - b->activations,
            LayerActivationBytes(TransformerLayerOps(spec, 60, shard), Recompute::kNone, shard,
                                 spec.hidden) +
                head);
}

TEST(MtpTest, ConfigErrors) {
  Json json = {{"preset", "deepseek-v3"}, {"mtp_layers", -1}};
  Expected<ModelSpec> negative = ModelFromJson(json, "model");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.error().ToString().find("model.mtp_layers"), std::string::npos);
  json = {{"preset", "bert-large"}, {"mtp_layers", 1}};
  Expected<ModelSpec> encoder = ModelFromJson(json, "model");
  ASSERT_FALSE(encoder.ok());
  EXPECT_NE(encoder.error().ToString().find("causal (decoder) models"), std::string::npos);
  Expected<ModelSpec> llama = ModelPreset("llama2-7b");
  ASSERT_TRUE(llama.ok());
  llama->transformer.mtp_layers = 1;
  TransformerShard grid = Shard(4);
  grid.tensor_layout = TensorLayout::k2D;
  const Status status = ValidateShard(llama->transformer, grid);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().ToString().find("multi-token prediction"), std::string::npos);
}

}  // namespace
}  // namespace dtsim::models
