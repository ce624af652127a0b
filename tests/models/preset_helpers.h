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

}  // namespace dtsim::models
