// Analytic tests of every collective algorithm's α-β cost. Test cluster (round numbers):
//   4 GPUs per node, NVLink-like 100 GB/s per GPU (1e11 B/s), α_intra = 1 us;
//   2 NICs per node of 100 Gbps (12.5 GB/s each), α_inter = 10 us; efficiency 1.
// A group of k members on a node gets min(k, 2) NICs: 25 GB/s (2.5e10 B/s) for k >= 2.
// S = 1e8 bytes unless said otherwise.
#include "network/collective_algorithms.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "tests/network/test_cluster.h"

namespace dtsim::network {
namespace {

using graph::CommKind;
using testing::HasSubstr;

constexpr int64_t kS = 100'000'000;

using testing_support::Ranks;
using testing_support::TestCluster;

DurationNs Cost(CommKind kind, std::string_view algorithm, const std::vector<int32_t>& group,
                int64_t size = kS, const ClusterSpec& cluster = TestCluster(), int32_t root = -1) {
  const CollectiveRequest request{.kind = kind,
                                  .size = Bytes(size),
                                  .shape = ShapeOfGroup(group, cluster),
                                  .cluster = &cluster,
                                  .ranks = group,
                                  .root = root};
  const Expected<AlgorithmChoice> choice = ChooseCollectiveAlgorithm(request, algorithm);
  EXPECT_TRUE(choice.ok()) << choice.error().ToString();
  return choice.ok() ? choice->time : DurationNs::Zero();
}

std::string_view Chosen(CommKind kind, const std::vector<int32_t>& group, int64_t size) {
  const ClusterSpec cluster = TestCluster();
  const CollectiveRequest request{.kind = kind,
                                  .size = Bytes(size),
                                  .shape = ShapeOfGroup(group, cluster),
                                  .cluster = &cluster,
                                  .ranks = group};
  return ChooseCollectiveAlgorithm(request, "")->algorithm->name;
}

TEST(GroupShapeTest, CountsNodesAndMembersPerNode) {
  const ClusterSpec cluster = TestCluster();
  const GroupShape all = ShapeOfGroup(Ranks(0, 16), cluster);
  EXPECT_EQ(all.nodes, 4);
  EXPECT_EQ(all.per_node, 4);
  EXPECT_TRUE(all.uniform);
  const std::vector<int32_t> uneven = {0, 1, 2, 4};  // 3 on node 0, 1 on node 1
  const GroupShape shape = ShapeOfGroup(uneven, cluster);
  EXPECT_EQ(shape.nodes, 2);
  EXPECT_EQ(shape.per_node, 3);
  EXPECT_FALSE(shape.uniform);
}

TEST(AllReduceTest, RingOnOneNode) {
  // p = 4: 2(p-1)α + 2(p-1)/p · S/B = 6 · 1 us + 1.5e8 / 1e11 s = 6 us + 1.5 ms.
  EXPECT_EQ(Cost(CommKind::kAllReduce, "ring", Ranks(0, 4)), Microseconds(1506));
}

TEST(AllReduceTest, RingAcrossNodes) {
  // p = 16 on 4 nodes: a circuit of the node-major ring has 12 hops inside nodes (1 us) and 4
  // across (10 us), (12 + 40) / 16 = 3.25 us a hop; 2 · 15 hops = 97.5 us of latency. A node's
  // NICs carry 2 · 15/16 · 1e8 = 1.875e8 B at 2.5e10 B/s = 7.5 ms (NVLink carries 3/4 of that
  // at 1e11 B/s, 1.406 ms, not the bottleneck). T = 7.5975 ms.
  EXPECT_EQ(Cost(CommKind::kAllReduce, "ring", Ranks(0, 16)), Nanoseconds(7'597'500));
}

TEST(AllReduceTest, RingWithOneMemberPerNodeUsesOneNic) {
  // Ranks 0, 4, 8, 12: one per node, so one NIC (1.25e10 B/s): 2 · 3/4 · 1e8 = 1.5e8 B takes
  // 12 ms, plus 2 · 3 · 10 us. T = 12.06 ms.
  EXPECT_EQ(Cost(CommKind::kAllReduce, "ring", {0, 4, 8, 12}), Microseconds(12'060));
}

TEST(AllReduceTest, DoubleBinaryTree) {
  // One node, p = 4: the chain's 3 hops up and back, 2 · 3 · 1 us; its middle members send
  // 2S = 2e8 B at 1e11 B/s. T = 6 us + 2 ms.
  EXPECT_EQ(Cost(CommKind::kAllReduce, "tree", Ranks(0, 4)), Microseconds(2006));
  // p = 16 on 4 nodes of k = 4: 2 · (3 · 1 us + ⌈log2 4⌉ · 10 us) = 46 us. Heap over nodes
  // 0..3: node 0 has 2 children, node 1 a parent and a child, nodes 2, 3 a parent only; the
  // mirrored heap gives node n the edges of position 3 - n. Node 0: 2 + 1, node 1: 2 + 1, so
  // the busiest node sends 3 · S/2 = 1.5e8 B over its NICs at 2.5e10 B/s = 6 ms (the chain's
  // 2e8 B on NVLink, 2 ms).
  EXPECT_EQ(Cost(CommKind::kAllReduce, "tree", Ranks(0, 16)), Microseconds(6046));
  // 16 nodes: a node with a parent and two children in one heap is a leaf in the other:
  // (3 + 1) · S/2 = 2S, the large-N bound. At 16 ranks, one per node of a 16-node cluster (no
  // chain): 2⌈log2 16⌉ · 10 us = 80 us + 2e8 / 1.25e10 s = 16 ms.
  std::vector<int32_t> one_per_node;
  for (int32_t node = 0; node < 16; ++node) one_per_node.push_back(4 * node);
  EXPECT_EQ(Cost(CommKind::kAllReduce, "tree", one_per_node, kS, TestCluster(16)),
            Microseconds(16'080));
}

TEST(AllReduceTest, HalvingDoubling) {
  // One node, p = 4: 2 log2 4 · 1 us + 2 · 3/4 · 1e8 / 1e11 s = 4 us + 1.5 ms.
  EXPECT_EQ(Cost(CommKind::kAllReduce, "halving_doubling", Ranks(0, 4)), Microseconds(1504));
  // p = 3: p' = 2, one extra rank folds in and gets the result back: 2 · (1 us + 1e8 / 1e11 s)
  // = 2.002 ms; then 2 steps of 1 us moving 2 · 1/2 · S = 1e8 B: 1.002 ms. T = 3.004 ms.
  EXPECT_EQ(Cost(CommKind::kAllReduce, "halving_doubling", Ranks(0, 3)), Microseconds(3004));
  // p = 16 on 4 nodes of k = 4 (2 NICs: 2 of a node's 4 senders per NIC). Halving: 2 far
  // steps (distance 8, 4: off-node), each 10 us + 2 · bytes / 1.25e10 B/s with bytes S/2, S/4:
  // 8.01 ms + 4.01 ms; 2 near steps, 1 us + bytes / 1e11 B/s with S/8, S/16: 126 us + 63.5 us.
  // Doubling mirrors it: T = 2 · (12.02 ms + 189.5 us) = 24.419 ms.
  EXPECT_EQ(Cost(CommKind::kAllReduce, "halving_doubling", Ranks(0, 16)), Microseconds(24'419));
}

TEST(AllReduceTest, Hierarchical) {
  // k = 4, N = 4. Intra reduce-scatter: 3 · 1 us + 3/4 · 1e8 / 1e11 s = 753 us; inter ring
  // all-reduce of the shards: 2 · 3 · 10 us + 2 · 3/4 · 1e8 / 2.5e10 s = 6.06 ms; intra
  // all-gather 753 us. T = 7.566 ms.
  EXPECT_EQ(Cost(CommKind::kAllReduce, "hierarchical", Ranks(0, 16)), Microseconds(7566));
}

TEST(AllReduceTest, NvlsReducesInTheSwitch) {
  // NVLink SHARP with a 3 us latency at efficiency 1 and no chunk overhead (NvlsChunkTest
  // prices it): each port carries (p+1)/p · S = 5/4 · 1e8 B at 1e11 B/s = 1.25 ms. T = 1.253
  // ms, less than the ring's 1.506 ms, so it is the default on one node; at efficiency 0.5,
  // 2.503 ms, and the ring is chosen again.
  ClusterSpec cluster = TestCluster();
  cluster.intra.nvls = {.enabled = true,
                        .latency = Microseconds(3),
                        .efficiency = 1.0,
                        .chunk_overhead = DurationNs::Zero()};
  EXPECT_EQ(Cost(CommKind::kAllReduce, "nvls", Ranks(0, 4), kS, cluster), Microseconds(1253));
  const auto chosen = [&](const std::vector<int32_t>& group) {
    const CollectiveRequest request{.kind = CommKind::kAllReduce,
                                    .size = Bytes(kS),
                                    .shape = ShapeOfGroup(group, cluster),
                                    .cluster = &cluster,
                                    .ranks = group};
    return ChooseCollectiveAlgorithm(request, "")->algorithm->name;
  };
  EXPECT_EQ(chosen(Ranks(0, 4)), "nvls");
  // Two nodes: NVLS does not apply, and NCCL's tuner runs a ring at 1e8 B (DefaultChoice…).
  EXPECT_EQ(chosen(Ranks(0, 8)), "ring");
  cluster.intra.nvls.efficiency = 0.5;
  EXPECT_EQ(Cost(CommKind::kAllReduce, "nvls", Ranks(0, 4), kS, cluster), Microseconds(2503));
  EXPECT_EQ(chosen(Ranks(0, 4)), "ring");
}

// NCCL's NVLS chunk (src/enqueue.cc calcCollChunking) on 8 GPUs of a DGX H100: 16 channels ×
// 8 heads = 128 concurrent ops; 128 KiB from 64 · 128 · 128 KiB = 1 GiB, 64 KiB from 8 · 128 ·
// 64 KiB = 64 MiB, 32 KiB from 2 · 128 · 32 KiB = 8 MiB, 16 KiB below. On 4 GPUs (64 ops) each
// threshold halves. The rate: 450 GB/s × 0.686 = 308.7 GB/s at 128 KiB; a channel moves 308.7 /
// 16 = 19.29375 GB/s, so the 640 ns chunk overhead is 12,348 B of it, and a chunk of C keeps
// (1 + 12,348 / 131,072) / (1 + 12,348 / C) of the rate: 0.92073 at 64 KiB, 0.79473 at 32
// KiB, 0.62396 at 16 KiB.
TEST(NvlsChunkTest, ChunksShrinkWithTheMessageAndCostTheirOverhead) {
  const ClusterSpec dgx = ClusterPreset("dgx-h100", 1).value();
  constexpr double kMiB = 1 << 20;
  const NvlsSpec& nvls = dgx.intra.nvls;
  EXPECT_EQ(NvlsChunk(nvls, 8, 2048 * kMiB), 128 * 1024);
  EXPECT_EQ(NvlsChunk(nvls, 8, 1024 * kMiB), 128 * 1024);
  EXPECT_EQ(NvlsChunk(nvls, 8, 1024 * kMiB - 1), 64 * 1024);
  EXPECT_EQ(NvlsChunk(nvls, 8, 64 * kMiB), 64 * 1024);
  EXPECT_EQ(NvlsChunk(nvls, 8, 64 * kMiB - 1), 32 * 1024);
  EXPECT_EQ(NvlsChunk(nvls, 8, 8 * kMiB), 32 * 1024);
  EXPECT_EQ(NvlsChunk(nvls, 8, 8 * kMiB - 1), 16 * 1024);
  EXPECT_EQ(NvlsChunk(nvls, 4, 512 * kMiB), 128 * 1024);
  EXPECT_EQ(NvlsChunk(nvls, 4, 32 * kMiB - 1), 32 * 1024);
  EXPECT_NEAR(NvlsRate(dgx, 8, 2048 * kMiB), 308.7e9, 1e3);
  EXPECT_NEAR(NvlsRate(dgx, 8, 256 * kMiB) / 308.7e9, 0.92073, 1e-5);
  EXPECT_NEAR(NvlsRate(dgx, 8, 32 * kMiB) / 308.7e9, 0.79473, 1e-5);
  EXPECT_NEAR(NvlsRate(dgx, 8, 1 * kMiB) / 308.7e9, 0.62396, 1e-5);
}

TEST(AllReduceTest, NvlsNeedsSharpAndOneNode) {
  const auto error = [](const ClusterSpec& cluster, const std::vector<int32_t>& group) {
    const CollectiveRequest request{.kind = CommKind::kAllReduce,
                                    .size = Bytes(kS),
                                    .shape = ShapeOfGroup(group, cluster),
                                    .cluster = &cluster,
                                    .ranks = group};
    return ChooseCollectiveAlgorithm(request, "nvls").error().message();
  };
  EXPECT_EQ(error(TestCluster(), Ranks(0, 4)),
            "the nvls algorithm needs an NVSwitch with NVLink SHARP (intra_node.nvls)");
  ClusterSpec sharp = TestCluster();
  sharp.intra.nvls = {.enabled = true, .latency = Microseconds(3), .efficiency = 1.0};
  EXPECT_EQ(error(sharp, Ranks(0, 8)),
            "the nvls algorithm runs inside one node; this group spans 2 nodes");
}

TEST(AllReduceTest, HierarchicalNeedsEvenPlacement) {
  const ClusterSpec cluster = TestCluster();
  const std::vector<int32_t> uneven = {0, 1, 2, 4};
  const CollectiveRequest request{.kind = CommKind::kAllReduce,
                                  .size = Bytes(kS),
                                  .shape = ShapeOfGroup(uneven, cluster),
                                  .cluster = &cluster};
  EXPECT_THAT(ChooseCollectiveAlgorithm(request, "hierarchical").error().message(),
              HasSubstr("needs the same number of group members on every node"));
  EXPECT_TRUE(ChooseCollectiveAlgorithm(request, "").ok());  // the default skips it
}

TEST(AllReduceTest, DefaultChoiceFollowsSizeAndPlacement) {
  // As NCCL's tuner picks (NcclPrefersTree): the ring's bus bandwidth B from its wire time, the
  // tree at min(0.9 B, 80 GB/s above two nodes) · 0.5 · NCCL's correction for the size, the
  // ring's latency counted 1.9 times across nodes from p/16 · 64 KiB. 16 ranks on 4 nodes:
  // ring latency 30 hops of (12 · 1 + 4 · 10)/16 = 3.25 us = 97.5 us; B = 25 GB/s (two NICs).
  // 1 kB: ring 97.5 us + 75 ns against tree 46 us + 1000 / (22.5 · 0.5 · 0.9 GB/s) = 46.1 us:
  // the tree. 1 MB: ring 185.25 + 75 = 260.3 us, tree 46 + 1e6 / (11.25 · 0.5 GB/s) = 223.8 us:
  // the tree. 1e8 B: ring 185.25 us + 7.5 ms = 7.685 ms, tree 46 us + 1e8 / (11.25 · 0.8 GB/s)
  // = 11.157 ms: the ring — though on 4 nodes a tree node sends only 1.5S where a ring's sends
  // 1.875S (the tree would take 6.046 ms); NCCL's model does not credit that.
  EXPECT_EQ(Chosen(CommKind::kAllReduce, Ranks(0, 16), 1000), "tree");
  EXPECT_EQ(Chosen(CommKind::kAllReduce, Ranks(0, 16), 1'000'000), "tree");
  EXPECT_EQ(Chosen(CommKind::kAllReduce, Ranks(0, 16), kS), "ring");
  // One node, 1e8 B: ring 1.506 ms, tree 2 · 3 · 1 us + 2e8/1e11 s = 2.006 ms.
  EXPECT_EQ(Chosen(CommKind::kAllReduce, Ranks(0, 4), kS), "ring");
}

TEST(ReduceScatterAllGatherTest, Rings) {
  // Reduce-scatter of a 1e8 B input, p = 4: 3 · 1 us + 3/4 · 1e8 / 1e11 s = 753 us.
  EXPECT_EQ(Cost(CommKind::kReduceScatter, "ring", Ranks(0, 4)), Microseconds(753));
  // All-gather of 1e8 B contributions, p = 4: 3 · 1 us + 3 · 1e8 / 1e11 s = 3.003 ms.
  EXPECT_EQ(Cost(CommKind::kAllGather, "ring", Ranks(0, 4)), Microseconds(3003));
}

TEST(BroadcastReduceTest, ChainAndBinomialTree) {
  // Pipelined chain, p = 4: 3 · 1 us + 1e8 / 1e11 s = 1.003 ms.
  EXPECT_EQ(Cost(CommKind::kBroadcast, "ring", Ranks(0, 4)), Microseconds(1003));
  EXPECT_EQ(Cost(CommKind::kReduce, "ring", Ranks(0, 4)), Microseconds(1003));
  // Binomial tree: ⌈log2 4⌉ = 2 rounds of (1 us + 1 ms).
  EXPECT_EQ(Cost(CommKind::kBroadcast, "binomial_tree", Ranks(0, 4), kS, TestCluster(), 0),
            Microseconds(2002));
  // 16 ranks on 4 nodes from root 0: rounds with span 1, 2 stay on node 0 (1 us + 1 ms each);
  // span 4: 0->4, 1->5, 2->6, 3->7, four senders off node 0 over its 2 NICs, two per NIC:
  // 10 us + 2 · 1e8 / 1.25e10 s = 16.01 ms; span 8: 8 senders, 4 per node on nodes 0 and 1,
  // again two per NIC: 16.01 ms. T = 2 · 1.001 + 2 · 16.01 = 34.022 ms.
  EXPECT_EQ(Cost(CommKind::kBroadcast, "binomial_tree", Ranks(0, 16), kS, TestCluster(), 0),
            Microseconds(34'022));
}

// NCCL's point-to-point traffic crosses a NIC in messages of at most 128 KiB, each costing
// the path 14,700 bytes more, against the ring's 1 MiB slices that `efficiency` describes
// (NetMessageEfficiency): f = (1 + 14,700 / 1,048,576) / (1 + 14,700 / 131,072) = 0.9117629.
// A NIC moves such traffic at 1.25e10 · f = 1.139704e10 B/s.
TEST(AllToAllTest, DirectAndHierarchical) {
  // Direct, 16 ranks on 4 nodes: 15 · 10 us; a node's NICs carry k(p-k)/p · S = 4 · 12/16 ·
  // 1e8 = 3e8 B at 2.5e10 · f B/s = 13.161317 ms. T = 13.311317 ms.
  EXPECT_EQ(Cost(CommKind::kAllToAll, "direct", Ranks(0, 16)), Nanoseconds(13'311'317));
  // 2DH: intra 3 · 1 us + 3/4 · 1e8 / 1e11 s = 753 us; inter 3 · 10 us + 4 · 3/4 · 1e8 /
  // (2.5e10 · f) s = 13.191317 ms. T = 13.944317 ms: the same volume, more phases.
  EXPECT_EQ(Cost(CommKind::kAllToAll, "hierarchical", Ranks(0, 16)), Nanoseconds(13'944'317));
  // At 1 kB messages the 15 inter-node steps dominate direct (150 us), while 2DH takes
  // 3 · 1 + 3 · 10 = 33 us of latency: the hierarchical one is faster.
  EXPECT_LT(Cost(CommKind::kAllToAll, "hierarchical", Ranks(0, 16), 1000),
            Cost(CommKind::kAllToAll, "direct", Ranks(0, 16), 1000));
}

TEST(BarrierAndSendRecvTest, LatencyAndOneLink) {
  // Dissemination over 16 ranks on 4 nodes: ⌈log2 16⌉ · 10 us.
  EXPECT_EQ(Cost(CommKind::kBarrier, "", Ranks(0, 16), 0), Microseconds(40));
  // Same node: 1 us + 1e8 / 1e11 s. Across nodes one NIC in 128 KiB messages (f above):
  // 10 us + 1e8 / 1.139704e10 s = 8.784212 ms.
  EXPECT_EQ(Cost(CommKind::kSendRecv, "", {0, 1}), Microseconds(1001));
  EXPECT_EQ(Cost(CommKind::kSendRecv, "", {0, 4}), Nanoseconds(8'784'212));
}

TEST(ShiftTest, EveryMemberSendsToTheNextAtOnce) {
  // One node, ranks 0..3: every hop on NVLink at once, one transfer per GPU port:
  // 1 us + 1e8 / 1e11 s = 1.001 ms (a ring all-gather's single step).
  EXPECT_EQ(Cost(CommKind::kShift, "direct", Ranks(0, 4)), Microseconds(1001));
  // Ranks 0, 4, 8, 12, one per node: every hop leaves its node over one NIC in 128 KiB
  // messages (1.139704e10 B/s, f above): 10 us + 8.774212 ms.
  const DurationNs one_nic = Nanoseconds(8'784'212);
  EXPECT_EQ(Cost(CommKind::kShift, "", {0, 4, 8, 12}), one_nic);
  // Ranks 0..7 on 2 nodes in node-major order: 3 hops on each node over NVLink (1 ms) and one
  // leaving each node (3 → 4, 7 → 0) over a NIC (8.77 ms): 10 us + 8.774212 ms.
  EXPECT_EQ(Cost(CommKind::kShift, "", Ranks(0, 8)), one_nic);
  // Ranks 0, 4, 1, 5 alternate nodes: every hop leaves its node, two from each node over its
  // 2 rails at once (one flow a NIC): still 10 us + 8.774212 ms.
  EXPECT_EQ(Cost(CommKind::kShift, "", {0, 4, 1, 5}), one_nic);
  // Ranks 0, 4, 1, 5, 2, 6 leave 3 flows a node on 2 rails: ⌈3/2⌉ = 2 share one NIC,
  // 10 us + 2 · 8.774212 ms (17.548423, rounded up) = 17.558423 ms.
  EXPECT_EQ(Cost(CommKind::kShift, "", {0, 4, 1, 5, 2, 6}), Nanoseconds(17'558'423));
}

TEST(SharedNicsTest, WhereEveryGpuCommunicatesAGroupGetsItsGpusShareOfTheNics) {
  // A training step (ClusterSpec::gpus_share_nics): the test cluster's 2 NICs serve 4 GPUs, so
  // a group's k members on a node get min(k, 2, k · 2/4) NICs — half a NIC a member.
  ClusterSpec shared = TestCluster();
  shared.gpus_share_nics = true;
  // Ranks 0, 4, 8, 12, one per node: half a NIC (6.25e9 B/s) where the group alone had one.
  // 2 · 3/4 · 1e8 = 1.5e8 B take 24 ms, plus 2 · 3 · 10 us: T = 24.06 ms (12.06 ms alone).
  EXPECT_EQ(Cost(CommKind::kAllReduce, "ring", {0, 4, 8, 12}, kS, shared), Microseconds(24'060));
  // Four members a node own the node's GPUs, so both NICs: unchanged (RingAcrossNodes).
  EXPECT_EQ(Cost(CommKind::kAllReduce, "ring", Ranks(0, 16), kS, shared),
            Cost(CommKind::kAllReduce, "ring", Ranks(0, 16)));
  // A send across nodes at most half a NIC in 128 KiB messages (f above): 1.139704e10 / 2 =
  // 5.69852e9 B/s; 10 us + 1e8 B at that rate = 10 us + 17.548423 ms (twice the lone send's
  // 8.774212 ms, rounded up).
  EXPECT_EQ(Cost(CommKind::kSendRecv, "", {0, 4}, kS, shared), Nanoseconds(17'558'423));
  // On one node nothing changes: NVLink, 1 us + 1e8 / 1e11 s.
  EXPECT_EQ(Cost(CommKind::kSendRecv, "", {0, 1}, kS, shared), Microseconds(1001));
  // A shift with one member a node: each hop on half a NIC, as the send.
  EXPECT_EQ(Cost(CommKind::kShift, "", {0, 4, 8, 12}, kS, shared), Nanoseconds(17'558'423));
  // A node with a NIC per GPU has nothing to share: a lone member keeps its NIC.
  ClusterSpec railed = shared;
  railed.inter.nics_per_node = 4;
  ClusterSpec alone = railed;
  alone.gpus_share_nics = false;
  EXPECT_EQ(Cost(CommKind::kAllReduce, "ring", {0, 4, 8, 12}, kS, railed),
            Cost(CommKind::kAllReduce, "ring", {0, 4, 8, 12}, kS, alone));
  EXPECT_EQ(Cost(CommKind::kSendRecv, "", {0, 4}, kS, railed),
            Cost(CommKind::kSendRecv, "", {0, 4}, kS, alone));
}

TEST(CollectiveAlgorithmsTest, GroupOfOneCostsNothing) {
  EXPECT_EQ(Cost(CommKind::kAllReduce, "", {3}), DurationNs::Zero());
}

TEST(CollectiveAlgorithmsTest, OversubscribedSpineSlowsRingsByTheShareThatClimbs) {
  // 2:1 oversubscription: a leaf's up-links carry half its nodes' NIC bandwidth. A ring over
  // 16 ranks on 4 nodes (4 a node) runs 30 hops of 3.25 us (RingAcrossNodes) and moves
  // 2 · 15/16 · 1e8 = 1.875e8 B through each node's 2.5e10 B/s: 7.5975 ms at full rate.
  ClusterSpec cluster = TestCluster();
  cluster.inter.oversubscription = 2;
  // One node a leaf: every ring edge leaves its leaf (c = 1), so the nodes get 1/2 of their
  // NICs: 97.5 us + 1.875e8 / 1.25e10 s = 15.0975 ms.
  cluster.inter.nodes_per_leaf = 1;
  EXPECT_EQ(Cost(CommKind::kAllReduce, "ring", Ranks(0, 16), kS, cluster), Nanoseconds(15'097'500));
  // Two nodes a leaf: the ring leaves each leaf on one edge of its two nodes (c = 1/2), and
  // the up-links carry half the NIC bandwidth: they keep up, max(1, 2 · 1/2) = 1, 7.5975 ms.
  cluster.inter.nodes_per_leaf = 2;
  EXPECT_EQ(Cost(CommKind::kAllReduce, "ring", Ranks(0, 16), kS, cluster), Nanoseconds(7'597'500));
  // At 3:1 they do not: max(1, 3 · 1/2) = 1.5, 97.5 us + 1.875e8 / (2.5e10 / 1.5) s = 11.3475 ms.
  cluster.inter.oversubscription = 3;
  EXPECT_EQ(Cost(CommKind::kAllReduce, "ring", Ranks(0, 16), kS, cluster), Nanoseconds(11'347'500));
  // Ranks 0..7 sit on nodes 0 and 1, under one leaf: no spine, full rate. A circuit of 8 hops
  // crosses 2 node boundaries: (6 · 1 us + 2 · 10 us) / 8 = 3.25 us a hop, 14 hops = 45.5 us;
  // 2 · 7/8 · 1e8 / 2.5e10 s = 7 ms.
  EXPECT_EQ(Cost(CommKind::kAllReduce, "ring", Ranks(0, 8), kS, cluster), Nanoseconds(7'045'500));
}

TEST(CollectiveAlgorithmsTest, AllToAllClimbsWithTheShareBoundForOtherLeaves) {
  // 16 ranks on 4 nodes, 2 nodes a leaf: a node's k(p − k)/p of S goes to the 12 ranks off its
  // node, 8 of them under the other leaf: c = (16 − 4 · 2) / (16 − 4) = 2/3. At 3:1 the nodes
  // get 1 / max(1, 3 · 2/3) = 1/2 of their NICs — as on a flat fabric of half the NIC rate
  // (same latencies, same messages).
  ClusterSpec cluster = TestCluster();
  cluster.inter.nodes_per_leaf = 2;
  cluster.inter.oversubscription = 3;
  ClusterSpec half = TestCluster();
  half.inter.nic_bandwidth = Bandwidth::BitsPerSecond(50 * kGiga);
  EXPECT_NEAR(Cost(CommKind::kAllToAll, "direct", Ranks(0, 16), kS, cluster).ns(),
              Cost(CommKind::kAllToAll, "direct", Ranks(0, 16), kS, half).ns(), 1);
}

// 8 nodes of 4 GPUs, 2 nodes a leaf, 4 a pod: pods joined at 1:8 (the leaves at 1:1).
ClusterSpec PodCluster() {
  ClusterSpec cluster = TestCluster(8);
  cluster.inter.nodes_per_leaf = 2;
  cluster.inter.nodes_per_pod = 4;
  cluster.inter.pod_oversubscription = 8;
  return cluster;
}

TEST(CollectiveAlgorithmsTest, GroupShapeCountsTheLeavesAndPodsItSpans) {
  const ClusterSpec cluster = PodCluster();
  // Ranks 0..11: nodes 0, 1, 2 — leaves 0 and 1 (node 2 alone under leaf 1), one pod.
  const GroupShape three = ShapeOfGroup(Ranks(0, 12), cluster);
  EXPECT_EQ(three.leaves.blocks, 2);
  EXPECT_EQ(three.leaves.fewest_nodes, 1);
  EXPECT_EQ(three.pods.blocks, 1);
  // One rank a node, all 8 nodes: 4 leaves of 2, 2 pods of 4.
  const std::vector<int32_t> one_a_node = {0, 4, 8, 12, 16, 20, 24, 28};
  const GroupShape spread = ShapeOfGroup(one_a_node, cluster);
  EXPECT_EQ(spread.leaves.blocks, 4);
  EXPECT_EQ(spread.leaves.fewest_nodes, 2);
  EXPECT_EQ(spread.pods.blocks, 2);
  EXPECT_EQ(spread.pods.fewest_nodes, 4);
  // Without pods in the fabric a group spans one.
  ClusterSpec flat = cluster;
  flat.inter.nodes_per_pod = 0;
  EXPECT_EQ(ShapeOfGroup(Ranks(0, 32), flat).pods.blocks, 1);
}

TEST(CollectiveAlgorithmsTest, PodsSlowRingsByTheShareThatClimbsToTheCore) {
  // The pods' up-links carry 1/8 of their NIC bandwidth. A ring of one GPU a node over the 8
  // nodes leaves each pod on one edge of its 4 nodes: c = 1/4, max(1, 8 · 1/4) = 2 — the cost
  // on a flat fabric of half the NIC rate (same hops). Inside one pod (nodes 0–3) the core is
  // not crossed and the leaves keep up (1:1): full rate.
  const ClusterSpec cluster = PodCluster();
  ClusterSpec half = TestCluster(8);
  half.inter.nic_bandwidth = Bandwidth::BitsPerSecond(50 * kGiga);
  const std::vector<int32_t> ring = {0, 4, 8, 12, 16, 20, 24, 28};
  EXPECT_EQ(Cost(CommKind::kAllReduce, "ring", ring, kS, cluster),
            Cost(CommKind::kAllReduce, "ring", ring, kS, half));
  EXPECT_EQ(Cost(CommKind::kAllReduce, "ring", {0, 4, 8, 12}, kS, cluster),
            Cost(CommKind::kAllReduce, "ring", {0, 4, 8, 12}, kS, TestCluster(8)));
  // At 1:4 between pods, 4 · 1/4 = 1: the core keeps up with a ring.
  ClusterSpec wider = cluster;
  wider.inter.pod_oversubscription = 4;
  EXPECT_EQ(Cost(CommKind::kAllReduce, "ring", ring, kS, wider),
            Cost(CommKind::kAllReduce, "ring", ring, kS, TestCluster(8)));
}

TEST(CollectiveAlgorithmsTest, PairsAcrossPodsShareTheCoreAtItsWholeOversubscription) {
  // A send/recv across pods climbs whole (every pair of a pipeline boundary sends at once): the
  // NIC's 1.25e10 B/s, in NCCL's 128 KiB network messages (f = 0.9117629: 1.139704e10 B/s,
  // FlowContentionTest), over 8: 1.42463e9 B/s, 10 us + 1e8 / 1.42463e9 s = 70.204 ms. Inside a
  // pod the leaves keep up: 10 us + 8.774212 ms.
  const ClusterSpec cluster = PodCluster();
  EXPECT_EQ(Cost(CommKind::kSendRecv, "", {0, 8}, kS, cluster), Nanoseconds(8'784'212));
  EXPECT_NEAR(Cost(CommKind::kSendRecv, "", {0, 16}, kS, cluster).ns(), 10'000 + 8 * 8'774'212, 8);
  // A shift around one GPU a node leaves each pod on one hop of its 4 nodes: max(1, 8/4) = 2.
  const std::vector<int32_t> ring = {0, 4, 8, 12, 16, 20, 24, 28};
  ClusterSpec half = TestCluster(8);
  half.inter.nic_bandwidth = Bandwidth::BitsPerSecond(50 * kGiga);
  EXPECT_EQ(Cost(CommKind::kShift, "", ring, kS, cluster),
            Cost(CommKind::kShift, "", ring, kS, half));
  EXPECT_LT(Cost(CommKind::kShift, "", ring, kS, TestCluster(8)).ns() * 19 / 10,
            Cost(CommKind::kShift, "", ring, kS, cluster).ns());
}

TEST(CollectiveAlgorithmsTest, EfficiencyScalesBandwidth) {
  // Half the NVLink efficiency doubles the bandwidth term: 6 us + 3 ms.
  ClusterSpec cluster = TestCluster();
  cluster.intra.efficiency = 0.5;
  EXPECT_EQ(Cost(CommKind::kAllReduce, "ring", Ranks(0, 4), kS, cluster), Microseconds(3006));
}

TEST(CollectiveAlgorithmsTest, UnknownAlgorithmListsTheRegisteredOnes) {
  const Expected<const CollectiveAlgorithm*> found =
      FindCollectiveAlgorithm(CommKind::kAllReduce, "rign");
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.error().ToString(),
            "unknown all_reduce algorithm (did you mean \"ring\"?); registered: \"ring\", "
            "\"tree\", \"halving_doubling\", \"hierarchical\", \"nvls\", \"parameter_server\", got "
            "\"rign\"");
}

TEST(CollectiveAlgorithmsTest, EveryKindHasADefault) {
  for (CommKind kind : {CommKind::kAllReduce, CommKind::kAllGather, CommKind::kReduceScatter,
                        CommKind::kAllToAll, CommKind::kBroadcast, CommKind::kReduce,
                        CommKind::kBarrier, CommKind::kShift, CommKind::kSendRecv}) {
    const int size = kind == CommKind::kSendRecv ? 2 : 8;
    EXPECT_GT(Cost(kind, "", Ranks(0, size), 1000), DurationNs::Zero())
        << graph::CommKindName(kind);
  }
}

// The thread blocks NCCL's kernel holds on each GPU: one per channel (KernelBlocks).
int Blocks(CommKind kind, const std::vector<int32_t>& group, int64_t size,
           const ClusterSpec& cluster = TestCluster(), std::string_view algorithm = "") {
  const CollectiveRequest request{.kind = kind,
                                  .size = Bytes(size),
                                  .shape = ShapeOfGroup(group, cluster),
                                  .cluster = &cluster,
                                  .ranks = group};
  const Expected<AlgorithmChoice> choice = ChooseCollectiveAlgorithm(request, algorithm);
  EXPECT_TRUE(choice.ok()) << choice.error().ToString();
  return choice.ok() ? choice->blocks : -1;
}

TEST(KernelBlocksTest, OnePerCollectiveChannelFewerForSmallBuffers) {
  // One node of the test cluster: two channels per NVLink, one link: 2 channels.
  EXPECT_EQ(Blocks(CommKind::kAllReduce, Ranks(0, 4), kS), 2);
  // Four nodes, 4 members each on 2 NICs of 12.5 GB/s (under 25 GB/s: two channels a NIC): 4.
  EXPECT_EQ(Blocks(CommKind::kAllReduce, Ranks(0, 16), kS), 4);
  EXPECT_EQ(Blocks(CommKind::kReduceScatter, Ranks(0, 16), kS), 4);
  // NCCL keeps 32 KiB a channel: a 40 KiB buffer runs on ⌈40 / 32⌉ = 2, 1 KiB on one.
  EXPECT_EQ(Blocks(CommKind::kAllReduce, Ranks(0, 16), 40 * 1024), 2);
  EXPECT_EQ(Blocks(CommKind::kAllReduce, Ranks(0, 16), 1024), 1);
  // An all-gather counts its whole output: 4 KiB from each of 16 ranks is 64 KiB, 2 channels.
  EXPECT_EQ(Blocks(CommKind::kAllGather, Ranks(0, 16), 4 * 1024), 2);
  EXPECT_EQ(Blocks(CommKind::kBarrier, Ranks(0, 16), 0), 1);
  EXPECT_EQ(Blocks(CommKind::kAllReduce, Ranks(0, 1), kS), 0);  // one rank: no kernel
}

TEST(KernelBlocksTest, DgxNodesAndNvls) {
  // DGX A100: 12 NVLinks, 24 ring channels on a node; across nodes one GPU a node reaches one
  // 200 Gb/s (25 GB/s) NIC, four channels, and eight GPUs a node eight NICs: 32 (NCCL's most).
  const ClusterSpec a100 = ClusterPreset("dgx-a100", 4).value();
  EXPECT_EQ(Blocks(CommKind::kAllReduce, Ranks(0, 8), kS, a100), 24);
  EXPECT_EQ(Blocks(CommKind::kAllReduce, {0, 8, 16, 24}, kS, a100), 4);
  EXPECT_EQ(Blocks(CommKind::kAllReduce, Ranks(0, 32), kS, a100), 32);
  // DGX H100: 18 NVLinks, 36 capped at 32; NVLS on its 16 NVLS channels.
  const ClusterSpec h100 = ClusterPreset("dgx-h100", 1).value();
  EXPECT_EQ(Blocks(CommKind::kAllReduce, Ranks(0, 8), kS, h100, "ring"), 32);
  EXPECT_EQ(Blocks(CommKind::kAllReduce, Ranks(0, 8), kS, h100, "nvls"), 16);
}

}  // namespace
}  // namespace dtsim::network
