// One training iteration of a transformer as a task graph, under data, tensor (1D with
// sequence parallelism, 2D and 2.5D SUMMA grids), pipeline (GPipe, 1F1B, interleaved) and
// expert parallelism, ZeRO-1/2/3 and gradient compression, on every rank or one rank per stage
// (symmetric ranks): every rank's compute (priced op by op by a cost model), its
// tensor-parallel collectives, pipeline sends and receives, expert all-to-alls, bucketed
// data-parallel gradient reduction and the optimizer step (docs/strategies.md).
#pragma once

#include <span>
#include <vector>

#include "models/cost_model.h"
#include "models/memory.h"
#include "sim/base/status.h"
#include "sim/base/time.h"
#include "sim/graph/task_graph.h"
#include "strategies/categories.h"
#include "strategies/compression.h"
#include "strategies/config.h"

namespace dtsim::strategies {

struct IterationStats {
  double model_flops = 0;           // one iteration, all ranks (MFU convention, no recompute)
  double hardware_flops = 0;        // with the recomputed forward
  models::CostSourceTally sources;  // compute time per cost source, all ranks
  std::vector<models::MemoryBreakdown> stage_memory;  // per pipeline stage (one rank each)
};

struct IterationGraph {
  graph::TaskGraph graph;
  IterationStats stats;
};

// `phase`: with gradient compression, the full-precision warm-up or the compressed steps.
// `stage_memory` (EstimateStageMemory's, one per stage; empty: none) gives the graph its ranks'
// memory track. The graph without `stats.stage_memory`.
Expected<IterationGraph> BuildTransformerIteration(
    const ResolvedConfig& config, const models::OpCostModel& cost,
    std::span<const models::MemoryBreakdown> stage_memory,
    CompressionPhase phase = CompressionPhase::kCompressed);

// The iteration of any config — a transformer under its plan, or a data-parallel ResNet
// (BuildDataParallelIteration) — with its per-stage memory; errors when a stage does not fit.
Expected<IterationGraph> BuildIteration(const ResolvedConfig& config,
                                        const models::OpCostModel& cost,
                                        CompressionPhase phase = CompressionPhase::kCompressed);

}  // namespace dtsim::strategies
