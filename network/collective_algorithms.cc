#include "network/collective_algorithms.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "network/nccl_p2p.h"
#include "network/switch_tiers.h"
#include "sim/base/check.h"
#include "sim/base/strings.h"

namespace dtsim::network {

using graph::CommKind;

namespace {

// The bandwidths and latency a group sees (docs/network.md, "Analytical model").
struct Rates {
  double intra_bytes_per_second;  // one GPU to its node peers
  double node_bytes_per_second;   // one node's NICs available to this group's k members
  DurationNs alpha;               // per step: intra-node latency if the group is on one node
  DurationNs alpha_intra;
  DurationNs alpha_inter;
  bool single_node;
};

Rates RatesFor(const CollectiveRequest& request, Traffic traffic) {
  const ClusterSpec& cluster = *request.cluster;
  const GroupShape& shape = request.shape;
  const double nics = GroupNics(cluster, shape.per_node);
  const double tiers = TierFactor(cluster, shape, traffic);
  Rates rates{.intra_bytes_per_second = IntraGroupRate(cluster, request.ranks),
              .node_bytes_per_second = nics * cluster.inter.nic_bandwidth.bytes_per_second() *
                                       cluster.inter.efficiency / tiers,
              .alpha_intra = cluster.intra.latency,
              .alpha_inter = cluster.inter.latency,
              .single_node = shape.nodes <= 1};
  rates.alpha = rates.single_node ? rates.alpha_intra : rates.alpha_inter;
  return rates;
}

// Seconds to move `bytes` at `rate`, as whole nanoseconds rounded up (0 for no bytes).
DurationNs Move(double bytes, double bytes_per_second) {
  if (bytes <= 0) return DurationNs::Zero();
  return ClampedNs(std::ceil(bytes / bytes_per_second * 1e9));
}

// steps · α + max(intra bytes per rank / intra rate, inter bytes per node / node rate).
DurationNs Phase(const Rates& rates, int64_t steps, DurationNs alpha, double intra_bytes,
                 double node_bytes) {
  const DurationNs wire =
      std::max(Move(intra_bytes, rates.intra_bytes_per_second),
               Move(rates.single_node ? 0 : node_bytes, rates.node_bytes_per_second));
  return alpha * steps + wire;
}

// The ring hop latency of the group (RingHopLatency).
DurationNs RingHop(const CollectiveRequest& r) {
  return RingHopLatency(r.shape.ranks, r.shape.nodes, *r.cluster);
}

int CeilLog2(int n) { return n <= 1 ? 0 : std::bit_width(static_cast<unsigned>(n - 1)); }

// The share of a rank's ring traffic that goes to a peer on its own node: on one node all of
// it; across nodes, k - 1 of every k hops in a node-major ring.
double IntraShare(const CollectiveRequest& r) {
  return r.shape.nodes <= 1 ? 1.0 : static_cast<double>(r.shape.per_node - 1) / r.shape.per_node;
}

// --- all-reduce ---------------------------------------------------------------------------

// Ring: reduce-scatter then all-gather around a ring, 2(p-1) steps, each rank sends
// 2(p-1)/p · S. Across nodes the node's NICs carry the same 2(p-1)/p · S (one crossing per
// channel, the data split across channels): T = 2(p-1)α + 2(p-1)/p · S / B.
Expected<DurationNs> AllReduceRing(const CollectiveRequest& r) {
  const Rates rates = RatesFor(r, Traffic::kNeighbour);
  const double p = r.shape.ranks;
  const double bytes = 2 * (p - 1) / p * static_cast<double>(r.size.count());
  return Phase(rates, int64_t{2} * (r.shape.ranks - 1), RingHop(r), bytes * IntraShare(r), bytes);
}

// Double binary tree (NCCL), pipelined: every tree edge streams at once
// (network/flow_programs.cc builds the same trees) after the latency of the longest path up
// and back down, the k−1 chain hops on a node and ⌈log2 N⌉ tree levels across nodes:
// 2((k−1)α_intra + ⌈log2 N⌉α_inter), the latency NCCL's tuning model charges its trees
// (src/graph/tuning.cc). On one node that is the ring's 2(p−1) hops. On each node a chain moves
// S each way: a member with two chain neighbours sends 2S, with one sends S. Across nodes two
// binary trees carry S/2 each: a heap over the N nodes and the heap over the nodes reversed; a
// node sends S/2 to its parent and to each child in each tree, so the busiest node sends
// max over n of (edges(n) + edges(N-1-n)) · S/2 — 2S for large N, less for small N (1.5S on 4
// nodes, S on 2: the "busbw above the NIC rate" NCCL users see on 2-node trees).
int HeapEdges(int position, int count) {
  const int children = (2 * position + 1 < count ? 1 : 0) + (2 * position + 2 < count ? 1 : 0);
  return (position > 0 ? 1 : 0) + children;
}

Expected<DurationNs> AllReduceTree(const CollectiveRequest& r) {
  const Rates rates = RatesFor(r, Traffic::kNeighbour);
  const double size = static_cast<double>(r.size.count());
  const int k = r.shape.per_node;
  const double chain = k >= 3 ? 2 * size : (k == 2 ? size : 0);
  const int n = r.shape.nodes;
  int busiest = 0;
  for (int node = 0; node < n; ++node) {
    busiest = std::max(busiest, HeapEdges(node, n) + HeapEdges(n - 1 - node, n));
  }
  return Phase(rates, 1, TreeLatency(r.shape.per_node, n, *r.cluster), chain, busiest * size / 2);
}

// NCCL's point-to-point plan for one hop of the request (below).
P2pPlan HopPlan(const CollectiveRequest& request, bool same_node);

// The rates a pair's transfer never exceeds in an exchange step, on one node and across nodes
// (NCCL's point-to-point channels for a shift; none for the MPI-style algorithms).
struct HopCaps {
  double on_node = std::numeric_limits<double>::infinity();
  double off_node = std::numeric_limits<double>::infinity();
  double net_efficiency = 1;  // of the NIC, for NCCL's point-to-point messages
  double tier_factor = 1;     // what the switch tiers above the NICs divide them by
};

// One step of pairwise exchanges, each pair (a, b) moving `bytes` from a to b: the latency of
// the slowest level crossed, then the slower of an on-node transfer (one per GPU, at most
// `caps.on_node`) and the busiest node's off-node transfers over its NICs (a sender uses its
// rail's NIC; the busiest rail carries ⌈busiest / rails⌉ of them, each at most `caps.off_node`:
// max-min fair, a capped transfer leaves the rest of the NIC to the others).
DurationNs ExchangeStep(const CollectiveRequest& r,
                        const std::vector<std::pair<int32_t, int32_t>>& pairs, double bytes,
                        HopCaps caps = {}) {
  const ClusterSpec& cluster = *r.cluster;
  std::vector<int> off_node(static_cast<size_t>(cluster.nodes), 0);
  bool on_node = false;
  for (const auto& [from, to] : pairs) {
    if (cluster.NodeOf(from) == cluster.NodeOf(to)) {
      on_node = true;
    } else {
      ++off_node[static_cast<size_t>(cluster.NodeOf(from))];
    }
  }
  const int busiest = *std::max_element(off_node.begin(), off_node.end());
  const DurationNs alpha = busiest > 0 ? cluster.inter.latency : cluster.intra.latency;
  const double nvlink = cluster.intra.bandwidth.bytes_per_second() * cluster.intra.efficiency;
  const double nic = cluster.inter.nic_bandwidth.bytes_per_second() * cluster.inter.efficiency *
                     caps.net_efficiency / caps.tier_factor;
  // The transfers spread over the node's rails; where every GPU communicates at once on a node
  // with fewer NICs than GPUs, over its members' share of the NICs (GroupNics).
  const int rails = std::min(cluster.gpus_per_node, cluster.inter.nics_per_node);
  const double per_nic = cluster.gpus_share_nics && rails < cluster.gpus_per_node
                             ? static_cast<double>(busiest) / GroupNics(cluster, r.shape.per_node)
                             : std::ceil(static_cast<double>(busiest) / rails);
  const DurationNs wire = std::max(
      on_node ? Move(bytes, std::min(nvlink, caps.on_node)) : DurationNs::Zero(),
      busiest > 0 ? Move(bytes, std::min(nic / per_nic, caps.off_node)) : DurationNs::Zero());
  return alpha + wire;
}

// Recursive halving (reduce-scatter) then doubling (all-gather), Rabenseifner, over the
// group in node-major order: with p' = 2^⌊log2 p⌋, the p - p' extra ranks first fold their S
// into a partner (and get the result back at the end); halving exchanges with the partner
// at distance p'/2, p'/4, ... moving S/2, S/4, ...; doubling mirrors it. The steps run one
// after the other: T = Σ steps (α + wire), each priced by ExchangeStep.
Expected<DurationNs> AllReduceHalvingDoubling(const CollectiveRequest& r) {
  DurationNs total;
  for (const ExchangeRound& round :
       HalvingDoublingRounds(r.ranks, static_cast<double>(r.size.count()))) {
    total += ExchangeStep(r, round.pairs, round.bytes);
  }
  return total;
}

// Hierarchical: ring reduce-scatter inside each node (k-1 steps, (k-1)/k · S), ring all-reduce
// of each S/k shard across the N nodes on k parallel rails (2(N-1) steps; a node's NICs carry
// k · 2(N-1)/N · S/k), ring all-gather inside each node.
Expected<DurationNs> AllReduceHierarchical(const CollectiveRequest& r) {
  if (!r.shape.uniform) return NeedsUniformGroup("hierarchical");
  const Rates rates = RatesFor(r, Traffic::kNeighbour);
  const double k = r.shape.per_node;
  const double n = r.shape.nodes;
  const double size = static_cast<double>(r.size.count());
  const DurationNs local =
      Phase(rates, r.shape.per_node - 1, rates.alpha_intra, (k - 1) / k * size, 0);
  const DurationNs across =
      Phase(rates, int64_t{2} * (r.shape.nodes - 1), rates.alpha_inter, 0, 2 * (n - 1) / n * size);
  return local + across + local;
}

// Parameter servers (BytePS), pipelined over partitions (PlanServerPipeline): each step costs
// the latency of the slowest level its stages cross ((k−1) α_intra for the on-node stages,
// α_inter for push and pull) plus the slowest of
//   - a rank's on-node ring traffic: (k−1)/k · partition for each on-node stage active;
//   - a node's NICs (B_node, as for the group's own traffic): with dedicated servers a node
//     sends a partition up while pushing and receives one while pulling; colocated, it sends
//     its pushes to the servers on other nodes, W_n = k_n · piece · (m − h_n), and, when it
//     hosts a server (h_n = 1), that server's pulls to the group's ranks on other nodes,
//     V_n = (p − k_n) · piece; it receives the mirror (out: push·W_n + pull·V_n, in:
//     push·V_n + pull·W_n);
//   - a dedicated server's NIC (`servers.nic_bandwidth` × efficiency): p · piece each way.
// A group on one node runs the ring all-reduce (BytePS with one worker machine runs NCCL
// alone). With m = N dedicated servers as fast as the workers' NICs each NIC carries S once
// each way, against 2(N−1)/N · S for a ring; colocated servers carry 2(N−1)/N · S.
Expected<DurationNs> AllReduceParameterServer(const CollectiveRequest& r) {
  const ClusterSpec& cluster = *r.cluster;
  const ServerSpec& servers = cluster.servers;
  DTSIM_RETURN_IF_ERROR(NeedsServers(cluster));
  if (!r.shape.uniform) return NeedsUniformGroup("parameter_server");
  // Every byte to or from a dedicated server climbs every tier (they hang off the top);
  // colocated servers' bytes climb the tiers the group spans.
  const bool dedicated = servers.placement == ServerPlacement::kDedicated;
  const Rates rates = RatesFor(r, dedicated ? Traffic::kToCore : Traffic::kSpanned);
  if (rates.single_node) return AllReduceRing(r);
  const int k = r.shape.per_node;
  const ServerPipeline pipeline =
      PlanServerPipeline(cluster, static_cast<double>(r.size.count()), k);
  const double node_rate = rates.node_bytes_per_second;
  const double server_rate = servers.nic_bandwidth.bytes_per_second() * cluster.inter.efficiency;
  std::vector<double> members(static_cast<size_t>(cluster.nodes), 0);
  for (int32_t rank : r.ranks) members[static_cast<size_t>(cluster.NodeOf(rank))] += 1;
  const double m = servers.count;
  const double p = r.shape.ranks;
  DurationNs total;
  for (const ServerRun& run : pipeline.runs) {
    const bool push = (run.stages & kServerPush) != 0;
    const bool pull = (run.stages & kServerPull) != 0;
    const int local_stages =
        ((run.stages & kServerScatter) != 0 ? 1 : 0) + ((run.stages & kServerGather) != 0 ? 1 : 0);
    DurationNs alpha = local_stages > 0 ? rates.alpha_intra * (k - 1) : DurationNs::Zero();
    if (push || pull) alpha = std::max(alpha, rates.alpha_inter);
    double node = 0;
    double server = 0;
    if (dedicated) {
      node = push || pull ? pipeline.partition : 0;
      server = push || pull ? p * pipeline.piece : 0;
    } else {
      for (int n = 0; n < cluster.nodes; ++n) {
        const double k_n = members[static_cast<size_t>(n)];
        const bool hosts = n < servers.count;
        const double w = k_n * pipeline.piece * (m - (hosts ? 1 : 0));
        const double v = hosts ? (p - k_n) * pipeline.piece : 0;
        node = std::max({node, (push ? w : 0) + (pull ? v : 0), (push ? v : 0) + (pull ? w : 0)});
      }
    }
    const double intra = local_stages * (k - 1.0) / k * pipeline.partition;
    const DurationNs wire = std::max({Move(intra, rates.intra_bytes_per_second),
                                      Move(node, node_rate), Move(server, server_rate)});
    total += (alpha + wire) * run.steps;
  }
  return total;
}

// NVLS (NVLink SHARP, NCCL's default all-reduce inside an H100 node from a few MiB): the
// switch reduces what the GPUs send up and multicasts the result down, so a GPU's port carries
// (p+1)/p · S each way (NvlsPortBytes) in one phase, at the NVLS rate for NCCL's chunk of this
// size (NvlsRate), after the NVLS latency: T = latency + (p+1)/p · S / NvlsRate.
Expected<DurationNs> AllReduceNvls(const CollectiveRequest& r) {
  DTSIM_RETURN_IF_ERROR(NeedsNvls(r));
  const double size = static_cast<double>(r.size.count());
  return r.cluster->intra.nvls.latency +
         Move(NvlsPortBytes(r.shape.ranks, size), NvlsRate(*r.cluster, r.shape.ranks, size));
}

// --- reduce-scatter, all-gather ------------------------------------------------------------

// Ring reduce-scatter of an S-byte input: p-1 steps, (p-1)/p · S per rank and per node.
Expected<DurationNs> ReduceScatterRing(const CollectiveRequest& r) {
  const Rates rates = RatesFor(r, Traffic::kNeighbour);
  const double p = r.shape.ranks;
  const double bytes = (p - 1) / p * static_cast<double>(r.size.count());
  return Phase(rates, r.shape.ranks - 1, RingHop(r), bytes * IntraShare(r), bytes);
}

// Ring all-gather of S-byte contributions: p-1 steps, each rank forwards (p-1) · S.
Expected<DurationNs> AllGatherRing(const CollectiveRequest& r) {
  const Rates rates = RatesFor(r, Traffic::kNeighbour);
  const double bytes = (r.shape.ranks - 1) * static_cast<double>(r.size.count());
  return Phase(rates, r.shape.ranks - 1, RingHop(r), bytes * IntraShare(r), bytes);
}

// --- broadcast, reduce ---------------------------------------------------------------------

// Pipelined chain (NCCL's ring broadcast/reduce): p-1 hops of latency, S through every link.
Expected<DurationNs> RootedRing(const CollectiveRequest& r) {
  const Rates rates = RatesFor(r, Traffic::kNeighbour);
  const double size = static_cast<double>(r.size.count());
  return Phase(rates, r.shape.ranks - 1, RingHop(r), size, size);
}

// Binomial tree, not pipelined: ⌈log2 p⌉ rounds each moving the whole S; in round j the
// 2^j members that have the data (counted from the root) send it to the member 2^j further on.
// Each round is priced by ExchangeStep, so a node whose members send off-node together in the
// late rounds pays for all of them. A reduce is the same rounds reversed.
Expected<DurationNs> RootedBinomialTree(const CollectiveRequest& r) {
  DurationNs total;
  for (const ExchangeRound& round :
       BinomialRounds(r.ranks, r.root, static_cast<double>(r.size.count()))) {
    total += ExchangeStep(r, round.pairs, round.bytes);
  }
  return total;
}

// --- all-to-all ----------------------------------------------------------------------------

// Direct pairwise exchange: p-1 steps; a rank sends S/p to each peer, (k-1)/p · S of it on its
// node; a node's NICs carry its k members' off-node shares, k(p-k)/p · S, as NCCL's
// point-to-point messages of one network step at most (AllToAllNetEfficiency).
Expected<DurationNs> AllToAllDirect(const CollectiveRequest& r) {
  const Rates rates = RatesFor(r, Traffic::kAllToAll);
  const double p = r.shape.ranks;
  const double k = r.shape.per_node;
  const double size = static_cast<double>(r.size.count());
  const double node_bytes = k * (p - k) / p * size / AllToAllNetEfficiency(*r.cluster, size / p);
  return Phase(rates, r.shape.ranks - 1, rates.alpha, (k - 1) / p * size, node_bytes);
}

// Two-level (Tutel's 2DH): an all-to-all inside each node groups data by destination node
// (k-1 steps, (k-1)/k · S), then one across nodes per local index (N-1 steps; a node's NICs
// carry k(N-1)/N · S, the same volume as direct, in N-1 instead of p-1 messages per rank).
Expected<DurationNs> AllToAllHierarchical(const CollectiveRequest& r) {
  if (!r.shape.uniform) return NeedsUniformGroup("hierarchical");
  const Rates rates = RatesFor(r, Traffic::kAllToAll);
  const double k = r.shape.per_node;
  const double n = r.shape.nodes;
  const double size = static_cast<double>(r.size.count());
  return Phase(rates, r.shape.per_node - 1, rates.alpha_intra, (k - 1) / k * size, 0) +
         Phase(rates, r.shape.nodes - 1, rates.alpha_inter, 0,
               k * (n - 1) / n * size / AllToAllNetEfficiency(*r.cluster, size / n));
}

// --- shift ----------------------------------------------------------------------------------

// Every member sends S to the next one at once, as one NCCL group of sends and receives in the
// group's communicator (ring attention's KV exchange): one exchange step (ExchangeStep) — the
// latency of the slowest level a hop crosses, then the slowest hop, each at most what NCCL's
// point-to-point channels for it move (P2pRate: on one H100 node, 32 MiB in an 8-rank
// communicator runs on 4 channels, 82 GB/s, not NVLink's 370) and an off-node hop at most its
// share of the NIC.
Expected<DurationNs> ShiftDirect(const CollectiveRequest& r) {
  const std::vector<ExchangeRound> rounds =
      ShiftRounds(r.ranks, static_cast<double>(r.size.count()));
  if (rounds.empty()) return DurationNs::Zero();
  const P2pPlan off_node = HopPlan(r, false);  // its rate is P2pRate's off-node one
  return ExchangeStep(r, rounds.front().pairs, rounds.front().bytes,
                      HopCaps{.on_node = P2pRate(r, true),
                              .off_node = off_node.bytes_per_second,
                              .net_efficiency = off_node.net_efficiency,
                              .tier_factor = TierFactor(*r.cluster, r.shape, Traffic::kNeighbour)});
}

// --- barrier, send/recv --------------------------------------------------------------------

// Dissemination barrier: ⌈log2 p⌉ rounds of latency.
Expected<DurationNs> BarrierDissemination(const CollectiveRequest& r) {
  return RatesFor(r, Traffic::kNeighbour).alpha * CeilLog2(r.shape.ranks);
}

// One message: α + S / B, where B is what NCCL's channels for the pair move (nccl_p2p.h): at
// most NVLink on one node, one NIC across nodes — divided by the switch tiers the pair crosses
// at their whole oversubscription, as every pair of a pipeline boundary sends at once.
Expected<DurationNs> SendRecvDirect(const CollectiveRequest& r) {
  const Rates rates = RatesFor(r, Traffic::kNeighbour);
  const double size = static_cast<double>(r.size.count());
  return rates.alpha + Move(size, P2pRate(r, r.shape.nodes <= 1,
                                          TierFactor(*r.cluster, r.shape, Traffic::kSpanned)));
}

constexpr std::array kAlgorithms = {
    CollectiveAlgorithm{"ring", CommKind::kAllReduce, true,
                        "reduce-scatter + all-gather around a ring", AllReduceRing,
                        programs::AllReduceRing},
    CollectiveAlgorithm{"tree", CommKind::kAllReduce, true, "double binary tree (NCCL), pipelined",
                        AllReduceTree, programs::AllReduceTree},
    CollectiveAlgorithm{"halving_doubling", CommKind::kAllReduce, false,
                        "recursive halving + doubling (Rabenseifner)", AllReduceHalvingDoubling,
                        programs::AllReduceHalvingDoubling},
    CollectiveAlgorithm{"hierarchical", CommKind::kAllReduce, false,
                        "intra-node reduce-scatter, inter-node all-reduce, intra-node all-gather",
                        AllReduceHierarchical, programs::AllReduceHierarchical},
    CollectiveAlgorithm{"nvls", CommKind::kAllReduce, true,
                        "NVLink SHARP: reduction and multicast in the NVSwitch (one node)",
                        AllReduceNvls, programs::AllReduceNvls},
    CollectiveAlgorithm{
        "parameter_server", CommKind::kAllReduce, false,
        "push to and pull from parameter servers (BytePS), pipelined over partitions",
        AllReduceParameterServer, programs::AllReduceParameterServer},
    CollectiveAlgorithm{"ring", CommKind::kReduceScatter, true, "ring", ReduceScatterRing,
                        programs::ReduceScatterRing},
    CollectiveAlgorithm{"ring", CommKind::kAllGather, true, "ring", AllGatherRing,
                        programs::AllGatherRing},
    CollectiveAlgorithm{"ring", CommKind::kBroadcast, true, "pipelined chain", RootedRing,
                        programs::RootedRing},
    CollectiveAlgorithm{"binomial_tree", CommKind::kBroadcast, false, "binomial tree",
                        RootedBinomialTree, programs::RootedBinomialTree},
    CollectiveAlgorithm{"ring", CommKind::kReduce, true, "pipelined chain", RootedRing,
                        programs::RootedRing},
    CollectiveAlgorithm{"binomial_tree", CommKind::kReduce, false, "binomial tree",
                        RootedBinomialTree, programs::RootedBinomialTree},
    CollectiveAlgorithm{"direct", CommKind::kAllToAll, true, "pairwise exchange", AllToAllDirect,
                        programs::AllToAllDirect},
    CollectiveAlgorithm{"hierarchical", CommKind::kAllToAll, false,
                        "intra-node then inter-node all-to-all (Tutel 2DH)", AllToAllHierarchical,
                        programs::AllToAllHierarchical},
    CollectiveAlgorithm{"direct", CommKind::kShift, true, "every member sends to the next at once",
                        ShiftDirect, programs::ShiftDirect},
    CollectiveAlgorithm{"dissemination", CommKind::kBarrier, true, "dissemination barrier",
                        BarrierDissemination, programs::BarrierDissemination},
    CollectiveAlgorithm{"direct", CommKind::kSendRecv, true, "one message", SendRecvDirect,
                        programs::SendRecvDirect},
};

}  // namespace

namespace {

P2pPlan HopPlan(const CollectiveRequest& request, bool same_node) {
  const GroupShape& comm = request.communicator.ranks > 0 ? request.communicator : request.shape;
  return PlanP2p(*request.cluster, comm.ranks, comm.nodes, same_node,
                 static_cast<double>(request.size.count()));
}

// The NCCL channels the request runs on, where the model counts them: a send/recv's, and a
// shift's slowest hop's (an off-node one when any hop leaves its node).
int ChannelsOf(const CollectiveRequest& request) {
  if (request.shape.ranks <= 1) return 0;
  if (request.kind == CommKind::kSendRecv || request.kind == CommKind::kShift) {
    return HopPlan(request, request.shape.nodes <= 1).channels;
  }
  return 0;
}

}  // namespace

int KernelBlocks(const CollectiveRequest& request, const CollectiveAlgorithm& algorithm) {
  const ClusterSpec& cluster = *request.cluster;
  const GroupShape& shape = request.shape;
  if (shape.ranks <= 1) return 0;
  switch (request.kind) {
    case CommKind::kSendRecv:
    case CommKind::kShift:
      return ChannelsOf(request);
    case CommKind::kAllToAll:
      return HopPlan(request, shape.nodes <= 1).communicator_channels;
    case CommKind::kBarrier:
      return 1;
    default:
      break;
  }
  if (algorithm.name == "nvls") return cluster.intra.nvls.channels;
  const int nodes = algorithm.name == "parameter_server" ? 1 : shape.nodes;
  const int channels =
      CollectiveChannels(cluster, nodes, std::min(shape.per_node, cluster.inter.nics_per_node));
  // 512 threads × NCCL_SIMPLE_THREAD_THRESHOLD (64 B) a channel.
  constexpr double kBytesPerChannel = 512 * 64;
  const double bytes = static_cast<double>(request.size.count()) *
                       (request.kind == CommKind::kAllGather ? shape.ranks : 1);
  return static_cast<int>(
      std::clamp(std::ceil(bytes / kBytesPerChannel), 1.0, static_cast<double>(channels)));
}

double P2pNetEfficiency(const CollectiveRequest& request) {
  return HopPlan(request, false).net_efficiency;
}

// A training step (ClusterSpec::gpus_share_nics) runs the other data-parallel replicas'
// all-reduces and the other tensor-parallel peers' sends beside a group's: on a node with fewer
// NICs than GPUs (one 100 Gb/s NIC for eight V100s) they split its NICs.
double GroupNics(const ClusterSpec& cluster, int members) {
  const int nics = cluster.inter.nics_per_node;
  const double own = std::min(members, nics);
  if (!cluster.gpus_share_nics) return own;
  const int gpus = std::max(cluster.gpus_per_node, members);
  return std::min(own, static_cast<double>(members) * nics / gpus);
}

double P2pRate(const CollectiveRequest& request, bool same_node, double nic_divisor) {
  const P2pPlan plan = HopPlan(request, same_node);
  if (same_node)
    return std::min(plan.bytes_per_second, IntraGroupRate(*request.cluster, request.ranks));
  // Across nodes at most the sending GPU's share of its node's NICs (GroupNics).
  const ClusterSpec& cluster = *request.cluster;
  const double nic = cluster.inter.nic_bandwidth.bytes_per_second() * cluster.inter.efficiency *
                     plan.net_efficiency;
  return std::min(plan.bytes_per_second, nic * GroupNics(cluster, 1) / nic_divisor);
}

double IntraGroupRate(const ClusterSpec& cluster, std::span<const int32_t> ranks) {
  const IntraNodeSpec& intra = cluster.intra;
  const double gpu = intra.bandwidth.bytes_per_second() * intra.efficiency;
  if (intra.mesh_links.empty() || ranks.size() < 2) return gpu;
  DTSIM_CHECK(
      intra.mesh_rings != nullptr && intra.mesh_rings->size() == size_t{1} << cluster.gpus_per_node,
      "a mesh's rings are built for its node (network::CheckMesh)");
  const double link = gpu / std::max(intra.links, 1);
  // Members per node, node by node in the group's order (groups list a node's ranks together;
  // one that returns to a node prices each visit's members on their own).
  double slowest = gpu;
  uint32_t members = 0;
  int node = cluster.NodeOf(ranks.front());
  const auto close = [&] {
    if (std::popcount(members) < 2) return;
    const MeshRings& rings = (*intra.mesh_rings)[members];
    slowest = std::min(slowest, rings.host ? kMeshHostRate : rings.rings * link);
  };
  for (const int32_t rank : ranks) {
    if (cluster.NodeOf(rank) != node) {
      close();
      members = 0;
      node = cluster.NodeOf(rank);
    }
    members |= 1U << (rank % cluster.gpus_per_node);
  }
  close();
  return slowest;
}

Status NeedsNvls(const CollectiveRequest& request) {
  if (!request.cluster->intra.nvls.enabled) {
    return Error("the nvls algorithm needs an NVSwitch with NVLink SHARP (intra_node.nvls)");
  }
  if (request.shape.nodes > 1) {
    return Error("the nvls algorithm runs inside one node; this group spans " +
                 std::to_string(request.shape.nodes) + " nodes");
  }
  return Status::Ok();
}

double NvlsPortBytes(int ranks, double size) { return (ranks + 1.0) / ranks * size; }

double NvlsChunk(const NvlsSpec& nvls, int ranks, double size) {
  constexpr double kKiB = 1024;
  const double ops = static_cast<double>(nvls.channels) * std::min(ranks, kNvlsMaxHeads);
  double chunk = 128 * kKiB;
  if (size < 64 * ops * chunk) chunk = 64 * kKiB;
  if (size < 8 * ops * chunk) chunk = 32 * kKiB;
  if (size < 2 * ops * chunk) chunk = 16 * kKiB;
  return chunk;
}

double NvlsRate(const ClusterSpec& cluster, int ranks, double size) {
  const NvlsSpec& nvls = cluster.intra.nvls;
  const double rate = cluster.intra.bandwidth.bytes_per_second() * nvls.efficiency;
  // The chunk overhead as bytes a channel could have moved meanwhile.
  const double overhead = nvls.chunk_overhead.ToSecondsDouble() * rate / nvls.channels;
  constexpr double kFullChunk = 128 * 1024;
  const double chunk = NvlsChunk(nvls, ranks, size);
  return rate * (1 + overhead / kFullChunk) / (1 + overhead / chunk);
}

DurationNs TreeLatency(int per_node, int nodes, const ClusterSpec& cluster) {
  return (cluster.intra.latency * (per_node - 1) + cluster.inter.latency * CeilLog2(nodes)) * 2;
}

DurationNs RingHopLatency(int ranks, int nodes, const ClusterSpec& cluster) {
  if (nodes <= 1) return cluster.intra.latency;
  const int64_t circuit =
      cluster.intra.latency.ns() * (ranks - nodes) + cluster.inter.latency.ns() * nodes;
  return DurationNs((circuit + ranks - 1) / ranks);
}

std::vector<ExchangeRound> BinomialRounds(std::span<const int32_t> ranks, int32_t root,
                                          double size) {
  std::vector<int32_t> order(ranks.begin(), ranks.end());
  std::sort(order.begin(), order.end());
  const auto first = std::find(order.begin(), order.end(), root);
  if (first != order.end()) std::rotate(order.begin(), first, order.end());
  std::vector<ExchangeRound> rounds;
  for (size_t span = 1; span < order.size(); span *= 2) {
    ExchangeRound& round = rounds.emplace_back(ExchangeRound{{}, size});
    for (size_t i = 0; i < span && i + span < order.size(); ++i) {
      round.pairs.emplace_back(order[i], order[i + span]);
    }
  }
  return rounds;
}

std::vector<ExchangeRound> ShiftRounds(std::span<const int32_t> ranks, double size) {
  if (ranks.size() < 2) return {};
  ExchangeRound round{{}, size};
  for (size_t i = 0; i < ranks.size(); ++i) {
    round.pairs.emplace_back(ranks[i], ranks[(i + 1) % ranks.size()]);
  }
  return {round};
}

std::vector<ExchangeRound> HalvingDoublingRounds(std::span<const int32_t> ranks, double size) {
  std::vector<int32_t> order(ranks.begin(), ranks.end());
  std::sort(order.begin(), order.end());
  const size_t p2 = std::bit_floor(order.size());
  ExchangeRound fold{{}, size};
  for (size_t i = p2; i < order.size(); ++i) fold.pairs.emplace_back(order[i], order[i - p2]);
  std::vector<ExchangeRound> halving;
  double bytes = size;
  for (size_t distance = p2 / 2; distance >= 1; distance /= 2) {
    bytes /= 2;
    ExchangeRound& round = halving.emplace_back(ExchangeRound{{}, bytes});
    for (size_t i = 0; i < p2; ++i) round.pairs.emplace_back(order[i], order[i ^ distance]);
  }
  std::vector<ExchangeRound> rounds;
  if (!fold.pairs.empty()) rounds.push_back(fold);
  rounds.insert(rounds.end(), halving.begin(), halving.end());
  rounds.insert(rounds.end(), halving.rbegin(), halving.rend());
  if (!fold.pairs.empty()) {
    for (auto& [from, to] : fold.pairs) std::swap(from, to);
    rounds.push_back(std::move(fold));
  }
  return rounds;
}

ServerPipeline PlanServerPipeline(const ClusterSpec& cluster, double size, int per_node) {
  ServerPipeline pipeline;
  const double limit = static_cast<double>(cluster.servers.partition.count());
  pipeline.partitions = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(size / limit)));
  pipeline.partition = size / static_cast<double>(pipeline.partitions);
  pipeline.piece = pipeline.partition / per_node / cluster.servers.count;
  std::vector<unsigned> stages = {kServerPush, kServerPull};
  if (per_node > 1) {
    stages.insert(stages.begin(), kServerScatter);
    stages.push_back(kServerGather);
  }
  // Stage i works on partition t − i in step t; consecutive steps with the same stages
  // active form a run (at most 2 · stages − 1 runs).
  const auto count = static_cast<int64_t>(stages.size());
  for (int64_t step = 0; step < pipeline.partitions + count - 1; ++step) {
    unsigned active = 0;
    for (int64_t i = 0; i < count; ++i) {
      if (step - i >= 0 && step - i < pipeline.partitions) active |= stages[static_cast<size_t>(i)];
    }
    if (!pipeline.runs.empty() && pipeline.runs.back().stages == active) {
      ++pipeline.runs.back().steps;
    } else {
      pipeline.runs.push_back({active, 1});
    }
  }
  return pipeline;
}

Status NeedsServers(const ClusterSpec& cluster) {
  if (cluster.servers.count > 0) return Status::Ok();
  return Error("the parameter_server algorithm needs parameter servers (cluster.servers)");
}

Error NeedsUniformGroup(std::string_view algorithm) {
  return Error(fmt::format("the {} algorithm needs the same number of group members on every node",
                           algorithm));
}

bool ServerIsLocal(const ClusterSpec& cluster, int32_t rank, int server) {
  return cluster.servers.placement == ServerPlacement::kColocated && cluster.NodeOf(rank) == server;
}

GroupShape ShapeOfGroup(std::span<const int32_t> ranks, const ClusterSpec& cluster) {
  std::vector<int> nodes;
  nodes.reserve(ranks.size());
  for (int32_t rank : ranks) nodes.push_back(cluster.NodeOf(rank));
  std::sort(nodes.begin(), nodes.end());
  GroupShape shape{.ranks = static_cast<int>(ranks.size())};
  for (size_t i = 0; i < nodes.size();) {
    size_t j = i;
    while (j < nodes.size() && nodes[j] == nodes[i]) ++j;
    const int count = static_cast<int>(j - i);
    if (shape.nodes > 0 && count != shape.per_node) shape.uniform = false;
    shape.per_node = std::max(shape.per_node, count);
    ++shape.nodes;
    i = j;
  }
  SpanTiers(nodes, cluster, shape);
  return shape;
}

std::span<const CollectiveAlgorithm> CollectiveAlgorithms() { return kAlgorithms; }

Expected<const CollectiveAlgorithm*> FindCollectiveAlgorithm(CommKind kind, std::string_view name) {
  std::vector<std::string_view> names;
  for (const CollectiveAlgorithm& algorithm : kAlgorithms) {
    if (algorithm.kind != kind) continue;
    if (algorithm.name == name) return &algorithm;
    names.push_back(algorithm.name);
  }
  return Error(fmt::format("unknown {} algorithm{}; registered: {}", graph::CommKindName(kind),
                           DidYouMean(name, names), JoinQuoted(names)),
               "", Quote(name));
}

std::string AlgorithmChoice::Label() const {
  if (algorithm == nullptr) return "";
  if (channels == 0) return std::string(algorithm->name);
  return fmt::format("{} on {} channel{}", algorithm->name, channels, channels == 1 ? "" : "s");
}

namespace {

// NCCL's tree correction for the Simple protocol (src/graph/tuning.cc treeCorrectionFactor):
// the share of its modelled bandwidth a tree reaches at 64 B · 2^i, i < 22 (to 128 MiB).
constexpr std::array<double, 22> kTreeCorrection = {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6,
                                                    .5, .5, .5, .5, .5, .5, .6, .6, .7, .8, .9};

// Whether NCCL's tuner would run this all-reduce as a tree rather than a ring (src/graph/
// tuning.cc, the model of NCCL 2.8–2.11, Simple protocol). NCCL chooses by its own estimates,
// which give both the ring's bus bandwidth B and credit the tree with none of what it saves
// on the wire (on two nodes a tree sends half the ring's bytes through the NICs): the tree
// moves S at min(0.9 B, 110 GB/s on up to two nodes, else 80) × 0.5 × the correction above, the
// ring S at B · p / 2(p − 1) after its latency, which across nodes NCCL counts 1.9 times once
// S ≥ p/16 · 64 KiB (its "plateau effect"). B is the ring's bus bandwidth as dtsim prices it,
// the latencies dtsim's (RingHopLatency and TreeLatency follow NCCL's): so dtsim runs the
// algorithm NCCL would pick and prices it by what it moves.
bool NcclPrefersTree(const CollectiveRequest& r, DurationNs ring) {
  const double p = r.shape.ranks;
  const double size = static_cast<double>(r.size.count());
  const auto ns = [](DurationNs t) { return static_cast<double>(t.ns()); };
  const double ring_latency = 2 * (p - 1) * ns(RingHop(r));
  const double tree_latency = ns(TreeLatency(r.shape.per_node, r.shape.nodes, *r.cluster));
  const double ring_wire = std::max(ns(ring) - ring_latency, 0.0);
  if (size <= 0 || ring_wire <= 0) return tree_latency < ring_latency;
  const double bus = 2 * (p - 1) / p * size / ring_wire;  // bytes per ns
  const bool multi_node = r.shape.nodes > 1;
  const double max_tree = r.shape.nodes > 2 ? 80.0 : 110.0;  // GB/s: bytes per ns
  const auto log_size = static_cast<size_t>(std::max(0.0, std::floor(std::log2(size / 64))));
  const double correction = log_size < kTreeCorrection.size() ? kTreeCorrection[log_size] : 1.0;
  const double tree_rate = std::min(0.9 * bus, max_tree) * 0.5 * correction;
  const double plateau = multi_node && size >= p / 16 * 65536 ? 1.9 : 1.0;
  const double nccl_ring = ring_latency * plateau + ring_wire;
  const double nccl_tree = tree_latency + size / tree_rate;
  return nccl_tree < nccl_ring;
}

}  // namespace

Expected<AlgorithmChoice> ChooseCollectiveAlgorithm(const CollectiveRequest& request,
                                                    std::string_view forced) {
  // Every algorithm pays the cluster's collective latency once (it does not change the choice).
  const DurationNs launch = request.cluster->collective_latency;
  if (!forced.empty()) {
    DTSIM_ASSIGN_OR_RETURN(const CollectiveAlgorithm* algorithm,
                           FindCollectiveAlgorithm(request.kind, forced));
    if (request.shape.ranks <= 1) return AlgorithmChoice{algorithm, DurationNs::Zero()};
    DTSIM_ASSIGN_OR_RETURN(const DurationNs time, algorithm->cost(request));
    return AlgorithmChoice{algorithm, launch + time, ChannelsOf(request),
                           KernelBlocks(request, *algorithm)};
  }
  if (request.shape.ranks <= 1) return AlgorithmChoice{nullptr, DurationNs::Zero()};
  AlgorithmChoice best{nullptr, DurationNs::Max()};
  const CollectiveAlgorithm* ring = nullptr;
  const CollectiveAlgorithm* tree = nullptr;
  DurationNs ring_time;
  DurationNs tree_time;
  for (const CollectiveAlgorithm& algorithm : kAlgorithms) {
    if (algorithm.kind != request.kind || !algorithm.default_candidate) continue;
    const Expected<DurationNs> time = algorithm.cost(request);
    if (!time.ok()) continue;
    // All-reduce: of ring and tree, the one NCCL's tuner picks competes with the others.
    if (request.kind == CommKind::kAllReduce && algorithm.name == "ring") {
      ring = &algorithm;
      ring_time = *time;
      continue;
    }
    if (request.kind == CommKind::kAllReduce && algorithm.name == "tree") {
      tree = &algorithm;
      tree_time = *time;
      continue;
    }
    if (*time < best.time) best = {&algorithm, *time};
  }
  if (ring != nullptr || tree != nullptr) {
    const bool use_tree =
        tree != nullptr && (ring == nullptr || NcclPrefersTree(request, ring_time));
    const AlgorithmChoice picked{use_tree ? tree : ring, use_tree ? tree_time : ring_time};
    if (best.algorithm == nullptr || picked.time < best.time) best = picked;
  }
  DTSIM_CHECK(best.algorithm != nullptr, "every collective kind has a default algorithm");
  best.time += launch;
  best.channels = ChannelsOf(request);
  best.blocks = KernelBlocks(request, *best.algorithm);
  return best;
}

}  // namespace dtsim::network
