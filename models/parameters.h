// Parameter counts of a model, split by where the parameters live.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "models/model_spec.h"

namespace dtsim::models {

struct ParameterCount {
  int64_t embedding = 0;  // token/position/segment embeddings and their norm; DLRM tables
  int64_t layers = 0;     // transformer layers (all experts); ResNet convs; DLRM MLPs
  int64_t output = 0;     // final norm, untied output layer, pooler/MLM head; ResNet's fc
  int64_t total = 0;
  int64_t active = 0;  // parameters one token uses: a MoE layer counts top_k experts

  int64_t expert = 0;  // of `layers`: the experts' MLP parameters (MoE only)
  // Multi-token-prediction modules, not in `total` (DeepSeek-V3's 671B leaves them out): each
  // a layer of the last layer's kind, eh_proj (2h × h) and three norms; they share the
  // embedding and output layer.
  int64_t mtp = 0;
};

// The weight matrices ({rows, columns}) of one layer's attention on one of `tensor_parallel`
// ranks, in the order it runs them: QKV and the output projection, heads split t ways (KV
// heads replicated when fewer than t); with MLA the query and KV down-projections (replicated:
// every rank runs them whole) and their up-projections (heads split).
std::vector<std::array<int64_t, 2>> AttentionMatrices(const TransformerSpec& t,
                                                      int tensor_parallel);
// The vectors of one layer's attention on such a rank: its biases (the output projection's
// replicated), and MLA's norms of its latents.
int64_t AttentionVectorElements(const TransformerSpec& t, int tensor_parallel);

// Per-layer counts of a transformer (one layer of each kind).
int64_t AttentionParameters(const TransformerSpec& t);
int64_t MlpParameters(const TransformerSpec& t, int64_t ffn_hidden);
int64_t NormParameters(const TransformerSpec& t);  // one norm over `hidden`
// A decoder layer's norms over `hidden`: before the attention and the MLP, and after each with
// post_norms.
int64_t LayerNormParameters(const TransformerSpec& t);
int64_t DenseLayerParameters(const TransformerSpec& t);
int64_t MoeLayerParameters(const TransformerSpec& t);   // all experts, shared ones, the router
int64_t MtpModuleParameters(const TransformerSpec& t);  // one multi-token-prediction module

ParameterCount CountParameters(const ModelSpec& model);

}  // namespace dtsim::models
