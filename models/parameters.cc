#include "models/parameters.h"

#include "models/resnet.h"

namespace dtsim::models {

int64_t AttentionParameters(const TransformerSpec& t) {
  // Q is h × q_dim and the output projection q_dim × h; K and V are h × kv_dim (grouped-query
  // attention). q_dim == h unless the head size is given separately.
  const int64_t weights = 2 * t.hidden * t.q_dim() + 2 * t.hidden * t.kv_dim();
  const int64_t biases = t.linear_bias ? t.q_dim() + t.hidden + 2 * t.kv_dim() : 0;
  return weights + biases;
}

int64_t MlpParameters(const TransformerSpec& t, int64_t ffn_hidden) {
  if (t.activation == Activation::kSwiGlu) {
    // gate and up h → f, down f → h.
    return 3 * t.hidden * ffn_hidden + (t.linear_bias ? 2 * ffn_hidden + t.hidden : 0);
  }
  return 2 * t.hidden * ffn_hidden + (t.linear_bias ? ffn_hidden + t.hidden : 0);
}

int64_t NormParameters(const TransformerSpec& t) {
  return t.norm == Norm::kLayerNorm ? 2 * t.hidden : t.hidden;
}

int64_t DenseLayerParameters(const TransformerSpec& t) {
  return AttentionParameters(t) + MlpParameters(t, t.ffn_hidden) + 2 * NormParameters(t);
}

int64_t MoeLayerParameters(const TransformerSpec& t) {
  const int64_t router = t.hidden * t.moe.experts;
  return AttentionParameters(t) + t.moe.experts * MlpParameters(t, t.MoeFfnHidden()) + router +
         2 * NormParameters(t);
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
