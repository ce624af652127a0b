#include "network/isolated_steps.h"

#include <algorithm>

namespace dtsim::network {

std::pair<int64_t, DurationNs> FastStep::RepeatAt(DurationNs elapsed, DurationNs latency) const {
  const DurationNs cycle = duration + latency;
  const int64_t repeat = std::min(elapsed.ns() / std::max<int64_t>(cycle.ns(), 1), repeats - 1);
  return {repeat, cycle * repeat};
}

Status IsolatedSteps::Prepare(const ClusterSpec& cluster, size_t link_count) {
  DTSIM_ASSIGN_OR_RETURN(Topology topology, Topology::Build(cluster, scratch_));
  scratch_topology_.emplace(std::move(topology));
  holder_.assign(link_count, kNoRun);
  return Status::Ok();
}

void IsolatedSteps::HoldUnmarked(uint32_t run, FastStep& fast) {
  fast.isolated = true;
  ++isolated_runs_;
  unmarked_ = run;
}

void IsolatedSteps::Hold(uint32_t run, FastStep& fast, std::span<const LinkId> links) {
  fast.isolated = true;
  ++isolated_runs_;
  for (LinkId link : links) holder_[link] = run;
}

std::optional<DurationNs> IsolatedSteps::Known(const FlowProgram* program, size_t step) const {
  const auto known = durations_.find({program, step});
  if (known == durations_.end()) return std::nullopt;
  return known->second;
}

void IsolatedSteps::Record(const FlowProgram* program, size_t step, DurationNs duration) {
  durations_.emplace(std::make_pair(program, step), duration);
}

IsolatedSteps::Flows IsolatedSteps::BytesLeft(const FlowStep& step, TimeNs start, TimeNs now) {
  scratch_.Advance(start);
  scratch_.ReserveFlows(FlowCount(step));
  for (size_t i = 0; i < FlowCount(step); ++i) {
    if (FlowBytes(step, i) <= 0) continue;
    path_.clear();
    AppendFlowPath(step, i, *scratch_topology_, path_);
    scratch_.StartFlow(path_, FlowBytes(step, i), i, FlowMaxRate(step, i));
  }
  while (true) {
    scratch_.UpdateRates();
    const TimeNs next = scratch_.NextCompletion();
    if (next > now) break;
    scratch_.Advance(next);
    scratch_.TakeCompleted();
  }
  scratch_.Advance(now);
  Flows left;
  for (const auto& [index, bytes] : scratch_.ActiveFlows()) {
    if (bytes > 0) left.emplace_back(index, bytes);
  }
  scratch_.Clear();
  std::sort(left.begin(), left.end());  // a deterministic order of insertion
  return left;
}

}  // namespace dtsim::network
