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

// A small transformer on 8 nodes of 4 H100s, one node a leaf, two a pod, pods joined at 1:8
// (docs/network.md, "Switch tiers"), with a narrow search space: where the rank order matters.
inline Json PodsSearchConfig(const Json& orders) {
  Json json = Json::parse(R"json({
    "model": {"family": "transformer", "layers": 8, "hidden": 2048, "heads": 16,
              "vocab": 8192, "max_seq": 1024},
    "training": {"global_batch": 32, "seq_len": 1024, "precision": "bf16"},
    "cluster": {"preset": "dgx-h100", "nodes": 8, "gpus_per_node": 4, "gpu": "h100-sxm5-80gb",
                "inter_node": {"topology": "fat-tree", "nics_per_node": 4, "nodes_per_leaf": 1,
                               "nodes_per_pod": 2, "pod_oversubscription": 8}},
    "search": {"micro_batches": [1], "zero_stages": [1], "recompute": ["none"],
               "schedules": ["1f1b"], "tensor_modes": ["1d"], "sequence_parallel": [false]}
  })json");
  json["search"]["orders"] = orders;
  return json;
}

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
