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

struct P2pPlan {
  int channels = 1;               // channels the transfer is split over
  int channels_per_peer = 1;      // at most, for one peer (p2pnChannelsPerPeer)
  int communicator_channels = 1;  // the communicator's p2p channels (p2pnChannels)
  double channel_rate = 0;        // bytes/s one channel moves on this path
  double bytes_per_second = 0;    // channels × channel_rate, at most the path's rate
};

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
