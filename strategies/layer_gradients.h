// The gradients one rank holds, piece by piece, as the data-parallel reduction, ZeRO's gathers,
// compression's residuals and the tied embedding's all-reduce see them: matrices (rows ×
// columns on this rank) and plain vector elements (docs/strategies.md).
#pragma once

#include "models/model_spec.h"
#include "strategies/compression.h"
#include "strategies/config.h"

namespace dtsim::strategies {

// One layer's gradients on one rank: fused QKV (h × (q + 2·kv)/t), the output projection
// (q/t × h), the MLP (h × f/t, two of them fused for SwiGLU, and f/t × h) and, as plain
// elements, the biases and norms. In a MoE layer the local experts' MLPs are apart (they are
// reduced over the expert-data-parallel group only) and the router (h × E) stays dense. On a
// 2D/2.5D grid, the q×q block of the unsplit layer.
struct LayerGradientSplit {
  GradientTensors dense;
  GradientTensors experts;
};
LayerGradientSplit LayerGradients(const models::TransformerSpec& spec, const ParallelPlan& plan,
                                  int layer);

// The first stage's embedding gradients: the token table's V/t rows, learned positions and
// segments; the embedding norm.
GradientTensors EmbeddingGradients(const models::TransformerSpec& spec, const ParallelPlan& plan);

// The last stage's (`stage`): its vocabulary tables (models::OutputTables: an untied output
// layer, the embedding's copy on a stage other than the first), the final norm, BERT's pooler
// and MLM head transform with its V/t output bias.
GradientTensors OutputGradients(const models::TransformerSpec& spec, const ParallelPlan& plan,
                                int stage);

// The gradients one rank of pipeline stage `stage` holds, of any model (a ResNet: all of it).
GradientTensors ModelGradients(const SimulationConfig& config, int stage);

}  // namespace dtsim::strategies
