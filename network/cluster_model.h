// What every network model is to its callers: the engine's CommunicationModel on a cluster,
// prepared for one graph before the run. The registry (network_models.h) makes them by name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "network/cluster.h"
#include "sim/base/status.h"
#include "sim/engine/communication.h"
#include "sim/graph/task_graph.h"

namespace dtsim::network {

// How a model runs each communication of a graph, for results and timelines: a label per
// distinct method ("ring", "nvls", "direct on 4 channels") and each communication's index into
// them. An empty label: a group of one rank, nothing moved.
struct CommMethods {
  std::vector<std::string> labels;
  std::vector<uint32_t> of_comm;  // per communication of the graph

  // The index of `label`, added when new (a graph has a handful of distinct methods).
  uint32_t Intern(const std::string& label) {
    for (uint32_t i = 0; i < labels.size(); ++i) {
      if (labels[i] == label) return i;
    }
    labels.push_back(label);
    return static_cast<uint32_t>(labels.size() - 1);
  }
  std::string_view of(graph::CommId comm) const { return labels[of_comm[comm.value()]]; }
};

// A network model on a cluster: the engine's CommunicationModel, prepared for one graph.
class ClusterModel : public engine::CommunicationModel {
 public:
  // Must succeed before the run, once: sizes a cluster of 0 nodes to the graph
  // (ceil(ranks / gpus_per_node) nodes), rejects what cannot run (more ranks than GPUs, an
  // unknown or inapplicable forced algorithm) and precomputes what the model needs.
  virtual Status Prepare(const graph::TaskGraph& graph) = 0;
  // The cluster as prepared (sized to the graph).
  virtual const ClusterSpec& cluster() const = 0;
  // How each communication of the prepared graph runs (set by Prepare).
  const CommMethods& methods() const { return methods_; }
  // The thread blocks each communication's NCCL kernel holds on a GPU (network::KernelBlocks,
  // set by Prepare).
  int KernelBlocks(graph::CommId comm) const override { return blocks_[comm.value()]; }

 protected:
  CommMethods methods_;
  std::vector<uint16_t> blocks_;  // per communication of the prepared graph
};

}  // namespace dtsim::network
