#include "network/flow_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "network/collective_algorithms.h"
#include "network/switch_tiers.h"

namespace dtsim::network {
namespace {

// The model's events: a run's next step starts; a step on the fast path ends (all the repeats
// its event covers); the next flow completion is due. A payload holds the kind in its top bits
// and the run in the rest.
enum class FlowEvent : uint8_t { kStepStart = 0, kFastStepEnd = 1, kCompletionCheck = 2 };
constexpr int kKindShift = 46;
constexpr uint64_t kRunMask = (uint64_t{1} << kKindShift) - 1;

constexpr uint64_t Payload(FlowEvent kind, uint32_t run = 0) {
  return (uint64_t{static_cast<uint8_t>(kind)} << kKindShift) | run;
}

// On an NVLink mesh with a link map, a transfer between GPUs of one node moves at most the
// rate of the rings the group's members' links hold (IntraGroupRate), as the analytical model
// prices it; the GPUs' ports still bound what concurrent communications share.
void CapMeshTransfers(FlowProgram& program, std::span<const int32_t> ranks,
                      const ClusterSpec& cluster) {
  if (cluster.intra.mesh_links.empty()) return;
  const double cap = IntraGroupRate(cluster, ranks);
  for (FlowStep& step : program) {
    for (Transfer& transfer : step.transfers) {
      if (cluster.IsServer(transfer.from) || cluster.IsServer(transfer.to) ||
          cluster.NodeOf(transfer.from) != cluster.NodeOf(transfer.to)) {
        continue;
      }
      transfer.max_rate = transfer.max_rate > 0 ? std::min(transfer.max_rate, cap) : cap;
    }
  }
}

// Where every GPU of a node communicates at once on a node with fewer NICs than GPUs
// (ClusterSpec::gpus_share_nics), a step's transfers leaving a node share the NICs its members
// there own (GroupNics), as the analytical model prices them: under symmetric ranks the sibling
// groups that take the rest are not simulated; with every rank simulated they are, and the cap
// is the share max-min fairness gives each transfer anyway.
void CapSharedNicTransfers(FlowProgram& program, const GroupShape& shape,
                           const ClusterSpec& cluster) {
  if (!cluster.gpus_share_nics || cluster.inter.nics_per_node >= cluster.gpus_per_node) return;
  const double nics = GroupNics(cluster, shape.per_node);
  const double rate =
      nics * cluster.inter.nic_bandwidth.bytes_per_second() * cluster.inter.efficiency;
  const auto leaves = [&cluster](const Transfer& transfer) {
    return !cluster.IsServer(transfer.from) && !cluster.IsServer(transfer.to) &&
           cluster.NodeOf(transfer.from) != cluster.NodeOf(transfer.to);
  };
  std::map<int, int> leaving;  // node → transfers leaving it in the step
  for (FlowStep& step : program) {
    leaving.clear();
    for (const Transfer& transfer : step.transfers) {
      if (leaves(transfer)) ++leaving[cluster.NodeOf(transfer.from)];
    }
    for (Transfer& transfer : step.transfers) {
      if (!leaves(transfer)) continue;
      const double cap = rate / leaving[cluster.NodeOf(transfer.from)];
      transfer.max_rate = transfer.max_rate > 0 ? std::min(transfer.max_rate, cap) : cap;
    }
  }
}

}  // namespace

// The algorithm for one communication and its flow program: the forced algorithm, or the
// analytically cheapest default (every registered algorithm has a flow program).
Expected<FlowModel::Planned> FlowModel::Plan(const graph::TaskGraph& graph,
                                             const graph::Communication& comm) {
  const std::span<const int32_t> ranks = graph.group(comm.priced_group);
  const CollectiveRequest request{.kind = comm.kind,
                                  .size = comm.size,
                                  .shape = ShapeOfGroup(ranks, cluster_),
                                  .cluster = &cluster_,
                                  .ranks = ranks,
                                  .root = comm.root};
  DTSIM_ASSIGN_OR_RETURN(const AlgorithmChoice choice,
                         ChooseCollectiveAlgorithm(request, graph.name(comm.algorithm)));
  Planned planned{std::make_shared<FlowProgram>(), std::make_shared<StepLinks>(), {}};
  planned.method = methods_.Intern(choice.Label());
  planned.blocks = static_cast<uint16_t>(choice.blocks);
  if (choice.algorithm == nullptr) return planned;  // a group of one rank: nothing to move
  planned.algorithm = choice.algorithm->name;
  DTSIM_ASSIGN_OR_RETURN(*planned.program, choice.algorithm->program({.kind = comm.kind,
                                                                      .size = comm.size,
                                                                      .ranks = ranks,
                                                                      .root = comm.root,
                                                                      .cluster = &cluster_}));
  CapMeshTransfers(*planned.program, ranks, cluster_);
  CapSharedNicTransfers(*planned.program, request.shape, cluster_);
  CapTierTransfers(*planned.program, ranks, request.shape, cluster_);
  planned.links->links.resize(planned.program->size());
  planned.links->routed.assign(planned.program->size(), false);
  return planned;
}

Status FlowModel::Prepare(const graph::TaskGraph& graph) {
  DTSIM_CHECK(!topology_.has_value(), "FlowModel::Prepare called twice");
  DTSIM_RETURN_IF_ERROR(FitCluster(cluster_, graph.rank_count()));
  DTSIM_ASSIGN_OR_RETURN(Topology topology, Topology::Build(cluster_, net_));
  topology_.emplace(std::move(topology));
  DTSIM_RETURN_IF_ERROR(isolated_.Prepare(cluster_, net_.link_count()));
  link_stamp_.assign(net_.link_count(), 0);
  programs_.resize(graph.comm_count());
  links_.resize(graph.comm_count());
  algorithms_.resize(graph.comm_count());
  methods_.of_comm.resize(graph.comm_count());
  blocks_.resize(graph.comm_count());
  // Iterations repeat the same communications: plan each distinct one once.
  std::map<std::tuple<graph::CommKind, int64_t, uint32_t, uint32_t, int32_t>, Planned> planned;
  for (uint32_t c = 0; c < graph.comm_count(); ++c) {
    const graph::Communication& comm = graph.comm(graph::CommId(c));
    const auto key = std::make_tuple(comm.kind, comm.size.count(), comm.priced_group.value(),
                                     comm.algorithm.value(), comm.root);
    auto it = planned.find(key);
    if (it == planned.end()) {
      Expected<Planned> plan = Plan(graph, comm);
      if (!plan.ok()) {
        const Error& error = plan.error();
        return Error(graph.DescribeComm(graph::CommId(c)) + ": " + error.message(), "",
                     error.value());
      }
      it = planned.emplace(key, std::move(plan).value()).first;
    }
    programs_[c] = it->second.program;
    links_[c] = it->second.links;
    algorithms_[c] = it->second.algorithm;
    methods_.of_comm[c] = it->second.method;
    blocks_[c] = it->second.blocks;
  }
  return Status::Ok();
}

void FlowModel::Attach(engine::CommunicationContext& context) {
  context_ = &context;
  handler_ = context.RegisterHandler(*this);
}

void FlowModel::Start(graph::CommId comm, engine::CommunicationContext& context) {
  const FlowProgram& program = *programs_[comm.value()];
  if (program.empty()) {
    context.CompleteAt(comm, context.Now());
    return;
  }
  uint32_t run;
  if (free_runs_.empty()) {
    run = static_cast<uint32_t>(runs_.size());
    runs_.emplace_back();
  } else {
    run = free_runs_.back();
    free_runs_.pop_back();
  }
  runs_[run] = Run{.comm = comm, .program = &program, .links = links_[comm.value()].get()};
  // The collective latency comes once, before the first step's own (as in the analytical model).
  BeginStep(run, cluster_.collective_latency);
}

void FlowModel::BeginStep(uint32_t run, DurationNs extra) {
  const FlowStep& step = (*runs_[run].program)[runs_[run].step];
  context_->Schedule(context_->Now() + extra + step.latency, handler_,
                     Payload(FlowEvent::kStepStart, run));
}

const std::vector<FluidNetwork::LinkId>& FlowModel::LinksOf(const Run& run) {
  std::vector<FluidNetwork::LinkId>& links = run.links->links[run.step];
  if (run.links->routed[run.step]) return links;
  run.links->routed[run.step] = true;
  const uint64_t stamp = ++routings_;
  for (const Transfer& transfer : (*run.program)[run.step].transfers) {
    if (transfer.bytes <= 0) continue;
    path_.clear();
    topology_->Route(transfer.from, transfer.to, path_);
    for (FluidNetwork::LinkId link : path_) {
      if (link_stamp_[link] == stamp) continue;
      link_stamp_[link] = stamp;
      links.push_back(link);
    }
  }
  return links;
}

void FlowModel::StartTransfers(uint32_t run) {
  Run& state = runs_[run];
  state.step_start = context_->Now();
  if (ClaimIsolation(run) && TryFastStep(run)) return;
  net_.Advance(context_->Now());
  const FlowStep& step = (*state.program)[state.step];
  IsolatedSteps::Flows flows;
  flows.reserve(FlowCount(step));
  for (size_t i = 0; i < FlowCount(step); ++i) {
    if (FlowBytes(step, i) > 0) flows.emplace_back(i, FlowBytes(step, i));
  }
  AddFlows(run, flows);
  if (state.outstanding == 0) {
    FinishStep(run);
    return;
  }
  Reschedule();
}

// Whether the step `run` starts now is isolated (it then holds its links). Isolated steps on
// these links stop being isolated first (a fast one joins the real network), before this
// step's flows arrive; then this step is isolated if its links are idle.
bool FlowModel::ClaimIsolation(uint32_t run) {
  Run& state = runs_[run];
  const auto links_of = [this](uint32_t other) -> const std::vector<FluidNetwork::LinkId>& {
    return LinksOf(runs_[other]);
  };
  isolated_.MarkHeldLinks(run, links_of);
  if (isolated_.AloneOnTheNetwork(net_.active_flows())) {
    isolated_.HoldUnmarked(run, state.fast);
    return true;
  }
  const std::vector<FluidNetwork::LinkId>& links = LinksOf(state);
  for (FluidNetwork::LinkId link : links) {
    if (isolated_.holder(link) != IsolatedSteps::kNoRun) Disturb(isolated_.holder(link));
  }
  const bool idle = std::none_of(links.begin(), links.end(),
                                 [&](FluidNetwork::LinkId link) { return net_.busy(link); });
  if (!isolated_.enabled() || !idle) return false;
  isolated_.Hold(run, state.fast, links);
  return true;
}

// An isolated step whose isolated time is known: this repeat and each later one (after the
// step's latency) take that time while nothing joins the links, which the run holds
// meanwhile: one event for them all.
bool FlowModel::TryFastStep(uint32_t run) {
  Run& state = runs_[run];
  const std::optional<DurationNs> known = isolated_.Known(state.program, state.step);
  if (!known) return false;
  const FlowStep& step = (*state.program)[state.step];
  state.fast.repeats = step.repeat - state.repeats_done;
  state.fast.duration = *known;
  state.fast.end = context_->Schedule(context_->Now() + state.fast.Span(step.latency), handler_,
                                      Payload(FlowEvent::kFastStepEnd, run));
  return true;
}

void FlowModel::AddFlows(uint32_t run, const IsolatedSteps::Flows& flows) {
  Run& state = runs_[run];
  const FlowStep& step = (*state.program)[state.step];
  net_.ReserveFlows(flows.size());
  for (const auto& [index, bytes] : flows) {
    path_.clear();
    AppendFlowPath(step, index, *topology_, path_);
    net_.StartFlow(path_, bytes, run, FlowMaxRate(step, index));
    ++state.outstanding;
    ++flows_started_;
  }
}

// Other traffic is about to join the run's links: it is no longer isolated, and if it is on
// the fast path its flows join the real network now.
void FlowModel::Disturb(uint32_t run) {
  Release(run);
  if (runs_[run].fast.end.has_value()) Materialize(run);
}

void FlowModel::Release(uint32_t run) {
  isolated_.Release(
      run,
      runs_[run].fast, [this](uint32_t other) -> const auto& { return LinksOf(runs_[other]); });
}

// A fast step is replayed alone in the scratch network from its start to now (exact: nothing
// shared its links), and its unfinished flows join the real network with the bytes they have
// left. When the event covers several repeats, `now` falls in one of them: inside its transfers
// (replayed from that repeat's start), or in the latency after it, when the next repeat is
// scheduled as the slow path would start it. A sequence that has finished by now keeps its end
// event (it is due now).
void FlowModel::Materialize(uint32_t run) {
  Run& state = runs_[run];
  FastStep& fast = state.fast;
  const FlowStep& step = (*state.program)[state.step];
  const auto [repeat, offset] = fast.RepeatAt(context_->Now() - state.step_start, step.latency);
  const TimeNs repeat_start = state.step_start + offset;
  const IsolatedSteps::Flows left = context_->Now() - repeat_start < fast.duration
                                        ? isolated_.BytesLeft(step, repeat_start, context_->Now())
                                        : IsolatedSteps::Flows();
  if (left.empty()) {
    // Repeat `repeat` is done: the last one ends the sequence now; otherwise the run waits
    // for the next repeat's start, after the latency.
    if (repeat == fast.repeats - 1) return;
    context_->Cancel(*fast.end);
    fast.end.reset();
    state.repeats_done += repeat + 1;
    fast_steps_ += static_cast<uint64_t>(repeat + 1);
    fast.repeats = 0;
    context_->Schedule(repeat_start + fast.duration + step.latency, handler_,
                       Payload(FlowEvent::kStepStart, run));
    return;
  }
  context_->Cancel(*fast.end);
  fast.end.reset();
  state.repeats_done += repeat;
  fast_steps_ += static_cast<uint64_t>(repeat);
  fast.repeats = 0;
  state.step_start = repeat_start;
  net_.Advance(context_->Now());
  AddFlows(run, left);
  // The disturbing step may itself go fast (the flows left may not cross its links), so the
  // completions of these flows are scheduled here.
  Reschedule();
}

void FlowModel::FinishStep(uint32_t run) {
  Run& state = runs_[run];
  const FlowProgram& program = *state.program;
  // A step that started on idle links and was never joined took its isolated time.
  if (state.fast.isolated) {
    if (state.fast.repeats == 0) {
      isolated_.Record(state.program, state.step, context_->Now() - state.step_start);
    }
    Release(run);
  }
  state.fast.repeats = 0;
  if (++state.repeats_done < program[state.step].repeat) {
    BeginStep(run);
    return;
  }
  state.repeats_done = 0;
  if (++state.step < program.size()) {
    BeginStep(run);
    return;
  }
  context_->CompleteAt(state.comm, context_->Now());
  free_runs_.push_back(run);
}

void FlowModel::OnEvent(uint64_t payload) {
  const auto run = static_cast<uint32_t>(payload & kRunMask);
  switch (static_cast<FlowEvent>(payload >> kKindShift)) {
    case FlowEvent::kStepStart:
      StartTransfers(run);
      return;
    case FlowEvent::kFastStepEnd:
      EndFastStep(run);
      return;
    case FlowEvent::kCompletionCheck:
      CompleteFlows();
      return;
  }
  DTSIM_CHECK(false, "an event payload the flow model did not schedule");
}

// The fast path's event: every repeat it covered has ended.
void FlowModel::EndFastStep(uint32_t run) {
  Run& state = runs_[run];
  state.fast.end.reset();
  fast_steps_ += static_cast<uint64_t>(state.fast.repeats);
  state.repeats_done += state.fast.repeats - 1;  // FinishStep counts the last
  FinishStep(run);
}

// The flows due by now have completed: their steps may finish.
void FlowModel::CompleteFlows() {
  pending_completion_.reset();
  net_.Advance(context_->Now());
  for (uint64_t owner : net_.TakeCompleted()) {
    const auto run = static_cast<uint32_t>(owner);
    if (--runs_[run].outstanding == 0) FinishStep(run);
  }
  Reschedule();
}

// After any change in the set of flows: new fair rates, and one pending event at the next
// flow completion (replacing the previous one, which the change made stale).
void FlowModel::Reschedule() {
  net_.UpdateRates();
  ++rate_updates_;
  if (pending_completion_.has_value()) {
    context_->Cancel(*pending_completion_);
    pending_completion_.reset();
  }
  const TimeNs next = net_.NextCompletion();
  if (next == TimeNs::Max()) return;
  pending_completion_ = context_->Schedule(std::max(next, context_->Now()), handler_,
                                           Payload(FlowEvent::kCompletionCheck));
}

}  // namespace dtsim::network
