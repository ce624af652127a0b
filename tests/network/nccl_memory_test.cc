// NCCL's buffers per communicator (network/nccl_memory.h), derived by hand from NCCL 2.30's
// sizes: LL 8·512·8·16 = 524,288 B; LL128 120·640·8·8 = 4,915,200 B; Simple 4 MiB; 4 KiB of
// ncclSendMem/ncclRecvMem; allocations rounded up to 2 MiB.
//   A channel's send + receive between GPUs of a node: ⌈4 KiB + 4 MiB⌉ + ⌈4 KiB + 0.5 MiB +
//   4.6875 MiB⌉ = 6 + 6 = 12 MiB.
//   The same through a NIC: ⌈4.6875 + 4⌉ + ⌈0.5 + 4.6875 + 4⌉ = 10 + 10 = 20 MiB.
#include "network/nccl_memory.h"

#include <gtest/gtest.h>

#include "network/cluster.h"

namespace dtsim::network {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

ClusterSpec Preset(const char* name, int nodes) { return ClusterPreset(name, nodes).value(); }

// One DGX H100 node, a tensor-parallel group of 8: 18 NVLinks give 2 × 18 = 36 ring channels,
// at most 32: 32 × 12 = 384 MiB of rings. NVLS once it all-reduces: 16 channels × 2 × (128 KiB
// × 8 steps) × 8 heads = 256 MiB. Four GPUs: 128 MiB of NVLS, the same rings. Without
// all-reduces (sequence parallelism's all-gathers and reduce-scatters) no NVLS.
TEST(NcclMemoryTest, OneNvlsNode) {
  const ClusterSpec h100 = Preset("dgx-h100", 1);
  const NcclBuffers eight = CommunicatorBuffers(
      h100, {.ranks = 8, .local_ranks = 8, .collectives = true, .all_reduce = true});
  EXPECT_EQ(eight.rings, 384 * kMiB);
  EXPECT_EQ(eight.nvls, 256 * kMiB);
  EXPECT_EQ(eight.p2p, 0);
  EXPECT_EQ(eight.total(), 640 * kMiB);
  const NcclBuffers four = CommunicatorBuffers(
      h100, {.ranks = 4, .local_ranks = 4, .collectives = true, .all_reduce = true});
  EXPECT_EQ(four.rings, 384 * kMiB);
  EXPECT_EQ(four.nvls, 128 * kMiB);
  const NcclBuffers gathers =
      CommunicatorBuffers(h100, {.ranks = 8, .local_ranks = 8, .collectives = true});
  EXPECT_EQ(gathers.total(), 384 * kMiB);
}

// A DGX A100 has 12 NVLinks (24 ring channels) and no NVLS: 24 × 12 = 288 MiB.
TEST(NcclMemoryTest, NoNvlsOnAnA100Node) {
  const NcclBuffers buffers =
      CommunicatorBuffers(Preset("dgx-a100", 1),
                          {.ranks = 8, .local_ranks = 8, .collectives = true, .all_reduce = true});
  EXPECT_EQ(buffers.rings, 288 * kMiB);
  EXPECT_EQ(buffers.nvls, 0);
}

// Across nodes: a data-parallel group of one GPU per node uses one 400 Gb/s NIC (50 GB/s ≥ 25:
// 4 channels), every connection through it: 4 × 20 = 80 MiB. Two full nodes use 8 NICs, 32
// channels; each channel enters and leaves a node once, so a rank holds 1/8 of a network pair
// and 7/8 of a local one a channel: 32 × (20 + 7 × 12) / 8 = 416 MiB. No NVLS across nodes.
TEST(NcclMemoryTest, RingsAcrossNodes) {
  const ClusterSpec h100 = Preset("dgx-h100", 4);
  EXPECT_EQ(
      CommunicatorBuffers(h100, {.ranks = 4, .nodes = 4, .local_ranks = 1, .collectives = true})
          .total(),
      80 * kMiB);
  const NcclBuffers two_nodes = CommunicatorBuffers(
      h100, {.ranks = 16, .nodes = 2, .local_ranks = 8, .collectives = true, .all_reduce = true});
  EXPECT_EQ(two_nodes.rings, 416 * kMiB);
  EXPECT_EQ(two_nodes.nvls, 0);
  // 100 Gb/s NICs (12.5 GB/s < 25) carry two channels each: one GPU per node, 2 × 20 MiB.
  ClusterSpec slow = h100;
  slow.inter.nic_bandwidth = Bandwidth::BitsPerSecond(100 * kGiga);
  EXPECT_EQ(
      CommunicatorBuffers(slow, {.ranks = 4, .nodes = 4, .local_ranks = 1, .collectives = true})
          .total(),
      40 * kMiB);
}

// An all-reduce across nodes opens the double binary tree on every collective channel: the way
// back along the node's chain ((g − 1) local pairs a node a channel) and 2(N − 1)/N network
// pairs a node a channel (two spanning trees of N − 1 links, one per channel).
// - Two full H100 nodes, 32 channels: 32 × 2 × 1 × 20 / 2 + 32 × 7 × 12 = 640 + 2,688 =
//   3,328 MiB a node, 416 MiB a rank (as the ring's: at N = 2 the tree has one link a channel).
// - Four full nodes: 32 × 2 × 3 × 20 / 4 + 2,688 = 960 + 2,688 = 3,648 MiB, 456 MiB a rank.
// - One GPU on each of four nodes, one NIC, 4 channels: 4 × 2 × 3 × 20 / 4 = 120 MiB.
// Without all-reduces (ZeRO's reduce-scatters and gathers) no tree.
TEST(NcclMemoryTest, TreesAcrossNodes) {
  const ClusterSpec h100 = Preset("dgx-h100", 4);
  const NcclBuffers two = CommunicatorBuffers(
      h100, {.ranks = 16, .nodes = 2, .local_ranks = 8, .collectives = true, .all_reduce = true});
  EXPECT_EQ(two.trees, 416 * kMiB);
  EXPECT_EQ(two.total(), 832 * kMiB);
  const NcclBuffers four = CommunicatorBuffers(
      h100, {.ranks = 32, .nodes = 4, .local_ranks = 8, .collectives = true, .all_reduce = true});
  EXPECT_EQ(four.trees, 456 * kMiB);
  const NcclBuffers spread = CommunicatorBuffers(
      h100, {.ranks = 4, .nodes = 4, .local_ranks = 1, .collectives = true, .all_reduce = true});
  EXPECT_EQ(spread.trees, 120 * kMiB);
  EXPECT_EQ(spread.rings, 80 * kMiB);
  const NcclBuffers gathers =
      CommunicatorBuffers(h100, {.ranks = 32, .nodes = 4, .local_ranks = 8, .collectives = true});
  EXPECT_EQ(gathers.trees, 0);
  // On one node the ring's channels are all there is (NVLS or not).
  EXPECT_EQ(CommunicatorBuffers(
                h100, {.ranks = 8, .local_ranks = 8, .collectives = true, .all_reduce = true})
                .trees,
            0);
}

// Point-to-point peers are connected on all their channels at the first send: on one H100 node
// 32 per peer (NcclP2pTest), 32 × 12 = 384 MiB a peer. Peers on other nodes share one pool
// each way: 32 p2p channels × 16 steps × 128 KiB = 64 MiB, 128 MiB for both, however many.
TEST(NcclMemoryTest, PointToPointPeers) {
  const ClusterSpec h100 = Preset("dgx-h100", 2);
  const NcclBuffers local =
      CommunicatorBuffers(h100, {.ranks = 8, .local_ranks = 8, .local_peers = 2});
  EXPECT_EQ(local.p2p, 2 * 384 * kMiB);
  EXPECT_EQ(local.rings, 0);  // no collectives, no rings
  const NcclBuffers remote =
      CommunicatorBuffers(h100, {.ranks = 2, .nodes = 2, .local_ranks = 1, .remote_peers = 1});
  EXPECT_EQ(remote.p2p, 128 * kMiB);
  const NcclBuffers three =
      CommunicatorBuffers(h100, {.ranks = 16, .nodes = 2, .local_ranks = 8, .remote_peers = 3});
  EXPECT_EQ(three.p2p, 128 * kMiB);
  // NCCL_P2P_NET_CHUNKSIZE = 2 MiB runs 512 KiB steps (P2pNetChunkBytes): the pools hold four
  // times as much, 32 × 16 × 512 KiB = 256 MiB each way.
  ClusterSpec chunked = h100;
  chunked.nccl.p2p_net_chunk_size = Bytes(2 * kMiB);
  EXPECT_EQ(
      CommunicatorBuffers(chunked, {.ranks = 2, .nodes = 2, .local_ranks = 1, .remote_peers = 1})
          .p2p,
      512 * kMiB);
}

TEST(NcclMemoryTest, OneRankHasNoCommunicator) {
  const NcclBuffers buffers = CommunicatorBuffers(
      Preset("dgx-h100", 1), {.ranks = 1, .collectives = true, .all_reduce = true});
  EXPECT_EQ(buffers.total(), 0);
}

}  // namespace
}  // namespace dtsim::network
