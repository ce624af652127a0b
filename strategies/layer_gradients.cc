#include "strategies/layer_gradients.h"

#include <algorithm>
#include <array>
#include <utility>

#include "models/memory.h"
#include "models/parameters.h"
#include "strategies/data_parallel_iteration.h"

namespace dtsim::strategies {
namespace {

LayerGradientSplit OneDLayerGradients(const models::TransformerSpec& spec, int t, int ep, int etp,
                                      int layer) {
  LayerGradientSplit split;
  const int64_t h = spec.hidden;
  for (const std::array<int64_t, 2>& matrix : models::AttentionMatrices(spec, t)) {
    split.dense.matrices.push_back(matrix);
  }
  const bool moe = spec.IsMoeLayer(layer);
  const auto up_of = [&spec](int64_t f) { return spec.gated_mlp() ? 2 * f : f; };
  if (moe && spec.moe.shared_experts > 0) {  // dense: reduced over data parallelism
    const int64_t shared = spec.SharedFfnHidden() / t;
    split.dense.matrices.push_back({h, up_of(shared)});
    split.dense.matrices.push_back({shared, h});
  }
  const int64_t ffn = moe ? spec.MoeFfnHidden() / etp : spec.ffn_hidden / t;
  const int64_t up = up_of(ffn);
  GradientTensors& mlp = moe ? split.experts : split.dense;
  for (int expert = 0; expert < (moe ? spec.moe.experts / ep : 1); ++expert) {
    mlp.matrices.push_back({h, up});
    mlp.matrices.push_back({ffn, h});
    // Expert biases: fc1's f/t (2f/t for SwiGLU) and fc2's h.
    if (moe && spec.linear_bias) mlp.vector_elements += up + h;
  }
  if (moe) split.dense.matrices.push_back({h, spec.moe.experts});
  if (spec.IsMtpLayer(layer)) split.dense.matrices.push_back({2 * h, h / t});  // eh_proj
  split.dense.vector_elements = models::LayerParameterCount(spec, t, ep, etp, layer) -
                                split.dense.elements() - split.experts.elements();
  return split;
}

// On a 2D/2.5D grid a rank holds the q×q block of every matrix and 1/q² of every vector
// (Optimus; ColossalAI's Linear2D, LayerNorm2D).
GradientTensors OnGrid(GradientTensors whole, int q) {
  for (std::array<int64_t, 2>& matrix : whole.matrices) matrix = {matrix[0] / q, matrix[1] / q};
  const int64_t cells = int64_t{q} * q;
  whole.vector_elements = (whole.vector_elements + cells - 1) / cells;
  return whole;
}

// The vocabulary rows of a rank's table before a grid cuts it q×q: V/t (1D), or all of V
// padded to a multiple of 128·q.
int64_t VocabRows(const models::TransformerSpec& spec, const ParallelPlan& plan) {
  if (plan.on_grid()) return spec.PaddedVocab(plan.grid());
  return spec.PaddedVocab(plan.tensor) / plan.tensor;
}

// The gradients one rank of pipeline stage `stage` of a transformer holds.
GradientTensors StageGradients(const SimulationConfig& config, int stage) {
  const models::TransformerSpec& spec = config.model.transformer;
  const ParallelPlan& plan = config.plan;
  GradientTensors tensors;
  if (stage == 0) tensors.Append(EmbeddingGradients(spec, plan));
  for (int index : models::StageLayerIndices(spec, plan.pipeline, plan.virtual_stages, stage,
                                             plan.chunk_layers)) {
    const LayerGradientSplit layer = LayerGradients(spec, plan, index);
    tensors.Append(layer.dense);
    tensors.Append(layer.experts);
  }
  if (stage == plan.pipeline - 1) {
    tensors.Append(OutputGradients(spec, plan, stage));
  }
  return tensors;
}

}  // namespace

LayerGradientSplit LayerGradients(const models::TransformerSpec& spec, const ParallelPlan& plan,
                                  int layer) {
  if (!plan.on_grid()) {
    return OneDLayerGradients(spec, plan.tensor, plan.expert, plan.ExpertTensor(), layer);
  }
  LayerGradientSplit whole = OneDLayerGradients(spec, 1, 1, 1, layer);
  return {OnGrid(std::move(whole.dense), plan.grid()),
          OnGrid(std::move(whole.experts), plan.grid())};
}

GradientTensors EmbeddingGradients(const models::TransformerSpec& spec, const ParallelPlan& plan) {
  GradientTensors tensors;
  tensors.matrices.push_back({VocabRows(spec, plan), spec.hidden});
  if (spec.position == models::PositionEmbedding::kLearned) {
    tensors.matrices.push_back({spec.max_seq, spec.hidden});
  }
  if (spec.token_types > 0) tensors.matrices.push_back({spec.token_types, spec.hidden});
  if (spec.embedding_norm) tensors.vector_elements += models::NormParameters(spec);
  return plan.on_grid() ? OnGrid(std::move(tensors), plan.grid()) : tensors;
}

GradientTensors OutputGradients(const models::TransformerSpec& spec, const ParallelPlan& plan,
                                int stage) {
  GradientTensors tensors;
  const int64_t vocab = VocabRows(spec, plan);
  for (int table = 0; table < models::OutputTables(spec, stage); ++table) {
    tensors.matrices.push_back({vocab, spec.hidden});
  }
  if (spec.final_norm) tensors.vector_elements += models::NormParameters(spec);
  if (spec.pooler) {
    tensors.matrices.push_back({spec.hidden, spec.hidden});
    tensors.vector_elements += spec.hidden;
  }
  if (spec.lm_head_transform) {
    tensors.matrices.push_back({spec.hidden, spec.hidden});
    tensors.vector_elements += spec.hidden + models::NormParameters(spec) + vocab;
  }
  return plan.on_grid() ? OnGrid(std::move(tensors), plan.grid()) : tensors;
}

GradientTensors ModelGradients(const SimulationConfig& config, int stage) {
  if (config.model.family != models::ModelFamily::kResNet) return StageGradients(config, stage);
  GradientTensors tensors;
  for (const GradientTensors& point : ResNetGradientPoints(config.model.resnet)) {
    tensors.Append(point);
  }
  return tensors;
}

}  // namespace dtsim::strategies
