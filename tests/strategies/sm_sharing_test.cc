// Compute shares its GPU's SMs with NCCL's kernels where its durations were priced alone, and
// not where they were timed inside a training run (an `in_run` op-cost table), whose times
// already hold it (docs/models.md, "SMs shared with communication").
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "sim/base/json_reader.h"
#include "strategies/pass_times.h"
#include "tests/strategies/simulate_helpers.h"

namespace dtsim::strategies {
namespace {

// GPT-3 1.3B on 16 H100s (TP 4 with SP, PP 2, DP 2), its ops priced from the H100's op-cost
// table at `profile`.
Json Gpt13bOnH100s(const std::string& profile) {
  Json json = Json::parse(R"({
    "model": "gpt3-1.3b",
    "training": {"global_batch": 64, "micro_batch": 4, "seq_len": 2048, "precision": "bf16",
                 "recompute": "selective"},
    "cluster": {"preset": "dgx-h100", "gpu": "h100-sxm5-80gb"},
    "parallelism": {"data": 2, "tensor": {"size": 4, "sequence_parallel": true},
                    "pipeline": {"size": 2, "schedule": "1f1b"}, "zero_stage": 1},
    "simulation": {"network_model": "analytical", "cost_model": "chain"}
  })");
  json["profile"] = profile;
  return json;
}

constexpr const char* kIsolated = DTSIM_EXAMPLES_DIR "/profiles/h100-sxm5-80gb.json";

// The shipped H100 table, marked as timed inside a run, written to `name` in the test's
// scratch directory.
std::string InRunCopy(const std::string& name) {
  Expected<Json> table = ReadJsonFile(kIsolated);
  EXPECT_TRUE(table.ok()) << table.error().ToString();
  if (!table.ok()) return "";
  (*table)["timing"] = "in_run";
  const std::string path = testing::TempDir() + "/" + name;
  std::ofstream(path) << table->dump();
  return path;
}

TEST(SmSharingTest, OnlyDurationsPricedAloneAreSlowedBesideCollectives) {
  const std::string isolated = kIsolated;
  const SimulationResult alone = SimulateJson(Gpt13bOnH100s(isolated));
  for (const TimeBreakdown& stage : alone.stages) EXPECT_GT(stage.sm_shared, DurationNs::Zero());
  const std::string in_run = InRunCopy("h100_in_run.json");
  ASSERT_FALSE(in_run.empty());
  const SimulationResult timed = SimulateJson(Gpt13bOnH100s(in_run));
  for (const TimeBreakdown& stage : timed.stages) EXPECT_EQ(stage.sm_shared, DurationNs::Zero());
}

// The search's bound shares SMs exactly when the simulation does, so it stays below it: with
// the table timed inside a run, its layers cost what they cost with no SMs counted.
TEST(SmSharingTest, TheBoundSharesWhenTheSimulationDoes) {
  const std::string isolated = kIsolated;
  const std::string in_run = InRunCopy("h100_in_run_bound.json");
  ASSERT_FALSE(in_run.empty());
  const auto backward = [](const Json& json) {
    const ResolvedConfig config = ConfigOf(json);
    const Expected<ConfigCostModel> cost = LoadCostModel(config);
    EXPECT_TRUE(cost.ok()) << cost.error().ToString();
    const Expected<PassTimes> times = PricePassTimes(config, *cost->model);
    EXPECT_TRUE(times.ok()) << times.error().ToString();
    return times.ok() ? times->layers[0].backward : DurationNs::Zero();
  };
  const auto without_sms = [](Json json) {
    json["cluster"]["gpu"] = {{"preset", "h100-sxm5-80gb"}, {"sms", 0}};
    return json;
  };
  // Priced alone: the wgrad beside the input-gradient reduce-scatter is slowed.
  EXPECT_GT(backward(Gpt13bOnH100s(isolated)), backward(without_sms(Gpt13bOnH100s(isolated))));
  EXPECT_EQ(backward(Gpt13bOnH100s(in_run)), backward(without_sms(Gpt13bOnH100s(in_run))));
}

}  // namespace
}  // namespace dtsim::strategies
