// The flow model's exact fast path, apart from the model that runs it (flow_model.h says why it
// is exact): which runs' steps hold their links as isolated steps, the isolated time of each
// (program, step) once measured, and the replay of a step alone in a scratch network when other
// traffic joins its links in the middle of it. The flow model decides when; this unit keeps the
// state and does the arithmetic. Turned off (`enabled` false) it never isolates anything, and
// the flow model then runs every step as flows: the test "fast path off changes nothing" is
// its contract.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "network/cluster.h"
#include "network/flow_programs.h"
#include "network/fluid_network.h"
#include "network/topology.h"
#include "sim/engine/communication.h"

namespace dtsim::network {

// One run's state on the fast path.
struct FastStep {
  // The step started on idle links and nobody has joined them: it holds them.
  bool isolated = false;
  std::optional<engine::EventId> end;  // set while the step runs on the fast path
  // On the fast path: how many repeats of the step the event covers (this one and the rest,
  // each after the step's latency), and one repeat's isolated transfer time.
  int64_t repeats = 0;
  DurationNs duration;

  // From the first covered repeat's start to the last one's end.
  DurationNs Span(DurationNs latency) const {
    return duration + (latency + duration) * (repeats - 1);
  }
  // The covered repeat under way `elapsed` after the first one started (the last one past
  // the end), and when it started, counted from the first.
  std::pair<int64_t, DurationNs> RepeatAt(DurationNs elapsed, DurationNs latency) const;
};

class IsolatedSteps {
 public:
  using LinkId = FluidNetwork::LinkId;
  using Flows = std::vector<std::pair<size_t, double>>;  // (flow of the step, bytes)
  static constexpr uint32_t kNoRun = ~uint32_t{0};

  explicit IsolatedSteps(bool enabled) : enabled_(enabled) {}
  bool enabled() const { return enabled_; }

  // Builds the scratch network on the cluster's topology; `link_count` is the real network's.
  Status Prepare(const ClusterSpec& cluster, size_t link_count);

  // Who holds which links. A step alone on an empty network holds its links without marking
  // them (a 1,024-GPU ring step crosses thousands): they are marked, through `links_of(run)`,
  // when another run starts a step.
  template <typename LinksOf>
  void MarkHeldLinks(uint32_t starting_run, LinksOf&& links_of) {
    if (unmarked_ == kNoRun || unmarked_ == starting_run) return;
    for (LinkId link : links_of(unmarked_)) holder_[link] = unmarked_;
    unmarked_ = kNoRun;
  }
  // Whether a step starting now is isolated without looking at its links: nothing else is
  // isolated and no flow is in flight.
  bool AloneOnTheNetwork(size_t active_flows) const {
    return enabled_ && isolated_runs_ == 0 && active_flows == 0;
  }
  void HoldUnmarked(uint32_t run, FastStep& fast);
  void Hold(uint32_t run, FastStep& fast, std::span<const LinkId> links);
  uint32_t holder(LinkId link) const { return holder_[link]; }
  // Ends the run's isolation (nothing if it is not isolated).
  template <typename LinksOf>
  void Release(uint32_t run, FastStep& fast, LinksOf&& links_of) {
    if (!fast.isolated) return;
    fast.isolated = false;
    --isolated_runs_;
    if (unmarked_ == run) {
      unmarked_ = kNoRun;
      return;
    }
    for (LinkId link : links_of(run)) {
      if (holder_[link] == run) holder_[link] = kNoRun;
    }
  }

  // The isolated time of a (program, step), once a repeat of it ran alone from start to end.
  std::optional<DurationNs> Known(const FlowProgram* program, size_t step) const;
  void Record(const FlowProgram* program, size_t step, DurationNs duration);

  // The flows of `step` (its transfers, or its pipelines) still moving at `now` had they
  // started alone at `start`, with the bytes they have left, in flow order: replayed in the
  // scratch network, which is left empty.
  Flows BytesLeft(const FlowStep& step, TimeNs start, TimeNs now);

 private:
  bool enabled_;
  FluidNetwork scratch_;  // the same links, to replay a step alone
  std::optional<Topology> scratch_topology_;
  std::vector<FluidNetwork::LinkId> path_;  // scratch
  std::map<std::pair<const FlowProgram*, size_t>, DurationNs> durations_;
  std::vector<uint32_t> holder_;  // per link: the isolated run holding it, or kNoRun
  uint32_t isolated_runs_ = 0;    // runs with FastStep::isolated set
  uint32_t unmarked_ = kNoRun;    // the isolated run whose links holder_ does not show
};

}  // namespace dtsim::network
