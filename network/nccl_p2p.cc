#include "network/nccl_p2p.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace dtsim::network {
namespace {

// src/init.cc: the point-to-point chunk, NCCL_P2P_NET_CHUNKSIZE for a communicator spanning
// nodes (P2pNetChunkBytes), NCCL_P2P_NVL_CHUNKSIZE on an NVLink node, NCCL_P2P_PCI_CHUNKSIZE
// on a PCIe one.
constexpr double kNvlChunk = 512 * 1024;
constexpr double kPciChunk = 128 * 1024;
// src/graph/paths.cc, NCCL_P2P_PER_CHANNEL_NET_BW: what NCCL counts one channel to move
// through a NIC, 14 GB/s; a network peer gets enough channels to fill its NIC at that rate.
constexpr double kNetChannelBytesPerSecond = 14e9;
// src/include/device.h: p2p operations one channel runs at once (NCCL_MAX_DEV_WORK_P2P_PER_BATCH).
constexpr int kP2pPerBatch = 8;
// src/init.cc: the ring search looks for at most MAXCHANNELS / 2 = 32 channels.
constexpr int kMaxRingChannels = 32;
// src/graph/search.cc ncclTopoDupChannels: rings of at least 25 GB/s are duplicated.
constexpr double kDuplicateRingBytesPerSecond = 25e9;

// One step of the Simple protocol's buffer: DEFAULT_BUFFSIZE / NCCL_STEPS = 512 KiB. NCCL 2.19
// and later keep the point-to-point chunk at most that (src/init.cc computeBuffSizes).
constexpr double kSimpleStepBytes = static_cast<double>(kNcclSimpleBufferBytes) / kNcclSteps;
constexpr double kMaxP2pChunk = kSimpleStepBytes;
// src/include/collectives.h, src/transport/net.cc: a ring collective's network message is a
// slice, ALLREDUCE_SLICESTEPS (NCCL_STEPS / 4 = 2) steps of DEFAULT_BUFFSIZE / NCCL_STEPS
// (4 MiB / 8): 1 MiB. inter_node.efficiency is measured on rings, so at this message size.
constexpr int kRingSliceSteps = kNcclSteps / 4;
constexpr double kRingNetSliceBytes = kRingSliceSteps * kSimpleStepBytes;
// What a network message costs beyond its bytes, in bytes of the path's time (the proxy posts
// one RDMA write per step and the receiver returns a credit per step). One constant, fitted on
// one curve of ../shared/network/measured-collectives.json — send/recv across ten H100 nodes of
// one GPU, 32 MiB–16 GiB, whose time was 0.915 of the model's at every size (docs/network.md,
// "Network messages"); checked on the all-to-all on the same nodes and both on twenty GPUs.
constexpr double kNetMessageOverheadBytes = 14'700;

struct Communicator {
  int ranks = 2;
  int nodes = 1;
};

int Pow2Up(int n) { return static_cast<int>(std::bit_ceil(static_cast<unsigned>(std::max(n, 1)))); }

int64_t DivUp(double a, double b) { return static_cast<int64_t>(std::ceil(a / b)); }

bool IsNvlink(const ClusterSpec& cluster) { return cluster.intra.topology != IntraTopology::kPcie; }

// The communicator's p2p channels (p2pnChannels): its collective channels rounded up to a power
// of two.
int CommunicatorChannels(const ClusterSpec& cluster, const Communicator& communicator, int nics) {
  return Pow2Up(CollectiveChannels(cluster, communicator.nodes, nics));
}

// Channels one peer may use (p2pnChannelsPerPeer), the fewest over the communicator's peers:
// on one node two per link between the pair (ncclTopoGetNchannels; two over PCIe); across
// nodes a network peer's, at least one per NIC and enough to fill the NIC at 14 GB/s each,
// halved until every peer of the largest batch fits in the communicator's channels.
int ChannelsPerPeer(const ClusterSpec& cluster, const Communicator& communicator,
                    int communicator_channels) {
  if (communicator.nodes <= 1) {
    const int links = IsNvlink(cluster) ? std::max(cluster.intra.links, 1) : 1;
    return std::min(communicator_channels, Pow2Up(2 * links));
  }
  const double nic = cluster.inter.nic_bandwidth.bytes_per_second();
  int per_peer =
      Pow2Up(static_cast<int>(std::max<int64_t>(1, DivUp(nic, kNetChannelBytesPerSecond))));
  const int64_t batches = DivUp(communicator.ranks, kP2pPerBatch);
  while (per_peer * batches > communicator_channels && per_peer > 1) per_peer /= 2;
  return per_peer;
}

}  // namespace

double NetMessageEfficiency(double message_bytes) {
  if (message_bytes >= kRingNetSliceBytes) return 1.0;
  const double message = std::max(message_bytes, 1.0);
  return (1 + kNetMessageOverheadBytes / kRingNetSliceBytes) /
         (1 + kNetMessageOverheadBytes / message);
}

double P2pNetChunkBytes(const ClusterSpec& cluster) {
  return std::min(static_cast<double>(cluster.nccl.p2p_net_chunk_size.count()), kMaxP2pChunk);
}

double AllToAllNetEfficiency(const ClusterSpec& cluster, double part_bytes) {
  return NetMessageEfficiency(std::min(P2pNetChunkBytes(cluster), part_bytes));
}

// On one node the ring search runs rings over the GPU's links, two channels a link, at most 32.
// Across nodes each NIC a node uses carries a ring, duplicated when it runs at 25 GB/s or more
// (search.cc), and every ring is doubled once more when the channels are connected (connect.cc
// ncclTopoPostset): four channels per 400 Gb/s NIC, two per 100 Gb/s one.
int CollectiveChannels(const ClusterSpec& cluster, int nodes, int nics) {
  if (nodes <= 1) {
    return std::min(kMaxRingChannels, 2 * std::max(cluster.intra.links, 1));
  }
  const double nic = cluster.inter.nic_bandwidth.bytes_per_second();
  const int per_nic = nic >= kDuplicateRingBytesPerSecond ? 4 : 2;
  return std::min(kMaxRingChannels, per_nic * std::clamp(nics, 1, kMaxRingChannels));
}

P2pPlan PlanP2p(const ClusterSpec& cluster, int communicator_ranks, int communicator_nodes,
                bool same_node, double bytes) {
  const Communicator communicator{std::max(communicator_ranks, 2),
                                  std::max(communicator_nodes, same_node ? 1 : 2)};
  const int nics = std::min(cluster.gpus_per_node, cluster.inter.nics_per_node);
  P2pPlan plan;
  plan.communicator_channels = CommunicatorChannels(cluster, communicator, nics);
  plan.channels_per_peer = ChannelsPerPeer(cluster, communicator, plan.communicator_channels);
  // addP2pToPlan: as few channels as keep each part within the chunking, starting from the
  // per-peer channels that let every rank's transfer run at once.
  const bool multi_node = communicator.nodes > 1;
  const double chunk =
      multi_node ? P2pNetChunkBytes(cluster) : (IsNvlink(cluster) ? kNvlChunk : kPciChunk);
  const double min_part = multi_node ? chunk / 2 : chunk / 8;
  const double max_part = multi_node ? chunk : chunk * 32;
  int at_least = plan.channels_per_peer;
  while (at_least * communicator.ranks > plan.communicator_channels && at_least > 1) at_least /= 2;
  int channels =
      static_cast<int>(std::min<int64_t>(at_least, std::max<int64_t>(1, DivUp(bytes, min_part))));
  double part = std::max(min_part, std::ceil(bytes / channels));
  while (part > max_part && channels <= plan.channels_per_peer / 2) {
    channels *= 2;
    part = std::ceil(bytes / channels);
  }
  plan.channels = channels;
  const IntraNodeSpec& intra = cluster.intra;
  const double nvlink = intra.bandwidth.bytes_per_second() * intra.efficiency;
  // Across nodes every channel sends its part in messages of at most one chunk.
  plan.net_efficiency =
      same_node ? 1.0 : NetMessageEfficiency(std::min(chunk, std::ceil(bytes / channels)));
  const double nic = cluster.inter.nic_bandwidth.bytes_per_second() * cluster.inter.efficiency *
                     plan.net_efficiency;
  plan.channel_rate =
      same_node ? nvlink / std::max(intra.links, 1)
                : kNetChannelBytesPerSecond * cluster.inter.efficiency * plan.net_efficiency;
  plan.bytes_per_second = std::min(channels * plan.channel_rate, same_node ? nvlink : nic);
  return plan;
}

}  // namespace dtsim::network
