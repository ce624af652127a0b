// `dtsim search` over global batches (search.global_batches): plans of different batches are
// ranked by the run's wall clock to train (docs/time_to_train.md), and the branch and bound on
// that figure must keep the top plans brute force finds.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "strategies/pass_times.h"
#include "strategies/plan_config.h"
#include "strategies/search.h"
#include "strategies/stage_memory.h"
#include "tests/testing/search_setup.h"

namespace dtsim::strategies {
namespace {

using testing::HasSubstr;

// A small transformer on 16 GPUs (nodes of 4), narrowed to 1D layouts and two micro-batch sizes,
// at three global batches, with a time_to_train section of 2^30 tokens (no critical batch: the
// budget holds at any batch).
Json BatchSearch() {
  return Json::parse(R"json({
    "model": {"family": "transformer", "layers": 8, "hidden": 1024, "heads": 16,
              "vocab": 8192, "max_seq": 512},
    "training": {"global_batch": 32, "seq_len": 512, "precision": "bf16"},
    "cluster": {"preset": "dgx-a100", "nodes": 4, "gpus_per_node": 4,
                "gpu": {"preset": "a100-sxm4-80gb", "memory": "4 GiB"}},
    "time_to_train": {"tokens": 1073741824},
    "search": {"micro_batches": [1, 2], "zero_stages": [0, 1], "tensor_modes": ["1d"],
               "recompute": ["none"], "max_virtual_stages": 2,
               "global_batches": [16, 32, 64]}
  })json");
}

using testing_support::SearchSetup;

SearchSetup Read(const Json& json) { return testing_support::ReadSearchSetup(json); }

// (wall clock to train in ns, average iteration in ns, enumeration index) of every plan that
// passes the checks and fits, simulated, best run first; checks on each that its iteration
// bound times its run's iterations stays under its run (the search's bound on RankingNs).
std::vector<std::tuple<int64_t, int64_t, size_t>> BruteForce(const SearchSetup& setup) {
  const std::vector<PlanChoice> plans = EnumeratePlans(setup.base, setup.space);
  Expected<ConfigCostModel> cost = LoadCostModel(setup.base);
  EXPECT_TRUE(cost.ok());
  std::vector<std::tuple<int64_t, int64_t, size_t>> runs;
  for (size_t i = 0; i < plans.size(); ++i) {
    Expected<ResolvedConfig> resolved = Resolve(ConfigFor(setup.base, setup.space, plans[i]));
    if (!resolved.ok() || !StageMemory(*resolved).ok()) continue;
    ResolvedConfig config = *resolved;
    config.ranks = RanksMode::kSymmetric;
    Expected<SimulationResult> result = Simulate(config, *cost->model);
    EXPECT_TRUE(result.ok()) << PlanLabel(plans[i], setup.space);
    if (!result.ok()) continue;
    EXPECT_TRUE(result->time_to_train);
    const PlanFigures figures = FiguresOf(*result);
    EXPECT_EQ(*figures.train_iterations, result->time_to_train->budget.iterations);
    Expected<PassTimes> passes = PricePassTimes(config, *cost->model);
    EXPECT_TRUE(passes.ok());
    const double bound = static_cast<double>(IterationLowerBound(config, *passes).ns()) *
                         static_cast<double>(*figures.train_iterations);
    EXPECT_LE(bound, static_cast<double>(RankingNs(figures, false)))
        << PlanLabel(plans[i], setup.space);
    runs.emplace_back(RankingNs(figures, false), figures.average_iteration_time.ns(), i);
  }
  std::sort(runs.begin(), runs.end());
  return runs;
}

TEST(SearchBatchTest, GlobalBatchesAreADimensionRankedByTimeToTrain) {
  const SearchSetup setup = Read(BatchSearch());
  EXPECT_THAT(setup.space.global_batches, testing::ElementsAre(16, 32, 64));
  const std::vector<PlanChoice> plans = EnumeratePlans(setup.base, setup.space);
  std::set<int64_t> batches;
  for (const PlanChoice& plan : plans) batches.insert(plan.global_batch);
  EXPECT_THAT(batches, testing::ElementsAre(16, 32, 64));
  // Each layout's training choices once per batch, in the plan label and the config.
  const PlanChoice& first = plans.front();
  EXPECT_THAT(PlanLabel(first, setup.space), HasSubstr(" · batch 16 · mb 1 · ZeRO 0"));
  EXPECT_EQ(ConfigFor(setup.base, setup.space, first).training.global_batch, 16);

  // 2^30 tokens at 16 × 512 tokens an iteration: 131,072 iterations; at 64: 32,768.
  const std::vector<std::tuple<int64_t, int64_t, size_t>> brute = BruteForce(setup);
  ASSERT_GE(brute.size(), 20u);
  Expected<SearchResult> result =
      Search(setup.base, setup.space, {.top = 3, .rerank = 0, .threads = 2});
  ASSERT_TRUE(result.ok()) << result.error().ToString();
  ASSERT_GE(result->ranking.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    const EvaluatedPlan& plan = result->plans[result->ranking[k]];
    EXPECT_EQ(plan.index, std::get<2>(brute[k])) << "rank " << k + 1;
    EXPECT_EQ(RankingNs(*plan.figures, false), std::get<0>(brute[k]));
    const int64_t iterations = 1073741824 / (plan.choice.global_batch * 512);
    EXPECT_EQ(plan.figures->train_iterations, iterations);
  }
  // The bound spared simulations here too.
  EXPECT_GT(result->Count(PlanStatus::kBounded), 0u);
  // Ranking one iteration would pick another plan: the smallest batch has the shortest
  // iterations, but with the tokens fixed the largest batch, its gradient reduction amortized
  // over more samples, trains soonest.
  const auto fastest_iteration = std::min_element(
      brute.begin(), brute.end(),
      [](const auto& a, const auto& b) { return std::get<1>(a) < std::get<1>(b); });
  EXPECT_EQ(plans[std::get<2>(*fastest_iteration)].global_batch, 16);
  EXPECT_EQ(plans[std::get<2>(brute.front())].global_batch, 64);
}

// McCandlish et al.'s critical batch makes a large batch pay in tokens: with B_crit 8,192 tokens
// at a reference batch of 16 × 512 = 8,192, a batch of 32 sequences (16,384 tokens) needs
// (1 + 2) / (1 + 1) = 1.5× the budget and one of 64 (32,768) (1 + 4) / 2 = 2.5×. The 64 that
// trained soonest with the budget fixed now trains later than 32, whose 1.5 × 2^30 / 16,384 =
// 98,304 iterations beat both the 16-sequence batch's 131,072 slower-per-token ones and the
// 64's 81,920 of 2.5× the tokens.
TEST(SearchBatchTest, PastTheCriticalBatchASmallerBatchTrainsSooner) {
  Json json = BatchSearch();
  json["time_to_train"]["critical_batch_tokens"] = 8192;
  json["time_to_train"]["reference_batch_tokens"] = 8192;
  const SearchSetup setup = Read(json);
  Expected<SearchResult> result =
      Search(setup.base, setup.space, {.top = 3, .rerank = 0, .threads = 2});
  ASSERT_TRUE(result.ok()) << result.error().ToString();
  ASSERT_GE(result->ranking.size(), 1u);
  const EvaluatedPlan& best = result->plans[result->ranking[0]];
  EXPECT_EQ(best.choice.global_batch, 32);
  EXPECT_EQ(best.figures->train_iterations, 98304);
  const std::vector<std::tuple<int64_t, int64_t, size_t>> brute = BruteForce(setup);
  ASSERT_FALSE(brute.empty());
  EXPECT_EQ(best.index, std::get<2>(brute.front()));
  for (const size_t index : result->ranking) {
    const EvaluatedPlan& plan = result->plans[index];
    const std::map<int64_t, int64_t> iterations = {{16, 131072}, {32, 98304}, {64, 81920}};
    EXPECT_EQ(plan.figures->train_iterations, iterations.at(plan.choice.global_batch));
  }
}

TEST(SearchBatchTest, RankingReadsTheRunWhereThereIsOne) {
  PlanFigures figures{.average_iteration_time = DurationNs(2'000'000'000)};
  EXPECT_EQ(RankingNs(figures, false), 2'000'000'000);
  figures.flow_average_iteration_time = DurationNs(2'500'000'000);
  EXPECT_EQ(RankingNs(figures, true), 2'500'000'000);
  figures.time_to_train_s = 86400.0;
  EXPECT_EQ(RankingNs(figures, false), 86'400'000'000'000);
  EXPECT_EQ(RankingNs(figures, true), 86'400'000'000'000);  // no flow run: the analytical one
  figures.flow_time_to_train_s = 90000.0;
  EXPECT_EQ(RankingNs(figures, true), 90'000'000'000'000);
  figures.time_to_train_s = 1e12;  // 31,700 years: held at 10^18 ns
  EXPECT_EQ(RankingNs(figures, false), 1'000'000'000'000'000'000);
}

TEST(SearchBatchTest, OneBatchNeedsNoTimeToTrainAndSeveralDo) {
  Json json = BatchSearch();
  json.erase("time_to_train");
  json["search"]["global_batches"] = {64};
  const SearchSetup one = Read(json);
  const std::vector<PlanChoice> plans = EnumeratePlans(one.base, one.space);
  ASSERT_FALSE(plans.empty());
  EXPECT_EQ(ConfigFor(one.base, one.space, plans.front()).training.global_batch, 64);
  EXPECT_THAT(PlanLabel(plans.front(), one.space), testing::Not(HasSubstr("batch")));

  const auto error = [](const Json& config) {
    constexpr std::array<std::string_view, 1> kSearch = {"search"};
    Expected<SimulationConfig> base = ReadConfigSections(config, "", kSearch);
    EXPECT_TRUE(base.ok());
    Expected<SearchSpace> space = SearchSpaceFromJson(&config["search"], *base);
    return space.ok() ? std::string() : space.error().ToString();
  };
  json["search"]["global_batches"] = {16, 64};
  EXPECT_THAT(error(json), HasSubstr("search.global_batches: plans of different global batches "
                                     "are ranked by time to train: give a \"time_to_train\" "
                                     "section"));
  json = BatchSearch();
  json["search"]["global_batches"] = {16, 64, 16};
  EXPECT_EQ(error(json), "search.global_batches[2]: listed twice, got 16");
  json["search"]["global_batches"] = {0};
  EXPECT_THAT(error(json), HasSubstr("search.global_batches[0]"));
}

// A ranked plan written out as a config (`dtsim search --emit`) carries its batch.
TEST(SearchBatchTest, AnEmittedPlanKeepsItsGlobalBatch) {
  const Json json = BatchSearch();
  const SearchSetup setup = Read(json);
  const PlanChoice choice = EnumeratePlans(setup.base, setup.space).back();
  ASSERT_EQ(choice.global_batch, 64);
  const Json config = PlanConfigJson(json, choice, nullptr, 4, RanksMode::kSymmetric);
  EXPECT_EQ(config["training"]["global_batch"], 64);
  EXPECT_FALSE(config.contains("search"));
}

}  // namespace
}  // namespace dtsim::strategies
