// Context parallelism (Megatron-Core with Transformer Engine): the config, the ring attention's
// K/V shifts and the a2a variant's all-to-alls, each rank's share of the work and the memory,
// the groups gradients reduce over, and full against symmetric ranks; each expectation derived
// in a comment.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "sim/graph/graph_json.h"
#include "strategies/categories.h"
#include "strategies/config.h"
#include "strategies/simulate.h"
#include "strategies/stage_memory.h"
#include "tests/strategies/simulate_helpers.h"
#include "traces/chakra_graph.h"
#include "traces/chakra_reader.h"
#include "traces/chakra_writer.h"

namespace dtsim::strategies {
namespace {

using graph::CommKind;
using testing::HasSubstr;

// 4 layers of hidden 4096 (32 heads of 128, 8 KV heads) on one DGX H100: DP 2 × CP 2 × TP 2
// (rank = tp + 2·(cp + 2·dp): context peers 2 apart, on one node), sequences of 8,192 tokens,
// 2 micro-batches of 1 per replica, no recompute.
Json CpConfig(const char* comm = "p2p") {
  Json json = Json::parse(R"({
    "model": {"family": "transformer", "layers": 4, "hidden": 4096, "heads": 32, "kv_heads": 8,
              "vocab": 32768, "max_seq": 8192},
    "training": {"global_batch": 4, "micro_batch": 1, "seq_len": 8192, "dropout": false,
                 "flash_attention": true},
    "cluster": {"preset": "dgx-h100", "gpu": "h100-sxm5-80gb", "nodes": 1},
    "parallelism": {"data": 2, "tensor": 2, "context": {"size": 2}},
    "simulation": {"network_model": "analytical"}
  })");
  json["parallelism"]["context"]["comm"] = comm;
  return json;
}

TEST(ContextParallelTest, ConfigReadsTheSizeAndTheVariant) {
  const ResolvedConfig config = ConfigOf(CpConfig());
  EXPECT_EQ(config.plan.context, 2);
  EXPECT_EQ(config.plan.context_comm, models::ContextComm::kP2p);
  EXPECT_EQ(config.plan.world(), 8);
  EXPECT_EQ(config.Microbatches(), 2);  // CP peers share their samples: 4 / (1 · 2)
  EXPECT_EQ(ConfigOf(CpConfig("a2a")).plan.context_comm, models::ContextComm::kAllToAll);
  Json plain = CpConfig();
  plain["parallelism"]["context"] = 2;
  EXPECT_EQ(ConfigOf(plain).plan.context, 2);
}

TEST(ContextParallelTest, ConfigErrorsNameTheKey) {
  EXPECT_THAT(ConfigError(CpConfig("ring")), HasSubstr("parallelism.context.comm"));
  EXPECT_THAT(ConfigError(CpConfig("ring")), HasSubstr("\"p2p\", \"a2a\""));
  Json no_flash = CpConfig();
  no_flash["training"]["flash_attention"] = false;
  EXPECT_THAT(ConfigError(no_flash), HasSubstr("parallelism.context: context parallelism needs "
                                               "flash attention"));
  Json odd = CpConfig();
  odd["training"]["seq_len"] = 8190;  // not 4 load-balanced chunks
  EXPECT_THAT(ConfigError(odd), HasSubstr("2 × context parallel size (load-balanced chunks) (4) "
                                          "must divide the sequence length (8190)"));
  Json few_kv = CpConfig("a2a");
  few_kv["model"]["kv_heads"] = 2;  // one KV head per tensor-parallel rank: a2a cannot split it
  EXPECT_THAT(ConfigError(few_kv), HasSubstr("must divide the KV heads of a tensor-parallel rank"));
  Json grid = CpConfig();
  grid["parallelism"]["data"] = 1;
  grid["parallelism"]["tensor"] = {{"size", 4}, {"mode", "2d"}};
  grid["training"]["micro_batch"] = 2;
  EXPECT_THAT(ConfigError(grid), HasSubstr("built with 1D tensor parallelism only"));
  Json too_many = CpConfig();
  too_many["parallelism"]["data"] = 4;
  EXPECT_THAT(ConfigError(too_many),
              HasSubstr("data × context × tensor × pipeline = 4 × 2 × 2 × 1 = 16 ranks, but the "
                        "cluster has 8 GPUs"));
}

// Ring attention: the K/V block of a rank is its 4,096 tokens × 4 KV heads × 128 × 2 B
// = 8,388,608 B (8 MiB). Per layer and micro-batch: forward passes it c − 1 = 1 time (8 MiB);
// backward passes K/V with dK/dV once (16 MiB) and sends dK/dV home (8 MiB): 32 MiB. 4 layers
// × 2 micro-batches: 256 MiB on rank 0. With CP 4 (DP 1) the block is 4 MiB, forward 3 × 4,
// backward 3 × 8 + 4: 40 MiB per layer and micro-batch, 4 micro-batches: 640 MiB.
TEST(ContextParallelTest, RingPassesKvBlocksAroundTheRing) {
  const SimulationResult two = SimulateJson(CpConfig());
  EXPECT_EQ(RankBytes(two, CommKind::kShift, "layer", kContextCategory), int64_t{256} << 20);
  Json four_json = CpConfig();
  four_json["parallelism"]["data"] = 1;
  four_json["parallelism"]["context"]["size"] = 4;
  const SimulationResult four = SimulateJson(four_json);
  EXPECT_EQ(RankBytes(four, CommKind::kShift, "layer", kContextCategory), int64_t{640} << 20);
  EXPECT_EQ(RankBytes(two, CommKind::kAllToAll, "layer"), 0);
}

// The shifts hide behind the attention chunks: on one node a shift of 8 MiB takes the
// collective latency, one NVLink hop and 8,388,608 B at what NCCL's point-to-point channels
// for a hop move in the 2-rank context-parallel communicator: its 32 channels (two per NVLink,
// at most 32) give each rank's hop 16, and 8 MiB in parts of 512 KiB fills all 16, each moving
// one of the 18 links' 450 GB/s × 0.822 (20.55 GB/s): 328.8 GB/s, 8,400 + 2,000 + 25,513 =
// 35,913 ns (16 MiB: 61,426 ns), while half of a layer's attention on 4,096 queries × 8,192 keys
// × 16 heads takes far longer. What stays exposed is the backward's last hop of dK/dV, which
// the next op (the QKV projection's gradients) waits for: 8 × 35,913 ns.
TEST(ContextParallelTest, RingShiftsHideBehindAttentionButTheLastGradientHop) {
  const SimulationResult result = SimulateJson(CpConfig());
  for (const TimeBreakdown& stage : result.stages) {
    EXPECT_EQ(stage.context, DurationNs(8 * 35'913));
  }
}

// a2a: per layer and micro-batch, forward all-to-alls Q, K, V (4,096 tokens × (2,048 + 1,024)
// × 2 B = 24 MiB) and the output (4,096 × 2,048 × 2 B = 16 MiB); backward dO (16 MiB) and dQ,
// dK, dV (24 MiB): 80 MiB, × 8 = 640 MiB on rank 0, on the compute stream.
TEST(ContextParallelTest, AllToAllVariantTradesSequenceForHeads) {
  const SimulationResult result = SimulateJson(CpConfig("a2a"));
  EXPECT_EQ(RankBytes(result, CommKind::kAllToAll, "layer", kContextCategory), int64_t{640} << 20);
  EXPECT_EQ(RankBytes(result, CommKind::kShift, "layer"), 0);
  EXPECT_GT(result.stages.front().context, DurationNs::Zero());
}

// Each context-parallel rank does 1/c of a sequence's work: CP 2 with DP 2 runs the model FLOPs
// of DP 4 (the same 4 sequences) on the same 8 GPUs, and keeps half the activations per
// micro-batch (every saved tensor scales with the rank's tokens). ZeRO shards over DP × CP: the
// same 4 ranks either way.
TEST(ContextParallelTest, EachRankHoldsItsShareOfTheSequence) {
  Json cp_json = CpConfig();
  cp_json["parallelism"]["zero_stage"] = 1;
  Json dp_json = cp_json;
  dp_json["parallelism"]["data"] = 4;
  dp_json["parallelism"].erase("context");
  const SimulationResult cp = SimulateJson(cp_json);
  const SimulationResult dp = SimulateJson(dp_json);
  EXPECT_NEAR(cp.iteration->stats.model_flops / dp.iteration->stats.model_flops, 1.0, 1e-12);
  const models::MemoryBreakdown& cp_memory = cp.iteration->stats.stage_memory.front();
  const models::MemoryBreakdown& dp_memory = dp.iteration->stats.stage_memory.front();
  // DP 4 keeps 1 micro-batch in flight of 8,192 tokens, CP 2 one of 4,096.
  EXPECT_NEAR(
      static_cast<double>(cp_memory.activations) / static_cast<double>(dp_memory.activations), 0.5,
      1e-6);
  EXPECT_EQ(cp_memory.optimizer_state, dp_memory.optimizer_state);
}

// Dense gradients reduce over the 4 ranks holding the same weights: tensor index 0 of data
// indices 0..3 (DP 2 × CP 2), ranks 0, 2, 4, 6.
TEST(ContextParallelTest, GradientsReduceOverDataAndContextPeers) {
  const SimulationResult result = SimulateJson(CpConfig());
  const graph::TaskGraph& graph = result.iteration->graph;
  int reductions = 0;
  for (uint32_t i = 0; i < graph.task_count(); ++i) {
    const graph::Task& task = graph.task(graph::TaskId(i));
    if (task.kind != graph::TaskKind::kCollective || graph.rank_of(graph::TaskId(i)) != 0 ||
        graph.category_name(task.category) != kDataCategory) {
      continue;
    }
    const std::span<const int32_t> group = graph.group(graph.comm(task.comm).group);
    EXPECT_EQ(std::vector<int32_t>(group.begin(), group.end()), (std::vector<int32_t>{0, 2, 4, 6}));
    ++reductions;
  }
  EXPECT_GT(reductions, 0);
}

TEST(ContextParallelTest, SymmetricRanksMatchFull) {
  ExpectSymmetricMatchesFull(CpConfig(), 4);
  ExpectSymmetricMatchesFull(CpConfig("a2a"), 4);
  // With sequence parallelism, ZeRO-3 and an interleaved pipeline (DP 1 × CP 2 × TP 2 × PP 2).
  Json pipelined = CpConfig();
  pipelined["training"]["global_batch"] = 4;
  pipelined["parallelism"] = Json::parse(R"({
    "data": 1, "tensor": {"size": 2, "sequence_parallel": true}, "context": 2,
    "pipeline": {"size": 2, "schedule": "interleaved", "virtual_stages": 2}, "zero_stage": 3})");
  ExpectSymmetricMatchesFull(pipelined, 2);
  // A MoE model whose experts spread over data and context peers (EP 2 over CP 2).
  Json moe = CpConfig();
  moe["model"]["moe"] = {{"experts", 4}, {"top_k", 2}};
  moe["parallelism"]["expert"] = 2;
  ExpectSymmetricMatchesFull(moe, 2);
}

// Llama 3.1 405B at 131,072 tokens on 16,384 H100s as Meta ran it (TP 8, CP 16, PP 16, DP 8,
// 128 sequences; Llama 3 paper, Table 4), stages of 7, 8 × 14, 7 layers. Without CP (DP 128)
// a micro-batch is a whole 131,072-token sequence: stage 0 keeps its 7 layers' activations of
// it (55.6 GiB), 17.4 GiB of weights, gradients and optimizer state, 0.75 GiB of CUDA context,
// and at its peak, the backward of its last layer, that layer's largest op (8.1 GiB of
// operands): 81.8 GiB, and 592 MiB of NCCL buffers (StageCommunicatorsTest: TP 384, DP 80, PP
// 128): 82.4 GiB, over the 80. CP 16 cuts a micro-batch to 8,192 tokens a rank; 1F1B keeps 16
// in flight on stage 0, the same 55.6 GiB of activations, but the largest op falls to
// 0.86 GiB: 74.6 GiB, and 720 MiB of NCCL buffers (CP's ring adds 128). The fullest stage is
// stage 1 (8 layers, 15 in flight, 59.6 GiB of activations): 79.3 GiB and the buffers, 79.99
// GiB — the plan Meta ran fits, with 7 MiB to spare.
TEST(ContextParallelTest, Llama405bAt128kFitsOn16kGpusOnlyWithContextParallelism) {
  Json json = Json::parse(R"({
    "model": "llama3.1-405b",
    "training": {"global_batch": 128, "micro_batch": 1, "seq_len": 131072, "dropout": false,
                 "flash_attention": true},
    "cluster": {"preset": "dgx-h100", "gpu": "h100-sxm5-80gb"},
    "parallelism": {"data": 8, "tensor": {"size": 8, "sequence_parallel": true}, "context": 16,
                    "pipeline": {"size": 16, "layers": [7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8,
                                                        8, 8, 7]},
                    "zero_stage": 1},
    "simulation": {"ranks": "symmetric"}
  })");
  const Expected<std::vector<models::MemoryBreakdown>> with_cp = StageMemory(ConfigOf(json));
  ASSERT_TRUE(with_cp.ok()) << with_cp.error().ToString();
  for (const models::MemoryBreakdown& stage : *with_cp) {
    EXPECT_LT(stage.total(), int64_t{80} << 30);
  }
  json["parallelism"]["data"] = 128;
  json["parallelism"].erase("context");
  EXPECT_THAT(ConfigError(json),
              HasSubstr("the plan does not fit: pipeline stage 0 needs 82.4 GiB"));
}

// Chakra has no ring step: each shift exports as a COMM_RECV_NODE from the previous context
// peer and a COMM_SEND_NODE to the next, as NCCL runs it (grouped send/recv), and dtsim reads
// its files back into the same graph.
TEST(ContextParallelTest, RingAttentionExportsToChakraAsSendRecvPairs) {
  // DP 1 × CP 4 × TP 2: rank tp + 2·cp, so rank 2 (cp 1, tp 0) receives from rank 0 and sends
  // to rank 4 at every ring step.
  Json json = CpConfig();
  json["parallelism"] = {{"data", 1}, {"tensor", 2}, {"context", {{"size", 4}, {"comm", "p2p"}}}};
  const SimulationResult result = SimulateJson(json);
  const graph::TaskGraph& graph = result.iteration->graph;
  int64_t shift_bytes = 0;
  int shifts = 0;
  for (uint32_t t = 0; t < graph.task_count(); ++t) {
    const graph::Task& task = graph.task(graph::TaskId(t));
    if (graph.rank_of(graph::TaskId(t)) != 2 || task.kind != graph::TaskKind::kCollective ||
        graph.comm(task.comm).kind != CommKind::kShift) {
      continue;
    }
    ++shifts;
    shift_bytes += graph.comm(task.comm).size.count();
  }
  ASSERT_GT(shifts, 0);
  const std::vector<traces::ChakraTrace> ranks = traces::ChakraTracesFromGraph(graph);
  int receives = 0;
  int sends = 0;
  int64_t sent_bytes = 0;
  for (const traces::ChakraNode& node : ranks[2].nodes) {
    const auto integer = [&node](const char* name) { return *node.Attr(name)->AsInteger(); };
    if (node.type == traces::ChakraNodeType::kCommRecv && node.Attr("dtsim.comm") != nullptr) {
      ++receives;
      EXPECT_EQ(integer("comm_src"), 0);
    } else if (node.type == traces::ChakraNodeType::kCommSend &&
               node.Attr("dtsim.shift_send_of") != nullptr) {
      ++sends;
      EXPECT_EQ(integer("comm_dst"), 4);
      EXPECT_GE(node.id, graph.task_count());
      sent_bytes += integer("comm_size");
    }
  }
  EXPECT_EQ(receives, shifts);
  EXPECT_EQ(sends, shifts);
  EXPECT_EQ(sent_bytes, shift_bytes);
  // Written and read back: the same graph.
  const std::string prefix = testing::TempDir() + "/cp_chakra";
  const Expected<std::vector<std::string>> written = traces::WriteChakraGraph(graph, prefix);
  ASSERT_TRUE(written.ok()) << written.error().ToString();
  std::vector<traces::ChakraTrace> read;
  for (int32_t rank = 0; rank < graph.rank_count(); ++rank) {  // then the comm group file
    Expected<traces::ChakraTrace> trace = traces::ReadChakraTrace(written->at(rank));
    ASSERT_TRUE(trace.ok()) << trace.error().ToString();
    read.push_back(std::move(trace).value());
  }
  const Expected<traces::ChakraGraph> back = traces::BuildChakraGraph(read);
  ASSERT_TRUE(back.ok()) << back.error().ToString();
  EXPECT_EQ(graph::TaskGraphToJson(back->graph), graph::TaskGraphToJson(graph));
  // a2a exports too: its all-to-alls are Chakra collectives.
  const Expected<std::vector<std::string>> a2a =
      traces::WriteChakraGraph(SimulateJson(CpConfig("a2a")).iteration->graph, prefix + "_a2a");
  EXPECT_TRUE(a2a.ok()) << a2a.error().ToString();
}

}  // namespace
}  // namespace dtsim::strategies
