#include "strategies/deepspeed_zero3.h"

#include "models/parameters.h"
#include "strategies/layer_gradients.h"
#include "strategies/parameter_gathers.h"

namespace dtsim::strategies {
namespace {

// Where a use happens: the piece and whether in its backward (with its recompute).
struct UseSite {
  size_t piece = 0;
  bool backward = false;
};

class UseList {
 public:
  void Add(int parameter, int64_t elements, UseSite site) {
    uses_.push_back({parameter, elements});
    sites_.push_back(site);
  }
  const std::vector<ParameterUse>& uses() const { return uses_; }
  const std::vector<UseSite>& sites() const { return sites_; }

 private:
  std::vector<ParameterUse> uses_;
  std::vector<UseSite> sites_;
};

// The gathered (non-persistent) matrices of a piece, each given the next parameter id.
std::vector<ParameterUse> Gathered(const GradientTensors& tensors, int& next_id) {
  std::vector<ParameterUse> matrices;
  for (const std::array<int64_t, 2>& matrix : tensors.matrices) {
    const int64_t elements = matrix[0] * matrix[1];
    if (elements > kDeepSpeedPersistenceThreshold) matrices.push_back({next_id++, elements});
  }
  return matrices;
}

}  // namespace

bool SynchronizedZero3(const SimulationConfig& config) {
  return config.training.framework == models::Framework::kDeepSpeed &&
         config.training.framework_release != std::array<int, 3>{0, 0, 0} &&
         config.training.framework_release < kDeepSpeedCoalescedRelease &&
         ParameterGathers::Gathers(config);
}

std::vector<bool> GatheredUses(std::span<const ParameterUse> uses, int64_t max_reuse_distance) {
  const size_t n = uses.size();
  std::vector<int64_t> before(n + 1, 0);  // elements of the uses before index i
  int parameters = 0;
  for (size_t i = 0; i < n; ++i) {
    before[i + 1] = before[i] + uses[i].elements;
    parameters = std::max(parameters, uses[i].parameter + 1);
  }
  std::vector<size_t> next(n, n);
  std::vector<size_t> seen(static_cast<size_t>(parameters), n);
  for (size_t i = n; i-- > 0;) {
    const auto parameter = static_cast<size_t>(uses[i].parameter);
    next[i] = seen[parameter];
    seen[parameter] = i;
  }
  std::vector<bool> available(static_cast<size_t>(parameters), false);
  std::vector<bool> gathered(n, false);
  for (size_t i = 0; i < n; ++i) {
    const auto parameter = static_cast<size_t>(uses[i].parameter);
    gathered[i] = !available[parameter];
    const bool keep = next[i] < n && before[next[i]] - before[i + 1] < max_reuse_distance;
    available[parameter] = keep;
  }
  return gathered;
}

DeepSpeedGathers::DeepSpeedGathers(const SimulationConfig& config) {
  const models::TransformerSpec& spec = config.model.transformer;
  const ParallelPlan& plan = config.plan;
  const auto layers = static_cast<size_t>(spec.layers);
  gathers_.resize(2 + layers);
  int next_id = 0;
  const std::vector<ParameterUse> embedding = Gathered(EmbeddingGradients(spec, plan), next_id);
  const std::vector<ParameterUse> output = Gathered(OutputGradients(spec, plan, 0), next_id);
  std::vector<std::vector<ParameterUse>> layer(layers);
  for (size_t i = 0; i < layers; ++i) {
    layer[i] = Gathered(LayerGradients(spec, plan, static_cast<int>(i)).dense, next_id);
  }
  UseList list;
  auto output_uses = [&](bool backward) {
    // A tied output layer multiplies by the embedding's token table.
    if (spec.tied_embeddings && !embedding.empty()) {
      list.Add(embedding.front().parameter, embedding.front().elements, {1, backward});
    }
    for (const ParameterUse& use : output) list.Add(use.parameter, use.elements, {1, backward});
  };
  for (const ParameterUse& use : embedding) list.Add(use.parameter, use.elements, {0, false});
  for (size_t i = 0; i < layers; ++i) {
    for (const ParameterUse& use : layer[i]) list.Add(use.parameter, use.elements, {2 + i, false});
  }
  output_uses(false);
  output_uses(true);
  for (size_t i = layers; i-- > 0;) {
    const bool recomputed =
        config.training.recompute == models::Recompute::kFull &&
        models::RecomputesLayer(config.training.recompute_every, static_cast<int>(i));
    if (recomputed) {
      for (const ParameterUse& use : layer[i]) list.Add(use.parameter, use.elements, {2 + i, true});
    }
    for (auto it = layer[i].rbegin(); it != layer[i].rend(); ++it) {
      list.Add(it->parameter, it->elements, {2 + i, true});
    }
  }
  for (const ParameterUse& use : embedding) list.Add(use.parameter, use.elements, {0, true});
  const std::vector<bool> gathered =
      GatheredUses(list.uses(), config.training.deepspeed.max_reuse_distance);
  for (size_t i = 0; i < gathered.size(); ++i) {
    if (!gathered[i]) continue;
    const UseSite site = list.sites()[i];
    gathers_[site.piece][site.backward ? 1 : 0].push_back(list.uses()[i].elements);
  }
}

std::span<const int64_t> DeepSpeedGathers::At(size_t piece, bool backward) const {
  if (piece >= gathers_.size()) return {};
  return gathers_[piece][backward ? 1 : 0];
}

std::vector<int64_t> ParameterTensors(const models::TransformerSpec& spec,
                                      const GradientTensors& gradients, bool layer) {
  std::vector<int64_t> tensors;
  for (const std::array<int64_t, 2>& matrix : gradients.matrices) {
    tensors.push_back(matrix[0] * matrix[1]);
  }
  if (gradients.vector_elements <= 0) return tensors;
  const int64_t per_norm = spec.norm == models::Norm::kLayerNorm ? 2 : 1;
  int64_t vectors =
      layer
          ? 2 * per_norm + (spec.linear_bias ? static_cast<int64_t>(gradients.matrices.size()) : 0)
          : per_norm;
  vectors = std::min(std::max<int64_t>(vectors, 1), gradients.vector_elements);
  for (int64_t v = 0; v < vectors; ++v) {
    // The vector elements split as evenly as they go.
    tensors.push_back(gradients.vector_elements / vectors +
                      (v < gradients.vector_elements % vectors ? 1 : 0));
  }
  return tensors;
}

models::Op ListApiCopy(int64_t part_elements, DType dtype, models::Pass pass) {
  return models::Op::Streaming("list-API copy", models::OpKind::kElementwise, pass, dtype,
                               part_elements, 2.0 * DTypeBytes(dtype), 0);
}

models::Op GatherBufferZeros(int64_t elements, DType dtype, models::Pass pass) {
  return models::Op::Streaming("gather buffer zeros", models::OpKind::kElementwise, pass, dtype,
                               elements, DTypeBytes(dtype), 0);
}

ListApiHost GatherHost(int ranks, const models::GpuSpec& gpu) {
  return {.loop = kGatherListPerRank * ranks,
          .copies = (kCopyDispatch + gpu.host_launch_time) * ranks};
}

ListApiHost ReduceScatterHost(int ranks, const models::GpuSpec& gpu) {
  return {.loop = kReduceScatterListPerRank * ranks,
          .copies = (kCopyDispatch + gpu.host_launch_time) * ranks};
}

}  // namespace dtsim::strategies
