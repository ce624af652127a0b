// Uneven pipeline stages: "layers": "balanced" (dtsim chooses the counts by cost) and given
// counts. The balanced split is checked against brute force over every contiguous split.
#include "strategies/stage_balance.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "models/memory.h"
#include "strategies/config.h"
#include "strategies/pass_times.h"
#include "strategies/simulate.h"
#include "strategies/transformer_iteration.h"
#include "tests/strategies/simulate_helpers.h"

namespace dtsim::strategies {
namespace {

using testing::HasSubstr;

// 12 layers of hidden 1024 and a 65,536-token vocabulary: the output layer's forward,
// 2·b·s·h·V FLOPs, is V/(12h + 2s) ≈ 4.6 layers' worth (a layer: 24·b·s·h² + 4·b·s²·h), so
// uniform stages of 3 layers leave the last stage far the slowest.
Json HeavyOutputConfig(const Json& layers) {
  Json json = Json::parse(R"({
    "model": {"family": "transformer", "layers": 12, "hidden": 1024, "heads": 16,
              "vocab": 65536, "max_seq": 1024, "tied_embeddings": false},
    "training": {"global_batch": 32, "micro_batch": 1, "seq_len": 1024},
    "cluster": {"preset": "dgx-a100", "gpu": "a100-sxm4-80gb", "nodes": 1},
    "parallelism": {"data": 1, "tensor": 2, "pipeline": {"size": 4}}
  })");
  json["parallelism"]["pipeline"]["layers"] = layers;
  return json;
}

// Work of one micro-batch on each stage of `counts`, as BalanceStageLayers weighs it.
std::vector<int64_t> StageWork(const SimulationConfig& config, const PassTimes& times,
                               const std::vector<int>& counts) {
  const auto work = [](const PieceTimes& piece) {
    return (piece.forward + piece.backward + piece.recompute + piece.forward_grid +
            piece.backward_grid + piece.recompute_grid)
        .ns();
  };
  std::vector<int64_t> stages;
  int layer = 0;
  for (size_t s = 0; s < counts.size(); ++s) {
    int64_t total = s == 0 ? work(times.embedding) : 0;
    if (s + 1 == counts.size()) total += work(times.output);
    for (int i = 0; i < counts[s]; ++i)
      total += work(times.Layer(config.model.transformer, layer++));
    stages.push_back(total);
  }
  return stages;
}

int64_t Slowest(const std::vector<int64_t>& work) {
  return *std::max_element(work.begin(), work.end());
}

TEST(StageBalanceTest, BalancedSplitIsTheBestContiguousSplit) {
  const ResolvedConfig config = ConfigOf(HeavyOutputConfig("balanced"));
  const auto cost = LoadCostModel(config);
  ASSERT_TRUE(cost.ok());
  const Expected<std::vector<int>> balanced = BalanceStageLayers(config, *cost->model);
  ASSERT_TRUE(balanced.ok()) << balanced.error().ToString();
  const Expected<PassTimes> times = PricePassTimes(config, *cost->model);
  ASSERT_TRUE(times.ok());
  // Brute force: every split of 12 layers into 4 stages of at least one (C(11, 3) = 165).
  int64_t best = std::numeric_limits<int64_t>::max();
  int splits = 0;
  for (int a = 1; a <= 9; ++a) {
    for (int b = 1; a + b <= 10; ++b) {
      for (int c = 1; a + b + c <= 11; ++c) {
        best = std::min(best, Slowest(StageWork(config, *times, {a, b, c, 12 - a - b - c})));
        ++splits;
      }
    }
  }
  EXPECT_EQ(splits, 165);
  ASSERT_EQ(balanced->size(), 4u);
  EXPECT_EQ(std::accumulate(balanced->begin(), balanced->end(), 0), 12);
  EXPECT_EQ(Slowest(StageWork(config, *times, *balanced)), best);
  // The output stage sheds layers; uniform is worse.
  EXPECT_LT(balanced->back(), 3);
  EXPECT_GT(Slowest(StageWork(config, *times, {3, 3, 3, 3})), best);
}

TEST(StageBalanceTest, BalancedStagesShortenTheIterationAsThePipelineFormulaSays) {
  // 1F1B with m = 32 micro-batches and stage work w_s per micro-batch: the last micro-batch
  // leaves the slowest stage after about Σ_s w_s + (m − 1)·max_s w_s (fill, then the slowest
  // stage's pace). Both splits are checked against it within 4% (pipeline transfers, the
  // optimizer step and the reductions are not in it) and the balanced one must be faster.
  const ResolvedConfig uniform_config = ConfigOf(HeavyOutputConfig("uniform"));
  const auto cost = LoadCostModel(uniform_config);
  ASSERT_TRUE(cost.ok());
  const Expected<PassTimes> times = PricePassTimes(uniform_config, *cost->model);
  ASSERT_TRUE(times.ok());
  const SimulationResult uniform = SimulateJson(HeavyOutputConfig("uniform"));
  const SimulationResult balanced = SimulateJson(HeavyOutputConfig("balanced"));
  EXPECT_TRUE(uniform.stage_layers.empty());
  ASSERT_EQ(balanced.stage_layers.size(), 4u);
  for (const auto& [result, counts] : {std::pair{&uniform, std::vector<int>{3, 3, 3, 3}},
                                       std::pair{&balanced, balanced.stage_layers}}) {
    const std::vector<int64_t> work = StageWork(uniform_config, *times, counts);
    const double formula = static_cast<double>(
        std::accumulate(work.begin(), work.end(), int64_t{0}) + 31 * Slowest(work));
    EXPECT_NEAR(static_cast<double>(result->iteration_time.ns()) / formula, 1.0, 0.04);
  }
  EXPECT_LT(balanced.iteration_time, uniform.iteration_time);
}

TEST(StageBalanceTest, GivenEqualCountsAreTheUniformPlan) {
  const SimulationResult uniform = SimulateJson(HeavyOutputConfig("uniform"));
  const SimulationResult given = SimulateJson(HeavyOutputConfig(Json::array({3, 3, 3, 3})));
  EXPECT_EQ(given.iteration_time, uniform.iteration_time);
  EXPECT_EQ(given.stage_layers, (std::vector<int>{3, 3, 3, 3}));
}

TEST(StageBalanceTest, GivenCountsPlaceTheLayersAndTheirMemory) {
  // Stage 1 of [5, 3, 2, 2] holds layers 5–7 and nothing else: its parameters are three
  // layers' (TP 2 shards), and the four stages hold every layer once.
  const Json json = HeavyOutputConfig(Json::array({5, 3, 2, 2}));
  const SimulationResult r = SimulateJson(json);
  const ResolvedConfig config = ConfigOf(json);
  const auto& spec = config.model.transformer;
  const auto& memory = r.iteration->stats.stage_memory;
  ASSERT_EQ(memory.size(), 4u);
  EXPECT_EQ(memory[1].parameter_count, 3 * models::LayerParameterCount(spec, 2, 1, 2, 5));
  EXPECT_EQ(memory[2].parameter_count, 2 * models::LayerParameterCount(spec, 2, 1, 2, 8));
  EXPECT_EQ(models::StageLayerIndices(spec, 4, 1, 1, config.plan.chunk_layers),
            (std::vector<int>{5, 6, 7}));
  // The task graph runs layers 5–7 on stage 1's first rank (rank 2: TP 2 × DP 1).
  const graph::TaskGraph& graph = r.iteration->graph;
  std::vector<std::string> layers;
  for (size_t i = 0; i < graph.task_count(); ++i) {
    const graph::TaskId id(static_cast<uint32_t>(i));
    const std::string_view name = graph.name(graph.task(id).name);
    if (graph.rank_of(id) == 2 && name.ends_with(".attn fwd") &&
        std::find(layers.begin(), layers.end(), name) == layers.end()) {
      layers.emplace_back(name);
    }
  }
  EXPECT_EQ(layers,
            (std::vector<std::string>{"layer5.attn fwd", "layer6.attn fwd", "layer7.attn fwd"}));
}

TEST(StageBalanceTest, SymmetricRanksAgreeWithFullRanks) {
  Json json = HeavyOutputConfig("balanced");
  json["parallelism"]["data"] = 2;
  json["cluster"]["nodes"] = 2;
  ExpectSymmetricMatchesFull(json);
}

TEST(StageBalanceTest, BadLayerSplitsNameThePathAndTheValue) {
  EXPECT_THAT(
      ConfigError(HeavyOutputConfig(Json::array({6, 6}))),
      HasSubstr(
          "parallelism.pipeline.layers: needs one layer count per pipeline stage (4), got 2"));
  EXPECT_THAT(ConfigError(HeavyOutputConfig(Json::array({3, 3, 3, 4}))),
              HasSubstr("the layer counts add up to 13, the model has 12 layers"));
  EXPECT_THAT(ConfigError(HeavyOutputConfig(Json::array({6, 0, 3, 3}))),
              HasSubstr("parallelism.pipeline.layers[1]"));
  EXPECT_THAT(ConfigError(HeavyOutputConfig("even")),
              HasSubstr("must be \"uniform\", \"balanced\" or a list of layer counts"));
  Json interleaved = HeavyOutputConfig("balanced");
  interleaved["parallelism"]["pipeline"]["schedule"] = "interleaved";
  interleaved["parallelism"]["pipeline"]["virtual_stages"] = 3;
  EXPECT_THAT(ConfigError(interleaved),
              HasSubstr("balanced stages are for one model chunk per stage"));
  // Uneven splits free the pipeline size from dividing the layers: 8 stages of 12 layers.
  Json eight = HeavyOutputConfig("balanced");
  eight["parallelism"]["pipeline"]["size"] = 8;
  eight["parallelism"]["tensor"] = 1;
  EXPECT_EQ(ConfigError(eight), "");
  eight["parallelism"]["pipeline"]["layers"] = "uniform";
  EXPECT_THAT(ConfigError(eight), HasSubstr("parallelism.pipeline"));
}

// Virtual stages with given counts, one per model chunk in model order (chunk k on stage
// k mod p): [1, 2, 2, 1, 2, 2, 1, 1] over 4 stages × 2 puts chunks 0 and 4 — layer 0, and
// layers 6–7 (after 1 + 2 + 2 + 1 = 6 layers) — on stage 0, and chunks 3 and 7 — layers 5 and
// 11 — on stage 3.
Json InterleavedConfig(const Json& layers) {
  Json json = HeavyOutputConfig(layers);
  json["parallelism"]["pipeline"]["schedule"] = "interleaved";
  json["parallelism"]["pipeline"]["virtual_stages"] = 2;
  return json;
}

TEST(StageBalanceTest, GivenCountsPerModelChunkWithVirtualStages) {
  const Json json = InterleavedConfig(Json::array({1, 2, 2, 1, 2, 2, 1, 1}));
  const ResolvedConfig config = ConfigOf(json);
  const auto& spec = config.model.transformer;
  EXPECT_EQ(models::StageLayerIndices(spec, 4, 2, 0, config.plan.chunk_layers),
            (std::vector<int>{0, 6, 7}));
  EXPECT_EQ(models::ChunkLayerIndices(spec, 4, 2, 3, 1, config.plan.chunk_layers),
            (std::vector<int>{11}));
  const SimulationResult r = SimulateJson(json);
  EXPECT_EQ(r.stage_layers, (std::vector<int>{3, 4, 3, 2}));  // per stage, over its chunks
  const auto& memory = r.iteration->stats.stage_memory;
  ASSERT_EQ(memory.size(), 4u);
  EXPECT_EQ(memory[1].parameter_count, 4 * models::LayerParameterCount(spec, 2, 1, 2, 1));
  // 3 layers on every stage, in chunks of 2 + 1 or 1 + 2.
  EXPECT_EQ(SimulateJson(InterleavedConfig(Json::array({2, 1, 1, 2, 1, 2, 2, 1}))).stage_layers,
            (std::vector<int>{3, 3, 3, 3}));
  EXPECT_THAT(ConfigError(InterleavedConfig(Json::array({3, 3, 3, 3}))),
              HasSubstr("needs one layer count per model chunk (pipeline stages × virtual "
                        "stages = 8, in model order: chunk k on stage k mod 4), got 4"));
  EXPECT_THAT(ConfigError(InterleavedConfig(Json::array({3, 0, 3, 0, 3, 0, 3, 0}))),
              HasSubstr("pipeline stage 1 holds no layer"));
}

TEST(StageBalanceTest, UnevenChunksSymmetricRanksAgreeWithFullRanks) {
  Json json = InterleavedConfig(Json::array({1, 2, 2, 1, 2, 2, 1, 1}));
  json["parallelism"]["data"] = 2;
  json["cluster"]["nodes"] = 2;
  ExpectSymmetricMatchesFull(json);
}

TEST(StageBalanceTest, EmbeddingAndLossCountAsLayers) {
  // 14 layers + the embedding + the loss = 16 slots over 4 × 2 chunks: 2 each, the first
  // chunk's first slot the embedding's and the last chunk's last the loss's.
  Json json = InterleavedConfig("uniform");
  json["model"]["layers"] = 14;
  json["parallelism"]["pipeline"]["embedding_as_layer"] = true;
  json["parallelism"]["pipeline"]["loss_as_layer"] = true;
  EXPECT_EQ(ConfigOf(json).plan.chunk_layers, (std::vector<int>{1, 2, 2, 2, 2, 2, 2, 1}));
  EXPECT_EQ(SimulateJson(json).stage_layers, (std::vector<int>{3, 4, 4, 3}));
  // Llama 3.1 405B as Megatron-Bridge splits it: 126 layers + 2 on 8 stages × 8 chunks; stages
  // 0 and 7 hold 15 layers, the others 16.
  Json llama = Json::parse(R"({"model": "llama3.1-405b",
    "training": {"global_batch": 64, "micro_batch": 1, "flash_attention": true},
    "cluster": {"preset": "dgx-h100", "gpu": "h100-sxm5-80gb"},
    "parallelism": {"tensor": 8, "pipeline": {"size": 8, "schedule": "interleaved",
      "virtual_stages": 8, "embedding_as_layer": true, "loss_as_layer": true}}})");
  const ResolvedConfig config = ConfigOf(llama);
  const auto& spec = config.model.transformer;
  EXPECT_EQ(config.plan.chunk_layers.front(), 1);
  EXPECT_EQ(config.plan.chunk_layers.back(), 1);
  EXPECT_EQ(std::count(config.plan.chunk_layers.begin(), config.plan.chunk_layers.end(), 2), 62);
  EXPECT_EQ(models::StageLayerIndices(spec, 8, 8, 0, config.plan.chunk_layers).size(), 15u);
  EXPECT_EQ(models::StageLayerIndices(spec, 8, 8, 3, config.plan.chunk_layers).size(), 16u);
  EXPECT_EQ(models::StageLayerIndices(spec, 8, 8, 7, config.plan.chunk_layers).back(), 125);
  // Without them, 126 layers do not split over 64 chunks.
  llama["parallelism"]["pipeline"].erase("embedding_as_layer");
  llama["parallelism"]["pipeline"].erase("loss_as_layer");
  EXPECT_THAT(ConfigError(llama),
              HasSubstr("layers (126) is not divisible by pipeline stages × virtual stages (64)"));
  json["model"]["layers"] = 13;
  EXPECT_THAT(ConfigError(json),
              HasSubstr("layers + the embedding and loss counted as layers (15) is not "
                        "divisible by pipeline stages × virtual stages (8)"));
  json["model"]["layers"] = 14;
  json["parallelism"]["pipeline"]["layers"] = Json::array({1, 2, 2, 2, 2, 2, 2, 1});
  EXPECT_THAT(ConfigError(json),
              HasSubstr("parallelism.pipeline.embedding_as_layer: the embedding and loss count "
                        "as layers of the uniform split"));
}

}  // namespace
}  // namespace dtsim::strategies
