// The work of one micro-batch's passes on one rank, priced without building the graph: what the
// search's lower bound (strategies/search.h) and stage balancing are built from. It is the
// graph's own layout (strategies/microbatch_layout.h) with its collectives priced by the
// analytical network model's algorithms.
#pragma once

#include <array>
#include <vector>

#include "models/cost_model.h"
#include "models/ops.h"
#include "sim/base/status.h"
#include "sim/base/time.h"
#include "strategies/config.h"

namespace dtsim::strategies {

// One micro-batch of a piece of the model on one rank, as the graph lays it out: the work its
// compute stream serializes — the ops (experts at the balanced load), 1D tensor-parallel
// reductions and a grid's row-statistics all-reduces — and the SUMMA broadcasts and reduces
// its "tp" stream serializes on a 2D/2.5D grid. No other collective, no waits.
struct PieceTimes {
  DurationNs forward, backward, recompute;
  DurationNs forward_grid, backward_grid, recompute_grid;
};
struct PassTimes {
  // One layer of each kind (TransformerSpec::LayerKind: MoE or dense, windowed or full
  // attention); zero for a kind the model does not have.
  std::array<PieceTimes, models::TransformerSpec::kLayerKinds> layers;
  // The same without recompute, for the layers training.recompute_every skips.
  std::array<PieceTimes, models::TransformerSpec::kLayerKinds> kept;
  int recompute_every = 1;
  PieceTimes embedding;  // the first stage's (its collectives left out)
  PieceTimes output;     // the last stage's
  const PieceTimes& Layer(const models::TransformerSpec& spec, int index) const {
    const auto kind = static_cast<size_t>(spec.LayerKind(index));
    return models::RecomputesLayer(recompute_every, index) ? layers[kind] : kept[kind];
  }
};

// A SUMMA op on the compute stream (PeerGroup::Summa, MicrobatchLayout's SummaStep): per step
// the time of its broadcasts before its chunk and of its reduces after it.
struct SummaStepTimes {
  DurationNs before, after;
};
// The op's span as the graph orders it, from the end of the task before it with the "tp"
// stream free: the first broadcast is never hidden, and with reduces after each chunk nothing
// is. A busy "tp" stream, the wait for the previous op's reduce or a rendezvous only add, so
// the lower bound may count the span, not just the op's compute.
DurationNs SummaSpan(DurationNs duration, const std::vector<SummaStepTimes>& steps);

// The pass times of a transformer's config.
Expected<PassTimes> PricePassTimes(const ResolvedConfig& config, const models::OpCostModel& cost);

}  // namespace dtsim::strategies
