// Layers per pipeline stage balanced by cost ("layers": "balanced"; docs/strategies.md "Stage
// balancing").
#pragma once

#include <vector>

#include "models/cost_model.h"
#include "sim/base/status.h"
#include "strategies/config.h"

namespace dtsim::strategies {

// One count per stage, adding up to the model's layers.
Expected<std::vector<int>> BalanceStageLayers(const ResolvedConfig& config,
                                              const models::OpCostModel& cost);

}  // namespace dtsim::strategies
