// Which of a transformer layer's forward ops each of Megatron-Core's selective recompute modules
// re-runs and frees (TransformerShard::recompute_modules), tagged on the ops the layer builder
// made (models/transformer_ops.cc) by their names.
#pragma once

#include "models/ops.h"

namespace dtsim::models {

void TagRecomputeModules(LayerOps& ops);

}  // namespace dtsim::models
