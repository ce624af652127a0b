#include "network/flow_model.h"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "network/collective_algorithms.h"

namespace dtsim::network {
namespace {

// Event payloads: the top bits say which; the rest is a run index.
constexpr uint64_t kCompletionCheck = uint64_t{1} << 47;
constexpr uint64_t kFastStepEnd = uint64_t{1} << 46;
constexpr uint64_t kRunMask = kFastStepEnd - 1;

}  // namespace

// The algorithm for one communication and its flow program: the forced algorithm, or the
// analytically cheapest default (every registered algorithm has a flow program).
Expected<FlowModel::Planned> FlowModel::Plan(const graph::TaskGraph& graph,
                                             const graph::Communication& comm) const {
  const std::span<const int32_t> ranks = graph.group(comm.priced_group);
  const CollectiveRequest request{.kind = comm.kind,
                                  .size = comm.size,
                                  .shape = ShapeOfGroup(ranks, cluster_),
                                  .cluster = &cluster_,
                                  .ranks = ranks,
                                  .root = comm.root};
  DTSIM_ASSIGN_OR_RETURN(const AlgorithmChoice choice,
                         ChooseCollectiveAlgorithm(request, graph.name(comm.algorithm)));
  Planned planned{std::make_shared<FlowProgram>(), {}};
  if (choice.algorithm == nullptr) return planned;  // a group of one rank: nothing to move
  planned.algorithm = choice.algorithm->name;
  DTSIM_ASSIGN_OR_RETURN(
      *planned.program,
      BuildFlowProgram(planned.algorithm, {.kind = comm.kind, .size = comm.size, .ranks = ranks,
                                           .root = comm.root, .cluster = &cluster_}));
  return planned;
}

Status FlowModel::Prepare(const graph::TaskGraph& graph) {
  DTSIM_CHECK(!topology_.has_value(), "FlowModel::Prepare called twice");
  DTSIM_RETURN_IF_ERROR(FitCluster(cluster_, graph.rank_count()));
  DTSIM_ASSIGN_OR_RETURN(Topology topology, Topology::Build(cluster_, net_));
  topology_.emplace(std::move(topology));
  DTSIM_ASSIGN_OR_RETURN(Topology scratch_topology, Topology::Build(cluster_, scratch_));
  scratch_topology_.emplace(std::move(scratch_topology));
  programs_.resize(graph.comm_count());
  algorithms_.resize(graph.comm_count());
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
    algorithms_[c] = it->second.algorithm;
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
  runs_[run] = Run{.comm = comm, .program = &program};
  BeginStep(run);
}

void FlowModel::BeginStep(uint32_t run) {
  const FlowStep& step = (*runs_[run].program)[runs_[run].step];
  context_->Schedule(context_->Now() + step.latency, handler_, run);
}

void FlowModel::StartTransfers(uint32_t run) {
  if (TryFastStep(run)) return;
  MaterializeFastSteps();
  Run& state = runs_[run];
  state.step_start = context_->Now();
  // A step starting on an empty network is a candidate for the fast path's memory.
  state.epoch_at_start = net_.active_flows() == 0 ? ++disturbances_ : 0;
  if (net_.active_flows() > 0) ++disturbances_;  // joining others disturbs their steps
  net_.Advance(context_->Now());
  const FlowStep& step = (*state.program)[state.step];
  std::vector<std::pair<size_t, double>> transfers;
  transfers.reserve(step.transfers.size());
  for (size_t i = 0; i < step.transfers.size(); ++i) {
    if (step.transfers[i].bytes > 0) transfers.emplace_back(i, step.transfers[i].bytes);
  }
  AddFlows(run, transfers);
  if (state.outstanding == 0) {
    FinishStep(run);
    return;
  }
  Reschedule();
}

void FlowModel::AddFlows(uint32_t run, const std::vector<std::pair<size_t, double>>& transfers) {
  Run& state = runs_[run];
  const FlowStep& step = (*state.program)[state.step];
  for (const auto& [index, bytes] : transfers) {
    const Transfer& transfer = step.transfers[index];
    path_.clear();
    topology_->Route(transfer.from, transfer.to, path_);
    net_.StartFlow(path_, bytes, run);
    ++state.outstanding;
    ++flows_started_;
  }
}

// The fast path: on an empty network with nothing else on the fast path, a step whose
// isolated duration is known is one event.
bool FlowModel::TryFastStep(uint32_t run) {
  if (!fast_isolated_steps_ || net_.active_flows() > 0 || !fast_runs_.empty()) return false;
  Run& state = runs_[run];
  const auto known = isolated_duration_.find({state.program, state.step});
  if (known == isolated_duration_.end()) return false;
  state.step_start = context_->Now();
  state.fast_end = context_->Schedule(context_->Now() + known->second, handler_,
                                      kFastStepEnd | run);
  fast_runs_.push_back(run);
  ++fast_steps_;
  return true;
}

// Other traffic is about to join: every fast step in flight is replayed alone in the scratch
// network from its start to now, and its unfinished flows join the real network with the
// bytes they have left. A step that had finished by now keeps its end event (it is due now).
void FlowModel::MaterializeFastSteps() {
  if (fast_runs_.empty()) return;
  ++disturbances_;
  net_.Advance(context_->Now());
  std::vector<uint32_t> still_fast;
  for (uint32_t run : fast_runs_) {
    Run& state = runs_[run];
    const FlowStep& step = (*state.program)[state.step];
    scratch_.Advance(state.step_start);
    for (size_t i = 0; i < step.transfers.size(); ++i) {
      const Transfer& transfer = step.transfers[i];
      if (transfer.bytes <= 0) continue;
      path_.clear();
      scratch_topology_->Route(transfer.from, transfer.to, path_);
      scratch_.StartFlow(path_, transfer.bytes, i);
    }
    while (true) {
      scratch_.UpdateRates();
      const TimeNs next = scratch_.NextCompletion();
      if (next > context_->Now()) break;
      scratch_.Advance(next);
      scratch_.TakeCompleted();
    }
    scratch_.Advance(context_->Now());
    std::vector<std::pair<size_t, double>> left;
    for (const auto& [index, bytes] : scratch_.ActiveFlows()) {
      if (bytes > 0) left.emplace_back(index, bytes);
    }
    scratch_.Clear();
    std::sort(left.begin(), left.end());  // a deterministic order of insertion
    if (left.empty()) {
      still_fast.push_back(run);
      continue;
    }
    context_->Cancel(*state.fast_end);
    state.fast_end.reset();
    state.epoch_at_start = 0;
    AddFlows(run, left);
  }
  fast_runs_ = std::move(still_fast);
}

void FlowModel::FinishStep(uint32_t run) {
  Run& state = runs_[run];
  const FlowProgram& program = *state.program;
  // A step that started on an empty network and was never joined took its isolated time.
  if (state.epoch_at_start != 0 && state.epoch_at_start == disturbances_) {
    isolated_duration_.emplace(StepKey{state.program, state.step},
                               context_->Now() - state.step_start);
  }
  state.epoch_at_start = 0;
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
  if ((payload & kFastStepEnd) != 0) {
    const auto run = static_cast<uint32_t>(payload & kRunMask);
    runs_[run].fast_end.reset();
    fast_runs_.erase(std::find(fast_runs_.begin(), fast_runs_.end(), run));
    FinishStep(run);
    return;
  }
  if ((payload & kCompletionCheck) == 0) {
    StartTransfers(static_cast<uint32_t>(payload));
    return;
  }
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
                                           kCompletionCheck);
}

}  // namespace dtsim::network
