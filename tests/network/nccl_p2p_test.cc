// NCCL's point-to-point channels (network/nccl_p2p.h), derived by hand from NCCL 2.29's rules.
#include "network/nccl_p2p.h"

#include <gtest/gtest.h>

#include "network/cluster.h"

namespace dtsim::network {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

ClusterSpec DgxH100(int nodes) { return ClusterPreset("dgx-h100", nodes).value(); }

// One DGX H100 node, nccl-tests' 8-GPU communicator. 18 NVLinks: two channels a link, 36,
// rounded up to 64 per peer, at most the communicator's 32; every rank's transfer at once
// needs 32 / 8 = 4 channels to start from. Parts run from 64 KiB (512 KiB / 8) to 16 MiB
// (512 KiB × 32): 32 MiB on 4 channels is 8 MiB a part (4 channels); 64 MiB exactly 16 MiB
// (still 4); 128 MiB 32 MiB, so 8 channels; 256 MiB 16; 1 GiB 32. A channel moves one link:
// 450 GB/s × 0.822 / 18 = 20.55 GB/s; 32 channels would be 657.6 GB/s, NVLink caps 369.9.
TEST(NcclP2pTest, ChannelsDoubleWithSizeOnOneNode) {
  const ClusterSpec cluster = DgxH100(1);
  const auto plan = [&](double bytes) { return PlanP2p(cluster, 8, 1, true, bytes); };
  EXPECT_EQ(plan(32 * kMiB).communicator_channels, 32);
  EXPECT_EQ(plan(32 * kMiB).channels_per_peer, 32);
  EXPECT_EQ(plan(32 * kMiB).channels, 4);
  EXPECT_EQ(plan(64 * kMiB).channels, 4);
  EXPECT_EQ(plan(128 * kMiB).channels, 8);
  EXPECT_EQ(plan(256 * kMiB).channels, 16);
  EXPECT_EQ(plan(1024 * kMiB).channels, 32);
  EXPECT_DOUBLE_EQ(plan(32 * kMiB).channel_rate, 450e9 * 0.822 / 18);
  EXPECT_DOUBLE_EQ(plan(32 * kMiB).bytes_per_second, 4 * 450e9 * 0.822 / 18);
  EXPECT_DOUBLE_EQ(plan(1024 * kMiB).bytes_per_second, 450e9 * 0.822);
  // 4 GPUs: 32 / 4 = 8 channels to start from, so 32 MiB is twice as fast as among 8.
  EXPECT_EQ(PlanP2p(cluster, 4, 1, true, 32 * kMiB).channels, 8);
  // A tiny send takes one channel per 64 KiB part: 100 KiB, two channels.
  EXPECT_EQ(plan(100 * 1024).channels, 2);
}

// Across nodes the chunk is 128 KiB (parts of 64–128 KiB). A network peer gets
// ⌈50 GB/s / 14 GB/s⌉ = 4 channels (400 Gb/s NIC); the communicator has four channels per NIC
// its nodes use. Ten nodes of one GPU: 4 channels, and 4 × ⌈10 / 8⌉ = 8 > 4, so 2 per peer.
// Every channel crosses the network in 128 KiB messages, which keep
// f = (1 + 14,700 / 1,048,576) / (1 + 14,700 / 131,072) = 0.9117629 of a ring's rate
// (NetMessageEfficiency): 2 × 14 GB/s × 0.97 × f = 24.76 GB/s, half the NIC (44.22 GB/s),
// where 24.86 GB/s was measured (../shared/network/measured-collectives.json, 16 GiB). Two
// ranks on two full DGX nodes: 32 channels, 4 per peer, 4 × 13.58 × f GB/s: the NIC's
// 48.5 × f GB/s.
TEST(NcclP2pTest, ANetworkPeerGetsFewChannels) {
  const double f = (1 + 14'700.0 / 1'048'576) / (1 + 14'700.0 / 131'072);
  ClusterSpec one_gpu = DgxH100(10);
  one_gpu.gpus_per_node = 1;
  one_gpu.inter.nics_per_node = 1;
  const P2pPlan ten = PlanP2p(one_gpu, 10, 10, false, 1024 * kMiB);
  EXPECT_EQ(ten.communicator_channels, 4);
  EXPECT_EQ(ten.channels_per_peer, 2);
  EXPECT_EQ(ten.channels, 2);
  EXPECT_DOUBLE_EQ(ten.net_efficiency, f);
  EXPECT_DOUBLE_EQ(ten.bytes_per_second, 2 * 14e9 * 0.97 * f);

  const P2pPlan pair = PlanP2p(DgxH100(2), 2, 2, false, 1024 * kMiB);
  EXPECT_EQ(pair.communicator_channels, 32);
  EXPECT_EQ(pair.channels, 4);
  EXPECT_DOUBLE_EQ(pair.bytes_per_second, 400e9 / 8 * 0.97 * f);
  // A 100 Gb/s NIC (12.5 GB/s): one channel per peer fills it.
  ClusterSpec slow = DgxH100(2);
  slow.inter.nic_bandwidth = Bandwidth::BitsPerSecond(100'000'000'000);
  EXPECT_EQ(PlanP2p(slow, 2, 2, false, 1024 * kMiB).channels_per_peer, 1);
  EXPECT_DOUBLE_EQ(PlanP2p(slow, 2, 2, false, 1024 * kMiB).bytes_per_second, 12.5e9 * 0.97 * f);
  // On one node NVLink is not the network: no message cost.
  EXPECT_DOUBLE_EQ(PlanP2p(DgxH100(1), 8, 1, true, 1024 * kMiB).net_efficiency, 1.0);
}

// NCCL_P2P_NET_CHUNKSIZE = 2 MiB, as NVIDIA's NeMo and Megatron-Bridge performance scripts set
// it for pipelined runs: NCCL 2.19+ keeps at most 4 MiB / 8 = 512 KiB, so parts run from
// 256 KiB to 512 KiB and each message keeps (1 + 14,700 / 1,048,576) / (1 + 14,700 / 524,288)
// = 0.98636 of the path, where 128 KiB kept 0.91176. Two ranks on two DGX H100 nodes: a 1 GiB
// send on 4 channels at the NIC's 48.5 × 0.98636 = 47.84 GB/s. A 64 KiB setting is kept.
TEST(NcclP2pTest, TheNetworkChunkIsNcclsSettingClampedToItsBuffer) {
  ClusterSpec dgx = DgxH100(2);
  EXPECT_DOUBLE_EQ(P2pNetChunkBytes(dgx), 128 * 1024);
  dgx.nccl.p2p_net_chunk_size = Bytes(int64_t{2} * 1024 * 1024);
  EXPECT_DOUBLE_EQ(P2pNetChunkBytes(dgx), 512 * 1024);
  const double f = (1 + 14'700.0 / 1'048'576) / (1 + 14'700.0 / 524'288);
  EXPECT_NEAR(f, 0.98636, 1e-5);
  const P2pPlan pair = PlanP2p(dgx, 2, 2, false, 1024 * kMiB);
  EXPECT_EQ(pair.channels, 4);
  EXPECT_DOUBLE_EQ(pair.net_efficiency, f);
  EXPECT_DOUBLE_EQ(pair.bytes_per_second, 400e9 / 8 * 0.97 * f);
  // 1 MiB in parts of at least 256 KiB: 4 channels of 256 KiB messages.
  const P2pPlan small = PlanP2p(dgx, 2, 2, false, kMiB);
  EXPECT_EQ(small.channels, 4);
  EXPECT_DOUBLE_EQ(small.net_efficiency, NetMessageEfficiency(256 * 1024));
  EXPECT_DOUBLE_EQ(AllToAllNetEfficiency(dgx, 64 * kMiB), f);
  dgx.nccl.p2p_net_chunk_size = Bytes(int64_t{64} * 1024);
  EXPECT_DOUBLE_EQ(P2pNetChunkBytes(dgx), 64 * 1024);
  EXPECT_DOUBLE_EQ(PlanP2p(dgx, 2, 2, false, 1024 * kMiB).net_efficiency,
                   NetMessageEfficiency(64 * 1024));
}

// The message cost: none from the ring's 1 MiB slice up; at NCCL's 128 KiB point-to-point
// step 0.9117629 (above); a 16 KiB message (a small all-to-all part) pays
// (1 + 14,700 / 1,048,576) / (1 + 14,700 / 16,384) = 0.5345.
TEST(NcclP2pTest, SmallerNetworkMessagesKeepLessOfThePath) {
  EXPECT_DOUBLE_EQ(NetMessageEfficiency(1024 * kMiB), 1.0);
  EXPECT_DOUBLE_EQ(NetMessageEfficiency(kMiB), 1.0);
  EXPECT_NEAR(NetMessageEfficiency(128 * 1024), 0.9117629, 1e-7);
  EXPECT_NEAR(NetMessageEfficiency(16 * 1024), 0.5345, 1e-4);
  // An all-to-all's parts cross in messages of at most one 128 KiB chunk.
  const ClusterSpec dgx = DgxH100(2);
  EXPECT_DOUBLE_EQ(AllToAllNetEfficiency(dgx, 64 * kMiB), NetMessageEfficiency(128 * 1024));
  EXPECT_DOUBLE_EQ(AllToAllNetEfficiency(dgx, 16 * 1024), NetMessageEfficiency(16 * 1024));
}

}  // namespace
}  // namespace dtsim::network
