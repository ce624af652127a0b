#include "network/flow_programs.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <limits>

#include "network/collective_algorithms.h"
#include "network/nccl_p2p.h"
#include "network/topology.h"

namespace dtsim::network {

using graph::CommKind;

namespace {

// The group's ranks per node, nodes in order, each node's ranks in order.
std::vector<std::vector<int32_t>> ByNode(const FlowRequest& r) {
  std::vector<int32_t> ranks(r.ranks.begin(), r.ranks.end());
  std::sort(ranks.begin(), ranks.end());
  std::vector<std::vector<int32_t>> nodes;
  for (int32_t rank : ranks) {
    if (nodes.empty() || r.cluster->NodeOf(nodes.back().front()) != r.cluster->NodeOf(rank)) {
      nodes.emplace_back();
    }
    nodes.back().push_back(rank);
  }
  return nodes;
}

size_t MostPerNode(const std::vector<std::vector<int32_t>>& nodes) {
  size_t most = 0;
  for (const auto& node : nodes) most = std::max(most, node.size());
  return most;
}

bool Uniform(const std::vector<std::vector<int32_t>>& nodes) {
  return std::all_of(nodes.begin(), nodes.end(),
                     [&](const auto& node) { return node.size() == nodes.front().size(); });
}

DurationNs Alpha(const FlowRequest& r, size_t nodes) {
  return nodes > 1 ? r.cluster->inter.latency : r.cluster->intra.latency;
}

// One hop of a node-major ring over the group (RingHopLatency).
DurationNs RingHop(const FlowRequest& r, size_t nodes) {
  return RingHopLatency(static_cast<int>(r.ranks.size()), static_cast<int>(nodes), *r.cluster);
}

// NCCL-style channels: across nodes, min(k, NICs) rings, each crossing node boundaries through
// a different NIC (each node's ranks rotated by the channel index); one ring on one node. On
// fabrics whose links have a direction — an NVLink ring inside a node, a ring or torus between
// nodes — at least two channels run, every odd one the other way round, so both directions of
// each link carry traffic as NCCL's bidirectional rings do.
std::vector<std::vector<int32_t>> Rings(const std::vector<std::vector<int32_t>>& nodes,
                                        const ClusterSpec& cluster) {
  const bool across = nodes.size() > 1;
  size_t channels = across ? std::min<size_t>(MostPerNode(nodes), cluster.inter.nics_per_node) : 1;
  const bool directed = across ? IsDirectConnected(cluster.inter.topology)
                               : cluster.intra.topology == IntraTopology::kRing;
  if (directed) channels = std::max<size_t>(2, channels + channels % 2);
  std::vector<std::vector<int32_t>> rings(channels);
  for (size_t c = 0; c < channels; ++c) {
    for (const auto& node : nodes) {
      for (size_t i = 0; i < node.size(); ++i) rings[c].push_back(node[(i + c) % node.size()]);
    }
    if (directed && c % 2 == 1) std::reverse(rings[c].begin(), rings[c].end());
  }
  return rings;
}

// Every ring edge carries `bytes` (per channel: the caller divides by the channel count).
std::vector<Transfer> RingTransfers(const std::vector<std::vector<int32_t>>& rings, double bytes,
                                    bool close_ring) {
  std::vector<Transfer> transfers;
  for (const auto& ring : rings) {
    const size_t edges = close_ring ? ring.size() : ring.size() - 1;
    for (size_t i = 0; i < edges; ++i) {
      transfers.push_back({ring[i], ring[(i + 1) % ring.size()], bytes});
    }
  }
  return transfers;
}

// `steps` ring steps of `bytes` over every edge of each ring (or chain, when not closed),
// each ring one pipeline: the steps stream back to back, so the step waits their latencies
// (`alpha` each) and then every edge carries steps · bytes.
FlowStep Pipelined(DurationNs alpha, const std::vector<std::vector<int32_t>>& rings, double bytes,
                   int64_t steps, bool close_ring) {
  const size_t edges = close_ring ? rings.front().size() : rings.front().size() - 1;
  return {alpha * steps, RingTransfers(rings, bytes * static_cast<double>(steps), close_ring), 1,
          static_cast<uint32_t>(edges)};
}

// A ring collective: `steps` ring steps of every ring edge carrying `bytes_per_step` split
// across the channels.
FlowProgram RingProgram(const FlowRequest& r, double bytes_per_step, int64_t steps) {
  const auto nodes = ByNode(r);
  const auto rings = Rings(nodes, *r.cluster);
  const double per_channel = bytes_per_step / static_cast<double>(rings.size());
  return {Pipelined(RingHop(r, nodes.size()), rings, per_channel, steps, true)};
}

double Size(const FlowRequest& r) { return static_cast<double>(r.size.count()); }
double P(const FlowRequest& r) { return static_cast<double>(r.ranks.size()); }

// One flow step per exchange round, its latency that of the slowest level a pair crosses.
FlowProgram ExchangeProgram(const FlowRequest& r, const std::vector<ExchangeRound>& rounds,
                            bool reverse) {
  FlowProgram program;
  for (const ExchangeRound& round : rounds) {
    FlowStep step{r.cluster->intra.latency, {}, 1};
    for (auto [from, to] : round.pairs) {
      if (r.cluster->NodeOf(from) != r.cluster->NodeOf(to)) step.latency = r.cluster->inter.latency;
      if (reverse) std::swap(from, to);
      step.transfers.push_back({from, to, round.bytes});
    }
    program.push_back(std::move(step));
  }
  if (reverse) std::reverse(program.begin(), program.end());
  return program;
}

// The request NCCL's point-to-point channels are planned for: the group as its communicator.
CollectiveRequest P2pRequest(const FlowRequest& r) {
  return CollectiveRequest{.kind = r.kind,
                           .size = r.size,
                           .shape = ShapeOfGroup(r.ranks, *r.cluster),
                           .cluster = r.cluster,
                           .ranks = r.ranks};
}

// NCCL's point-to-point messages cost a NIC more than their bytes (NetMessageEfficiency): an
// off-node transfer of the step takes `bytes / efficiency` of its path, and its rate cap, if
// any, counts the same inflated bytes — alone it takes what the analytical model charges.
void ChargeNetMessages(const ClusterSpec& cluster, double efficiency, FlowStep& step) {
  for (Transfer& transfer : step.transfers) {
    if (cluster.NodeOf(transfer.from) == cluster.NodeOf(transfer.to)) continue;
    transfer.bytes /= efficiency;
    if (transfer.max_rate > 0) transfer.max_rate /= efficiency;
  }
}

}  // namespace

size_t FlowCount(const FlowStep& step) {
  return step.pipeline == 0 ? step.transfers.size() : step.transfers.size() / step.pipeline;
}

std::span<const Transfer> FlowTransfers(const FlowStep& step, size_t flow) {
  const size_t edges = std::max<size_t>(step.pipeline, 1);
  return std::span<const Transfer>(step.transfers).subspan(flow * edges, edges);
}

double FlowMaxRate(const FlowStep& step, size_t flow) {
  double cap = std::numeric_limits<double>::infinity();
  for (const Transfer& transfer : FlowTransfers(step, flow)) {
    if (transfer.max_rate > 0) cap = std::min(cap, transfer.max_rate);
  }
  return cap;
}

double FlowBytes(const FlowStep& step, size_t flow) {
  return step.transfers[flow * std::max<size_t>(step.pipeline, 1)].bytes;
}

void AppendFlowPath(const FlowStep& step, size_t flow, const Topology& topology,
                    std::vector<uint32_t>& path) {
  for (const Transfer& transfer : FlowTransfers(step, flow)) {
    topology.Route(transfer.from, transfer.to, path);
  }
}

namespace programs {

Expected<FlowProgram> AllReduceRing(const FlowRequest& r) {
  return RingProgram(r, Size(r) / P(r), 2 * (static_cast<int64_t>(r.ranks.size()) - 1));
}

Expected<FlowProgram> ReduceScatterRing(const FlowRequest& r) {
  return RingProgram(r, Size(r) / P(r), static_cast<int64_t>(r.ranks.size()) - 1);
}

Expected<FlowProgram> AllGatherRing(const FlowRequest& r) {
  return RingProgram(r, Size(r), static_cast<int64_t>(r.ranks.size()) - 1);
}

// Pipelined chain from the root (broadcast) or to it (reduce): every chain edge streams S
// at once, after the p-1 hops of latency.
Expected<FlowProgram> RootedRing(const FlowRequest& r) {
  const auto nodes = ByNode(r);
  auto rings = Rings(nodes, *r.cluster);
  for (auto& ring : rings) {
    std::rotate(ring.begin(), std::find(ring.begin(), ring.end(), r.root), ring.end());
    if (r.kind == CommKind::kReduce) std::reverse(ring.begin(), ring.end());
  }
  const double per_channel = Size(r) / static_cast<double>(rings.size());
  return FlowProgram{{RingHop(r, nodes.size()) * static_cast<int64_t>(r.ranks.size() - 1),
                      RingTransfers(rings, per_channel, false), 1,
                      static_cast<uint32_t>(r.ranks.size() - 1)}};
}

// All pairs at once, S/p each, after p-1 steps of latency.
Expected<FlowProgram> AllToAllDirect(const FlowRequest& r) {
  const auto nodes = ByNode(r);
  FlowStep step{Alpha(r, nodes.size()) * static_cast<int64_t>(r.ranks.size() - 1), {}, 1};
  for (int32_t from : r.ranks) {
    for (int32_t to : r.ranks) {
      if (from != to) step.transfers.push_back({from, to, Size(r) / P(r)});
    }
  }
  ChargeNetMessages(*r.cluster, AllToAllNetEfficiency(*r.cluster, Size(r) / P(r)), step);
  return FlowProgram{std::move(step)};
}

// Tutel's 2DH: all pairs inside each node (S/k each), then all pairs among the same local
// index across nodes (S/N each).
Expected<FlowProgram> AllToAllHierarchical(const FlowRequest& r) {
  const auto nodes = ByNode(r);
  if (!Uniform(nodes)) return NeedsUniformGroup("hierarchical");
  const size_t k = nodes.front().size();
  const double n = static_cast<double>(nodes.size());
  FlowStep local{r.cluster->intra.latency * static_cast<int64_t>(k - 1), {}, 1};
  for (const auto& node : nodes) {
    for (int32_t from : node) {
      for (int32_t to : node) {
        if (from != to) local.transfers.push_back({from, to, Size(r) / static_cast<double>(k)});
      }
    }
  }
  FlowStep across{r.cluster->inter.latency * static_cast<int64_t>(nodes.size() - 1), {}, 1};
  for (size_t j = 0; j < k; ++j) {
    for (const auto& a : nodes) {
      for (const auto& b : nodes) {
        if (&a != &b) across.transfers.push_back({a[j], b[j], Size(r) / n});
      }
    }
  }
  ChargeNetMessages(*r.cluster, AllToAllNetEfficiency(*r.cluster, Size(r) / n), across);
  return FlowProgram{std::move(local), std::move(across)};
}

// Ring reduce-scatter inside each node, ring all-reduce of each S/k shard across nodes per
// local index, ring all-gather inside each node.
Expected<FlowProgram> AllReduceHierarchical(const FlowRequest& r) {
  const auto nodes = ByNode(r);
  if (!Uniform(nodes)) return NeedsUniformGroup("hierarchical");
  const size_t k = nodes.front().size();
  const double n = static_cast<double>(nodes.size());
  const double shard = Size(r) / static_cast<double>(k);
  const FlowStep local =
      Pipelined(r.cluster->intra.latency, nodes, shard, static_cast<int64_t>(k) - 1, true);
  std::vector<std::vector<int32_t>> rails(k);
  for (const auto& node : nodes) {
    for (size_t j = 0; j < k; ++j) rails[j].push_back(node[j]);
  }
  FlowStep across = Pipelined(r.cluster->inter.latency, rails, shard / n,
                              2 * (static_cast<int64_t>(nodes.size()) - 1), true);
  FlowProgram program;
  if (k > 1) program.push_back(local);
  if (nodes.size() > 1) program.push_back(std::move(across));
  if (k > 1) program.push_back(local);
  return program;
}

// Parameter servers, the pipeline of collective_algorithms.cc (PlanServerPipeline): one flow
// step per run of steps with the same stages active, repeated. An on-node stage moves its
// whole ring reduce-scatter (or all-gather) of a partition at once, (k−1)/k of it over each
// ring edge, after (k−1) α_intra; push and pull send a piece between every rank and every
// server (transfers to a colocated server on the rank's own node stay off the network). A
// group on one node runs the ring all-reduce.
Expected<FlowProgram> AllReduceParameterServer(const FlowRequest& r) {
  const ClusterSpec& cluster = *r.cluster;
  DTSIM_RETURN_IF_ERROR(NeedsServers(cluster));
  const auto nodes = ByNode(r);
  if (!Uniform(nodes)) return NeedsUniformGroup("parameter_server");
  if (nodes.size() == 1) return AllReduceRing(r);
  const size_t k = nodes.front().size();
  const ServerPipeline pipeline = PlanServerPipeline(cluster, Size(r), static_cast<int>(k));
  const double kd = static_cast<double>(k);
  const std::vector<Transfer> local =
      k > 1 ? RingTransfers(nodes, (kd - 1) / kd * pipeline.partition, true)
            : std::vector<Transfer>{};
  std::vector<Transfer> push;
  std::vector<Transfer> pull;
  for (const auto& node : nodes) {
    for (int32_t rank : node) {
      for (int server = 0; server < cluster.servers.count; ++server) {
        if (ServerIsLocal(cluster, rank, server)) continue;
        push.push_back({rank, cluster.ServerEndpoint(server), pipeline.piece});
        pull.push_back({cluster.ServerEndpoint(server), rank, pipeline.piece});
      }
    }
  }
  FlowProgram program;
  for (const ServerRun& run : pipeline.runs) {
    FlowStep step{DurationNs::Zero(), {}, run.steps};
    const auto add = [&](unsigned stage, const std::vector<Transfer>& transfers, DurationNs alpha) {
      if ((run.stages & stage) == 0) return;
      step.latency = std::max(step.latency, alpha);
      step.transfers.insert(step.transfers.end(), transfers.begin(), transfers.end());
    };
    const DurationNs intra = cluster.intra.latency * static_cast<int64_t>(k - 1);
    add(kServerScatter, local, intra);
    add(kServerPush, push, cluster.inter.latency);
    add(kServerPull, pull, cluster.inter.latency);
    add(kServerGather, local, intra);
    program.push_back(std::move(step));
  }
  return program;
}

// NCCL's double binary tree, pipelined: one step in which every edge streams at once, after
// the tree latency (TreeLatency). On each node a chain carries S each way (reduce toward the
// first member, broadcast back). Across nodes two binary trees carry S/2 each: a heap over the
// nodes, and the same heap over the nodes reversed. A heap's internal positions are
// 0 .. ⌊N/2⌋ - 1, so no node is internal in both: each node sends at most
// 1.5 · S/2 · 2 + 0.5 · S/2 · 2 = 2S over its NICs.
// The inter-node part is split over min(k, NICs) channels, channel c using each node's c-th
// member (and so its NIC).
Expected<FlowProgram> AllReduceTree(const FlowRequest& r) {
  const auto nodes = ByNode(r);
  FlowStep step{
      TreeLatency(static_cast<int>(MostPerNode(nodes)), static_cast<int>(nodes.size()), *r.cluster),
      {},
      1};
  for (const auto& node : nodes) {
    for (size_t i = 1; i < node.size(); ++i) {
      step.transfers.push_back({node[i], node[i - 1], Size(r)});
      step.transfers.push_back({node[i - 1], node[i], Size(r)});
    }
  }
  if (nodes.size() > 1) {
    const size_t channels = std::min<size_t>(MostPerNode(nodes), r.cluster->inter.nics_per_node);
    const double bytes = Size(r) / 2 / static_cast<double>(channels);
    const size_t n = nodes.size();
    for (size_t c = 0; c < channels; ++c) {
      for (const bool mirrored : {false, true}) {
        const auto member = [&](size_t position) {
          const auto& node = nodes[mirrored ? n - 1 - position : position];
          return node[c % node.size()];
        };
        for (size_t j = 1; j < n; ++j) {
          step.transfers.push_back({member(j), member((j - 1) / 2), bytes});
          step.transfers.push_back({member((j - 1) / 2), member(j), bytes});
        }
      }
    }
  }
  return FlowProgram{std::move(step)};
}

// NVLS: one step after the NVLS latency in which every GPU sends to every other, so each
// port carries NvlsPortBytes each way. The links run at the intra-node efficiency and NVLS at
// its rate for NCCL's chunk (NvlsRate), so the bytes are scaled by their ratio: the step takes
// the analytical time, at the price of overstating NVLS's share of a port another transfer
// contends for.
Expected<FlowProgram> AllReduceNvls(const FlowRequest& r) {
  const CollectiveRequest request{.shape = {.ranks = static_cast<int>(r.ranks.size()),
                                            .nodes = static_cast<int>(ByNode(r).size())},
                                  .cluster = r.cluster};
  DTSIM_RETURN_IF_ERROR(NeedsNvls(request));
  const IntraNodeSpec& intra = r.cluster->intra;
  const int ranks = static_cast<int>(r.ranks.size());
  const double bytes = NvlsPortBytes(ranks, Size(r)) / (ranks - 1) *
                       (intra.bandwidth.bytes_per_second() * intra.efficiency) /
                       NvlsRate(*r.cluster, ranks, Size(r));
  FlowStep step{intra.nvls.latency, {}, 1};
  for (int32_t from : r.ranks) {
    for (int32_t to : r.ranks) {
      if (from != to) step.transfers.push_back({from, to, bytes});
    }
  }
  return FlowProgram{std::move(step)};
}

Expected<FlowProgram> AllReduceHalvingDoubling(const FlowRequest& r) {
  return ExchangeProgram(r, HalvingDoublingRounds(r.ranks, Size(r)), false);
}

// A reduce is the broadcast's rounds reversed, data flowing toward the root.
Expected<FlowProgram> RootedBinomialTree(const FlowRequest& r) {
  return ExchangeProgram(r, BinomialRounds(r.ranks, r.root, Size(r)), r.kind == CommKind::kReduce);
}

// Each hop a flow of its own, at most what NCCL's channels for it move in the group's
// communicator (P2pRate), as the analytical shift counts it.
Expected<FlowProgram> ShiftDirect(const FlowRequest& r) {
  FlowProgram program = ExchangeProgram(r, ShiftRounds(r.ranks, Size(r)), false);
  if (program.empty()) return program;
  const CollectiveRequest request = P2pRequest(r);
  const double on_node = P2pRate(request, true);
  const double off_node = P2pRate(request, false);
  for (Transfer& transfer : program.front().transfers) {
    const bool same_node = r.cluster->NodeOf(transfer.from) == r.cluster->NodeOf(transfer.to);
    transfer.max_rate = same_node ? on_node : off_node;
  }
  ChargeNetMessages(*r.cluster, P2pNetEfficiency(request), program.front());
  return program;
}

Expected<FlowProgram> BarrierDissemination(const FlowRequest& r) {
  const auto nodes = ByNode(r);
  const int rounds = std::bit_width(static_cast<unsigned>(r.ranks.size() - 1));
  return FlowProgram{{Alpha(r, nodes.size()) * rounds, {}, 1}};
}

// One flow at the rate NCCL's channels for the pair reach (P2pRate), at most.
Expected<FlowProgram> SendRecvDirect(const FlowRequest& r) {
  const bool same_node = r.cluster->NodeOf(r.ranks[0]) == r.cluster->NodeOf(r.ranks[1]);
  const CollectiveRequest request = P2pRequest(r);
  FlowStep step{same_node ? r.cluster->intra.latency : r.cluster->inter.latency,
                {{r.ranks[0], r.ranks[1], Size(r), P2pRate(request, same_node)}},
                1};
  if (!same_node) ChargeNetMessages(*r.cluster, P2pNetEfficiency(request), step);
  return FlowProgram{step};
}

}  // namespace programs
}  // namespace dtsim::network
