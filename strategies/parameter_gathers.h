// ZeRO-3's parameter gathers as the transformer builder emits them for one (data index, stage):
// each layer's (the embedding's, the output layer's) parameter shards all-gathered from the
// data-parallel group before its forward and again before its backward, on the rank's "zero"
// stream, one piece ahead (docs/strategies.md, "ZeRO"). FSDP2 under pipelining (framework
// "pytorch") reshards nothing between micro-batches: each piece is gathered once, before its
// first use of the step (models::MemoryPlan keeps the stage gathered); without pipelining and
// with training.reshard_after_forward false, once a micro-batch (forward's gather kept for the
// backward). DeepSpeed before 0.5.5
// (SynchronizedZero3, strategies/deepspeed_zero3.h) gathers each parameter on its own when its
// reuse distance says so, on the compute stream with the list API's copies, and reduce-scatters
// each gradient the same way right after its backward.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "models/cost_model.h"
#include "sim/graph/builder.h"
#include "strategies/config.h"
#include "strategies/deepspeed_zero3.h"
#include "strategies/peer_group.h"
#include "strategies/stage_collectives.h"

namespace dtsim::strategies {

class ParameterGathers {
 public:
  ParameterGathers(graph::TaskGraphBuilder& builder, const ResolvedConfig& config,
                   const models::OpCostModel& cost, StageCollectives& collectives);

  // Starts a new (data index, stage): nothing gathered yet.
  void Begin() {
    after_.clear();
    gathered_.clear();
  }

  // The gather before the group's next use of the embedding, layer `layer`, or the output
  // layer of `stage` — in its backward pass (with its recompute) when `backward`; nothing below
  // ZeRO-3.
  void Embedding(PeerGroup& group, bool backward);
  void Layer(PeerGroup& group, int layer, bool backward);
  void Output(PeerGroup& group, int stage, bool backward);

  // DeepSpeed before 0.5.5: each of a piece's gradients (a layer's when `layer`) reduce-scattered
  // on its own, on the compute stream, the list API's copies before each. Nothing otherwise.
  void ReduceEach(PeerGroup& group, const GradientTensors& gradients, bool layer);

  // Whether the plan gathers parameters before each use (ZeRO-3 over more than one rank).
  static bool Gathers(const SimulationConfig& config);
  // Whether gathered pieces stay gathered for the rest of the step (FSDP2 under pipelining).
  static bool KeepsGathered(const SimulationConfig& config);

 private:
  void Gather(PeerGroup& group, int64_t parameters, std::string_view name,
              int64_t expert_parameters = 0);
  // DeepSpeed before 0.5.5: piece `piece`'s parameters gathered one by one (DeepSpeedGathers).
  void GatherEach(PeerGroup& group, size_t piece, bool backward, std::string_view name);
  // The list API's copies around one collective over the data-parallel group: one per rank of
  // `part_elements` elements, priced by the cost model.
  DurationNs ListCopies(int64_t part_elements) const;
  // One op's time on the cost model, or the roofline's where an op-cost table has no entry.
  DurationNs Priced(const models::Op& op) const;
  bool Gathers() const { return Gathers(config_); }
  // FSDP2 with training.reshard_after_forward false: what forward gathered is kept for the
  // backward (resharded after it).
  bool KeptSinceForward(bool backward) const;
  // Whether piece `key` (0 the embedding, 1 the output layer, 2 + i layer i) needs its gather
  // now; records it when gathered pieces stay gathered.
  bool NeedsGather(size_t key);

  graph::TaskGraphBuilder& builder_;
  const ResolvedConfig& config_;
  const models::OpCostModel& cost_;
  StageCollectives& collectives_;
  std::optional<DeepSpeedGathers> deepspeed_;  // DeepSpeed before 0.5.5
  // Per peer, the end of the compute before the last gathered piece.
  std::vector<std::optional<graph::TaskId>> after_;
  std::vector<bool> gathered_;  // by piece key, when pieces stay gathered
};

}  // namespace dtsim::strategies
