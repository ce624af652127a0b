// Multi-token prediction in a simulated iteration: the modules run on the last stage after its
// layers, their heads with the output layer's; the last stage's copy of the embedding is
// all-reduced with the first stage's; their gradients join the data-parallel reduction; full
// and symmetric ranks agree. Each expectation derived in a comment.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "models/memory.h"
#include "models/ops.h"
#include "strategies/config.h"
#include "strategies/layer_gradients.h"
#include "strategies/pass_times.h"
#include "strategies/simulate.h"
#include "tests/strategies/simulate_helpers.h"

namespace dtsim::strategies {
namespace {

// 4 MoE layers of hidden 1024 (8 heads, 4 experts top-2) and one MTP module, untied, on one
// DGX H100: DP 2 × TP 2 × PP 2 (EP 2), 4 micro-batches of 1 × 2,048 tokens per replica.
Json MtpConfig(int mtp_layers = 1) {
  Json json = Json::parse(R"({
    "model": {"family": "transformer", "layers": 4, "hidden": 1024, "heads": 8, "vocab": 32768,
              "max_seq": 2048, "norm": "rmsnorm", "activation": "swiglu", "position": "rotary",
              "linear_bias": false, "tied_embeddings": false,
              "moe": {"experts": 4, "top_k": 2, "dropless": true}},
    "training": {"global_batch": 8, "micro_batch": 1, "dropout": false,
                 "flash_attention": true},
    "cluster": {"preset": "dgx-h100", "gpu": "h100-sxm5-80gb", "nodes": 1},
    "parallelism": {"data": 2, "tensor": 2, "pipeline": 2, "expert": 2},
    "simulation": {"network_model": "analytical"}
  })");
  json["model"]["mtp_layers"] = mtp_layers;
  return json;
}

// Model FLOPs of a piece's forward and backward on one rank for one micro-batch.
double PieceFlops(const models::LayerOps& ops) {
  double flops = 0;
  for (const std::vector<models::Op>* pass : {&ops.forward, &ops.backward}) {
    for (const models::Op& op : *pass) flops += op.model_flops;
  }
  return flops;
}

// The module (layer index 4) and its head run on the last stage's 2 × 2 ranks for each of its 4
// micro-batches: the iteration's model FLOPs grow by 16 × (the module's passes + the output
// layer's extra head), priced on one rank's shard.
TEST(MtpSimulationTest, ModulesAddTheirPassesOnTheLastStage) {
  const ResolvedConfig config = ConfigOf(MtpConfig());
  const SimulationResult with = SimulateJson(MtpConfig());
  const SimulationResult without = SimulateJson(MtpConfig(0));
  const models::TransformerSpec& spec = config.model.transformer;
  const models::TransformerShard shard = ShardOf(config);
  models::TransformerSpec plain = spec;
  plain.mtp_layers = 0;
  const double module = PieceFlops(models::TransformerLayerOps(spec, 4, shard)) +
                        PieceFlops(models::OutputOps(spec, shard)) -
                        PieceFlops(models::OutputOps(plain, shard));
  EXPECT_NEAR(with.iteration->stats.model_flops - without.iteration->stats.model_flops, 16 * module,
              1e-6 * 16 * module);
  EXPECT_GT(with.iteration_time, without.iteration_time);
  // The last stage's tasks name the module as layer 4.
  const graph::TaskGraph& graph = with.iteration->graph;
  bool found = false;
  for (size_t i = 0; i < graph.task_count() && !found; ++i) {
    const graph::TaskId id(static_cast<uint32_t>(i));
    found = graph.name(graph.task(id).name).starts_with("layer4.mtp fwd");
  }
  EXPECT_TRUE(found);
}

// The last stage keeps the embedding for the module's lookups and all-reduces its gradient
// with the first stage's, as Megatron-Core does for a tied output layer: V/t × h fp32 =
// 16,384 × 1,024 × 4 B = 64 MiB between ranks 0 and 4. Untied without MTP there is none.
TEST(MtpSimulationTest, LastStageEmbeddingIsAllReducedWithTheFirst) {
  EXPECT_EQ(RankBytes(SimulateJson(MtpConfig()), graph::CommKind::kAllReduce, "tied embedding"),
            int64_t{64} << 20);
  EXPECT_EQ(RankBytes(SimulateJson(MtpConfig(0)), graph::CommKind::kAllReduce, "tied embedding"),
            0);
}

// The last stage's gradients grow by the module's parameters on its rank and the embedding's
// V/t × h rows; the first stage's do not change.
TEST(MtpSimulationTest, ModuleGradientsJoinTheLastStage) {
  const SimulationConfig with = ConfigOf(MtpConfig());
  const SimulationConfig without = ConfigOf(MtpConfig(0));
  const models::TransformerSpec& spec = with.model.transformer;
  EXPECT_EQ(ModelGradients(with, 1).elements() - ModelGradients(without, 1).elements(),
            models::LayerParameterCount(spec, 2, 2, 2, 4) + int64_t{16384} * 1024);
  EXPECT_EQ(ModelGradients(with, 0).elements(), ModelGradients(without, 0).elements());
}

// Balancing stages counts the module (a MoE layer and a second head) with the output layer.
// 8 layers on 2 stages: the split [n, 8 − n] minimizing max(embedding + n·w, (8 − n)·w +
// output (+ module)), w a layer's work per micro-batch (fewer layers first on a tie), from
// the priced passes; with the module the last stage holds fewer layers.
TEST(MtpSimulationTest, BalancedStagesCountTheModuleOnTheLast) {
  std::vector<int> last_stage;
  for (const int mtp : {0, 1}) {
    Json json = MtpConfig(mtp);
    json["model"]["layers"] = 8;
    json["parallelism"]["pipeline"] = {{"size", 2}, {"layers", "balanced"}};
    const ResolvedConfig config = ConfigOf(json);
    const auto cost = LoadCostModel(config);
    ASSERT_TRUE(cost.ok());
    const Expected<PassTimes> times = PricePassTimes(config, *cost->model);
    ASSERT_TRUE(times.ok());
    const auto work = [](const PieceTimes& piece) {
      return (piece.forward + piece.backward + piece.recompute).ns();
    };
    const models::TransformerSpec& spec = config.model.transformer;
    const int64_t layer = work(times->Layer(spec, 0));
    const int64_t tail = work(times->output) + (mtp > 0 ? work(times->Layer(spec, 8)) : 0);
    int best = 0;
    int64_t slowest = std::numeric_limits<int64_t>::max();
    for (int n = 1; n < 8; ++n) {
      const int64_t slow = std::max(work(times->embedding) + n * layer, (8 - n) * layer + tail);
      if (slow < slowest) {
        slowest = slow;
        best = n;
      }
    }
    const SimulationResult result = SimulateJson(json);
    EXPECT_EQ(result.stage_layers, (std::vector<int>{best, 8 - best})) << mtp;
    last_stage.push_back(result.stage_layers.back());
  }
  EXPECT_LT(last_stage[1], last_stage[0]);
}

TEST(MtpSimulationTest, SymmetricRanksMatchFull) {
  ExpectSymmetricMatchesFull(MtpConfig(), 2);
  // Interleaved (the module on the last of 2 × 2 chunks), sequence parallel, ZeRO-1, FP8.
  Json interleaved = MtpConfig();
  interleaved["parallelism"] = Json::parse(R"({
    "data": 2, "tensor": {"size": 2, "sequence_parallel": true}, "expert": 2,
    "pipeline": {"size": 2, "schedule": "interleaved", "virtual_stages": 2}, "zero_stage": 1})");
  interleaved["training"]["precision"] = "fp8";
  ExpectSymmetricMatchesFull(interleaved, 2);
}

}  // namespace
}  // namespace dtsim::strategies
