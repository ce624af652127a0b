// Mixture-of-experts plans: expert-parallel all-to-alls around each MoE layer, expert gradients
// reduced over the expert-data-parallel group, skewed routing, and the plan's errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "sim/base/dtype.h"
#include "strategies/pass_times.h"
#include "strategies/simulate.h"
#include "tests/strategies/simulate_helpers.h"

namespace dtsim::strategies {
namespace {

using testing::HasSubstr;

// 4 layers, every one MoE with 4 experts top-2, dropless; hidden 512; 8 GPUs in one node:
// DP 8 with EP 4.
Json MoeConfig() {
  return Json::parse(R"({
    "model": {"family": "transformer", "layers": 4, "hidden": 512, "heads": 8, "vocab": 1024,
              "max_seq": 512, "moe": {"experts": 4, "top_k": 2, "dropless": true}},
    "training": {"global_batch": 16, "micro_batch": 1, "seq_len": 512},
    "cluster": {"preset": "dgx-a100", "nodes": 1, "gpu": "a100-sxm4-80gb"},
    "parallelism": {"data": 8, "expert": 4}
  })");
}

TEST(MoeTest, AllToAllBytesAreTokensTimesTopKTimesHidden) {
  // Each MoE layer moves every micro-batch's tokens to their experts and back, forward and
  // backward: 4 all-to-alls per layer per micro-batch per expert group. Each rank sends
  // E·C·h·e bytes with C = ⌈k·T/E⌉ (dropless, balanced) = ⌈2·512/4⌉ = 256: 4·256·512·2 =
  // 1 MiB = T·k·h·e (tokens × top-k × hidden × bytes per element; notes §8.2).
  const SimulationResult r = SimulateJson(MoeConfig());
  const CommTally a2a = Tally(r.iteration->graph, graph::CommKind::kAllToAll, 4);
  const int64_t per_rank = 512LL * 2 * 512 * 2;
  // 2 expert groups × 4 layers × 2 micro-batches × 4 all-to-alls.
  EXPECT_EQ(a2a.count, 2 * 4 * 2 * 4);
  EXPECT_EQ(a2a.bytes, a2a.count * per_rank);
  // With capacity padding (factor 1.25, not dropless): C = ⌈2·512·1.25/4⌉ = 320.
  Json padded = MoeConfig();
  padded["model"]["moe"]["dropless"] = false;
  padded["model"]["moe"]["capacity_factor"] = 1.25;
  const SimulationResult p = SimulateJson(padded);
  EXPECT_EQ(Tally(p.iteration->graph, graph::CommKind::kAllToAll, 4).bytes,
            a2a.count * 4LL * 320 * 512 * 2);
  // The time they block shows as "ep" in the breakdown.
  EXPECT_GT(r.stages[0].expert.ns(), 0);
}

TEST(MoeTest, ExpertGradientsReduceOverTheExpertDataParallelGroup) {
  // DP 8, EP 4: each expert lives on 8/4 = 2 ranks, so its gradients all-reduce over pairs;
  // dense gradients (attention, norms, router, embedding) over all 8. Per rank and layer the
  // experts hold 4/4 = 1 expert of 2·512·2048 weights + 2048 + 512 biases, fp32 gradients.
  const SimulationResult r = SimulateJson(MoeConfig());
  const CommTally pairs = Tally(r.iteration->graph, graph::CommKind::kAllReduce, 2);
  EXPECT_EQ(pairs.bytes, 4 /* pairs */ * 4 /* layers */ * (2LL * 512 * 2048 + 2048 + 512) * 4);
  EXPECT_GT(Tally(r.iteration->graph, graph::CommKind::kAllReduce, 8).bytes, 0);
}

TEST(MoeTest, BalancedRoutingFullAndSymmetricAgree) {
  Json json = MoeConfig();
  const SimulationResult full = SimulateJson(json);
  json["simulation"] = {{"ranks", "symmetric"}};
  const SimulationResult symmetric = SimulateJson(json);
  EXPECT_NEAR(symmetric.iteration_time.ToSecondsDouble() / full.iteration_time.ToSecondsDouble(),
              1.0, 0.001);
  EXPECT_DOUBLE_EQ(symmetric.iteration->stats.model_flops, full.iteration->stats.model_flops);
  EXPECT_TRUE(symmetric.warnings.empty());
}

// DeepSeek-style layers: a dense first layer, then MoE layers with a shared expert, and
// multi-head latent attention.
Json DeepSeekStyleConfig() {
  Json json = MoeConfig();
  json["model"]["kv_heads"] = 8;
  json["model"]["linear_bias"] = false;
  json["model"]["mla"] = {{"q_lora_rank", 128},
                          {"kv_lora_rank", 64},
                          {"qk_nope_head_dim", 64},
                          {"qk_rope_head_dim", 32},
                          {"v_head_dim", 64}};
  json["model"]["moe"]["shared_experts"] = 1;
  json["model"]["moe"]["first_dense_layers"] = 1;
  return json;
}

TEST(MoeTest, SharedExpertsAndDenseFirstLayersMoveNoMoreTokens) {
  // A shared expert runs on the rank's own tokens: the all-to-alls still move T·k·h·e per rank
  // and layer (512·2·512·2 bytes), now on the 3 MoE layers of 4 (the first is dense): 2 expert
  // groups × 3 layers × 2 micro-batches × 4 all-to-alls.
  const SimulationResult r = SimulateJson(DeepSeekStyleConfig());
  const CommTally a2a = Tally(r.iteration->graph, graph::CommKind::kAllToAll, 4);
  EXPECT_EQ(a2a.count, 2 * 3 * 2 * 4);
  EXPECT_EQ(a2a.bytes, a2a.count * 512LL * 2 * 512 * 2);
}

TEST(MoeTest, LatentAttentionAndSharedExpertsFullAndSymmetricAgree) {
  Json json = DeepSeekStyleConfig();
  json["parallelism"] = {{"data", 4}, {"tensor", 2}, {"expert", 4}};
  ExpectSymmetricMatchesFull(json);
  // With FP8 on an H100 and context parallelism (ring attention over the latent heads' K and V).
  json["cluster"] = {{"preset", "dgx-h100"}, {"nodes", 1}, {"gpu", "h100-sxm5-80gb"}};
  json["training"]["precision"] = "fp8";
  json["training"]["flash_attention"] = true;
  json["parallelism"] = {{"data", 2}, {"tensor", 2}, {"context", 2}, {"expert", 4}};
  ExpectSymmetricMatchesFull(json);
}

TEST(MoeTest, SlidingWindowLayersArePricedApart) {
  // GPT-OSS style: windows of 64 tokens on layers 0 and 2 of the 4, full attention on 1 and 3.
  // The search's pass times price each kind of layer once: a windowed layer's forward is
  // shorter than a full one's; the iteration is shorter than without windows; full and
  // symmetric ranks agree.
  Json json = MoeConfig();
  json["training"]["flash_attention"] = true;
  const SimulationResult without = SimulateJson(json);
  json["model"]["sliding_window"] = 64;
  json["model"]["sliding_window_pattern"] = 2;
  const ResolvedConfig config = ConfigOf(json);
  const auto cost = LoadCostModel(config);
  ASSERT_TRUE(cost.ok());
  const Expected<PassTimes> times = PricePassTimes(config, *cost->model);
  ASSERT_TRUE(times.ok()) << times.error().ToString();
  const models::TransformerSpec& spec = config.model.transformer;
  EXPECT_LT(times->Layer(spec, 0).forward, times->Layer(spec, 1).forward);
  EXPECT_EQ(times->Layer(spec, 0).forward, times->Layer(spec, 2).forward);
  EXPECT_LT(SimulateJson(json).iteration_time, without.iteration_time);
  ExpectSymmetricMatchesFull(json);
  // Under a2a context parallelism (c = 2: each rank attends the whole sequence with 4 of the 8
  // heads) the windows stay; full and symmetric ranks agree. The p2p ring is refused.
  json["parallelism"] = {{"data", 4}, {"context", {{"size", 2}, {"comm", "a2a"}}}, {"expert", 4}};
  ExpectSymmetricMatchesFull(json);
  json["parallelism"]["context"]["comm"] = "p2p";
  EXPECT_THAT(ConfigError(json), HasSubstr("parallelism.context.comm: sliding-window"));
}

TEST(MoeTest, SkewedRoutingSetsThePaceOnlyWithEveryRankSimulated) {
  // Imbalance 2 over EP 4: the first rank of each expert group gets 2× the mean tokens, the
  // other three (4 − 2)/3 each; the all-to-alls make everyone wait for the busiest. Full ranks
  // show it, symmetric ranks (one balanced rank per stage) cannot and say so.
  Json json = MoeConfig();
  const SimulationResult balanced = SimulateJson(json);
  json["parallelism"]["expert"] = {{"size", 4}, {"imbalance", 2.0}};
  const SimulationResult skewed = SimulateJson(json);
  EXPECT_GT(skewed.iteration_time.ToSecondsDouble(),
            1.05 * balanced.iteration_time.ToSecondsDouble());
  // The hot rank computes longer; a cold rank waits in the all-to-alls.
  const auto compute = [&](int32_t rank) {
    for (const TimeBreakdown& b : skewed.stages) {
      if (b.rank == rank) return b.compute;
    }
    return DurationNs::Zero();
  };
  EXPECT_GT(compute(0), balanced.stages[0].compute);
  json["simulation"] = {{"ranks", "symmetric"}};
  const SimulationResult symmetric = SimulateJson(json);
  EXPECT_EQ(symmetric.iteration_time, balanced.iteration_time);
  ASSERT_EQ(symmetric.warnings.size(), 1u);
  EXPECT_THAT(symmetric.warnings[0], HasSubstr("symmetric ranks simulate balanced routing"));
  // Model FLOPs do not change: skew moves tokens between experts.
  EXPECT_NEAR(skewed.iteration->stats.model_flops / balanced.iteration->stats.model_flops, 1.0,
              1e-12);
}

TEST(MoeTest, BadPlansNameTheField) {
  Json json = MoeConfig();
  json["parallelism"]["expert"] = 3;
  EXPECT_THAT(ConfigError(json), HasSubstr("parallelism.data: data-parallel size (8) is not "
                                           "divisible by expert-parallel size"));
  json = MoeConfig();
  json["parallelism"] = {{"data", 8}, {"expert", 8}};
  EXPECT_THAT(ConfigError(json), HasSubstr("parallelism.expert: experts (4) is not divisible by "
                                           "expert-parallel size (8)"));
  json = MoeConfig();
  json["parallelism"]["expert"] = {{"size", 4}, {"imbalance", 5}};
  EXPECT_THAT(ConfigError(json), HasSubstr("parallelism.expert.imbalance"));
  json = MoeConfig();
  json["model"].erase("moe");
  EXPECT_THAT(ConfigError(json), HasSubstr("expert parallelism needs a mixture-of-experts model"));
}

TEST(MoeTest, ZeroShardsExpertStateOverTheExpertDataParallelGroup) {
  // DP 8 with EP 4: each expert is held by 8/4 = 2 ranks. Per rank, each of the 4 MoE layers
  // has 4/4 = 1 local expert MLP of 2·h·f + f + h = 2·512·2048 + 2048 + 512 = 2,099,712
  // parameters (GeLU, biases): 8,398,848 expert parameters. ZeRO-1 (DeepSpeed-MoE) shards the
  // dense parameters' optimizer state over all 8 ranks and the experts' over their 2:
  // ⌈(dense/8 + experts/2)·12⌉ bytes (bf16 Adam: fp32 master + 2 moments).
  constexpr int64_t kExperts = 4 * (2 * 512 * 2048 + 2048 + 512);
  Json json = MoeConfig();
  json["parallelism"]["zero_stage"] = 1;
  const SimulationResult r = SimulateJson(json);
  const models::MemoryBreakdown& memory = r.iteration->stats.stage_memory.front();
  const double dense = static_cast<double>(memory.parameter_count - kExperts);
  EXPECT_EQ(memory.optimizer_state,
            static_cast<int64_t>(std::ceil((dense / 8 + static_cast<double>(kExperts) / 2) * 12)));
  // Gradients: the experts' reduce-scattered over each pair of holders (4 pairs), all of them
  // once; after the step each pair all-gathers its updated expert halves (⌈E/2⌉ bf16 each).
  const ResolvedConfig config = ConfigOf(json);
  const int64_t grad_bytes = DTypeBytes(config.training.grad_dtype);
  const CommTally scatter = Tally(r.iteration->graph, graph::CommKind::kReduceScatter, 2);
  EXPECT_EQ(scatter.bytes, 4 * kExperts * grad_bytes);
  const CommTally gather = Tally(r.iteration->graph, graph::CommKind::kAllGather, 2);
  EXPECT_EQ(gather.count, 4);
  EXPECT_EQ(gather.bytes, 4 * (kExperts / 2) * 2);
  // The dense shards gather over all 8: ⌈dense/8⌉ bf16 each.
  const CommTally dense_gather = Tally(r.iteration->graph, graph::CommKind::kAllGather, 8);
  EXPECT_EQ(dense_gather.count, 1);
  EXPECT_EQ(dense_gather.bytes, (memory.parameter_count - kExperts + 7) / 8 * 2);
  // Less optimizer state than without ZeRO, and symmetric ranks agree with full ones.
  json["parallelism"]["zero_stage"] = 0;
  EXPECT_LT(memory.optimizer_state,
            SimulateJson(json).iteration->stats.stage_memory.front().optimizer_state);
  json["parallelism"]["zero_stage"] = 2;
  ExpectSymmetricMatchesFull(json);
}

TEST(MoeTest, ZeroThreeGathersExpertsOverTheirExpertDataParallelGroup) {
  // ZeRO-3 with DP 8, EP 4: before each layer's forward and again before its backward, the
  // dense parameters (attention, norms, router) are all-gathered over all 8 data-parallel
  // ranks, ⌈dense/8⌉ bf16 each, and the local expert (2,099,712 parameters, as above) over
  // the 2 ranks holding it, ⌈2,099,712/2⌉ = 1,049,856 bf16 each: per micro-batch 2 gathers per
  // layer per direction. 4 layers × 2 micro-batches × 2 = 16 per rank and group; there are 4
  // pairs of expert holders and one group of 8.
  constexpr int64_t kLocalExpert = 2 * 512 * 2048 + 2048 + 512;
  // Per layer: QKV and projection with biases, two norms, the router (h·E).
  constexpr int64_t kDenseLayer = 4 * 512 * 512 + 4 * 512 + 2 * 2 * 512 + 512 * 4;
  Json json = MoeConfig();
  json["parallelism"]["zero_stage"] = 3;
  const SimulationResult r = SimulateJson(json);
  const CommTally experts = Tally(r.iteration->graph, graph::CommKind::kAllGather, 2);
  EXPECT_EQ(experts.count, 4 * 16);
  EXPECT_EQ(experts.bytes, 4 * 16 * (kLocalExpert / 2) * 2);
  // Over all 8: the 16 layer gathers plus the embedding's and the output's, forward and
  // backward, per micro-batch (the dense shards of everything else).
  const CommTally dense = Tally(r.iteration->graph, graph::CommKind::kAllGather, 8);
  int64_t layer_gathers = 0;
  for (size_t c = 0; c < r.iteration->graph.comm_count(); ++c) {
    const graph::Communication& comm =
        r.iteration->graph.comm(graph::CommId(static_cast<uint32_t>(c)));
    if (comm.kind == graph::CommKind::kAllGather &&
        comm.size.count() == (kDenseLayer + 7) / 8 * 2) {
      ++layer_gathers;
    }
  }
  EXPECT_EQ(layer_gathers, 16);
  EXPECT_EQ(dense.count, 16 + 2 * 2 * 2);
  // Parameters are sharded the same way in memory: dense over 8, experts over 2.
  const models::MemoryBreakdown& memory = r.iteration->stats.stage_memory.front();
  constexpr int64_t kExperts = 4 * kLocalExpert;
  const double dense_params = static_cast<double>(memory.parameter_count - kExperts);
  EXPECT_EQ(memory.parameters,
            static_cast<int64_t>(std::ceil((dense_params / 8 + kExperts / 2.0) * 2)));
  ExpectSymmetricMatchesFull(json);
}

}  // namespace
}  // namespace dtsim::strategies
