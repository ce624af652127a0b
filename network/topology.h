// The links of a cluster and the route between any two GPUs, for the flow model.
//
// Links (each one direction, capacity = bandwidth x efficiency, in bytes per second):
//   - intra-node: with a switch, mesh or PCIe fabric, per GPU a port into and out of the node
//     fabric (a mesh is modelled as a switch; see docs/network.md); with an NVLink ring, per
//     GPU a link to each ring neighbour, half the GPU's bandwidth each;
//   - fat-tree and rail-optimized: per node `nics_per_node` NICs, each with an up and a down
//     link; GPU g uses NIC g mod nics_per_node of its node (its rail); with leaves
//     (nodes_per_leaf > 0), per leaf an aggregate up-link to the spine and a down-link from it,
//     of capacity (nodes under the leaf x NICs x NIC bandwidth) / oversubscription; with pods
//     (nodes_per_pod > 0), per pod an aggregate up-link to the core and a down-link from it, of
//     capacity (nodes in the pod x NICs x NIC bandwidth) / (oversubscription x
//     pod_oversubscription);
//   - ring and torus: nodes are direct-connected to their neighbours; per node and dimension
//     of extent > 1, a link in each direction, the node's NIC bandwidth split evenly over them.
//   - dedicated parameter servers (switched fabrics only): per server an up and a down link of
//     its NIC's capacity, attached to the spine.
// Routes: same node: GPU out-port, GPU in-port (ring: hop by hop the shorter way round).
// Across nodes: fat-tree/rail: sender's NIC up, [its leaf up, [its pod up, the receiver's pod
// down when the pods differ], the receiver's leaf down when the leaves differ], receiver's NIC
// down; ring/torus: dimension-order routing, each dimension the shorter way round (ties go
// up). To and from a dedicated server (attached to the top tier): the GPU's NIC, [its leaf's
// and pod's up- or down-links where there are leaves and pods], the server's NIC. A colocated
// server on node n is reached as the GPU on node n with the sender's local index (rail-matched);
// not at all from its own node (host memory, not the network).
#pragma once

#include <vector>

#include "network/cluster.h"
#include "network/fluid_network.h"
#include "sim/base/status.h"

namespace dtsim::network {

class Topology {
 public:
  // Adds the cluster's links to `net`.
  static Expected<Topology> Build(const ClusterSpec& cluster, FluidNetwork& net);

  // Appends the links from endpoint `from` to endpoint `to` (distinct; GPUs, or a GPU and a
  // server: ClusterSpec::ServerEndpoint) to `path`.
  void Route(int32_t from, int32_t to, std::vector<FluidNetwork::LinkId>& path) const;

 private:
  explicit Topology(const ClusterSpec& cluster) : cluster_(cluster) {}
  int LeafOf(int node) const { return node / cluster_.inter.nodes_per_leaf; }
  int PodOf(int node) const { return node / cluster_.inter.nodes_per_pod; }
  // Aggregate up-links (and down-links, +1) of `per_block` nodes each, at 1/oversubscription.
  FluidNetwork::LinkId AddUplinks(FluidNetwork& net, int per_block, double oversubscription) const;
  void AddIntra(FluidNetwork& net);
  void AddInter(FluidNetwork& net);
  void RouteIntra(int32_t from, int32_t to, std::vector<FluidNetwork::LinkId>& path) const;
  void RouteSwitched(int32_t from, int32_t to, std::vector<FluidNetwork::LinkId>& path) const;
  void RouteDirect(int from_node, int to_node, std::vector<FluidNetwork::LinkId>& path) const;
  void RouteServer(int32_t gpu, int server, bool to_server,
                   std::vector<FluidNetwork::LinkId>& path) const;

  ClusterSpec cluster_;
  bool intra_ring_ = false;
  FluidNetwork::LinkId first_gpu_out_ = 0;  // switch: GPU g out = first + 2g, in = +1;
                                            // ring: GPU g to g+1 = first + 2g, to g-1 = +1
  FluidNetwork::LinkId first_nic_up_ = 0;   // node n, NIC i: up = first + 2(n·nics + i), down +1
  FluidNetwork::LinkId first_leaf_up_ = 0;  // leaf l: up = first + 2l, down = +1
  FluidNetwork::LinkId first_pod_up_ = 0;   // pod q: up = first + 2q, down = +1
  FluidNetwork::LinkId first_direct_ = 0;  // node n, dimension d: up = first + 2(n·D + d), down +1
  FluidNetwork::LinkId first_server_up_ = 0;  // dedicated server s: up = first + 2s, down +1
  std::vector<int> extents_;                  // ring/torus: nodes along each dimension
  bool leaves_ = false;
  bool pods_ = false;
};

}  // namespace dtsim::network
