#include "network/nccl_memory.h"

#include <algorithm>

#include "network/nccl_p2p.h"

namespace dtsim::network {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * kKiB;
// src/init.cc computeBuffSizes, from src/include/device.h: LL 8 lines × 512 threads × 8 steps
// × 16 B; LL128 120 elements × 640 threads × 8 steps × 8 B; Simple 4 MiB.
constexpr int64_t kLlBytes = int64_t{8} * 512 * 8 * 16;
constexpr int64_t kLl128Bytes = int64_t{120} * 640 * 8 * 8;
constexpr int64_t kSimpleBytes = kNcclSimpleBufferBytes;
constexpr int64_t kConnectionMemBytes = 4 * kKiB;  // ncclSendMem, ncclRecvMem (MEM_ALIGN)
constexpr int64_t kGranularity = 2 * kMiB;         // CUDA_IPC_MIN; cuMem's granularity
constexpr int kSteps = kNcclSteps;                 // NCCL_STEPS (nccl_p2p.h)
constexpr int kSharedSteps = 16;                   // NCCL_SHARED_STEPS (src/transport/net.cc)
constexpr int64_t kNvlsChunk = 128 * kKiB;         // NCCL_NVLS_CHUNKSIZE

int64_t RoundUp(int64_t bytes) { return (bytes + kGranularity - 1) / kGranularity * kGranularity; }

// One channel's send and receive connection between GPUs of a node, on this rank: with P2P
// read the sender keeps Simple beside its ncclSendMem and the receiver LL and LL128 beside its
// ncclRecvMem (6 + 6 MiB); without, the receiver keeps all three (2 + 10 MiB).
int64_t LocalChannelPairBytes() {
  return RoundUp(kConnectionMemBytes + kSimpleBytes) +
         RoundUp(kConnectionMemBytes + kLlBytes + kLl128Bytes);
}

// The same through a NIC, with GPUDirect RDMA: the sender's LL128 and Simple (LL stays in host
// memory) and the receiver's three, each side one allocation.
int64_t NetChannelPairBytes() {
  return RoundUp(kLl128Bytes + kSimpleBytes) + RoundUp(kLlBytes + kLl128Bytes + kSimpleBytes);
}

// The communicator's collective channels: its GPUs on this node use up to as many NICs.
int ChannelsOf(const ClusterSpec& cluster, const CommunicatorUse& use) {
  return CollectiveChannels(cluster, use.nodes,
                            std::min(use.local_ranks, cluster.inter.nics_per_node));
}

NcclBuffers RingBuffers(const ClusterSpec& cluster, const CommunicatorUse& use) {
  const int channels = ChannelsOf(cluster, use);
  NcclBuffers buffers;
  if (use.nodes <= 1) {
    buffers.rings = channels * LocalChannelPairBytes();
    return buffers;
  }
  // Each channel's ring enters and leaves a node once: of a node's g GPUs one receives from
  // and one sends to the network (both sides of NetChannelPairBytes count here as one rank's
  // share of the node's), the rest stay on NVLink. Spread over the channels, a rank's share:
  // 1/g of a network pair and (g − 1)/g of a local one, per channel.
  const int g = std::max(use.local_ranks, 1);
  buffers.rings =
      (channels * NetChannelPairBytes() + int64_t{channels} * (g - 1) * LocalChannelPairBytes()) /
      g;
  return buffers;
}

// The double binary tree, across nodes, once an all-reduce runs with it (src/transport/generic.cc
// ncclTransportTreeConnect): on every collective channel each rank connects both ways to its
// tree parent and children, reusing a connection the ring opened to the same peer in the same
// direction. On a node the tree is a chain in the ring's order, so every link adds the way back
// the ring does not take: (g − 1) local pairs a channel, as the ring's. Across nodes each channel
// uses one of the two trees, spanning trees of the N nodes: N − 1 links, each a network
// connection both ways, so 2(N − 1)/N network pairs a node a channel, on other GPU pairs than
// the ring's. A rank's share, as the ring's, is the node's over g.
NcclBuffers TreeBuffers(const ClusterSpec& cluster, const CommunicatorUse& use) {
  NcclBuffers buffers;
  if (!use.all_reduce || use.nodes <= 1) return buffers;
  const int64_t channels = ChannelsOf(cluster, use);
  const int64_t g = std::max(use.local_ranks, 1);
  const int64_t n = use.nodes;
  const int64_t node = channels * 2 * (n - 1) * NetChannelPairBytes() / n +
                       channels * (g - 1) * LocalChannelPairBytes();
  buffers.trees = node / g;
  return buffers;
}

NcclBuffers NvlsBuffers(const ClusterSpec& cluster, const CommunicatorUse& use) {
  NcclBuffers buffers;
  if (!use.all_reduce || !cluster.intra.nvls.enabled || use.nodes > 1) return buffers;
  const int64_t heads = std::min(use.local_ranks, kNvlsMaxHeads);
  buffers.nvls = RoundUp(int64_t{cluster.intra.nvls.channels} * 2 * kNvlsChunk * kSteps * heads);
  return buffers;
}

NcclBuffers P2pBuffers(const ClusterSpec& cluster, const CommunicatorUse& use) {
  NcclBuffers buffers;
  if (use.local_peers + use.remote_peers == 0) return buffers;
  const P2pPlan plan =
      PlanP2p(cluster, use.ranks, use.nodes, /*same_node=*/use.remote_peers == 0, kSimpleBytes);
  buffers.p2p = int64_t{use.local_peers} * plan.channels_per_peer * LocalChannelPairBytes();
  if (use.remote_peers > 0) {
    // One pool each way, shared by every network peer of the rank.
    // Each holds NCCL_SHARED_STEPS steps of the network chunk per channel
    // (NCCL_P2P_NET_CHUNKSIZE, as NCCL clamps it: P2pNetChunkBytes).
    const auto chunk = static_cast<int64_t>(P2pNetChunkBytes(cluster));
    buffers.p2p += 2 * RoundUp(int64_t{plan.communicator_channels} * kSharedSteps * chunk);
  }
  return buffers;
}

}  // namespace

NcclBuffers& NcclBuffers::operator+=(const NcclBuffers& other) {
  rings += other.rings;
  trees += other.trees;
  nvls += other.nvls;
  p2p += other.p2p;
  return *this;
}

NcclBuffers CommunicatorBuffers(const ClusterSpec& cluster, const CommunicatorUse& use) {
  NcclBuffers buffers;
  if (use.ranks < 2) return buffers;
  if (use.collectives) {
    buffers += RingBuffers(cluster, use);
    buffers += TreeBuffers(cluster, use);
    buffers += NvlsBuffers(cluster, use);
  }
  buffers += P2pBuffers(cluster, use);
  return buffers;
}

}  // namespace dtsim::network
