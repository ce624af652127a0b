// The work of one micro-batch's passes on one rank, priced without building the graph: what the
// search's lower bound (strategies/search.h) and stage balancing are built from. It is the
// graph's own layout (strategies/microbatch_layout.h) with its collectives priced by the
// analytical network model's algorithms.
#pragma once

#include <array>

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

// The pass times of a transformer's config.
Expected<PassTimes> PricePassTimes(const ResolvedConfig& config, const models::OpCostModel& cost);

}  // namespace dtsim::strategies
