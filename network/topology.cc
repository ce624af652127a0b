#include "network/topology.h"

#include <fmt/format.h>

#include <algorithm>

#include "sim/base/check.h"

namespace dtsim::network {

Expected<Topology> Topology::Build(const ClusterSpec& cluster, FluidNetwork& net) {
  Topology topology(cluster);
  topology.AddIntra(net);
  topology.AddInter(net);
  return topology;
}

void Topology::AddIntra(FluidNetwork& net) {
  const double gpu = cluster_.intra.bandwidth.bytes_per_second() * cluster_.intra.efficiency;
  intra_ring_ = cluster_.intra.topology == IntraTopology::kRing && cluster_.gpus_per_node > 1;
  // A ring splits a GPU's bandwidth over its two neighbours; a switch gives it one port.
  const double link = intra_ring_ ? gpu / 2 : gpu;
  first_gpu_out_ = static_cast<FluidNetwork::LinkId>(net.link_count());
  for (int g = 0; g < cluster_.gpu_count(); ++g) {
    net.AddLink(link);
    net.AddLink(link);
  }
}

void Topology::AddInter(FluidNetwork& net) {
  const InterNodeSpec& inter = cluster_.inter;
  const double nic = inter.nic_bandwidth.bytes_per_second() * inter.efficiency;
  if (IsDirectConnected(inter.topology)) {
    extents_ = inter.topology == InterTopology::kRing ? std::vector<int>{cluster_.nodes}
                                                      : inter.dimensions;
    const auto active =
        std::count_if(extents_.begin(), extents_.end(), [](int e) { return e > 1; });
    const double port =
        active == 0 ? nic : inter.nics_per_node * nic / (2.0 * static_cast<double>(active));
    first_direct_ = static_cast<FluidNetwork::LinkId>(net.link_count());
    for (size_t i = 0; i < static_cast<size_t>(cluster_.nodes) * extents_.size(); ++i) {
      net.AddLink(port);
      net.AddLink(port);
    }
    return;
  }
  first_nic_up_ = static_cast<FluidNetwork::LinkId>(net.link_count());
  for (int n = 0; n < cluster_.nodes * inter.nics_per_node; ++n) {
    net.AddLink(nic);
    net.AddLink(nic);
  }
  const ServerSpec& servers = cluster_.servers;
  if (servers.count > 0 && servers.placement == ServerPlacement::kDedicated) {
    const double server_nic = servers.nic_bandwidth.bytes_per_second() * inter.efficiency;
    first_server_up_ = static_cast<FluidNetwork::LinkId>(net.link_count());
    for (int server = 0; server < servers.count; ++server) {
      net.AddLink(server_nic);
      net.AddLink(server_nic);
    }
  }
  leaves_ = cluster_.HasLeafSwitches();
  if (!leaves_) return;
  first_leaf_up_ = AddUplinks(net, inter.nodes_per_leaf, cluster_.LeafOversubscription());
  pods_ = cluster_.HasPods();
  if (pods_) first_pod_up_ = AddUplinks(net, inter.nodes_per_pod, cluster_.PodOversubscription());
}

FluidNetwork::LinkId Topology::AddUplinks(FluidNetwork& net, int per_block,
                                          double oversubscription) const {
  const InterNodeSpec& inter = cluster_.inter;
  const double nic = inter.nic_bandwidth.bytes_per_second() * inter.efficiency;
  const auto first = static_cast<FluidNetwork::LinkId>(net.link_count());
  for (int node = 0; node < cluster_.nodes; node += per_block) {
    const int nodes = std::min(per_block, cluster_.nodes - node);
    const double uplink = nodes * inter.nics_per_node * nic / oversubscription;
    net.AddLink(uplink);
    net.AddLink(uplink);
  }
  return first;
}

void Topology::Route(int32_t from, int32_t to, std::vector<FluidNetwork::LinkId>& path) const {
  if (cluster_.IsServer(from) || cluster_.IsServer(to)) {
    DTSIM_CHECK(cluster_.IsServer(from) != cluster_.IsServer(to),
                "servers exchange only with GPUs");
    const bool to_server = cluster_.IsServer(to);
    const int32_t server = (to_server ? to : from) - cluster_.gpu_count();
    DTSIM_CHECK(server < cluster_.servers.count, "no such server");
    RouteServer(to_server ? from : to, server, to_server, path);
    return;
  }
  const int from_node = cluster_.NodeOf(from);
  const int to_node = cluster_.NodeOf(to);
  if (from_node == to_node) {
    RouteIntra(from, to, path);
  } else if (IsDirectConnected(cluster_.inter.topology)) {
    RouteDirect(from_node, to_node, path);
  } else {
    RouteSwitched(from, to, path);
  }
}

void Topology::RouteIntra(int32_t from, int32_t to, std::vector<FluidNetwork::LinkId>& path) const {
  if (!intra_ring_) {
    path.push_back(first_gpu_out_ + 2 * static_cast<uint32_t>(from));
    path.push_back(first_gpu_out_ + 2 * static_cast<uint32_t>(to) + 1);
    return;
  }
  // Hop by hop around the node's ring, the shorter way (ties go up).
  const int k = cluster_.gpus_per_node;
  const int base = cluster_.NodeOf(from) * k;
  const int up = ((to - from) % k + k) % k;
  const bool upward = up <= k - up;
  int32_t at = from;
  for (int hop = 0, hops = upward ? up : k - up; hop < hops; ++hop) {
    path.push_back(first_gpu_out_ + 2 * static_cast<uint32_t>(at) + (upward ? 0 : 1));
    const int local = at - base;
    at = base + (upward ? (local + 1) % k : (local + k - 1) % k);
  }
}

void Topology::RouteSwitched(int32_t from, int32_t to,
                             std::vector<FluidNetwork::LinkId>& path) const {
  const int from_node = cluster_.NodeOf(from);
  const int to_node = cluster_.NodeOf(to);
  const int nics = cluster_.inter.nics_per_node;
  auto nic_link = [&](int node, int32_t gpu) {
    const int rail = (gpu % cluster_.gpus_per_node) % nics;
    return first_nic_up_ + 2 * static_cast<uint32_t>(node * nics + rail);
  };
  path.push_back(nic_link(from_node, from));
  if (leaves_ && LeafOf(from_node) != LeafOf(to_node)) {
    path.push_back(first_leaf_up_ + 2 * static_cast<uint32_t>(LeafOf(from_node)));
    if (pods_ && PodOf(from_node) != PodOf(to_node)) {
      path.push_back(first_pod_up_ + 2 * static_cast<uint32_t>(PodOf(from_node)));
      path.push_back(first_pod_up_ + 2 * static_cast<uint32_t>(PodOf(to_node)) + 1);
    }
    path.push_back(first_leaf_up_ + 2 * static_cast<uint32_t>(LeafOf(to_node)) + 1);
  }
  path.push_back(nic_link(to_node, to) + 1);
}

void Topology::RouteServer(int32_t gpu, int server, bool to_server,
                           std::vector<FluidNetwork::LinkId>& path) const {
  const int node = cluster_.NodeOf(gpu);
  if (cluster_.servers.placement == ServerPlacement::kColocated) {
    DTSIM_CHECK(server != node,
                "a colocated server is reached from its own node without the network");
    // Rail-matched: the server's node receives on the NIC of the GPU's local index.
    const int32_t peer = server * cluster_.gpus_per_node + gpu % cluster_.gpus_per_node;
    Route(to_server ? gpu : peer, to_server ? peer : gpu, path);
    return;
  }
  const int nics = cluster_.inter.nics_per_node;
  const FluidNetwork::LinkId nic =
      first_nic_up_ +
      2 * static_cast<uint32_t>(node * nics + (gpu % cluster_.gpus_per_node) % nics);
  const FluidNetwork::LinkId server_up = first_server_up_ + 2 * static_cast<uint32_t>(server);
  const FluidNetwork::LinkId leaf =
      leaves_ ? first_leaf_up_ + 2 * static_cast<uint32_t>(LeafOf(node)) : 0;
  const FluidNetwork::LinkId pod =
      pods_ ? first_pod_up_ + 2 * static_cast<uint32_t>(PodOf(node)) : 0;
  if (to_server) {
    path.push_back(nic);
    if (leaves_) path.push_back(leaf);
    if (pods_) path.push_back(pod);
    path.push_back(server_up + 1);
  } else {
    path.push_back(server_up);
    if (pods_) path.push_back(pod + 1);
    if (leaves_) path.push_back(leaf + 1);
    path.push_back(nic + 1);
  }
}

// Dimension-order routing: node coordinates with dimension 0 varying fastest; dimension by
// dimension, step the shorter way round its ring.
void Topology::RouteDirect(int from_node, int to_node,
                           std::vector<FluidNetwork::LinkId>& path) const {
  const auto dims = static_cast<int>(extents_.size());
  int at = from_node;
  int stride = 1;
  for (int d = 0; d < dims; ++d) {
    const int extent = extents_[static_cast<size_t>(d)];
    const int here = (at / stride) % extent;
    const int there = (to_node / stride) % extent;
    const int up = ((there - here) % extent + extent) % extent;
    const bool upward = up <= extent - up;
    for (int hop = 0, hops = upward ? up : extent - up; hop < hops; ++hop) {
      path.push_back(first_direct_ + 2 * static_cast<uint32_t>(at * dims + d) + (upward ? 0 : 1));
      const int coordinate = (at / stride) % extent;
      const int next = upward ? (coordinate + 1) % extent : (coordinate + extent - 1) % extent;
      at += (next - coordinate) * stride;
    }
    stride *= extent;
  }
}

}  // namespace dtsim::network
