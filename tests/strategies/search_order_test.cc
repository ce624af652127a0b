// The rank order as a search dimension (search.orders; docs/search.md): each order that numbers a
// plan's ranks differently is one more plan, priced where the order puts its groups — on a
// cluster of pods (docs/network.md, "Switch tiers") the order decides which groups cross the
// oversubscribed core.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "strategies/pass_times.h"
#include "strategies/search.h"
#include "tests/testing/search_setup.h"

namespace dtsim::strategies {
namespace {

Json PodsSearch(const Json& orders) { return testing_support::PodsSearchConfig(orders); }

TEST(SearchOrderTest, EachOrderThatNumbersAPlanDifferentlyIsAPlan) {
  // tp-dp-pp and tp-pp-dp number a plan's ranks alike unless both its data and pipeline sizes
  // exceed 1: those plans are enumerated twice, the rest once.
  const testing_support::SearchSetup one =
      testing_support::ReadSearchSetup(PodsSearch(Json::array({"tp-dp-pp"})));
  const testing_support::SearchSetup two =
      testing_support::ReadSearchSetup(PodsSearch(Json::array({"tp-dp-pp", "tp-pp-dp"})));
  const std::vector<PlanChoice> single = EnumeratePlans(one.base, one.space);
  size_t both = 0;
  for (const PlanChoice& plan : single) {
    if (plan.plan.pipeline > 1 && plan.plan.DataIndices() > 1) ++both;
  }
  ASSERT_GT(both, 0U);
  const std::vector<PlanChoice> plans = EnumeratePlans(two.base, two.space);
  EXPECT_EQ(plans.size(), single.size() + both);
  size_t labelled = 0;
  for (const PlanChoice& plan : plans) {
    const bool pipeline_inside = PlanOrderName(plan.plan) == "tp-pp-dp";
    EXPECT_EQ(PlanLabel(plan, two.space).ends_with(" · order tp-pp-dp"), pipeline_inside);
    if (pipeline_inside) {
      ++labelled;
      EXPECT_TRUE(plan.plan.pipeline > 1 && plan.plan.DataIndices() > 1);
      // The config the search simulates carries the order.
      EXPECT_EQ(PlanOrderName(ConfigFor(two.base, two.space, plan).plan), "tp-pp-dp");
    }
  }
  EXPECT_EQ(labelled, both);
  // A bad order names its place in the section.
  Json bad = PodsSearch(Json::array({"tp-dp-pp", "tp-xp-dp"}));
  const Expected<SimulationConfig> base =
      ReadConfigSections(bad, "", std::array<std::string_view, 1>{"search"});
  ASSERT_TRUE(base.ok());
  const Expected<SearchSpace> space = SearchSpaceFromJson(&bad["search"], *base);
  ASSERT_FALSE(space.ok());
  EXPECT_THAT(space.error().ToString(),
              testing::StartsWith("search.orders[1]: unknown dimension \"xp\""));
}

TEST(SearchOrderTest, PlansArePricedWhereTheirOrderPutsTheirGroups) {
  // The search prices pass times once per kind of shard; the tensor- and context-parallel
  // groups sit where the order puts them (dp-tp-pp strides a tensor group by the data size),
  // so every plan's bound is its own and its time is what simulating it gives.
  const testing_support::SearchSetup setup = testing_support::ReadSearchSetup(
      PodsSearch(Json::array({"tp-dp-pp", "tp-pp-dp", "dp-tp-pp"})));
  const Expected<SearchResult> result =
      Search(setup.base, setup.space, {.top = 5, .rerank = 0, .threads = 2});
  ASSERT_TRUE(result.ok()) << result.error().ToString();
  Expected<ConfigCostModel> cost = LoadCostModel(setup.base);
  ASSERT_TRUE(cost.ok());
  // (data, tensor, pipeline) → iteration per order, for plans simulated in several orders.
  std::map<std::tuple<int, int, int>, std::map<std::string, int64_t>> by_layout;
  size_t checked = 0;
  for (const EvaluatedPlan& plan : result->plans) {
    if (plan.status != PlanStatus::kSimulated && plan.status != PlanStatus::kBounded) continue;
    Expected<ResolvedConfig> config = Resolve(ConfigFor(setup.base, setup.space, plan.choice));
    ASSERT_TRUE(config.ok());
    const Expected<PassTimes> passes = PricePassTimes(*config, *cost->model);
    ASSERT_TRUE(passes.ok());
    EXPECT_EQ(plan.lower_bound, IterationLowerBound(*config, *passes))
        << PlanLabel(plan.choice, setup.space);
    if (plan.status != PlanStatus::kSimulated) continue;
    config->ranks = RanksMode::kSymmetric;
    const Expected<SimulationResult> simulated = Simulate(*config, *cost->model);
    ASSERT_TRUE(simulated.ok());
    EXPECT_EQ(plan.figures->iteration_time, simulated->iteration_time)
        << PlanLabel(plan.choice, setup.space);
    const ParallelPlan& p = plan.choice.plan;
    by_layout[{p.data, p.tensor, p.pipeline}][PlanOrderName(p)] = simulated->iteration_time.ns();
    ++checked;
  }
  EXPECT_GT(checked, 10U);
  // Across the 1:8 core the order moves some layout's iteration.
  bool moved = false;
  for (const auto& [layout, times] : by_layout) {
    for (const auto& [order, ns] : times) moved |= ns != times.begin()->second;
  }
  EXPECT_TRUE(moved);
}

}  // namespace
}  // namespace dtsim::strategies
