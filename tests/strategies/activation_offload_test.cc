// Activation offloading's copies in the simulated iteration (strategies/activation_offload.h)
// and the configs Megatron-Core refuses — each expectation derived in its comment.
#include "strategies/activation_offload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "models/memory.h"
#include "strategies/stage_memory.h"
#include "tests/strategies/simulate_helpers.h"

namespace dtsim::strategies {
namespace {

// A Megatron plan on one H100 (host link as given), one micro-batch of 4,096 tokens.
Json OneGpu(int layers, int offloaded, const std::string& host = "") {
  Json gpu = "h100-sxm5-80gb";
  if (!host.empty()) gpu = {{"preset", "h100-sxm5-80gb"}, {"host_bandwidth", host}};
  return {{"model",
           {{"family", "transformer"},
            {"layers", layers},
            {"hidden", 2048},
            {"heads", 16},
            {"vocab", 1024},
            {"max_seq", 4096}}},
          {"training",
           {{"global_batch", 1},
            {"micro_batch", 1},
            {"precision", "bf16"},
            {"flash_attention", true},
            {"dropout", false},
            {"activation_offload_layers", offloaded}}},
          {"cluster", {{"preset", "dgx-h100"}, {"gpu", gpu}, {"nodes", 1}, {"gpus_per_node", 1}}},
          {"parallelism", {{"data", 1}}}};
}

TEST(ActivationOffloadTest, CopiesHiddenBehindTheirWindowsCostNothing) {
  // At 10 TB/s a layer's copy (a few hundred MB) takes tens of µs, less than any window's
  // compute: the compute stream never waits, and the iteration is the plan's without offloading.
  const SimulationResult plain = SimulateJson(OneGpu(8, 0));
  const SimulationResult offloaded = SimulateJson(OneGpu(8, 4, "10 TB/s"));
  EXPECT_EQ(offloaded.iteration_time, plain.iteration_time);
}

TEST(ActivationOffloadTest, ASlowHostLinkStallsTheComputeOnBothPasses) {
  // Two layers, the first offloaded (N = 1), its copy C far above both layers' times f, b.
  // TE 2.10 (anchor a_0 = L − N − 1 = 0): the copy starts with layer 0 and the compute waits
  // for it after layer 0 (C − f_0); the copy back starts before layer 0's backward, which
  // waits for it (C). v1 (window w_0 = 1): the copy starts after layer 0 and the compute waits
  // after layer 1 (C − f_1); the copy back starts before layer 1's backward and layer 0's
  // waits for it (C − b_1). Either way two link rates differ by 2 (C_a − C_b): at 1 GB/s C is
  // K ns for K kept bytes, at 2 GB/s K/2 ns.
  for (const bool v1 : {false, true}) {
    Json slow_json = OneGpu(2, 1, "1 GB/s");
    slow_json["training"]["activation_offload_v1"] = v1;
    Json faster_json = OneGpu(2, 1, "2 GB/s");
    faster_json["training"]["activation_offload_v1"] = v1;
    const ResolvedConfig config = ConfigOf(slow_json);
    const int64_t kept =
        models::LayerKeptBytes(config.model.transformer, MemoryPlanOf(config, 0), 0);
    ASSERT_GT(kept, 100'000'000);  // C ≥ 100 ms at 1 GB/s, far above a layer's milliseconds
    const SimulationResult slow = SimulateJson(slow_json);
    const SimulationResult faster = SimulateJson(faster_json);
    const int64_t half = std::llround(static_cast<double>(kept) / 2);
    EXPECT_EQ((slow.iteration_time - faster.iteration_time).ns(), 2 * (kept - half)) << v1;
    // The stalls are the compute stream's idle time; the copies run on their own streams.
    EXPECT_GT(slow.stages[0].idle.ns(), kept) << v1;
  }
}

TEST(ActivationOffloadTest, TheMemoryTrackDropsWhileLayersAreAway) {
  // Eight layers, four offloaded (anchors 3 … 6 under TE 2.10, windows 1, 3, 5, 7 under v1):
  // each offloaded layer's kept bytes leave the track when its copy ends and come back as its
  // copy back starts, so the track's top is lower than without offloading and it ends at its
  // base.
  const auto top = [](const SimulationResult& result) {
    const graph::TaskGraph& graph = result.iteration->graph;
    int64_t held = graph.memory_base(0);
    std::vector<std::pair<TimeNs, int64_t>> changes;
    for (const graph::MemoryChange& change : graph.memory_changes()) {
      changes.emplace_back(result.times.task_end[change.task.value()], change.bytes);
    }
    std::stable_sort(changes.begin(), changes.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    int64_t most = held;
    for (const auto& [at, bytes] : changes) most = std::max(most, held += bytes);
    return std::pair{most, held - graph.memory_base(0)};
  };
  const auto [plain_top, plain_end] = top(SimulateJson(OneGpu(8, 0)));
  EXPECT_EQ(plain_end, 0);
  for (const bool v1 : {false, true}) {
    Json json = OneGpu(8, 4);
    json["training"]["activation_offload_v1"] = v1;
    const auto [offloaded_top, offloaded_end] = top(SimulateJson(json));
    EXPECT_LT(offloaded_top, plain_top) << v1;
    EXPECT_EQ(offloaded_end, 0) << v1;
  }
}

TEST(ActivationOffloadTest, ConfigsMegatronCoreRefusesAreErrors) {
  Json json = OneGpu(8, 8);
  EXPECT_NE(ConfigError(json).find("fewer layers than the model's 8"), std::string::npos)
      << ConfigError(json);
  json = OneGpu(8, 2);
  json["training"]["recompute"] = "full";
  EXPECT_NE(ConfigError(json).find("with activation recompute"), std::string::npos);
  json = OneGpu(8, 2);
  json["training"]["framework"] = "pytorch";
  EXPECT_NE(ConfigError(json).find("as Megatron-Core runs it"), std::string::npos);
  json = OneGpu(8, 2);
  json["cluster"]["gpus_per_node"] = 2;
  json["parallelism"] = {{"data", 1}, {"pipeline", 2}};
  EXPECT_NE(ConfigError(json).find("under pipeline parallelism"), std::string::npos)
      << ConfigError(json);
  json = OneGpu(8, 2);
  json["parallelism"] = {{"data", 1}, {"pipeline", {{"size", 1}, {"schedule", "gpipe"}}}};
  EXPECT_NE(ConfigError(json).find("forward_backward_no_pipelining"), std::string::npos)
      << ConfigError(json);
  json = OneGpu(8, 0);
  json["training"]["activation_offload_v1"] = true;
  EXPECT_NE(ConfigError(json).find("which is 0"), std::string::npos) << ConfigError(json);
  json = OneGpu(8, 2);
  json["cluster"]["gpu"] = {{"preset", "h100-sxm5-80gb"}, {"host_bandwidth", "0 GB/s"}};
  EXPECT_NE(ConfigError(json).find("host_bandwidth"), std::string::npos) << ConfigError(json);
}

}  // namespace
}  // namespace dtsim::strategies
