// The search's branch-and-bound bookkeeping: the K best times, the forecast of the simulations
// still to come (the progress line's total), and the order the checks run in.
#include "strategies/search_bound.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <limits>
#include <vector>

namespace dtsim::strategies {
namespace {

TEST(SpreadOrderTest, IsAPermutationWhosePrefixesSampleTheWholeRange) {
  for (const size_t n : {0UL, 1UL, 2UL, 3UL, 10UL, 12UL, 22185UL, 47940UL}) {
    const SpreadOrder order(n);
    std::vector<int> seen(n, 0);
    for (size_t k = 0; k < n; ++k) {
      ASSERT_LT(order(k), n);
      ++seen[order(k)];
    }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; })) << n;
    if (n < 1000) continue;
    // The first quarter of the order puts at least a fifth of itself in each quarter of the
    // range (a stride near n/φ spreads any prefix almost evenly).
    std::array<size_t, 4> quarters{};
    for (size_t k = 0; k < n / 4; ++k) ++quarters[order(k) * 4 / n];
    for (const size_t q : quarters) EXPECT_GT(q, n / 4 / 5) << n;
  }
}

TEST(TopTimesTest, KeepsTheKBestDistinctTimes) {
  TopTimes best(3);
  EXPECT_EQ(best.Kth(), std::numeric_limits<int64_t>::max());  // fewer than K: no bound yet
  for (const int64_t t : {50, 20, 20, 40}) best.Add(t);
  EXPECT_EQ(best.Kth(), 50);  // 20, 40, 50: the second 20 is the same row
  best.Add(10);
  EXPECT_EQ(best.Times(), (std::vector<int64_t>{10, 20, 40}));
  EXPECT_EQ(best.Kth(), 40);
}

// Ten plans with bounds 10, 20, …, 100 ns reached in that order; K = 3.
TEST(SimulationForecastTest, PredictsTheKthBestFromTheBoundsAndTheRatiosSoFar) {
  std::vector<int64_t> bounds;
  for (int64_t b = 10; b <= 100; b += 10) bounds.push_back(b);
  SimulationForecast forecast(bounds);
  TopTimes best(3);
  // Nothing simulated: each plan predicted at its bound (ratio 1), the 3rd best 30 ns, so the
  // plans bounded by 10, 20, 30.
  EXPECT_EQ(forecast.StillToSimulate(0, best), 3u);
  // The first simulates to 15 ns (ratio 1.5): the next predicted at 30, 45, 60, …; with 15 the
  // 3rd best is 45, so of the nine left those bounded by 20, 30, 40.
  forecast.Simulated(10, 15);
  best.Add(15);
  EXPECT_EQ(forecast.StillToSimulate(1, best), 3u);
  // Two more at 22 and 24 ns (ratios 1.1 and 0.8, lower quartile 0.8; the 3rd best is 24 now):
  // predictions from 40·0.8 = 32 all exceed 24, so the 3rd best stays 24 and no plan left
  // (bounds from 40) is under it.
  forecast.Simulated(20, 22);
  best.Add(22);
  forecast.Simulated(30, 24);
  best.Add(24);
  EXPECT_EQ(forecast.StillToSimulate(3, best), 0u);
  // Past the end: nothing left.
  EXPECT_EQ(forecast.StillToSimulate(20, best), 0u);
}

TEST(SimulationForecastTest, NeverCountsMoreThanTheKthBestNowAllows) {
  // Ratios of 3 would predict every plan at 3× its bound; the 2nd best simulated (12 ns) still
  // caps the count at the plans bounded by 12 or less.
  SimulationForecast forecast({10, 11, 12, 13, 14});
  TopTimes best(2);
  forecast.Simulated(1, 3);
  best.Add(11);
  best.Add(12);
  EXPECT_EQ(forecast.StillToSimulate(0, best), 3u);
}

}  // namespace
}  // namespace dtsim::strategies
