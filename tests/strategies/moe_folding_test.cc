// MoE parallel folding (Megatron-Core's expert_tensor_parallel_size 1 under tensor
// parallelism): each rank routes its sequence-parallel shard of the tokens through whole
// experts, the expert-parallel group spans tensor and data ranks (expert index tp + t·dp), and
// expert gradients reduce over the t·D/EP ranks holding the same experts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "strategies/simulate.h"
#include "strategies/stage_memory.h"
#include "tests/strategies/simulate_helpers.h"

namespace dtsim::strategies {
namespace {

using testing::HasSubstr;

// 4 layers, every one MoE with 8 experts top-2, dropless, GeLU FFN 4h = 2048; hidden 512;
// 8 GPUs in one node: DP 4 × TP 2 with sequence parallelism; 16 sequences of 512 tokens, so
// 16/4 = 4 micro-batches of 1 per replica. `expert` is the plan's expert section.
Json FoldingConfig(const Json& expert) {
  Json json = Json::parse(R"({
    "model": {"family": "transformer", "layers": 4, "hidden": 512, "heads": 8, "vocab": 1024,
              "max_seq": 512, "moe": {"experts": 8, "top_k": 2, "dropless": true}},
    "training": {"global_batch": 16, "micro_batch": 1, "seq_len": 512},
    "cluster": {"preset": "dgx-a100", "nodes": 1, "gpu": "a100-sxm4-80gb"},
    "parallelism": {"data": 4, "tensor": {"size": 2, "sequence_parallel": true}}
  })");
  json["parallelism"]["expert"] = expert;
  return json;
}

Json Folded(int size) { return FoldingConfig({{"size", size}, {"tensor", 1}}); }

TEST(MoeFoldingTest, AllToAllsMoveTheSequenceShardOverTensorAndDataRanks) {
  // Folded, EP 8 spans all 8 ranks (TP 2 × DP 4): one group. Each rank routes its shard of
  // T = 512/2 = 256 tokens: C = ⌈2·256/8⌉ = 64 per expert, E·C·h·e = 8·64·512·2 = 512 KiB =
  // T·k·h·e. 4 all-to-alls per layer per micro-batch: 1 group × 4 layers × 4 micro-batches × 4.
  const SimulationResult folded = SimulateJson(Folded(8));
  const CommTally a2a = Tally(folded.iteration->graph, graph::CommKind::kAllToAll, 8);
  EXPECT_EQ(a2a.count, 1 * 4 * 4 * 4);
  EXPECT_EQ(a2a.bytes, a2a.count * 256LL * 2 * 512 * 2);
  // Without folding (EP 4 of the data indices, experts split over TP 2) each rank still
  // routes its own shard (Megatron-Core's alltoall dispatcher; the tensor group gathers what
  // arrives: moe_sequence_parallel_test.cc): the same 512 KiB per rank, in 2 groups of 4 (one
  // per tensor index).
  const SimulationResult split = SimulateJson(FoldingConfig(4));
  const CommTally split_a2a = Tally(split.iteration->graph, graph::CommKind::kAllToAll, 4);
  EXPECT_EQ(split_a2a.count, 2 * 4 * 4 * 4);
  EXPECT_EQ(split_a2a.bytes, split_a2a.count * 256LL * 2 * 512 * 2);
  // Folded EP 4: expert indices 0–3 ((dp, tp) = (0, 0), (0, 1), (1, 0), (1, 1)) and 4–7 form
  // 2 groups of 4, each rank still sending its 256 tokens' 512 KiB.
  const SimulationResult folded4 = SimulateJson(Folded(4));
  const CommTally a2a4 = Tally(folded4.iteration->graph, graph::CommKind::kAllToAll, 4);
  EXPECT_EQ(a2a4.count, 2 * 4 * 4 * 4);
  EXPECT_EQ(a2a4.bytes, a2a4.count * 256LL * 2 * 512 * 2);
}

TEST(MoeFoldingTest, TheMoeBlockHasNoTensorParallelReductions) {
  // Under sequence parallelism both plans' MoE blocks take and return the rank's own shard, and
  // attention reduce-scatters once each way. Without folding the experts split over TP 2, so
  // the group reduce-scatters their partial outputs in forward (fc2's) and the tokens' input
  // gradients in backward (fc1's); folded, whole experts have none. Over 4 TP groups × 4
  // layers × 4 micro-batches that is 4·4·4·2 = 128 reduce-scatters fewer.
  const int split =
      Tally(SimulateJson(FoldingConfig(4)).iteration->graph, graph::CommKind::kReduceScatter, 2)
          .count;
  const int folded =
      Tally(SimulateJson(Folded(4)).iteration->graph, graph::CommKind::kReduceScatter, 2).count;
  EXPECT_EQ(split - folded, 4 * 4 * 4 * 2);
}

TEST(MoeFoldingTest, ExpertGradientsReduceOverTheRanksHoldingTheSameExperts) {
  // Folded EP 4 over t·D = 8 ranks: 8/4 = 2 ranks hold each expert (expert indices r and r + 4:
  // (dp, tp) and (dp + 2, tp)), 4 such pairs. Each rank holds 8/4 = 2 whole experts of
  // 2·512·2048 weights + 2048 + 512 biases per layer, fp32 gradients: all-reduced in pairs.
  const SimulationResult r = SimulateJson(Folded(4));
  const CommTally pairs = Tally(r.iteration->graph, graph::CommKind::kAllReduce, 2);
  EXPECT_EQ(pairs.bytes, 4 /* pairs */ * 4 /* layers */ * 2 * (2LL * 512 * 2048 + 2048 + 512) * 4);
  // EP 8 leaves one rank per expert: nothing to reduce.
  EXPECT_EQ(Tally(SimulateJson(Folded(8)).iteration->graph, graph::CommKind::kAllReduce, 1).count,
            0);
  EXPECT_EQ(Tally(SimulateJson(Folded(8)).iteration->graph, graph::CommKind::kAllReduce, 2).count,
            0);
}

TEST(MoeFoldingTest, RanksHoldWholeExperts) {
  // Per layer, folded: 2 whole experts (2·512·2048 + 2048 + 512 each); split over TP 2: the
  // same 2 experts halved (2·512·1024 + 1024 + 512 each). The difference over 4 layers is
  // 4 · 2 · (2·512·1024 + 1024) = 8,396,800 parameters.
  const Expected<std::vector<models::MemoryBreakdown>> folded =
      EstimateStageMemory(ConfigOf(Folded(4)));
  const Expected<std::vector<models::MemoryBreakdown>> split =
      EstimateStageMemory(ConfigOf(FoldingConfig(4)));
  ASSERT_TRUE(folded.ok() && split.ok());
  EXPECT_EQ(folded->front().parameter_count - split->front().parameter_count, 8396800);
}

TEST(MoeFoldingTest, FullAndSymmetricRanksAgree) {
  ExpectSymmetricMatchesFull(Folded(8));
  ExpectSymmetricMatchesFull(Folded(4));
  // With ZeRO-1 (expert shards all-gathered over their pairs after the step) and ZeRO-3
  // (gathered before each layer), a pipeline, and shared experts that reduce on their own.
  Json json = Folded(4);
  json["parallelism"]["zero_stage"] = 1;
  ExpectSymmetricMatchesFull(json);
  json["parallelism"]["zero_stage"] = 3;
  ExpectSymmetricMatchesFull(json);
  json = Folded(2);
  json["parallelism"]["data"] = 2;
  json["parallelism"]["pipeline"] = 2;
  json["model"]["moe"]["shared_experts"] = 1;
  ExpectSymmetricMatchesFull(json);
}

TEST(MoeFoldingTest, PlansFoldingCannotRunAreErrors) {
  Json json = Folded(8);
  json["parallelism"]["tensor"]["sequence_parallel"] = false;
  EXPECT_THAT(ConfigError(json),
              HasSubstr("parallelism.expert.tensor: MoE parallel folding (expert tensor "
                        "parallel size 1 under tensor parallelism) needs "
                        "parallelism.tensor.sequence_parallel"));
  json = Folded(16);
  EXPECT_THAT(ConfigError(json), HasSubstr("parallelism.expert"));
  EXPECT_THAT(ConfigError(json), HasSubstr("tensor × data parallel size"));
  json = FoldingConfig({{"size", 2}, {"tensor", 3}});
  EXPECT_THAT(ConfigError(json),
              HasSubstr("parallelism.expert.tensor: expert tensor parallelism is built as the "
                        "tensor-parallel size (2) or 1"));
  json = Folded(8);
  json["parallelism"]["expert"]["imbalance"] = 2;
  EXPECT_THAT(ConfigError(json), HasSubstr("skewed routing"));
  json = Folded(8);
  json["model"].erase("moe");
  json["parallelism"]["expert"]["size"] = 1;
  EXPECT_THAT(ConfigError(json), HasSubstr("needs a mixture-of-experts model"));
}

}  // namespace
}  // namespace dtsim::strategies
