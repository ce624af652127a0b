// The `analytical` network model: each communication costs its algorithm's α-β time on the
// levels its group spans (collective_algorithms.h), with no contention between concurrent
// communications. Costs are computed once, in Prepare(), which also rejects what cannot run
// (more ranks than GPUs, an unknown or inapplicable forced algorithm) before the simulation.
#pragma once

#include <string_view>
#include <vector>

#include "network/cluster.h"
#include "network/cluster_model.h"
#include "network/collective_algorithms.h"

namespace dtsim::network {

class AnalyticalModel final : public ClusterModel {
 public:
  explicit AnalyticalModel(ClusterSpec cluster) : cluster_(std::move(cluster)) {}

  // Must succeed before the model is used with `graph`. A cluster with 0 nodes is sized to the
  // graph: ceil(ranks / gpus_per_node) nodes.
  Status Prepare(const graph::TaskGraph& graph) override;

  std::string_view name() const override { return "analytical"; }
  void Start(graph::CommId comm, engine::CommunicationContext& context) override;

  const ClusterSpec& cluster() const override { return cluster_; }
  DurationNs Cost(graph::CommId comm) const { return costs_[comm.value()]; }
  // The algorithm that prices `comm` ("" for a group of one rank).
  std::string_view AlgorithmOf(graph::CommId comm) const;

 private:
  ClusterSpec cluster_;
  std::vector<DurationNs> costs_;
  std::vector<const CollectiveAlgorithm*> algorithms_;
};

}  // namespace dtsim::network
