#include "models/parameters.h"

#include <algorithm>

#include "models/resnet.h"

namespace dtsim::models {

std::vector<std::array<int64_t, 2>> AttentionMatrices(const TransformerSpec& t,
                                                      int tensor_parallel) {
  const int64_t h = t.hidden;
  const int64_t heads = t.heads / tensor_parallel;
  if (t.mla.enabled()) {
    const MlaSpec& mla = t.mla;
    std::vector<std::array<int64_t, 2>> matrices;
    if (mla.q_lora_rank > 0) {
      matrices.push_back({h, mla.q_lora_rank});
      matrices.push_back({mla.q_lora_rank, heads * t.head_dim()});
    } else {
      matrices.push_back({h, heads * t.head_dim()});
    }
    // The KV latent and the keys' shared rotary part; then per head the keys' other part and
    // the values.
    matrices.push_back({h, mla.kv_lora_rank + mla.qk_rope_head_dim});
    matrices.push_back({mla.kv_lora_rank, heads * (mla.qk_nope_head_dim + mla.v_head_dim)});
    matrices.push_back({heads * t.v_head_dim(), h});
    return matrices;
  }
  // Q is h × q_dim and the output projection q_dim × h; K and V are h × kv_dim (grouped-query
  // attention). q_dim == h unless the head size is given separately.
  const int64_t q = heads * t.head_dim();
  const int64_t kv = std::max<int64_t>(1, t.kv_heads / tensor_parallel) * t.head_dim();
  return {{h, q + 2 * kv}, {q, h}};
}

int64_t AttentionVectorElements(const TransformerSpec& t, int tensor_parallel) {
  if (t.mla.enabled()) {
    // MLA layers have no biases; a norm over each latent (as the model's norms: RMSNorm one
    // vector, LayerNorm two).
    const int64_t per = t.norm == Norm::kLayerNorm ? 2 : 1;
    return per * (t.mla.q_lora_rank + t.mla.kv_lora_rank);
  }
  // A QK norm's weights (and LayerNorm's biases) over head_dim, for the queries and the keys,
  // replicated on every tensor-parallel rank.
  const int64_t vectors = t.norm == Norm::kLayerNorm ? 2 : 1;
  const int64_t qk_norm = t.qk_norm ? 2 * vectors * t.head_dim() : 0;
  if (!t.linear_bias) return qk_norm;
  const std::array<int64_t, 2> qkv = AttentionMatrices(t, tensor_parallel).front();
  return qkv[1] + t.hidden + qk_norm;  // QKV's column-parallel biases, the output projection's h
}

int64_t AttentionParameters(const TransformerSpec& t) {
  int64_t params = AttentionVectorElements(t, 1);
  for (const std::array<int64_t, 2>& matrix : AttentionMatrices(t, 1)) {
    params += matrix[0] * matrix[1];
  }
  return params;
}

int64_t MlpParameters(const TransformerSpec& t, int64_t ffn_hidden) {
  if (t.gated_mlp()) {
    // gate and up h → f, down f → h.
    return 3 * t.hidden * ffn_hidden + (t.linear_bias ? 2 * ffn_hidden + t.hidden : 0);
  }
  return 2 * t.hidden * ffn_hidden + (t.linear_bias ? ffn_hidden + t.hidden : 0);
}

int64_t NormParameters(const TransformerSpec& t) {
  return t.norm == Norm::kLayerNorm ? 2 * t.hidden : t.hidden;
}

int64_t LayerNormParameters(const TransformerSpec& t) {
  return (t.post_norms ? 4 : 2) * NormParameters(t);
}

int64_t DenseLayerParameters(const TransformerSpec& t) {
  return AttentionParameters(t) + MlpParameters(t, t.ffn_hidden) + LayerNormParameters(t);
}

int64_t MoeLayerParameters(const TransformerSpec& t) {
  const int64_t router = t.hidden * t.moe.experts;
  const int64_t shared = t.moe.shared_experts > 0 ? MlpParameters(t, t.SharedFfnHidden()) : 0;
  return AttentionParameters(t) + t.moe.experts * MlpParameters(t, t.MoeFfnHidden()) + shared +
         router + LayerNormParameters(t);
}

int64_t MtpModuleParameters(const TransformerSpec& t) {
  const int64_t layer = t.IsMoeLayer(t.layers) ? MoeLayerParameters(t) : DenseLayerParameters(t);
  return layer + 2 * t.hidden * t.hidden + 3 * NormParameters(t);
}

namespace {

ParameterCount CountTransformer(const TransformerSpec& t) {
  ParameterCount count;
  count.embedding = t.vocab * t.hidden;
  if (t.position == PositionEmbedding::kLearned) count.embedding += t.max_seq * t.hidden;
  count.embedding += t.token_types * t.hidden;
  if (t.embedding_norm) count.embedding += NormParameters(t);

  const int64_t moe_layers = t.MoeLayerCount();
  const int64_t dense_layers = t.layers - moe_layers;
  count.layers = dense_layers * DenseLayerParameters(t) + moe_layers * MoeLayerParameters(t);
  count.expert = moe_layers * t.moe.experts * MlpParameters(t, t.MoeFfnHidden());

  if (t.final_norm) count.output += NormParameters(t);
  if (!t.tied_embeddings) count.output += t.vocab * t.hidden;
  if (t.pooler) count.output += t.hidden * t.hidden + t.hidden;
  if (t.lm_head_transform)
    count.output += t.hidden * t.hidden + t.hidden + NormParameters(t) + t.vocab;

  count.total = count.embedding + count.layers + count.output;
  const int64_t idle_experts =
      moe_layers * (t.moe.experts - t.moe.top_k) * MlpParameters(t, t.MoeFfnHidden());
  count.active = count.total - idle_experts;
  count.mtp = t.mtp_layers * MtpModuleParameters(t);
  return count;
}

int64_t MlpChain(int64_t input, const std::vector<int64_t>& widths) {
  int64_t params = 0;
  for (int64_t width : widths) {
    params += input * width + width;  // weights and biases
    input = width;
  }
  return params;
}

ParameterCount CountDlrm(const DlrmSpec& d) {
  ParameterCount count;
  for (int64_t rows : d.table_rows) count.embedding += rows * d.embedding_dim;
  count.layers =
      MlpChain(d.dense_features, d.bottom_mlp) + MlpChain(d.InteractionWidth(), d.top_mlp);
  count.total = count.active = count.embedding + count.layers;
  return count;
}

ParameterCount CountResNet(const ResNetSpec& r) {
  ParameterCount count;
  for (const ConvLayer& conv : ResNetConvs(r)) {
    // Convolutions have no bias; each is followed by a BatchNorm with scale and shift.
    count.layers +=
        conv.in_channels * conv.out_channels * conv.kernel * conv.kernel + 2 * conv.out_channels;
  }
  const int64_t features = ResNetFeatures(r);
  count.output = features * r.classes + r.classes;
  count.total = count.active = count.layers + count.output;
  return count;
}

}  // namespace

ParameterCount CountParameters(const ModelSpec& model) {
  switch (model.family) {
    case ModelFamily::kTransformer:
      return CountTransformer(model.transformer);
    case ModelFamily::kResNet:
      return CountResNet(model.resnet);
    case ModelFamily::kDlrm:
      return CountDlrm(model.dlrm);
  }
  return {};
}

}  // namespace dtsim::models
