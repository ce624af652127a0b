// The collectives the transformer builder makes while it builds one (data index, pipeline
// stage) at a time: a grid's ROW and COL collectives inside the stage's tensor-parallel group,
// and the collectives across data indices (expert all-to-alls, ZeRO-3's gathers) that several
// (data index, stage) programs share, matched by their order in each program.
#pragma once

#include <array>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/base/units.h"
#include "sim/graph/builder.h"
#include "strategies/config.h"
#include "strategies/microbatch_layout.h"

namespace dtsim::strategies {

// Peer `tp` of some data indices on a stage — with 2.5D, at every depth layer, which hold the
// same weights: all of them (`logical`, what collectives are priced over) and the simulated
// ones, with their (data index, tensor index).
struct RankGroup {
  std::vector<int32_t> logical, simulated;
  std::vector<std::pair<int, int>> simulated_at;
};

class StageCollectives {
 public:
  // The first `simulated_data` data indices and `simulated_tensor` tensor indices are simulated.
  StageCollectives(graph::TaskGraphBuilder& builder, const ParallelPlan& plan, int simulated_data,
                   int simulated_tensor);

  // Starts the program of (data index `dp`, `stage`).
  void Begin(int dp, int stage);

  // One collective per ROW (COL) group of the current (data index, stage), over the group's
  // simulated members and priced over all q: per simulated peer, the one it takes part in.
  // A broadcast's or reduce's root is the member at `comm.root` along the axis (with symmetric
  // ranks, the simulated member: by the grid's symmetry it costs the same).
  std::vector<graph::CommId> Grid(const LayoutComm& comm);

  // Collectives across data indices (the expert group; all of data parallelism with its
  // context-parallel peers; the expert data-parallel group, the D/EP indices holding the same
  // experts as the current one; or the context-parallel group) of the current stage, one per
  // simulated tensor-parallel peer i (over peer i of each data index). Members build their stages
  // one after another, so the first to reach the n-th such collective of its program makes it and
  // the others (same stage, same program) join it by that index. Under MoE parallel folding the
  // expert and expert-data groups are over expert indices tp + t·dp (ParallelPlan::ExpertIndex):
  // a group spans tensor and data indices, and peers of one program may share one.
  // kStage: every rank of the stage (all tensor and data indices: FP8 amax reductions).
  enum class Across : uint8_t { kExpert, kData, kExpertData, kContext, kStage };
  std::vector<graph::CommId> Matched(Across across, graph::CommKind kind, Bytes bytes);

  // Peer `tp` of data indices `dps` on `stage`.
  RankGroup RanksOver(int stage, int tp, const std::vector<int>& dps) const;

  // The expert-data-parallel groups of `stage` (the ranks holding the same experts) that hold a
  // simulated rank: per simulated tensor index, its expert-data group through each of the first
  // `expert` data indices, or under MoE parallel folding the groups of the simulated ranks'
  // expert indices (ParallelPlan::ExpertIndex).
  std::vector<RankGroup> ExpertDataGroups(int stage) const;

  // Tensor-parallel ranks with distinct weights: all t, or the q² of one 2.5D depth layer.
  int WeightPeers() const { return plan_.tensor / plan_.tensor_depth; }

 private:
  graph::TaskGraphBuilder& builder_;
  const ParallelPlan& plan_;
  int simulated_data_;
  int simulated_tensor_;
  // Groups over tensor and data indices (MoE parallel folding's, the whole stage): the
  // collectives of the group starting at index tp + t·dp = `first`.
  std::vector<graph::CommId> SpanningMatched(Across across, graph::CommKind kind, Bytes bytes,
                                             size_t index);
  int SpanningFirst(Across across, int index) const;
  RankGroup SpanningGroup(Across across, int stage, int first) const;
  graph::CommId Make(graph::CommKind kind, Bytes bytes, const RankGroup& ranks);

  int dp_ = 0;
  int stage_ = 0;
  // Matched collectives made so far per (across, stage, first data index), each one comm per
  // simulated tensor-parallel peer; per kind, the index of the next in this program.
  std::map<std::tuple<Across, int, int>, std::vector<std::vector<graph::CommId>>> matched_;
  // Groups over tensor and data indices, per (across, stage, first index): the group's
  // collectives in order.
  std::map<std::tuple<Across, int, int>, std::vector<graph::CommId>> spanning_;
  std::array<size_t, 5> sequence_{};
};

}  // namespace dtsim::strategies
