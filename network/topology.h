// The links of a cluster and the route between any two GPUs, for the flow model.
//
// Links (each one direction, capacity = bandwidth x efficiency, in bytes per second):
//   - per GPU, a port into and out of the node fabric (NVSwitch-style; the flow model treats
//     every intra-node topology as a switch for now);
//   - per node, `nics_per_node` NICs, each with an up and a down link; GPU g uses NIC
//     g mod nics_per_node of its node (its rail);
//   - fat-tree and rail-optimized fabrics with leaves (nodes_per_leaf > 0): per leaf an
//     aggregate up-link to the spine and a down-link from it, of capacity
//     (nodes under the leaf x NICs x NIC bandwidth) / oversubscription.
// Routes: same node: GPU out-port, GPU in-port. Across nodes: sender's NIC up, [its leaf up,
// the receiver's leaf down when the leaves differ], receiver's NIC down.
#pragma once

#include <vector>

#include "network/cluster.h"
#include "network/fluid_network.h"
#include "sim/base/status.h"

namespace dtsim::network {

class Topology {
 public:
  // Adds the cluster's links to `net`. Errors for fabrics the flow model does not route yet.
  static Expected<Topology> Build(const ClusterSpec& cluster, FluidNetwork& net);

  // Appends the links from GPU `from` to GPU `to` (distinct) to `path`.
  void Route(int32_t from, int32_t to, std::vector<FluidNetwork::LinkId>& path) const;

 private:
  explicit Topology(const ClusterSpec& cluster) : cluster_(cluster) {}
  int LeafOf(int node) const { return node / cluster_.inter.nodes_per_leaf; }

  ClusterSpec cluster_;
  FluidNetwork::LinkId first_gpu_out_ = 0;  // GPU g: out = first_gpu_out_ + 2g, in = +1
  FluidNetwork::LinkId first_nic_up_ = 0;   // node n, NIC i: up = first + 2(n·nics + i), down +1
  FluidNetwork::LinkId first_leaf_up_ = 0;  // leaf l: up = first + 2l, down = +1
  bool leaves_ = false;
};

}  // namespace dtsim::network
