#include "network/flow_model.h"

#include <map>
#include <tuple>

#include <fmt/format.h>

#include "network/collective_algorithms.h"

namespace dtsim::network {
namespace {

// Event payloads: the top bit says which; the rest is a run index.
constexpr uint64_t kCompletionCheck = uint64_t{1} << 47;

bool HasProgram(const CollectiveAlgorithm& algorithm) {
  return HasFlowProgram(algorithm.kind, algorithm.name);
}

}  // namespace

Status FlowModel::Prepare(const graph::TaskGraph& graph) {
  DTSIM_RETURN_IF_ERROR(FitCluster(cluster_, graph.rank_count()));
  DTSIM_ASSIGN_OR_RETURN(Topology topology, Topology::Build(cluster_, net_));
  topology_.emplace(std::move(topology));
  programs_.resize(graph.comm_count());
  algorithms_.resize(graph.comm_count());
  std::map<std::tuple<graph::CommKind, int64_t, uint32_t, uint32_t, int32_t>,
           std::pair<std::shared_ptr<const FlowProgram>, std::string_view>> built;
  for (uint32_t c = 0; c < graph.comm_count(); ++c) {
    const graph::Communication& comm = graph.comm(graph::CommId(c));
    const auto key = std::make_tuple(comm.kind, comm.size.count(), comm.group.value(),
                                     comm.algorithm.value(), comm.root);
    auto it = built.find(key);
    if (it == built.end()) {
      const std::span<const int32_t> ranks = graph.group(comm.group);
      const CollectiveRequest request{.kind = comm.kind,
                                      .size = comm.size,
                                      .shape = ShapeOfGroup(ranks, cluster_),
                                      .cluster = &cluster_};
      const std::string_view forced = graph.name(comm.algorithm);
      Expected<AlgorithmChoice> choice = ChooseCollectiveAlgorithm(request, forced, HasProgram);
      auto program = std::make_shared<FlowProgram>();
      std::string_view name;
      if (choice.ok() && choice->algorithm != nullptr) {
        name = choice->algorithm->name;
        Expected<FlowProgram> steps = BuildFlowProgram(
            name, {.kind = comm.kind, .size = comm.size, .ranks = ranks, .root = comm.root,
                   .cluster = &cluster_});
        if (steps.ok()) *program = std::move(steps).value();
        else choice = std::move(steps).error();
      }
      if (!choice.ok()) {
        Error error = std::move(choice).error();
        return Error(graph.DescribeComm(graph::CommId(c)) + ": " + error.message(), "",
                     error.value());
      }
      it = built.emplace(key, std::make_pair(std::move(program), name)).first;
    }
    programs_[c] = it->second.first;
    algorithms_[c] = it->second.second;
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
  Run& state = runs_[run];
  const FlowStep& step = (*state.program)[state.step];
  net_.Advance(context_->Now());
  for (const Transfer& transfer : step.transfers) {
    if (transfer.bytes <= 0) continue;
    path_.clear();
    topology_->Route(transfer.from, transfer.to, path_);
    net_.StartFlow(path_, transfer.bytes, run);
    ++state.outstanding;
    ++flows_started_;
  }
  if (state.outstanding == 0) {
    FinishStep(run);
    return;
  }
  Reschedule();
}

void FlowModel::FinishStep(uint32_t run) {
  Run& state = runs_[run];
  const FlowProgram& program = *state.program;
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
