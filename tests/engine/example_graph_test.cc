// The shipped example (tools/examples/pipeline_2x2.json) simulated and checked against a
// derivation by hand. Model: `dtsim run` defaults, 5 us + size / 100 GB/s (8e11 bit/s):
//   8 MiB transfer:  8388608 * 8 / 8e11 s = 83886.08 ns -> 83887 ns (rounded up) + 5000 = 88887 ns
//   64 MiB all-reduce: 67108864 * 8 / 8e11 s = 671088.64 -> 671089 ns + 5000 = 676089 ns
// Stage 0 (ranks 0, 1; forward 300 us, backward 600 us), stage 1 (ranks 2, 3; 350 us, 700 us):
//   act0: stage 0 forward 0-300000, transfer 300000-388887
//   stage 1: fwd0 388887-738887, bwd0 738887-1438887, grad0 transfer 1438887-1527774
//   act1: stage 0 fwd1 300000-600000, transfer 600000-688887
//   stage 1: fwd1 waits for its compute stream: 1438887-1788887, bwd1 -2488887,
//            grad1 transfer 2488887-2577774, all-reduce 2488887-3164976, adam -3284976
//   stage 0: bwd0 1527774-2127774, bwd1 2577774-3177774, all-reduce -3853863, adam -3973863
// So the makespan is 3973863 ns. Rank 0 is busy for its compute (2 x 300 + 2 x 600 + 120 us =
// 1920000 ns) plus the communication that no compute overlaps: act1, grad0 and grad1 transfers
// (3 x 88887) and the all-reduce (676089): 2862750 ns. Rank 2: compute 2 x 350 + 2 x 700 + 120 us
// = 2220000 ns, plus act0 (88887) and [2488887, 3164976) (676089): 2984976 ns.
#include <gtest/gtest.h>

#include "sim/engine/fixed_cost_model.h"
#include "sim/engine/simulator.h"
#include "sim/graph/graph_json.h"

namespace dtsim::engine {
namespace {

TEST(ExampleGraphTest, MatchesTheHandDerivation) {
  const Expected<graph::TaskGraph> graph =
      graph::LoadTaskGraph(DTSIM_EXAMPLES_DIR "/pipeline_2x2.json");
  ASSERT_TRUE(graph.ok()) << graph.error().ToString();
  FixedCostModel model(Microseconds(5), Bandwidth::BytesPerSecond(100 * kGiga));
  Simulator sim(*graph, model);
  ASSERT_TRUE(sim.Run().ok());
  const RunSummary summary = sim.Summarize();
  EXPECT_EQ(summary.makespan, TimeNs(3'973'863));
  ASSERT_EQ(summary.ranks.size(), 4u);
  for (int r : {0, 1}) EXPECT_EQ(summary.ranks[r].busy, Nanoseconds(2'862'750));
  for (int r : {2, 3}) EXPECT_EQ(summary.ranks[r].busy, Nanoseconds(2'984'976));
  EXPECT_EQ(summary.ranks[0].idle, Nanoseconds(3'973'863 - 2'862'750));
  // 20 compute tasks end by event, 10 communications complete by event.
  EXPECT_EQ(summary.events, 30u);
}

}  // namespace
}  // namespace dtsim::engine
