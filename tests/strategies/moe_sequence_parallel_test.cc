// A MoE block under sequence parallelism as Megatron-Core's alltoall dispatcher runs it
// (models/transformer_ops.cc, MoeMlp): each rank routes its own shard of the tokens, the
// expert-parallel all-to-all moves those, the tensor group all-gathers what arrived before
// experts split over it and reduce-scatters their partial outputs after; the block's output
// is the shard, gathered only for the next layer, and a block without shared experts needs
// neither its input gathered nor its output gradient.
#include <gtest/gtest.h>

#include <set>
#include <string_view>

#include "models/ops.h"
#include "strategies/categories.h"
#include "tests/strategies/simulate_helpers.h"

namespace dtsim::strategies {
namespace {

// 4 layers, every one MoE with 8 experts top-2, dropless, GeLU FFN 4h = 2048; hidden 512; no
// recompute; 8 A100s in one node: DP 4 × TP 2 with sequence parallelism, EP 4 over the data
// indices with the experts split over TP 2 (expert tensor parallel size = t); 16 sequences of
// 512 tokens: 4 micro-batches of 1 per replica.
Json SplitExpertsConfig(int shared_experts) {
  Json json = Json::parse(R"({
    "model": {"family": "transformer", "layers": 4, "hidden": 512, "heads": 8, "vocab": 1024,
              "max_seq": 512, "moe": {"experts": 8, "top_k": 2, "dropless": true}},
    "training": {"global_batch": 16, "micro_batch": 1, "seq_len": 512, "recompute": "none"},
    "cluster": {"preset": "dgx-a100", "nodes": 1, "gpu": "a100-sxm4-80gb"},
    "parallelism": {"data": 4, "expert": 4, "tensor": {"size": 2, "sequence_parallel": true}}
  })");
  if (shared_experts > 0) json["model"]["moe"]["shared_experts"] = shared_experts;
  return json;
}

// Rank 0's collectives of `kind` in `category` the compute stream waits for: how many, and the
// bytes of each (the all-gather's per-rank share, the reduce-scatter's whole input), summed.
CommTally RankZero(const SimulationResult& result, graph::CommKind kind,
                   std::string_view category) {
  const graph::TaskGraph& graph = result.iteration->graph;
  CommTally tally;
  for (size_t i = 0; i < graph.task_count(); ++i) {
    const graph::Task& task = graph.task(graph::TaskId(static_cast<uint32_t>(i)));
    const graph::Stream& stream = graph.stream(task.stream);
    if (stream.rank != 0 || task.kind != graph::TaskKind::kCollective) continue;
    const graph::Communication& comm = graph.comm(task.comm);
    // The compute stream's, and the input-gradient reductions beside the wgrads on the "tp"
    // stream (not its re-gathers).
    const bool beside_wgrad = graph.name(stream.name) == StreamName(StreamRole::kTensor) &&
                              comm.kind != graph::CommKind::kAllGather;
    if (graph.name(stream.name) != StreamName(StreamRole::kCompute) && !beside_wgrad) continue;
    if (graph.category_name(task.category) != category) continue;
    if (comm.kind != kind) continue;
    ++tally.count;
    tally.bytes += comm.size.count();
  }
  return tally;
}

constexpr int64_t kShard = 256LL * 512 * 2;      // T/t = 256 tokens × h × 2 B: 256 KiB
constexpr int64_t kRouted = 8LL * 64 * 512 * 2;  // E·C·h·e, C = ⌈k·256/E⌉ = 64: 512 KiB
constexpr int kPasses = 4 * 4;                   // layers × micro-batches

// Rank 0's tensor-parallel reduce-scatters (each of the b·s·h·e the ranks hold; on its compute
// stream, or beside a wgrad) and all-gathers (each rank's b·s/t·h·e shard) on its compute stream.
void ExpectTensorCollectives(const SimulationResult& r, int scatters, int gathers) {
  const CommTally reduced = RankZero(r, graph::CommKind::kReduceScatter, kTensorCategory);
  EXPECT_EQ(reduced.count, scatters);
  EXPECT_EQ(reduced.bytes, reduced.count * 2 * kShard);
  const CommTally gathered = RankZero(r, graph::CommKind::kAllGather, kTensorCategory);
  EXPECT_EQ(gathered.count, gathers);
  EXPECT_EQ(gathered.bytes, gathered.count * kShard);
}

TEST(MoeSequenceParallelTest, TheTensorGroupGathersTheTokensItsAllToAllsBrought) {
  const SimulationResult r = SimulateJson(SplitExpertsConfig(0));
  // Each rank sends its shard's k·256 routed tokens: E·C·h·e = 512 KiB an all-to-all, 4 a
  // layer and micro-batch (dispatch and combine, each way).
  const CommTally a2a = RankZero(r, graph::CommKind::kAllToAll, kExpertCategory);
  EXPECT_EQ(a2a.count, 4 * kPasses);
  EXPECT_EQ(a2a.bytes, a2a.count * kRouted);
  // After the dispatch's all-to-all (forward) and the combine's (backward) the tensor group
  // all-gathers what each rank received, 512 KiB each; before the combine's all-to-all
  // (forward) and the dispatch's (backward) it reduce-scatters the experts' t·512 KiB.
  const CommTally gathers = RankZero(r, graph::CommKind::kAllGather, kExpertCategory);
  EXPECT_EQ(gathers.count, 2 * kPasses);
  EXPECT_EQ(gathers.bytes, gathers.count * kRouted);
  const CommTally scatters = RankZero(r, graph::CommKind::kReduceScatter, kExpertCategory);
  EXPECT_EQ(scatters.count, 2 * kPasses);
  EXPECT_EQ(scatters.bytes, scatters.count * 2 * kRouted);
}

TEST(MoeSequenceParallelTest, WithoutSharedExpertsTheBlockGathersNothingOfItsOwn) {
  // The tensor-parallel collectives left, per micro-batch: the embedding reduce-scatters its
  // lookup (s·h·e = 512 KiB) and gathers layer 0's input (256 KiB); each layer's attention
  // reduce-scatters its output (forward) and its input gradient (backward); each MoE block
  // gathers the next layer's input after its combine (forward) and its input gradient for the
  // attention's output projection (backward, after the router's); layer 0's attention gathers
  // the embedding's output gradient (the layers after a MoE block without shared experts take
  // it as the shard); the output layer reduce-scatters its input gradient and gathers nothing
  // (the last layer takes the shard).
  ExpectTensorCollectives(SimulateJson(SplitExpertsConfig(0)), 4 * (1 + 4 * 2 + 1),
                          4 * (1 + 4 * 2 + 1));
}

TEST(MoeSequenceParallelTest, SharedExpertsGatherAndReduceScatterTheirOwn) {
  // With a shared expert (Megatron-Core's SharedExpertMLP: a column- and a row-parallel linear
  // over the shard) each layer adds, per micro-batch: the gather of its input (the attention
  // projection's reduce-scatter is followed by it) and its output's reduce-scatter in forward;
  // the gather of its output gradient (every attention's and the output layer's reduce-scatter
  // is followed by one) and its input gradient's reduce-scatter in backward, which gathers for
  // the attention's projection in place of the router.
  //
  // Reduce-scatters a micro-batch: embedding 1; per layer attention 2, shared experts 2;
  // output layer 1. Gathers: embedding 1; per layer: forward the shared experts' input and the
  // next layer's input, backward the attention's (the previous block's output gradient) and
  // the shared experts' fc1 (the projection's output gradient); the output layer's 1.
  const SimulationResult r = SimulateJson(SplitExpertsConfig(1));
  ExpectTensorCollectives(r, 4 * (1 + 4 * 4 + 1), 4 * (1 + 4 * 4 + 1));
  // Their fc1 saved the shard and gathers it again beside its dgrad, on the "tp" stream: one
  // more re-gather per layer and micro-batch than without them (the attention's QKV has one).
  const auto regathers = [](const SimulationResult& result) {
    const graph::TaskGraph& graph = result.iteration->graph;
    int count = 0;
    for (size_t i = 0; i < graph.task_count(); ++i) {
      const graph::Task& task = graph.task(graph::TaskId(static_cast<uint32_t>(i)));
      const graph::Stream& stream = graph.stream(task.stream);
      if (stream.rank == 0 && task.kind == graph::TaskKind::kCollective &&
          graph.name(stream.name) == StreamName(StreamRole::kTensor) &&
          graph.comm(task.comm).kind == graph::CommKind::kAllGather) {
        ++count;
      }
    }
    return count;
  };
  EXPECT_EQ(regathers(r) - regathers(SimulateJson(SplitExpertsConfig(0))), kPasses);
}

TEST(MoeSequenceParallelTest, ExpertsRunTheTokensTheirGroupGathered) {
  // Layer ops of rank 0: the router runs on the 256-token shard; each of the 8/4 = 2 local
  // experts takes ep·C·t = 4·64·2 = 512 rows (the group's tokens) at FFN 2048/2 = 1024.
  Json json = SplitExpertsConfig(0);
  const ResolvedConfig config = ConfigOf(json);
  const models::TransformerShard shard = ShardOf(config);
  EXPECT_EQ(shard.moe_tokens(), 256);
  EXPECT_EQ(shard.expert_gather(), 2);
  const models::LayerOps ops = models::TransformerLayerOps(config.model.transformer, 1, shard);
  bool saw_router = false, saw_fc1 = false;
  for (const models::Op& op : ops.forward) {
    if (op.name == "moe.router") {
      saw_router = true;
      EXPECT_DOUBLE_EQ(op.flops, 2.0 * 256 * 512 * 8);
    }
    if (op.name == "moe.expert.fc1") {
      saw_fc1 = true;
      EXPECT_DOUBLE_EQ(op.flops, 2.0 * 512 * 1024 * 512 * 2);
      // MFU counts the routed tokens: k·s = 1,024 of them, each through 1/t of an expert.
      EXPECT_DOUBLE_EQ(op.model_flops, 2.0 * 1024 * 1024 * 512);
    }
  }
  EXPECT_TRUE(saw_router);
  EXPECT_TRUE(saw_fc1);
  // Without sequence parallelism every rank routes all 512 tokens, and the experts take
  // ep·C = 4·128 rows: the same expert work, twice the all-to-all.
  json["parallelism"]["tensor"]["sequence_parallel"] = false;
  const models::TransformerShard replicated = ShardOf(ConfigOf(json));
  EXPECT_EQ(replicated.moe_tokens(), 512);
  EXPECT_EQ(replicated.expert_gather(), 1);
}

TEST(MoeSequenceParallelTest, FullAndSymmetricRanksAgree) {
  ExpectSymmetricMatchesFull(SplitExpertsConfig(0));
  ExpectSymmetricMatchesFull(SplitExpertsConfig(1));
}

}  // namespace
}  // namespace dtsim::strategies
