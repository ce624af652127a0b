// Analytic tests of the stream orders (graph::StreamOrder): ready-first streams (ASTRA-sim's
// hardware resources) and unbounded ones (its receives), beside the default in-order streams of
// simulator_test.cc. Each expected time is derived in a comment.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/engine/fixed_cost_model.h"
#include "sim/engine/simulator.h"
#include "sim/graph/builder.h"

namespace dtsim::engine {
namespace {

using graph::CommId;
using graph::CommKind;
using graph::StreamId;
using graph::StreamOrder;
using graph::TaskGraph;
using graph::TaskGraphBuilder;
using graph::TaskId;
using graph::TaskKind;
using testing::HasSubstr;

// Communication takes no time: what is tested is the order streams choose in.
FixedCostModel InstantModel() {
  return FixedCostModel(DurationNs(0), Bandwidth::BytesPerSecond(1));
}

TaskGraph Build(TaskGraphBuilder& builder) {
  Expected<TaskGraph> graph = std::move(builder).Build();
  EXPECT_TRUE(graph.ok()) << graph.error().ToString();
  return std::move(graph).value();
}

TaskId Compute(TaskGraphBuilder& b, StreamId s, int64_t us) {
  return b.AddTask(s, TaskKind::kCompute, "op", "", Microseconds(us));
}

TEST(StreamOrderTest, AReadyFirstStreamLetsAReadyTaskOvertakeABlockedOne) {
  TaskGraphBuilder builder;
  const TaskId slow = Compute(builder, builder.Stream(0, "compute"), 10);
  const StreamId s = builder.Stream(1, "gpu", StreamOrder::kReadyFirst);
  const TaskId blocked = Compute(builder, s, 1);
  const TaskId ready = Compute(builder, s, 1);
  const TaskId later = Compute(builder, s, 4);
  builder.AddDependency(blocked, slow);
  const TaskGraph graph = Build(builder);
  FixedCostModel model = InstantModel();
  Simulator sim(graph, model);
  ASSERT_TRUE(sim.Run().ok());
  // At 0 `ready` and `later` are ready and `blocked` waits for `slow`: `ready` (added first)
  // runs 0-1, `later` 1-5; `blocked` becomes ready at 10 and runs 10-11. (In order: blocked
  // 10-11, ready 11-12, later 12-16; simulator_test.cc, StreamsAreFifoEvenWhenALaterTaskIsReady.)
  EXPECT_EQ(sim.times().task_start[ready.value()], TimeNs(0));
  EXPECT_EQ(sim.times().task_start[later.value()], TimeNs(1'000));
  EXPECT_EQ(sim.times().task_start[blocked.value()], TimeNs(10'000));
  EXPECT_EQ(sim.makespan(), TimeNs(11'000));
}

TEST(StreamOrderTest, OfTheReadyTasksTheFirstAddedGoesFirst) {
  TaskGraphBuilder builder;
  const StreamId gate_stream = builder.Stream(0, "gate");
  const TaskId gate = Compute(builder, gate_stream, 2);
  const StreamId s = builder.Stream(0, "gpu", StreamOrder::kReadyFirst);
  const TaskId first = Compute(builder, s, 3);
  const TaskId second = Compute(builder, s, 3);
  const TaskId busy = Compute(builder, s, 5);
  builder.AddDependency(first, gate);
  builder.AddDependency(second, gate);
  const TaskGraph graph = Build(builder);
  FixedCostModel model = InstantModel();
  Simulator sim(graph, model);
  ASSERT_TRUE(sim.Run().ok());
  // `busy` alone is ready at 0 and runs 0-5. `first` and `second` became ready at 2; at 5 the
  // stream takes the one added first: first 5-8, second 8-11.
  EXPECT_EQ(sim.times().task_start[busy.value()], TimeNs(0));
  EXPECT_EQ(sim.times().task_start[first.value()], TimeNs(5'000));
  EXPECT_EQ(sim.times().task_start[second.value()], TimeNs(8'000));
}

TEST(StreamOrderTest, AnUnboundedStreamRunsEveryReadyTaskAtOnce) {
  TaskGraphBuilder builder;
  const StreamId s = builder.Stream(0, "recv", StreamOrder::kUnbounded);
  const TaskId a = Compute(builder, s, 4);
  const TaskId b = Compute(builder, s, 6);
  const TaskGraph graph = Build(builder);
  FixedCostModel model = InstantModel();
  Simulator sim(graph, model);
  ASSERT_TRUE(sim.Run().ok());
  // Both start at 0; the span is the longer, 6 us.
  EXPECT_EQ(sim.times().task_start[a.value()], TimeNs(0));
  EXPECT_EQ(sim.times().task_start[b.value()], TimeNs(0));
  EXPECT_EQ(sim.makespan(), TimeNs(6'000));
}

// Two identical ranks, each with a compute and a communication stream, both ready-first:
//   a (10 us) → collective C over both ranks (no time) → y (5 us); x (100 us) needs nothing,
//   and was added after y.
// At 10 both a's end; in that instant's round of choices each comm stream takes C and each
// compute stream, with only x ready (y waits for C), takes x. C completes at 10 too, but in an
// event after the round, so it cannot make y ready for the second rank's choice only: both
// ranks run x 10-110 and y 110-115. (Had each stream chosen in an event of its own, C's
// completion would have come between the first rank's choices and the second's, and the
// second rank would have run y first.)
TEST(StreamOrderTest, IdenticalRanksChooseAlikeWhenATaskEndsTheInstantItStarts) {
  TaskGraphBuilder builder;
  const std::vector<int32_t> group = {0, 1};
  const CommId c = builder.AddCollective(CommKind::kAllReduce, Bytes(0), group, "c");
  std::vector<TaskId> xs;
  std::vector<TaskId> ys;
  for (const int32_t rank : group) {
    const StreamId gpu = builder.Stream(rank, "gpu", StreamOrder::kReadyFirst);
    const StreamId comm = builder.Stream(rank, "comm", StreamOrder::kReadyFirst);
    const TaskId a = Compute(builder, gpu, 10);
    const TaskId post = builder.AddCollectiveTask(comm, c, "c", "");
    const TaskId y = Compute(builder, gpu, 5);
    const TaskId x = Compute(builder, gpu, 100);
    builder.AddDependency(post, a);
    builder.AddDependency(y, post);
    xs.push_back(x);
    ys.push_back(y);
  }
  const TaskGraph graph = Build(builder);
  FixedCostModel model = InstantModel();
  Simulator sim(graph, model);
  ASSERT_TRUE(sim.Run().ok());
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(sim.times().task_start[xs[r].value()], TimeNs(10'000)) << "rank " << r;
    EXPECT_EQ(sim.times().task_start[ys[r].value()], TimeNs(110'000)) << "rank " << r;
  }
  EXPECT_EQ(sim.makespan(), TimeNs(115'000));
}

// Rank 0 posts collective A then B, both ready at 0; rank 1 posts A after 1 us of compute, so
// at 0 its comm stream takes B. Each holds its stream waiting for the other: a deadlock no
// order of the streams' tasks shows ahead of time (the graph builds), which the run reports.
TEST(StreamOrderTest, ADeadlockOfReadyFirstStreamsIsReportedAtRunTime) {
  TaskGraphBuilder builder;
  const std::vector<int32_t> group = {0, 1};
  const CommId a = builder.AddCollective(CommKind::kAllReduce, Bytes(0), group, "A");
  const CommId b = builder.AddCollective(CommKind::kAllReduce, Bytes(0), group, "B");
  const StreamId comm0 = builder.Stream(0, "comm", StreamOrder::kReadyFirst);
  builder.AddCollectiveTask(comm0, a, "A", "");
  builder.AddCollectiveTask(comm0, b, "B", "");
  const StreamId comm1 = builder.Stream(1, "comm", StreamOrder::kReadyFirst);
  const TaskId a1 = builder.AddCollectiveTask(comm1, a, "A", "");
  builder.AddCollectiveTask(comm1, b, "B", "");
  builder.AddDependency(a1, Compute(builder, builder.Stream(1, "gpu"), 1));
  const TaskGraph graph = Build(builder);
  FixedCostModel model = InstantModel();
  Simulator sim(graph, model);
  const Status status = sim.Run();
  ASSERT_FALSE(status.ok());
  const std::string& report = status.error().message();
  EXPECT_THAT(report, HasSubstr("deadlock at 1.000 us: 4 of 5 tasks never finished; the task "
                                "holding each stuck stream, or its first unfinished task:"));
  EXPECT_THAT(report, HasSubstr("task #0 (rank 0, stream \"comm\", A) arrived at collective "
                                "\"A\""));
  EXPECT_THAT(report, HasSubstr("task #3 (rank 1, stream \"comm\", B) arrived at collective "
                                "\"B\""));
}

TEST(StreamOrderTest, InOrderStreamsStillRefuseThatGraphWhenItIsBuilt) {
  TaskGraphBuilder builder;
  const std::vector<int32_t> group = {0, 1};
  const CommId a = builder.AddCollective(CommKind::kAllReduce, Bytes(0), group, "A");
  const CommId b = builder.AddCollective(CommKind::kAllReduce, Bytes(0), group, "B");
  builder.AddCollectiveTask(builder.Stream(0, "comm"), a, "A", "");
  builder.AddCollectiveTask(builder.Stream(0, "comm"), b, "B", "");
  builder.AddCollectiveTask(builder.Stream(1, "comm"), b, "B", "");
  builder.AddCollectiveTask(builder.Stream(1, "comm"), a, "A", "");
  const Expected<TaskGraph> graph = std::move(builder).Build();
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.error().ToString(), HasSubstr("deadlock: communications are posted in an "
                                                  "order that can never rendezvous"));
}

}  // namespace
}  // namespace dtsim::engine
