// Helpers shared by the models tests: a preset's transformer spec.
#pragma once

#include <gtest/gtest.h>

#include <string_view>

#include "models/model_spec.h"

namespace dtsim::models {

inline TransformerSpec PresetTransformer(std::string_view name) {
  Expected<ModelSpec> model = ModelPreset(name);
  EXPECT_TRUE(model.ok()) << name;
  return model.ok() ? model->transformer : TransformerSpec{};
}

// Llama 3's preset (RMSNorm, SwiGLU, rotary, grouped-query attention) at a toy size whose
// tensors are all multiples of the allocator's 512 B rounding: `layers` layers, hidden 512, 8
// heads of 64 over 4 key-value heads (so repeat_kv copies), MLP 1,536, vocabulary 1,024.
inline TransformerSpec ToyLlama(int layers, int max_seq) {
  TransformerSpec spec = PresetTransformer("llama3-8b");
  spec.layers = layers;
  spec.hidden = 512;
  spec.heads = 8;
  spec.kv_heads = 4;
  spec.ffn_hidden = 1536;
  spec.vocab = 1024;
  spec.max_seq = max_seq;
  return spec;
}

}  // namespace dtsim::models
