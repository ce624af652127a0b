// Collective algorithms, registered by name per collective kind: one entry each, holding its
// analytical α-β cost on the levels a group spans (docs/network.md derives every formula) and
// the flow program the flow model runs (flow_programs.h). A cost is a
// sum of phases; a phase takes  steps · α  +  max(intra bytes per rank / intra bandwidth,
// inter-node bytes per node / the node's inter-node bandwidth for this group).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "network/cluster.h"
#include "network/flow_programs.h"
#include "sim/base/status.h"
#include "sim/graph/task.h"

namespace dtsim::network {

// How a group spreads over one switch tier's blocks (leaves or pods) of a fat-tree or
// rail-optimized fabric.
struct TierSpan {
  int blocks = 1;        // blocks holding at least one member
  int fewest_nodes = 0;  // the fewest of the group's nodes under one of them
};

// Where a group's ranks sit (rank r is GPU r: node r / gpus_per_node).
struct GroupShape {
  int ranks = 0;        // p
  int nodes = 0;        // N: nodes holding at least one member
  int per_node = 0;     // k: the most members on one node
  bool uniform = true;  // every one of the N nodes holds exactly k members
  TierSpan leaves;      // the leaf switches it spans (one where the fabric has none)
  TierSpan pods;        // the pods it spans (one where the fabric has none)
};

GroupShape ShapeOfGroup(std::span<const int32_t> ranks, const ClusterSpec& cluster);

struct CollectiveRequest {
  graph::CommKind kind = graph::CommKind::kAllReduce;
  Bytes size;  // each rank's input buffer (docs/formats/task-graph.md)
  GroupShape shape;
  const ClusterSpec* cluster = nullptr;
  std::span<const int32_t> ranks;  // the group (algorithms whose steps depend on placement)
  int32_t root = -1;               // broadcast / reduce root
  // Send/recv and shift: the communicator they run in, which sets NCCL's channels
  // (nccl_p2p.h); ranks 0: the group itself.
  GroupShape communicator;
};

struct CollectiveAlgorithm {
  std::string_view name;
  graph::CommKind kind;
  bool default_candidate;  // considered when the graph does not force an algorithm
  std::string_view summary;
  // The analytical time, or an error when the algorithm does not apply to this group.
  Expected<DurationNs> (*cost)(const CollectiveRequest& request);
  // How it moves data, step by step, for the flow model: the volumes `cost` counts.
  Expected<FlowProgram> (*program)(const FlowRequest& request);
};

// The latency of one hop of a node-major ring over p ranks on N nodes, as NCCL's tuning model
// counts a ring's latency (src/graph/tuning.cc): a circuit crosses a node boundary N times, so
// its hops average ((p − N) α_intra + N α_inter) / p (rounded up to whole ns); α_intra on one
// node, α_inter with one rank per node. Ring steps pay it once each in both models.
DurationNs RingHopLatency(int ranks, int nodes, const ClusterSpec& cluster);
// The double binary tree's latency with at most k members on a node and N nodes, as NCCL's
// tuning model counts it: the chain's k−1 hops and ⌈log2 N⌉ tree levels, up and back down,
// 2((k−1) α_intra + ⌈log2 N⌉ α_inter). Both models charge it once.
DurationNs TreeLatency(int per_node, int nodes, const ClusterSpec& cluster);

// NVLS all-reduce (NVLink SHARP): an error unless the cluster's NVSwitch reduces in the switch
// and the group sits on one node (both models check it first). Each GPU's port carries
// (p + 1)/p · S each way: its whole buffer up to the switch's reductions and the reduced 1/p
// it owns, and that 1/p multicast back and everyone else's reduced parts down.
Status NeedsNvls(const CollectiveRequest& request);
double NvlsPortBytes(int ranks, double size);
// NCCL's NVLS chunk for an all-reduce of `size` bytes over `ranks` GPUs of one node
// (src/enqueue.cc calcCollChunking): 128 KiB (NCCL_NVLS_CHUNKSIZE), halved to 64 KiB below
// 64 · ops · 128 KiB, 32 KiB below 8 · ops · 64 KiB, 16 KiB below 2 · ops · 32 KiB, where ops =
// NVLS channels × heads (one head per GPU, at most 32): on 8 H100s (16 channels) 64 KiB below
// 1 GiB, 32 KiB below 64 MiB, 16 KiB below 8 MiB.
double NvlsChunk(const NvlsSpec& nvls, int ranks, double size);
// The rate a GPU's port moves NVLS traffic at: bandwidth × NVLS efficiency, scaled by how much
// of a channel's time a chunk's bytes take, C / (C + o · b) with o the chunk overhead and b a
// channel's rate, relative to the full 128 KiB chunk the efficiency was measured with (on 8
// H100s 0.921 at 64 KiB, 0.795 at 32 KiB). Both models use it.
double NvlsRate(const ClusterSpec& cluster, int ranks, double size);

// What one GPU of the group moves to its node peers, per direction: the intra-node bandwidth ×
// efficiency, or on an NVLink mesh with a link map the rings its members' links hold (on the
// node where they hold fewest: a ring is as fast as its slowest node), each one link's
// bandwidth × efficiency (mesh_rings.h: on a DGX-1, 1 ring on GPUs 0–1, 2 on 0–2, 4 on 0–3,
// 6 on all 8). Both models use it for every transfer between GPUs of one node.
double IntraGroupRate(const ClusterSpec& cluster, std::span<const int32_t> ranks);

// The NICs of a node that `members` of a group there drive: min(members, NICs) — and where
// every GPU communicates at once (ClusterSpec::gpus_share_nics) on a node with fewer NICs than
// GPUs, only their GPUs' share, members × NICs / GPUs (docs/network.md, "Analytical model").
// Both models use it.
double GroupNics(const ClusterSpec& cluster, int members);

// The rate of one point-to-point transfer of the request's size between two GPUs on one node
// (`same_node`) or on two: what NCCL's channels for the pair move in the request's
// communicator, or in its group when none is given (nccl_p2p.h). A send/recv and each hop of
// a shift move at most this; both models use it. `nic_divisor` divides the NIC's share (the
// analytical model's switch tiers; the flow model routes through them instead).
double P2pRate(const CollectiveRequest& request, bool same_node, double nic_divisor = 1);

// The share of a NIC the request's point-to-point transfers keep across nodes, in NCCL's
// network messages (P2pPlan::net_efficiency); P2pRate's off-node rate includes it.
double P2pNetEfficiency(const CollectiveRequest& request);

// Exchange schedules shared by the analytical costs and the flow programs, so both models
// price the same steps. A step is a list of (from, to) rank pairs moving `bytes` each.
struct ExchangeRound {
  std::vector<std::pair<int32_t, int32_t>> pairs;
  double bytes = 0;
};
// Binomial-tree broadcast rounds from `root` over `ranks` (node-major order counted from the
// root): in round j the first 2^j members send S to the member 2^j further on.
std::vector<ExchangeRound> BinomialRounds(std::span<const int32_t> ranks, int32_t root,
                                          double size);
// A shift: each member sends S to the next in the group's order, the last to the first (one
// round of p pairs; none for one rank).
std::vector<ExchangeRound> ShiftRounds(std::span<const int32_t> ranks, double size);
// Rabenseifner over `ranks` in node-major order: the fold of the extra ranks (if any), the
// halving steps, the doubling steps (the halving mirrored), the unfold.
std::vector<ExchangeRound> HalvingDoublingRounds(std::span<const int32_t> ranks, double size);

// The parameter-server all-reduce's schedule (docs/network.md, "Parameter servers"), a
// pipeline over partitions as BytePS runs it: the S-byte buffer is cut into c = ⌈S / partition⌉
// partitions, and each partition goes through the stages on-node reduce-scatter (when k > 1),
// push, pull, on-node all-gather (when k > 1), stage i of partition j in step j + i. After the
// reduce-scatter each of a node's k ranks holds 1/k of a partition and pushes it spread evenly
// over the m servers: `piece` = partition / (k · m) bytes to each.
enum ServerStage : unsigned {
  kServerScatter = 1,
  kServerPush = 2,
  kServerPull = 4,
  kServerGather = 8,
};
struct ServerRun {
  unsigned stages = 0;  // ServerStage bits active in each of these steps
  int64_t steps = 0;    // consecutive steps with exactly these stages
};
struct ServerPipeline {
  int64_t partitions = 1;
  double partition = 0;
  double piece = 0;
  std::vector<ServerRun> runs;
};
ServerPipeline PlanServerPipeline(const ClusterSpec& cluster, double size, int per_node);
// An error unless the cluster has parameter servers (both models check it first).
Status NeedsServers(const ClusterSpec& cluster);
// The error of a hierarchical or parameter-server algorithm given a group with a different
// number of members on some node (both models).
Error NeedsUniformGroup(std::string_view algorithm);
// Whether rank `rank` reaches server `server` without the network (a colocated server on
// the rank's own node).
bool ServerIsLocal(const ClusterSpec& cluster, int32_t rank, int server);

std::span<const CollectiveAlgorithm> CollectiveAlgorithms();
// The algorithm `name` for `kind`; the error lists the names registered for that kind.
Expected<const CollectiveAlgorithm*> FindCollectiveAlgorithm(graph::CommKind kind,
                                                             std::string_view name);

struct AlgorithmChoice {
  const CollectiveAlgorithm* algorithm = nullptr;  // null for a group of one rank (no cost)
  DurationNs time;
  int channels =
      0;  // NCCL channels, where the model counts them (send/recv, shift); 0: not counted
  // The thread blocks its kernel holds on each member's GPU while it runs (KernelBlocks).
  int blocks = 0;

  // "ring", "direct on 4 channels"; "" for a group of one rank.
  std::string Label() const;
};

// The thread blocks NCCL's kernel for the request holds on each member's GPU, one per channel
// it runs on (src/enqueue.cc topoGetAlgoInfo, NCCL 2.27): NVLS on the NVLS channels; a
// send/recv or a shift on its point-to-point channels (nccl_p2p.h); an all-to-all, NCCL's
// grouped sends and receives, on the communicator's point-to-point channels; every other
// collective on the communicator's collective channels (CollectiveChannels; a parameter
// server's on-node part on a node's), fewer for a small buffer — NCCL drops channels while the
// buffer (an all-gather's whole output) is under channels × 512 threads × 64 B
// (NCCL_SIMPLE_THREAD_THRESHOLD), 32 KiB a channel; a barrier on one. 0 for one rank.
int KernelBlocks(const CollectiveRequest& request, const CollectiveAlgorithm& algorithm);

// The forced algorithm when `forced` is not empty; otherwise, as NCCL's tuner does, the
// default candidate with the lowest predicted time for this size and placement.
Expected<AlgorithmChoice> ChooseCollectiveAlgorithm(const CollectiveRequest& request,
                                                    std::string_view forced);

}  // namespace dtsim::network
