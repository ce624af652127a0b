// One training iteration of a DLRM (docs/strategies.md, "DLRM"), as TorchRec runs one with
// DistributedModelParallel: the dense part (bottom MLP, interaction, top MLP) data parallel, its
// gradients all-reduced in buckets behind the backward (DDP); the embedding tables sharded
// (strategies/embedding_sharding.h), each micro-batch's sparse indices sent to the tables'
// ranks, the pooled embeddings sent back to their samples' ranks (all-to-all for table-wise
// tables, reduce-scatter of partial sums for row-wise), their gradients the reverse way, and
// the tables updated in the backward with the optimizer fused in.
#pragma once

#include <vector>

#include "models/cost_model.h"
#include "sim/base/status.h"
#include "strategies/compression.h"
#include "strategies/config.h"
#include "strategies/transformer_iteration.h"

namespace dtsim::strategies {

// The dense weights' gradients in the order the backward produces them: the top MLP's layers
// from the last, then the bottom MLP's (each weight as its out × in matrix, and its bias).
std::vector<GradientTensors> DlrmGradientPoints(const models::DlrmSpec& spec);

// Precondition: `config` is a checked DLRM's. Symmetric ranks simulate rank 0 doing the work of the
// rank with the most embedding work (all ranks wait for it at the exchanges); full ranks every
// rank. The graph without `stats.stage_memory` (BuildIteration adds it).
Expected<IterationGraph> BuildDlrmIteration(const ResolvedConfig& config,
                                            const models::OpCostModel& cost);

}  // namespace dtsim::strategies
