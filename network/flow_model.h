// The `flow` network model: every communication runs its algorithm's flow program
// (flow_programs.h) on the cluster's links (topology.h), and all flows in flight — of every
// communication at once — share link bandwidth max-min fairly (fluid_network.h), recomputed
// whenever a flow starts or ends. So tensor-, data-, pipeline- and expert-parallel traffic slow
// each other down exactly where they share links.
//
// Isolated steps run fast, exactly. A step whose links carry no other traffic when it starts,
// and which nobody joins until it ends, took a time that depends only on its own flows (max-min
// rates separate over flows that share no links); it is remembered per (program, step). When
// the same step later starts on idle links it becomes one timed event with no flows, covering
// all its remaining repeats (a parameter-server pipeline repeats its steps; a ring streams all
// its steps as one pipelined step) — while the rest of the cluster is busy elsewhere, as the
// tensor-parallel rings of a thousand GPUs are, each inside its node. A step on the fast path
// holds its links; if other traffic arrives on one of them, the step is replayed alone in a
// scratch network up to that moment and its flows join the real network with exactly the bytes
// they have left. The fast path's state and arithmetic are their own unit (isolated_steps.h);
// this model decides when a step takes it.
#pragma once

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "network/cluster.h"
#include "network/cluster_model.h"
#include "network/flow_programs.h"
#include "network/fluid_network.h"
#include "network/isolated_steps.h"
#include "network/topology.h"

namespace dtsim::network {

class FlowModel final : public ClusterModel, public engine::EventHandler {
 public:
  // `fast_isolated_steps` turns the exact fast path on (the default); off is for tests that
  // check it changes nothing.
  explicit FlowModel(ClusterSpec cluster, bool fast_isolated_steps = true)
      : cluster_(std::move(cluster)), isolated_(fast_isolated_steps) {}

  // Must succeed before the run (call once): sizes a 0-node cluster to the graph, builds the
  // topology, chooses each communication's algorithm (forced, or the cheapest analytically)
  // and builds its flow program.
  Status Prepare(const graph::TaskGraph& graph) override;

  std::string_view name() const override { return "flow"; }
  void Attach(engine::CommunicationContext& context) override;
  void Start(graph::CommId comm, engine::CommunicationContext& context) override;
  void OnEvent(uint64_t payload) override;

  const ClusterSpec& cluster() const override { return cluster_; }
  std::string_view AlgorithmOf(graph::CommId comm) const { return algorithms_[comm.value()]; }
  uint64_t flows_started() const { return flows_started_; }
  uint64_t rate_updates() const { return rate_updates_; }
  uint64_t fast_steps() const { return fast_steps_; }

 private:
  // Per step of a program, the links its transfers cross, each once; routed on first use (a
  // step alone on an empty network never needs them).
  struct StepLinks {
    std::vector<std::vector<FluidNetwork::LinkId>> links;
    std::vector<bool> routed;
  };
  struct Run {
    graph::CommId comm;
    const FlowProgram* program = nullptr;
    StepLinks* links = nullptr;  // the program's
    size_t step = 0;
    int64_t repeats_done = 0;
    size_t outstanding = 0;
    TimeNs step_start;  // when the current step's transfers began
    FastStep fast;      // the run on the fast path (isolated_steps.h)
  };
  struct Planned {
    std::shared_ptr<FlowProgram> program;  // shared by identical communications
    std::shared_ptr<StepLinks> links;
    std::string_view algorithm;
    uint32_t method = 0;  // index in methods_
    uint16_t blocks = 0;  // KernelBlocks
  };

  Expected<Planned> Plan(const graph::TaskGraph& graph, const graph::Communication& comm);

  void BeginStep(uint32_t run, DurationNs extra = DurationNs::Zero());
  void StartTransfers(uint32_t run);
  bool ClaimIsolation(uint32_t run);
  bool TryFastStep(uint32_t run);
  void FinishStep(uint32_t run);
  void EndFastStep(uint32_t run);
  void CompleteFlows();
  void Reschedule();
  const std::vector<FluidNetwork::LinkId>& LinksOf(const Run& run);
  void Disturb(uint32_t run);
  void Release(uint32_t run);
  void Materialize(uint32_t run);
  void AddFlows(uint32_t run, const IsolatedSteps::Flows& flows);

  ClusterSpec cluster_;
  FluidNetwork net_;
  std::optional<Topology> topology_;
  std::vector<std::shared_ptr<FlowProgram>> programs_;  // per comm; shared when identical
  std::vector<std::shared_ptr<StepLinks>> links_;       // per comm, with its program
  std::vector<std::string_view> algorithms_;
  engine::CommunicationContext* context_ = nullptr;
  engine::HandlerId handler_ = 0;
  std::vector<Run> runs_;
  std::vector<uint32_t> free_runs_;
  std::optional<engine::EventId> pending_completion_;
  std::vector<FluidNetwork::LinkId> path_;  // scratch
  uint64_t flows_started_ = 0;
  uint64_t rate_updates_ = 0;
  uint64_t fast_steps_ = 0;
  IsolatedSteps isolated_;            // the fast path
  std::vector<uint64_t> link_stamp_;  // LinksOf scratch: the routing that last saw a link
  uint64_t routings_ = 0;
};

}  // namespace dtsim::network
