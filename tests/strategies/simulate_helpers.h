// Helpers shared by the strategies tests: simulate a config given as JSON, or get its error.
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "strategies/config.h"
#include "strategies/simulate.h"

namespace dtsim::strategies {

inline SimulationConfig ConfigOf(const Json& json) {
  Expected<SimulationConfig> config = ConfigFromJson(json, "");
  EXPECT_TRUE(config.ok()) << config.error().ToString();
  return *config;
}

inline SimulationResult SimulateJson(const Json& json) {
  Expected<SimulationResult> result = Simulate(ConfigOf(json));
  EXPECT_TRUE(result.ok()) << result.error().ToString();
  return std::move(*result);
}

// The error reading the config, or (a config that reads) simulating it; empty when both work.
inline std::string ConfigError(const Json& json) {
  Expected<SimulationConfig> config = ConfigFromJson(json, "");
  if (!config.ok()) return config.error().ToString();
  Expected<SimulationResult> result = Simulate(*config);
  return result.ok() ? "" : result.error().ToString();
}

}  // namespace dtsim::strategies
