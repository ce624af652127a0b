// ZeRO-3's parameter gathers as the transformer builder emits them for one (data index, stage):
// each layer's (the embedding's, the output layer's) parameter shards all-gathered from the
// data-parallel group before its forward and again before its backward, on the rank's "zero"
// stream, one piece ahead (docs/strategies.md, "ZeRO"). FSDP2 under pipelining (framework
// "pytorch") reshards nothing between micro-batches: each piece is gathered once, before its
// first use of the step (models::MemoryPlan keeps the stage gathered).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "sim/graph/builder.h"
#include "strategies/config.h"
#include "strategies/peer_group.h"
#include "strategies/stage_collectives.h"

namespace dtsim::strategies {

class ParameterGathers {
 public:
  ParameterGathers(graph::TaskGraphBuilder& builder, const ResolvedConfig& config,
                   StageCollectives& collectives)
      : builder_(builder), config_(config), collectives_(collectives) {}

  // Starts a new (data index, stage): nothing gathered yet.
  void Begin() {
    after_.clear();
    gathered_.clear();
  }

  // The gather before the group's next use of the embedding, layer `layer`, or the output
  // layer of `stage`; nothing below ZeRO-3.
  void Embedding(PeerGroup& group);
  void Layer(PeerGroup& group, int layer);
  void Output(PeerGroup& group, int stage);

  // Whether the plan gathers parameters before each use (ZeRO-3 over more than one rank).
  static bool Gathers(const SimulationConfig& config);
  // Whether gathered pieces stay gathered for the rest of the step (FSDP2 under pipelining).
  static bool KeepsGathered(const SimulationConfig& config);

 private:
  void Gather(PeerGroup& group, int64_t parameters, std::string_view name,
              int64_t expert_parameters = 0);
  bool Gathers() const { return Gathers(config_); }
  // Whether piece `key` (0 the embedding, 1 the output layer, 2 + i layer i) needs its gather
  // now; records it when gathered pieces stay gathered.
  bool NeedsGather(size_t key);

  graph::TaskGraphBuilder& builder_;
  const ResolvedConfig& config_;
  StageCollectives& collectives_;
  // Per peer, the end of the compute before the last gathered piece.
  std::vector<std::optional<graph::TaskId>> after_;
  std::vector<bool> gathered_;  // by piece key, when pieces stay gathered
};

}  // namespace dtsim::strategies
