#include "strategies/stage_collectives.h"

#include <numeric>
#include <optional>

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
  }
  std::vector<std::vector<graph::CommId>>& made = matched_[{across, stage_, first}];
  const size_t index = sequence_[static_cast<size_t>(across)]++;
  if (index == made.size()) {
    // On a 2.5D grid peer tp shares its weights with tp ± q² (the other depth layers): one
    // collective spans them all (RanksOver), and each depth layer's peer joins it.
    std::vector<graph::CommId> comms;
    for (int tp = 0; tp < simulated_tensor_; ++tp) {
      if (tp >= WeightPeers()) {
        comms.push_back(comms[static_cast<size_t>(tp % WeightPeers())]);
        continue;
      }
      const RankGroup ranks = RanksOver(stage_, tp, dps);
      comms.push_back(builder_.AddCollective(kind, bytes, ranks.simulated));
      if (ranks.simulated.size() != ranks.logical.size()) {
        builder_.PriceAs(comms.back(), ranks.logical);
      }
    }
    made.push_back(std::move(comms));
  }
  return made[index];
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
