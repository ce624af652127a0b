// The device memory NCCL holds for one rank's communicators: the buffers of the connections
// its collectives and point-to-point operations open, and NVLink SHARP's buffers (docs/
// network.md, "NCCL's buffers"). It lives outside PyTorch's caching allocator: nvidia-smi
// counts it, `torch.cuda.max_memory_reserved` does not, and a plan must leave room for it.
//
// The sizes are NCCL 2.30's defaults (NVIDIA/nccl 5067397c), with NCCL_RUNTIME_CONNECT (the
// default with cuMem since 2.22): a connection is opened the first time an operation needs it
// and kept for the communicator's life.
// - A connection between two GPUs of a node (P2P transport, src/transport/p2p.cc
//   p2pSendSetup/p2pRecvSetup) holds a buffer per protocol (src/init.cc computeBuffSizes: LL
//   512 KiB, LL128 4,800 KiB, Simple 4 MiB) beside a 4 KiB ncclSendMem and ncclRecvMem, the
//   receiver's and the sender's share each rounded up to CUDA_IPC_MIN (2 MiB,
//   src/include/comm.h): 6 + 6 MiB with P2P read (Simple on the sender), 2 + 10 MiB without;
//   12 MiB for a channel's send and receive either way.
// - A connection through a NIC (src/transport/net.cc sendProxySetup/recvProxySetup, with
//   GPUDirect RDMA) holds LL128 and Simple on the sender's GPU and all three on the receiver's,
//   each side rounded up to the 2 MiB allocation granularity: 10 + 10 MiB.
// - Point-to-point operations across nodes share one pool per rank and direction instead
//   (sharedNetBuffersInit): p2p channels × 16 steps × the 128 KiB chunk, 64 MiB on 32 channels.
// - A collective opens its ring on every collective channel (src/transport/generic.cc
//   ncclTransportRingConnect): one send and one receive connection a channel. In a ring over
//   nodes, each channel enters and leaves a node once, through one of its GPUs.
// - An all-reduce across nodes opens the double binary tree too (src/transport/generic.cc
//   ncclTransportTreeConnect), on every collective channel: the way back along the node's chain,
//   and a network connection each way to each tree neighbour node. NCCL's tuner runs small
//   all-reduces across nodes with the tree (its latency grows with log N, the ring's with N),
//   and one such all-reduce keeps the connections for the communicator's life, so every
//   all-reducing communicator across nodes counts them.
// - NVLS (src/transport/nvls.cc ncclNvlsBufferSetup), set up the first time an all-reduce runs
//   with it: NVLS channels × 2 × (128 KiB chunk × 8 steps) × heads (a node's GPUs), rounded
//   up to 2 MiB: 256 MiB on 8 H100s.
// - A point-to-point peer is connected on all of its p2p channels at the first send or
//   receive (src/enqueue.cc): p2pnChannelsPerPeer × 12 MiB on a node.
// Not counted: NVLS trees and CollNet, PAT, and NCCL's host memory.
#pragma once

#include <cstdint>

#include "network/cluster.h"

namespace dtsim::network {

// One communicator as one of its ranks uses it.
struct CommunicatorUse {
  int ranks = 1;        // the communicator's ranks
  int nodes = 1;        // the nodes they span
  int local_ranks = 1;  // its ranks on this rank's node
  // Whether it runs collectives (gradient reductions, tensor-parallel all-reduces, ZeRO's
  // gathers): a ring on every collective channel.
  bool collectives = false;
  // Whether they include all-reduces, which NCCL runs with NVLS on an NVLS node (dtsim's
  // network models price NVLS for all-reduce only: network/collective_algorithms.h), and with
  // the double binary tree across nodes when small.
  bool all_reduce = false;
  // The peers this rank sends to and receives from (pipeline neighbours, all-to-all, ring
  // attention), on its node and on others. A peer counts once for both directions.
  int local_peers = 0;
  int remote_peers = 0;
};

// Per rank, in bytes.
struct NcclBuffers {
  int64_t rings = 0;  // the collectives' ring connections
  int64_t trees = 0;  // the double binary tree's, beyond the ring's (all-reduce across nodes)
  int64_t nvls = 0;   // NVLink SHARP's buffers
  int64_t p2p = 0;    // point-to-point connections and the network's shared pools

  int64_t total() const { return rings + trees + nvls + p2p; }
  NcclBuffers& operator+=(const NcclBuffers& other);
};

// The buffers `use` holds on one of its ranks; none for a communicator of one rank.
NcclBuffers CommunicatorBuffers(const ClusterSpec& cluster, const CommunicatorUse& use);

}  // namespace dtsim::network
