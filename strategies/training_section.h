#pragma once

// The "training" section of a simulation config (docs/config.md): batch, sequence, precisions
// (activations, FP8 recipe, parameters, gradients, optimizer state), framework, optimizer and
// recompute policy.

#include "sim/base/json_reader.h"
#include "sim/base/status.h"
#include "strategies/config.h"

namespace dtsim::strategies {

// Reads `value` (the config's "training" object) into `training`, whose fields keep their
// defaults where the section is silent; errors name the JSON path and the value.
Status ReadTraining(const Json& value, TrainingConfig& training);

// The gradients' dtype `training`'s framework defaults to: the activations' under DeepSpeed
// (its communication_data_type), else fp32 (Megatron's main gradients).
DType DefaultGradDtype(const TrainingConfig& training);

}  // namespace dtsim::strategies
