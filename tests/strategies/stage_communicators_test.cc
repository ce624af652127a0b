// The communicators a stage's rank joins and NCCL's buffers for them (strategies/
// stage_communicators.h); the byte counts per communicator are network/nccl_memory_test.cc's.
#include "strategies/stage_communicators.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "strategies/stage_memory.h"
#include "tests/strategies/simulate_helpers.h"

namespace dtsim::strategies {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

std::map<std::string, int64_t> BytesByName(const ResolvedConfig& config, int stage) {
  std::map<std::string, int64_t> bytes;
  for (const StageCommunicator& c : StageCommunicators(config, stage)) {
    bytes[c.name] = c.buffers.total();
  }
  return bytes;
}

// The shipped LLaMA-2 70B plan on 64 H100s: TP 8 (one node) with sequence parallelism, DP 4
// under ZeRO 1, PP 2, rank order tp-dp-pp. Stage 0's rank 0: its tensor group fills node 0 and
// all-gathers and reduce-scatters (32 ring channels × 12 MiB = 384 MiB, no NVLS, which only
// all-reduces use); its data-parallel peers are ranks 0, 8, 16, 24, one a node, reduce-scattering
// (4 channels through one NIC × 20 MiB = 80 MiB); its pipeline peer is rank 32, on node 4 (the
// network's two shared p2p pools, 128 MiB). The untied output layer needs no embedding group.
// 592 MiB; stage 1 the same.
TEST(StageCommunicatorsTest, LlamaOn64H100s) {
  const ResolvedConfig config = ConfigOf(ExampleJson("llama2_70b_64h100.json"));
  const std::map<std::string, int64_t> expected = {
      {"tensor", 384 * kMiB}, {"data", 80 * kMiB}, {"pipeline", 128 * kMiB}};
  EXPECT_EQ(BytesByName(config, 0), expected);
  EXPECT_EQ(BytesByName(config, 1), expected);
  EXPECT_EQ(StageNcclBuffers(config, 0).total(), 592 * kMiB);
  // The memory model counts them outside the allocator, in every stage's total.
  const Expected<std::vector<models::MemoryBreakdown>> memory = EstimateStageMemory(config);
  ASSERT_TRUE(memory.ok()) << memory.error().ToString();
  for (const models::MemoryBreakdown& stage : *memory) {
    EXPECT_EQ(stage.nccl, 592 * kMiB);
    EXPECT_EQ(stage.total(), stage.tensors() + stage.runtime + stage.nccl);
  }
}

// Without sequence parallelism the tensor group all-reduces activations: NVLS adds 256 MiB.
// Without ZeRO the data group all-reduces gradients too, across nodes: no NVLS, but the double
// binary tree (network/nccl_memory_test.cc TreesAcrossNodes): one GPU on each of 4 nodes, 4
// channels × 2 × 3 / 4 × 20 MiB = 120 MiB beside the ring's 80.
TEST(StageCommunicatorsTest, AllReducesAddNvlsOnOneNode) {
  Json json = ExampleJson("llama2_70b_64h100.json");
  json["parallelism"]["tensor"]["sequence_parallel"] = false;
  json["parallelism"]["zero_stage"] = 0;
  const std::map<std::string, int64_t> expected = {
      {"tensor", 640 * kMiB}, {"data", 200 * kMiB}, {"pipeline", 128 * kMiB}};
  EXPECT_EQ(BytesByName(ConfigOf(json), 0), expected);
}

// Mixtral 8x7B on 64 H100s: DP 16 with EP 8, PP 4, no TP; rank = dp + 16·pp. Rank 0's data
// group is ranks 0–15 on nodes 0 and 1 (8 NICs a node: 32 channels; a rank holds 1/8 of a
// network pair and 7/8 of a local one a channel: 32 × (20 + 7 × 12) / 8 = 416 MiB of rings,
// and as it all-reduces across two nodes the tree's as much again: 832 MiB); its
// expert all-to-all peers are ranks 1–7, all on node 0, each on 32 p2p channels: 7 × 32 × 12 =
// 2,688 MiB (NVIDIA/nccl issue 1685 saw 32 channels a pair and 10 + 2 MiB buffers each, and
// 3.28 GB more in use after the first all-to-all of 8 H100s); its expert-data group is ranks
// 0 and 8, one on each of nodes 0 and 1 (one NIC: 4 channels × 20 MiB = 80 MiB of ring, the
// tree's 4 × 2 × 1 / 2 × 20 = 80 MiB more; no NVLS across nodes); its pipeline peer is rank 16
// on node 2 (128 MiB).
TEST(StageCommunicatorsTest, ExpertAllToAllPeersOnOneNode) {
  const ResolvedConfig config = ConfigOf(ExampleJson("mixtral_8x7b_ep8_64h100.json"));
  const std::map<std::string, int64_t> expected = {{"data", 832 * kMiB},
                                                   {"expert", 2688 * kMiB},
                                                   {"expert-data", 160 * kMiB},
                                                   {"pipeline", 128 * kMiB}};
  EXPECT_EQ(BytesByName(config, 0), expected);
}

// GPT-3 1.3B on 16 A100s (two DGX A100: 12 NVLinks, no NVLS, 200 Gb/s NICs, so 4 channels a
// NIC): TP 4 with sequence parallelism, DP 2 under ZeRO 1, PP 2; rank = tp + 4·(dp + 2·pp).
// Rank 0's tensor group (ranks 0–3) and data group (ranks 0 and 4) are on node 0: 2 × 12 = 24
// ring channels × 12 MiB = 288 MiB each. Its pipeline peer, rank 8, is on node 1 (two pools of
// 32 channels × 16 × 128 KiB: 128 MiB). GPT-3 ties its embeddings, so the first and last
// stages all-reduce the table's gradients: ranks 0 and 8, one GPU a node (ring 4 × 20 = 80 MiB,
// tree 4 × 2 × 1 / 2 × 20 = 80 MiB: 160 MiB).
TEST(StageCommunicatorsTest, TiedEmbeddingGroupOnTheFirstAndLastStages) {
  const ResolvedConfig config = ConfigOf(ExampleJson("gpt3_1.3b_16gpu.json"));
  const std::map<std::string, int64_t> expected = {{"tensor", 288 * kMiB},
                                                   {"data", 288 * kMiB},
                                                   {"pipeline", 128 * kMiB},
                                                   {"embedding", 160 * kMiB}};
  EXPECT_EQ(BytesByName(config, 0), expected);
  EXPECT_EQ(BytesByName(config, 1), expected);
}

// Llama 3.1 405B at 128k on 16,384 H100s (TP 8 with SP, CP 16 as a p2p ring, DP 8, PP 16):
// rank 0's context peers are ranks 8 and 120 (data indices 1 and 15, eight ranks apart), on
// other nodes: the two shared pools, 128 MiB. Its data group spans data × context = 128 data
// indices, one GPU a node (80 MiB); tensor 384 MiB; pipeline 128 MiB. 720 MiB.
TEST(StageCommunicatorsTest, ContextParallelRingPeers) {
  const ResolvedConfig config = ConfigOf(ExampleJson("llama3.1_405b_128k_16384h100.json"));
  const std::map<std::string, int64_t> expected = {{"tensor", 384 * kMiB},
                                                   {"data", 80 * kMiB},
                                                   {"context", 128 * kMiB},
                                                   {"pipeline", 128 * kMiB}};
  EXPECT_EQ(BytesByName(config, 0), expected);
  for (const StageCommunicator& c : StageCommunicators(config, 0)) {
    if (c.name == "context") {
      EXPECT_EQ(c.use.ranks, 16);
      EXPECT_EQ(c.use.remote_peers, 2);
    }
  }
}

// One GPU: no communicator, nothing held.
TEST(StageCommunicatorsTest, OneGpuHoldsNone) {
  Json json = ExampleJson("llama2_70b_64h100.json");
  json["model"] = "gpt2-124m";
  json["cluster"] = {
      {"preset", "dgx-h100"}, {"nodes", 1}, {"gpus_per_node", 1}, {"gpu", "h100-sxm5-80gb"}};
  json["parallelism"] = {{"data", 1}};
  json["training"]["global_batch"] = 8;
  json["training"]["seq_len"] = 1024;
  const ResolvedConfig config = ConfigOf(json);
  EXPECT_TRUE(StageCommunicators(config, 0).empty());
  EXPECT_EQ(StageNcclBuffers(config, 0).total(), 0);
}

}  // namespace
}  // namespace dtsim::strategies
