// How fast NCCL moves one point-to-point transfer (ncclSend/ncclRecv, and so pipeline-parallel
// sends): over how many channels, each moving at most what one channel moves (docs/network.md,
// "Point-to-point channels"). One channel is one thread block driving one connection; a
// transfer is split over channels only once its parts would be larger than NCCL's chunking
// allows, so a medium send on one node runs on few channels and reaches a fraction of NVLink,
// and a send across nodes runs on the channels NCCL gives one network peer — fewer than fill
// a 400 Gb/s NIC. The rules and constants are NCCL 2.29's (src/enqueue.cc addP2pToPlan,
// src/graph/paths.cc ncclTopoComputeP2pChannels and ncclTopoGetNchannels, src/init.cc
// computeBuffSizes, src/graph/search.cc and connect.cc for the communicator's channels).
#pragma once

#include <cstdint>

#include "network/cluster.h"

namespace dtsim::network {

// NCCL's Simple-protocol buffer per connection (DEFAULT_BUFFSIZE, src/include/device.h) and
// the steps it is cut into (NCCL_STEPS): what its chunks, slices and buffers derive from.
inline constexpr int64_t kNcclSimpleBufferBytes = int64_t{4} << 20;
inline constexpr int kNcclSteps = 8;

struct P2pPlan {
  int channels = 1;               // channels the transfer is split over
  int channels_per_peer = 1;      // at most, for one peer (p2pnChannelsPerPeer)
  int communicator_channels = 1;  // the communicator's p2p channels (p2pnChannels)
  double channel_rate = 0;        // bytes/s one channel moves on this path
  double bytes_per_second = 0;    // channels × channel_rate, at most the path's rate
  double net_efficiency = 1;      // across nodes: NetMessageEfficiency of its messages; else 1
};

// NCCL's network step for point-to-point traffic: a send, a receive, and so every part of an
// all-to-all, crosses the network in steps of this size (src/device/sendrecv.h), or of its
// whole part when that is smaller. NCCL_P2P_NET_CHUNKSIZE (`cluster.nccl.p2p_net_chunk_size`,
// 128 KiB by default), at most an eighth (NCCL_STEPS) of the Simple protocol's buffer: NCCL
// 2.19 and later clamp it so (src/init.cc computeBuffSizes), and dtsim keeps NCCL's 4 MiB
// buffer (DEFAULT_BUFFSIZE), so a 2 MiB setting runs 512 KiB steps.
double P2pNetChunkBytes(const ClusterSpec& cluster);

// The share of its rate a network path keeps when it moves `message_bytes` messages, against
// the ring collectives `inter_node.efficiency` describes. Each message the proxy posts costs
// the path the time of kNetMessageOverheadBytes more (nccl_p2p.cc); a ring's Simple protocol
// sends slices of 1 MiB (2 steps of its 4 MiB buffer's 8, src/include/collectives.h and
// src/transport/net.cc), point-to-point traffic 128 KiB steps:
//   (1 + c / 1 MiB) / (1 + c / m).
// 1 for a message of 1 MiB or more; 0.912 for 128 KiB, 0.986 for 512 KiB (docs/network.md,
// "Network messages").
double NetMessageEfficiency(double message_bytes);

// The same for an all-to-all (NCCL runs it as grouped sends and receives) whose parts, one per
// peer, are `part_bytes`: messages of one network step, or of the whole part when smaller.
double AllToAllNetEfficiency(const ClusterSpec& cluster, double part_bytes);

// NCCL's collective channels for a communicator spanning `nodes`, whose GPUs of a node use
// `nics` NICs: two per NVLink on one node (ncclTopoCompute's rings; two over PCIe), two or four
// per NIC across nodes (four from 25 GB/s: ncclTopoDupChannels and ncclTopoPostset), at most 32.
int CollectiveChannels(const ClusterSpec& cluster, int nodes, int nics);

// The plan for `bytes` sent between two GPUs, on one node (`same_node`) or across nodes, in
// `communicator`. The path's rate is NVLink (or PCIe) × intra efficiency on one node, one NIC
// × inter efficiency across nodes.
// `communicator` is the communicator the transfer runs in: its ranks and the nodes they span
// (more than one node changes NCCL's chunk sizes and channel budget).
P2pPlan PlanP2p(const ClusterSpec& cluster, int communicator_ranks, int communicator_nodes,
                bool same_node, double bytes);

}  // namespace dtsim::network
