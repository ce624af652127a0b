// What every network model is to its callers: the engine's CommunicationModel on a cluster,
// prepared for one graph before the run. The registry (network_models.h) makes them by name.
#pragma once

#include "network/cluster.h"
#include "sim/base/status.h"
#include "sim/engine/communication.h"
#include "sim/graph/task_graph.h"

namespace dtsim::network {

// A network model on a cluster: the engine's CommunicationModel, prepared for one graph.
class ClusterModel : public engine::CommunicationModel {
 public:
  // Must succeed before the run, once: sizes a cluster of 0 nodes to the graph
  // (ceil(ranks / gpus_per_node) nodes), rejects what cannot run (more ranks than GPUs, an
  // unknown or inapplicable forced algorithm) and precomputes what the model needs.
  virtual Status Prepare(const graph::TaskGraph& graph) = 0;
  // The cluster as prepared (sized to the graph).
  virtual const ClusterSpec& cluster() const = 0;
};

}  // namespace dtsim::network
