// One training iteration of a model that is only data parallel (ResNet): every rank runs the
// whole model's forward and backward per micro-batch, its gradients reduced in buckets that
// overlap the last backward, then the optimizer step (docs/strategies.md, "Data-parallel
// models").
#pragma once

#include "models/cost_model.h"
#include "sim/base/status.h"
#include "strategies/compression.h"
#include "strategies/config.h"
#include "strategies/transformer_iteration.h"

namespace dtsim::strategies {

// A ResNet's gradients in the order its backward pass produces them: the classifier, then each
// convolution from the last (its weight as the C_out × C_in·r² matrix PowerSGD reshapes it to,
// with its BatchNorm's scale and shift).
std::vector<GradientTensors> ResNetGradientPoints(const models::ResNetSpec& spec);

// Precondition: `config` is a ResNet's. The graph without
// `stats.stage_memory` (BuildIteration adds it).
Expected<IterationGraph> BuildDataParallelIteration(
    const ResolvedConfig& config, const models::OpCostModel& cost,
    CompressionPhase phase = CompressionPhase::kCompressed);

}  // namespace dtsim::strategies
