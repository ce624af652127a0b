#include "network/topology.h"

#include <fmt/format.h>

namespace dtsim::network {

Expected<Topology> Topology::Build(const ClusterSpec& cluster, FluidNetwork& net) {
  const InterTopology inter = cluster.inter.topology;
  if (inter != InterTopology::kFatTree && inter != InterTopology::kRailOptimized) {
    return Error(fmt::format("the flow model does not route a {} inter-node fabric yet; use the "
                             "analytical model", InterTopologyName(inter)));
  }
  Topology topology(cluster);
  const double gpu_port = cluster.intra.bandwidth.bytes_per_second() * cluster.intra.efficiency;
  const double nic = cluster.inter.nic_bandwidth.bytes_per_second() * cluster.inter.efficiency;
  topology.first_gpu_out_ = static_cast<FluidNetwork::LinkId>(net.link_count());
  for (int g = 0; g < cluster.gpu_count(); ++g) {
    net.AddLink(gpu_port);
    net.AddLink(gpu_port);
  }
  topology.first_nic_up_ = static_cast<FluidNetwork::LinkId>(net.link_count());
  for (int n = 0; n < cluster.nodes * cluster.inter.nics_per_node; ++n) {
    net.AddLink(nic);
    net.AddLink(nic);
  }
  const int per_leaf = cluster.inter.nodes_per_leaf;
  topology.leaves_ = per_leaf > 0 && per_leaf < cluster.nodes;
  if (topology.leaves_) {
    topology.first_leaf_up_ = static_cast<FluidNetwork::LinkId>(net.link_count());
    for (int first = 0; first < cluster.nodes; first += per_leaf) {
      const int nodes = std::min(per_leaf, cluster.nodes - first);
      const double uplink =
          nodes * cluster.inter.nics_per_node * nic / cluster.inter.oversubscription;
      net.AddLink(uplink);
      net.AddLink(uplink);
    }
  }
  return topology;
}

void Topology::Route(int32_t from, int32_t to, std::vector<FluidNetwork::LinkId>& path) const {
  const int from_node = cluster_.NodeOf(from);
  const int to_node = cluster_.NodeOf(to);
  if (from_node == to_node) {
    path.push_back(first_gpu_out_ + 2 * static_cast<uint32_t>(from));
    path.push_back(first_gpu_out_ + 2 * static_cast<uint32_t>(to) + 1);
    return;
  }
  const int nics = cluster_.inter.nics_per_node;
  auto nic_link = [&](int node, int32_t gpu) {
    const int rail = (gpu % cluster_.gpus_per_node) % nics;
    return first_nic_up_ + 2 * static_cast<uint32_t>(node * nics + rail);
  };
  path.push_back(nic_link(from_node, from));
  if (leaves_ && LeafOf(from_node) != LeafOf(to_node)) {
    path.push_back(first_leaf_up_ + 2 * static_cast<uint32_t>(LeafOf(from_node)));
    path.push_back(first_leaf_up_ + 2 * static_cast<uint32_t>(LeafOf(to_node)) + 1);
  }
  path.push_back(nic_link(to_node, to) + 1);
}

}  // namespace dtsim::network
