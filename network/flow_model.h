// The `flow` network model: every communication runs its algorithm's flow program
// (flow_programs.h) on the cluster's links (topology.h), and all flows in flight — of every
// communication at once — share link bandwidth max-min fairly (fluid_network.h), recomputed
// whenever a flow starts or ends. So tensor-, data-, pipeline- and expert-parallel traffic slow
// each other down exactly where they share links.
#pragma once

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "network/cluster.h"
#include "network/flow_programs.h"
#include "network/fluid_network.h"
#include "network/topology.h"
#include "sim/engine/communication.h"

namespace dtsim::network {

class FlowModel final : public engine::CommunicationModel, public engine::EventHandler {
 public:
  explicit FlowModel(ClusterSpec cluster) : cluster_(std::move(cluster)) {}

  // Must succeed before the run: sizes a 0-node cluster to the graph, builds the topology,
  // chooses each communication's algorithm (forced, or the cheapest analytically among those
  // with a flow program) and builds its program.
  Status Prepare(const graph::TaskGraph& graph);

  std::string_view name() const override { return "flow"; }
  void Attach(engine::CommunicationContext& context) override;
  void Start(graph::CommId comm, engine::CommunicationContext& context) override;
  void OnEvent(uint64_t payload) override;

  const ClusterSpec& cluster() const { return cluster_; }
  std::string_view AlgorithmOf(graph::CommId comm) const { return algorithms_[comm.value()]; }
  uint64_t flows_started() const { return flows_started_; }
  uint64_t rate_updates() const { return rate_updates_; }

 private:
  struct Run {
    graph::CommId comm;
    const FlowProgram* program = nullptr;
    size_t step = 0;
    int64_t repeats_done = 0;
    size_t outstanding = 0;
  };

  void BeginStep(uint32_t run);
  void StartTransfers(uint32_t run);
  void FinishStep(uint32_t run);
  void Reschedule();

  ClusterSpec cluster_;
  FluidNetwork net_;
  std::optional<Topology> topology_;
  std::vector<std::shared_ptr<const FlowProgram>> programs_;  // per comm; shared when identical
  std::vector<std::string_view> algorithms_;
  engine::CommunicationContext* context_ = nullptr;
  engine::HandlerId handler_ = 0;
  std::vector<Run> runs_;
  std::vector<uint32_t> free_runs_;
  std::optional<engine::EventId> pending_completion_;
  std::vector<FluidNetwork::LinkId> path_;  // scratch
  uint64_t flows_started_ = 0;
  uint64_t rate_updates_ = 0;
};

}  // namespace dtsim::network
