#include "strategies/stage_collectives.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <set>

namespace dtsim::strategies {

StageCollectives::StageCollectives(graph::TaskGraphBuilder& builder, const ParallelPlan& plan,
                                   int simulated_data, int simulated_tensor)
    : builder_(builder),
      plan_(plan),
      simulated_data_(simulated_data),
      simulated_tensor_(simulated_tensor) {}

void StageCollectives::Begin(int dp, int stage) {
  dp_ = dp;
  stage_ = stage;
  sequence_ = {};
}

std::vector<graph::CommId> StageCollectives::Grid(const LayoutComm& comm) {
  const int q = plan_.grid();
  const int stride = comm.group == CommGroup::kGridRow ? 1 : q;
  std::vector<graph::CommId> comms;
  std::vector<std::optional<graph::CommId>> made(static_cast<size_t>(simulated_tensor_));
  for (int tp = 0; tp < simulated_tensor_; ++tp) {
    const int first = tp - (tp / stride % q) * stride;
    std::optional<graph::CommId>& made_comm = made[static_cast<size_t>(first)];
    if (!made_comm) {
      std::vector<int32_t> logical, simulated;
      for (int c = 0; c < q; ++c) {
        const int member = first + c * stride;
        logical.push_back(plan_.Rank(dp_, stage_, member));
        if (member < simulated_tensor_) simulated.push_back(logical.back());
      }
      const int32_t root_rank = first + comm.root * stride < simulated_tensor_
                                    ? logical[static_cast<size_t>(comm.root)]
                                    : simulated.front();
      made_comm = builder_.AddCollective(comm.kind, comm.bytes, simulated, {}, {}, root_rank);
      if (simulated.size() != logical.size()) builder_.PriceAs(*made_comm, logical);
    }
    comms.push_back(*made_comm);
  }
  return comms;
}

std::vector<graph::CommId> StageCollectives::Matched(Across across, graph::CommKind kind,
                                                     Bytes bytes) {
  const size_t index = sequence_[static_cast<size_t>(across)]++;
  if (across == Across::kStage ||
      (plan_.folded_experts() && (across == Across::kExpert || across == Across::kExpertData))) {
    return SpanningMatched(across, kind, bytes, index);
  }
  int first = 0;
  std::vector<int> dps;
  switch (across) {
    case Across::kExpert:
      first = plan_.ExpertGroupFirst(dp_);
      dps.resize(static_cast<size_t>(plan_.expert));
      std::iota(dps.begin(), dps.end(), first);
      break;
    case Across::kData:
      dps.resize(static_cast<size_t>(plan_.DataIndices()));
      std::iota(dps.begin(), dps.end(), 0);
      break;
    case Across::kExpertData:
      first = dp_ % plan_.expert;
      for (int dp = first; dp < plan_.DataIndices(); dp += plan_.expert) dps.push_back(dp);
      break;
    case Across::kContext:
      first = plan_.ContextGroupFirst(dp_);
      dps.resize(static_cast<size_t>(plan_.context));
      std::iota(dps.begin(), dps.end(), first);
      break;
    case Across::kStage:  // SpanningMatched
      break;
  }
  std::vector<std::vector<graph::CommId>>& made = matched_[{across, stage_, first}];
  if (index == made.size()) {
    // On a 2.5D grid peer tp shares its weights with tp ± q² (the other depth layers): one
    // collective spans them all (RanksOver), and each depth layer's peer joins it.
    std::vector<graph::CommId> comms;
    for (int tp = 0; tp < simulated_tensor_; ++tp) {
      if (tp >= WeightPeers()) {
        comms.push_back(comms[static_cast<size_t>(tp % WeightPeers())]);
        continue;
      }
      comms.push_back(Make(kind, bytes, RanksOver(stage_, tp, dps)));
    }
    made.push_back(std::move(comms));
  }
  return made[index];
}

// A group over tensor and data indices (under folding, or the whole stage): peers of one
// program may share a group (one collective they all join) or sit in different ones.
std::vector<graph::CommId> StageCollectives::SpanningMatched(Across across, graph::CommKind kind,
                                                             Bytes bytes, size_t index) {
  std::vector<graph::CommId> comms;
  comms.reserve(static_cast<size_t>(simulated_tensor_));
  for (int tp = 0; tp < simulated_tensor_; ++tp) {
    const int first = SpanningFirst(across, plan_.ExpertIndex(dp_, tp));
    std::vector<graph::CommId>& made = spanning_[{across, stage_, first}];
    if (index == made.size()) {
      made.push_back(Make(kind, bytes, SpanningGroup(across, stage_, first)));
    }
    comms.push_back(made[index]);
  }
  return comms;
}

int StageCollectives::SpanningFirst(Across across, int index) const {
  switch (across) {
    case Across::kExpert:
      return index / plan_.expert * plan_.expert;
    case Across::kExpertData:
      return index % plan_.expert;
    default:
      return 0;  // kStage: one group
  }
}

// The expert-parallel group: `expert` consecutive expert indices from `first`; the
// expert-data-parallel group: every `expert`-th from `first` (< expert); the stage: all.
RankGroup StageCollectives::SpanningGroup(Across across, int stage, int first) const {
  const int stride = across == Across::kExpertData ? plan_.expert : 1;
  const int members = across == Across::kExpert       ? plan_.expert
                      : across == Across::kExpertData ? plan_.ExpertData()
                                                      : plan_.tensor * plan_.DataIndices();
  RankGroup group;
  for (int m = 0; m < members; ++m) {
    const int index = first + m * stride;
    const int dp = index / plan_.tensor;
    const int tp = index % plan_.tensor;
    group.logical.push_back(plan_.Rank(dp, stage, tp));
    if (dp < simulated_data_ && tp < simulated_tensor_) {
      group.simulated.push_back(group.logical.back());
      group.simulated_at.emplace_back(dp, tp);
    }
  }
  return group;
}

std::vector<RankGroup> StageCollectives::ExpertDataGroups(int stage) const {
  std::vector<RankGroup> groups;
  if (plan_.folded_experts()) {
    std::set<int> firsts;
    for (int dp = 0; dp < simulated_data_; ++dp) {
      for (int tp = 0; tp < simulated_tensor_; ++tp) {
        firsts.insert(SpanningFirst(Across::kExpertData, plan_.ExpertIndex(dp, tp)));
      }
    }
    for (int first : firsts) groups.push_back(SpanningGroup(Across::kExpertData, stage, first));
    return groups;
  }
  for (int tp = 0; tp < std::min(simulated_tensor_, WeightPeers()); ++tp) {
    for (int first = 0; first < std::min(plan_.expert, simulated_data_); ++first) {
      std::vector<int> holders;
      for (int dp = first; dp < plan_.DataIndices(); dp += plan_.expert) holders.push_back(dp);
      groups.push_back(RanksOver(stage, tp, holders));
    }
  }
  return groups;
}

graph::CommId StageCollectives::Make(graph::CommKind kind, Bytes bytes, const RankGroup& ranks) {
  const graph::CommId comm = builder_.AddCollective(kind, bytes, ranks.simulated);
  if (ranks.simulated.size() != ranks.logical.size()) builder_.PriceAs(comm, ranks.logical);
  return comm;
}

RankGroup StageCollectives::RanksOver(int stage, int tp, const std::vector<int>& dps) const {
  RankGroup group;
  for (int dp : dps) {
    for (int member = tp; member < plan_.tensor; member += WeightPeers()) {
      group.logical.push_back(plan_.Rank(dp, stage, member));
      if (dp < simulated_data_ && member < simulated_tensor_) {
        group.simulated.push_back(group.logical.back());
        group.simulated_at.emplace_back(dp, member);
      }
    }
  }
  return group;
}

}  // namespace dtsim::strategies
