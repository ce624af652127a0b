// Parameter counts of a model, split by where the parameters live.
#pragma once

#include <cstdint>

#include "models/model_spec.h"

namespace dtsim::models {

struct ParameterCount {
  int64_t embedding = 0;  // token/position/segment embeddings and their norm; DLRM tables
  int64_t layers = 0;     // transformer layers (all experts); ResNet convs; DLRM MLPs
  int64_t output = 0;     // final norm, untied output layer, pooler/MLM head; ResNet's fc
  int64_t total = 0;
  int64_t active = 0;  // parameters one token uses: a MoE layer counts top_k experts

  int64_t expert = 0;  // of `layers`: the experts' MLP parameters (MoE only)
};

// Per-layer counts of a transformer (one layer of each kind).
int64_t AttentionParameters(const TransformerSpec& t);
int64_t MlpParameters(const TransformerSpec& t, int64_t ffn_hidden);
int64_t NormParameters(const TransformerSpec& t);  // one norm over `hidden`
int64_t DenseLayerParameters(const TransformerSpec& t);
int64_t MoeLayerParameters(const TransformerSpec& t);  // all experts and the router

ParameterCount CountParameters(const ModelSpec& model);

}  // namespace dtsim::models
