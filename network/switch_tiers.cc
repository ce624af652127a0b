#include "network/switch_tiers.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace dtsim::network {

namespace {

// The blocks of `per_block` nodes that sorted `nodes` (repeats allowed) occupy, and the fewest
// distinct nodes in one of them.
TierSpan SpanOver(const std::vector<int>& nodes, int per_block) {
  TierSpan span{.blocks = 0, .fewest_nodes = std::numeric_limits<int>::max()};
  for (size_t i = 0; i < nodes.size();) {
    const int block = nodes[i] / per_block;
    int distinct = 0;
    for (int last = -1; i < nodes.size() && nodes[i] / per_block == block; ++i) {
      if (nodes[i] != last) ++distinct;
      last = nodes[i];
    }
    ++span.blocks;
    span.fewest_nodes = std::min(span.fewest_nodes, distinct);
  }
  if (span.blocks == 0) return TierSpan{};
  return span;
}

}  // namespace

void SpanTiers(const std::vector<int>& nodes, const ClusterSpec& cluster, GroupShape& shape) {
  if (IsDirectConnected(cluster.inter.topology)) return;
  if (cluster.HasLeafSwitches()) shape.leaves = SpanOver(nodes, cluster.inter.nodes_per_leaf);
  if (cluster.HasPods()) shape.pods = SpanOver(nodes, cluster.inter.nodes_per_pod);
}

// What the tiers' up-links divide a node's rate by: at a tier whose up-links carry 1/o of the
// NIC bandwidth below them, with a share c of a node's traffic climbing, max(1, o · c) — every
// block's nodes busy alike (a training step's groups are copies of each other), so a block
// sends c of its NIC traffic up through 1/o of its NIC bandwidth. Rings and trees leave a block
// on one edge out of the m of the group's nodes in it: c = 1/m at the block holding fewest;
// an all-to-all sends (p − k·m)/(p − k) of a node's off-node bytes to other blocks.
double TierFactor(const ClusterSpec& cluster, const GroupShape& shape, Traffic traffic) {
  double factor = 1;
  const auto tier = [&](const TierSpan& span, double oversubscription) {
    if (span.blocks <= 1 && traffic != Traffic::kToCore) return;
    double climbing = 1;
    if (traffic == Traffic::kNeighbour) {
      climbing = 1.0 / std::max(span.fewest_nodes, 1);
    } else if (traffic == Traffic::kAllToAll) {
      const double p = shape.ranks;
      const double k = shape.per_node;
      climbing = std::clamp((p - k * span.fewest_nodes) / (p - k), 0.0, 1.0);
    }
    factor = std::max(factor, oversubscription * climbing);
  };
  if (cluster.HasLeafSwitches()) tier(shape.leaves, cluster.LeafOversubscription());
  if (cluster.HasPods()) tier(shape.pods, cluster.PodOversubscription());
  return factor;
}

// Where every GPU communicates at once (ClusterSpec::gpus_share_nics), the nodes of a leaf or
// pod that are not the group's run copies of it, as the analytical model assumes
// (TierFactor): a block's up-link gives the group's m nodes under it m / o of their NICs'
// worth (o: the tier's oversubscription), shared by the step's transfers that climb out of
// the block. Under symmetric ranks the copies are not simulated; with every rank simulated
// they are, and the cap is what max-min fairness gives each climbing transfer anyway.
// Transfers to and from parameter servers are left to the servers' NICs.
void CapTierTransfers(FlowProgram& program, std::span<const int32_t> ranks, const GroupShape& shape,
                      const ClusterSpec& cluster) {
  if (!cluster.gpus_share_nics) return;
  const double node_rate = GroupNics(cluster, shape.per_node) *
                           cluster.inter.nic_bandwidth.bytes_per_second() *
                           cluster.inter.efficiency;
  const auto cap_tier = [&](int per_block, double oversubscription) {
    if (oversubscription <= 1) return;  // the up-links carry what the NICs below can send
    const auto blocks = static_cast<size_t>((cluster.nodes + per_block - 1) / per_block);
    const auto block = [&](int32_t gpu) {
      return static_cast<size_t>(cluster.NodeOf(gpu) / per_block);
    };
    std::vector<int> nodes;  // the group's nodes, each once
    nodes.reserve(ranks.size());
    for (int32_t rank : ranks) nodes.push_back(cluster.NodeOf(rank));
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    std::vector<double> members(blocks, 0);  // the group's nodes under each block
    for (int node : nodes) members[static_cast<size_t>(node / per_block)] += 1;
    const auto climbs = [&](const Transfer& transfer) {
      return !cluster.IsServer(transfer.from) && !cluster.IsServer(transfer.to) &&
             block(transfer.from) != block(transfer.to);
    };
    std::vector<int> climbing(blocks, 0);  // transfers leaving each block in the step
    for (FlowStep& step : program) {
      std::fill(climbing.begin(), climbing.end(), 0);
      for (const Transfer& transfer : step.transfers) {
        if (climbs(transfer)) ++climbing[block(transfer.from)];
      }
      for (Transfer& transfer : step.transfers) {
        if (!climbs(transfer)) continue;
        const size_t from = block(transfer.from);
        const double cap = members[from] * node_rate / (oversubscription * climbing[from]);
        transfer.max_rate = transfer.max_rate > 0 ? std::min(transfer.max_rate, cap) : cap;
      }
    }
  };
  if (cluster.HasLeafSwitches()) {
    cap_tier(cluster.inter.nodes_per_leaf, cluster.LeafOversubscription());
  }
  if (cluster.HasPods()) cap_tier(cluster.inter.nodes_per_pod, cluster.PodOversubscription());
}

}  // namespace dtsim::network
