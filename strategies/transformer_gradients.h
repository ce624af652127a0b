// A transformer's data-parallel gradient reduction, from where each rank's gradients become
// ready in its stage's last backward to the optimizer step: each stage's gradients bucketed
// and reduced over data parallelism (the experts' over their expert-data-parallel groups), the
// tied embedding's all-reduce between the first and last stages, then the step
// (strategies/gradient_reduction.h does the buckets and the step).
#pragma once

#include <vector>

#include "models/cost_model.h"
#include "sim/base/status.h"
#include "sim/graph/builder.h"
#include "strategies/compression.h"
#include "strategies/config.h"
#include "strategies/stage_collectives.h"

namespace dtsim::strategies {

// Where each peer of one (data index, stage) has its gradients ready in the last micro-batch's
// backward, in the order they become ready: the output layer (last stage), each layer from the
// last, the embedding (first).
struct GradientReady {
  std::vector<std::vector<graph::TaskId>> at;   // per peer
  std::vector<GradientTensors> tensors;         // the gradients ready there
  std::vector<GradientTensors> expert_tensors;  // of which the experts'
};

// `ready[stage][dp]` for each stage and simulated data index.
Status ReduceTransformerGradients(const ResolvedConfig& config, const models::OpCostModel& cost,
                                  CompressionPhase phase, const StageCollectives& collectives,
                                  const std::vector<std::vector<GradientReady>>& ready,
                                  graph::TaskGraphBuilder& builder,
                                  models::CostSourceTally& sources);

}  // namespace dtsim::strategies
