// A search test's base config and space, read from a config's JSON as `dtsim search` reads them
// (its "search" section apart); a failure to read fails the test.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <string_view>

#include "sim/base/json_reader.h"
#include "strategies/config.h"
#include "strategies/search.h"

namespace dtsim::testing_support {

struct SearchSetup {
  strategies::SimulationConfig base;
  strategies::SearchSpace space;
};

inline SearchSetup ReadSearchSetup(const Json& json) {
  SearchSetup setup;
  constexpr std::array<std::string_view, 1> kSearch = {"search"};
  Expected<strategies::SimulationConfig> base = strategies::ReadConfigSections(json, "", kSearch);
  EXPECT_TRUE(base.ok()) << base.error().ToString();
  if (!base.ok()) return setup;
  setup.base = *base;
  const Json* section = json.contains("search") ? &json["search"] : nullptr;
  Expected<strategies::SearchSpace> space = strategies::SearchSpaceFromJson(section, setup.base);
  EXPECT_TRUE(space.ok()) << space.error().ToString();
  if (space.ok()) setup.space = *space;
  return setup;
}

}  // namespace dtsim::testing_support
