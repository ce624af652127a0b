// The memory one rank of each pipeline stage needs (models/memory.h's estimate under the plan,
// plus gradient compression's error-feedback residuals), and the check that it fits the GPU.
#pragma once

#include <vector>

#include "models/memory.h"
#include "sim/base/status.h"
#include "strategies/config.h"

namespace dtsim::strategies {

// The memory model's view of pipeline stage `stage` of the config's plan.
models::MemoryPlan MemoryPlanOf(const ResolvedConfig& config, int stage);

// Per-stage memory (one rank of each pipeline stage), fitting the GPU or not.
Expected<std::vector<models::MemoryBreakdown>> EstimateStageMemory(const ResolvedConfig& config);
// The same; errors when a stage does not fit the GPU ("needs 97.2 GiB per GPU, …").
Expected<std::vector<models::MemoryBreakdown>> StageMemory(const ResolvedConfig& config);

}  // namespace dtsim::strategies
