// The memory check before a graph is built (strategies/footprint.h): its estimate is a lower
// bound on every shipped example, in both rank modes; a config past the limit fails before it
// is built; and a graph that outgrows the limit the estimate let through is stopped.
#include "strategies/footprint.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "strategies/simulate.h"
#include "tests/strategies/simulate_helpers.h"

namespace dtsim::strategies {
namespace {

using testing::HasSubstr;

ResolvedConfig Example(const std::string& name, const std::vector<std::string>& overrides) {
  Expected<ResolvedConfig> config =
      LoadConfig(std::string(DTSIM_EXAMPLES_DIR) + "/" + name, overrides);
  EXPECT_TRUE(config.ok()) << config.error().ToString();
  return *config;
}

TEST(FootprintTest, TheEstimateIsALowerBoundOnEveryExamplesTasks) {
  for (const char* name :
       {"gpt3_1.3b_16gpu.json", "llama2_70b_64h100.json", "bert_large_64gpu_ethernet.json",
        "bert_large_64gpu_ethernet_byteps.json", "mixtral_8x7b_ep8_64h100.json",
        "gpt3_6.7b_tesseract_64gpu.json", "resnet50_256gpu.json", "gpt3_175b_1024gpu.json",
        "deepseek_v3_1024h100.json", "dlrm_mlperf_8h100.json"}) {
    for (const char* ranks : {"full", "symmetric"}) {
      // Every rank of the three largest (21 M, 5.3 M and ≈ 43 M tasks: 128 × the symmetric
      // graph's 333 k) takes too long for a unit test.
      const bool large = std::string(name) == "gpt3_175b_1024gpu.json" ||
                         std::string(name) == "llama2_70b_64h100.json" ||
                         std::string(name) == "deepseek_v3_1024h100.json";
      if (large && std::string(ranks) == "full") continue;
      const ResolvedConfig config = Example(name, {fmt::format("simulation.ranks=\"{}\"", ranks)});
      const Footprint footprint = EstimateFootprint(config);
      const Expected<SimulationResult> result = Simulate(config);
      ASSERT_TRUE(result.ok()) << result.error().ToString();
      const double tasks = static_cast<double>(result->iteration->graph.task_count());
      EXPECT_LE(footprint.tasks, tasks) << name << " " << ranks;
      std::printf("  %-40s %-9s estimate %10.0f tasks, built %10.0f (%.2f)\n", name, ranks,
                  footprint.tasks, tasks, footprint.tasks / tasks);
    }
  }
}

std::string ResolveError(const std::vector<std::string>& overrides) {
  const Expected<ResolvedConfig> config =
      LoadConfig(std::string(DTSIM_EXAMPLES_DIR) + "/gpt3_1.3b_16gpu.json", overrides);
  EXPECT_FALSE(config.ok());
  return config.ok() ? "" : config.error().ToString();
}

// Sizes each within its field's bound that multiply past int64 are refused while resolving,
// before a model multiplies them (the simulate fuzzer's findings: a max_seq of 10^13 taken as
// the sequence length, whose attention scores overflowed in the op builder).
TEST(FootprintTest, SizesThatMultiplyPastInt64AreRefused) {
  // Without training.seq_len the model's max_seq is the sequence: bounded like seq_len.
  EXPECT_THAT(ResolveError({"training.seq_len=null",
                            R"(model={"preset": "gpt3-1.3b", "max_seq": 10221474836484})"}),
              HasSubstr("model.max_seq: without training.seq_len the sequence is the model's "
                        "max_seq, past the longest dtsim simulates (16777216 tokens)"));
  // GPT-3 1.3B has 16 heads: 16 sequences of 2^24 tokens make 2^4 · 2^4 · 2^48 = 2^56 scores,
  // which is allowed; 32 sequences make 2^57.
  EXPECT_THAT(
      ResolveError({"training.seq_len=16777216",
                    R"(model={"preset": "gpt3-1.3b", "max_seq": 16777216})",
                    "training.micro_batch=32", "training.global_batch=512", "parallelism.data=2",
                    "parallelism.pipeline=1", "parallelism.tensor.size=8"}),
      HasSubstr("a micro-batch's attention scores (micro_batch × heads × seq_len²) come "
                "to 1.44e+17 elements, past the 2^56 (7.21e+16)"));
  // A hidden width of 2^31: a layer's attention weight alone is 2^62 elements.
  EXPECT_THAT(ResolveError({R"(model={"preset": "gpt3-1.3b", "hidden": 2147483648})"}),
              HasSubstr("a layer's largest weight"));
}

// GPT-3's learned position table has max_seq (2,048) rows: 8,192 tokens were simulated
// without a word, with the 2,048-row table's parameters. Rotary models have no table.
TEST(FootprintTest, ASequencePastTheLearnedPositionTableIsRefused) {
  EXPECT_THAT(ResolveError({"training.seq_len=8192"}),
              HasSubstr("gpt3_1.3b_16gpu.json: training.seq_len: longer than the model's learned "
                        "position table (2048 positions, "
                        "model.max_seq): give the model a longer one (\"model\": {\"preset\": "
                        "\"gpt3-1.3b\", \"max_seq\": 8192}), got 8192"));
  const Expected<ResolvedConfig> longer =
      LoadConfig(std::string(DTSIM_EXAMPLES_DIR) + "/gpt3_1.3b_16gpu.json",
                 {"training.seq_len=8192", R"(model={"preset": "gpt3-1.3b", "max_seq": 8192})"});
  EXPECT_TRUE(longer.ok()) << longer.error().ToString();
  const Expected<ResolvedConfig> rotary = LoadConfig(
      std::string(DTSIM_EXAMPLES_DIR) + "/llama2_70b_64h100.json", {"training.seq_len=8192"});
  EXPECT_TRUE(rotary.ok()) << rotary.error().ToString();
}

TEST(FootprintTest, AConfigPastTheLimitFailsBeforeItsGraphIsBuilt) {
  // The small example: 16 ranks × 8 micro-batches × 2 passes × 24 layers / 2 stages × 8 ranks
  // per stage = 16 × 8 × 2 × 24 / 2 = 3,072 tasks at least, 245,760 bytes.
  ResolvedConfig config = Example("gpt3_1.3b_16gpu.json", {});
  EXPECT_EQ(EstimateFootprint(config).tasks, 3072);
  EXPECT_EQ(EstimateFootprint(config).bytes, 3072 * kBytesPerTask);
  config.max_memory = 200000;
  const Expected<SimulationResult> result = Simulate(config);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.error().ToString(),
              HasSubstr("simulation: the simulation would need at least 0.0002289 GiB, over the "
                        "0.000186 GiB allowed (--max-memory): 16 simulated ranks × 8 "
                        "micro-batches × forward and backward of their layers make at least "
                        "3.07e+03 tasks of ~80 bytes"));
}

TEST(FootprintTest, AGraphThatOutgrowsTheLimitIsStoppedWhileItIsBuilt) {
  // The estimate (3,072 tasks) is below the 36,352 tasks the example builds: a limit between
  // them passes the check and stops the builder after the first pipeline stage passes it.
  ResolvedConfig config = Example("gpt3_1.3b_16gpu.json", {});
  config.max_memory = 10000 * kBytesPerTask;
  const Expected<SimulationResult> result = Simulate(config);
  ASSERT_FALSE(result.ok());
  // 10,000 × 80 bytes = 0.000745 GiB; stage 0's two replicas build 18,048 tasks.
  EXPECT_EQ(result.error().ToString(),
            "simulation: the graph outgrew the 0.000745 GiB allowed (--max-memory) at 18048 "
            "tasks, while building pipeline stage 1 of 2");
}

TEST(FootprintTest, TheDefaultIsThreeQuartersOfTheMachine) {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  EXPECT_EQ(DefaultMaxMemory(), static_cast<int64_t>(pages) * page / 4 * 3);
}

}  // namespace
}  // namespace dtsim::strategies
