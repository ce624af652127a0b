// Analytic tests of the engine: each expected time is derived in a comment from the graph and
// the fixed-cost model (latency + size / bandwidth).
#include "sim/engine/simulator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/engine/fixed_cost_model.h"
#include "sim/graph/builder.h"

namespace dtsim::engine {
namespace {

using graph::CommId;
using graph::CommKind;
using graph::StreamId;
using graph::TaskGraph;
using graph::TaskGraphBuilder;
using graph::TaskId;
using graph::TaskKind;
using testing::HasSubstr;
using testing::Not;

// 1 us latency and 1 GB/s: a 1000-byte transfer takes 1000 * 8 / 8e9 s = 1 us, so 2 us in all.
FixedCostModel OneMicrosecondModel() {
  return FixedCostModel(Microseconds(1), Bandwidth::BytesPerSecond(kGiga));
}

TaskGraph Build(TaskGraphBuilder& builder) {
  Expected<TaskGraph> graph = std::move(builder).Build();
  EXPECT_TRUE(graph.ok()) << graph.error().ToString();
  return std::move(graph).value();
}

TaskId Compute(TaskGraphBuilder& b, StreamId s, int64_t us, std::string_view category = "") {
  return b.AddTask(s, TaskKind::kCompute, "op", category, Microseconds(us));
}

TEST(SimulatorTest, ChainOnOneStreamSums) {
  TaskGraphBuilder builder;
  const StreamId s = builder.Stream(0, "compute");
  const TaskId a = Compute(builder, s, 1);
  const TaskId b = Compute(builder, s, 2);
  const TaskId c = Compute(builder, s, 3);
  const TaskGraph graph = Build(builder);
  FixedCostModel model = OneMicrosecondModel();
  Simulator sim(graph, model);
  ASSERT_TRUE(sim.Run().ok());
  // Serial stream: starts at 0, 1, 1 + 2 = 3; makespan 1 + 2 + 3 = 6 us.
  EXPECT_EQ(sim.times().task_start[a.value()], TimeNs(0));
  EXPECT_EQ(sim.times().task_start[b.value()], TimeNs(1000));
  EXPECT_EQ(sim.times().task_start[c.value()], TimeNs(3000));
  EXPECT_EQ(sim.makespan(), TimeNs(6000));
  EXPECT_EQ(sim.events_processed(), 3u);  // one end event per task
}

// TakeTimes hands over the run's arrays themselves (no copy: the same buffer), after which the
// simulator holds none; the summary taken before it is unaffected.
TEST(SimulatorTest, TakeTimesMovesTheArraysOut) {
  TaskGraphBuilder builder;
  const StreamId s = builder.Stream(0, "compute");
  Compute(builder, s, 1);
  const TaskId b = Compute(builder, s, 2);
  const TaskGraph graph = Build(builder);
  FixedCostModel model = OneMicrosecondModel();
  Simulator sim(graph, model);
  ASSERT_TRUE(sim.Run().ok());
  const RunSummary summary = sim.Summarize();
  const TimeNs* const buffer = sim.times().task_end.data();
  const graph::TaskTimes times = sim.TakeTimes();
  EXPECT_EQ(times.task_end.data(), buffer);
  EXPECT_EQ(times.task_end[b.value()], TimeNs(3000));  // 1 + 2 us
  EXPECT_TRUE(sim.times().task_start.empty());
  EXPECT_TRUE(sim.times().task_end.empty());
  EXPECT_EQ(summary.makespan, TimeNs(3000));
}

TEST(SimulatorTest, TwoStreamsOfOneRankOverlap) {
  TaskGraphBuilder builder;
  Compute(builder, builder.Stream(0, "compute"), 5);
  Compute(builder, builder.Stream(0, "comm"), 3);
  const TaskGraph graph = Build(builder);
  FixedCostModel model = OneMicrosecondModel();
  Simulator sim(graph, model);
  ASSERT_TRUE(sim.Run().ok());
  // Both start at 0: makespan max(5, 3) = 5 us; busy is the union [0, 5), so no idle time.
  EXPECT_EQ(sim.makespan(), TimeNs(5000));
  const RunSummary summary = sim.Summarize();
  EXPECT_EQ(summary.ranks[0].busy, Microseconds(5));
  EXPECT_EQ(summary.ranks[0].idle, Microseconds(0));
}

TEST(SimulatorTest, CrossRankDependencyWaits) {
  TaskGraphBuilder builder;
  const TaskId a = Compute(builder, builder.Stream(0, "compute"), 4);
  const TaskId b = Compute(builder, builder.Stream(1, "compute"), 1);
  builder.AddDependency(b, a);
  const TaskGraph graph = Build(builder);
  FixedCostModel model = OneMicrosecondModel();
  Simulator sim(graph, model);
  ASSERT_TRUE(sim.Run().ok());
  // b waits for a: starts at 4, ends at 5. Rank 1 is busy 1 us of 5, idle 4.
  EXPECT_EQ(sim.times().task_start[b.value()], TimeNs(4000));
  EXPECT_EQ(sim.makespan(), TimeNs(5000));
  const RunSummary summary = sim.Summarize();
  EXPECT_EQ(summary.ranks[1].busy, Microseconds(1));
  EXPECT_EQ(summary.ranks[1].idle, Microseconds(4));
}

TEST(SimulatorTest, CollectiveStartsWhenItsLastMemberArrives) {
  TaskGraphBuilder builder;
  const std::vector<int32_t> group = {0, 1, 2};
  const CommId ar = builder.AddCollective(CommKind::kAllReduce, Bytes(1000), group, "grads");
  std::vector<TaskId> posts;
  const int64_t work_us[] = {1, 2, 5};
  for (int32_t rank : group) {
    const StreamId s = builder.Stream(rank, "compute");
    Compute(builder, s, work_us[rank]);
    posts.push_back(builder.AddCollectiveTask(s, ar, "all-reduce", "dp"));
  }
  const TaskGraph graph = Build(builder);
  FixedCostModel model = OneMicrosecondModel();
  Simulator sim(graph, model);
  ASSERT_TRUE(sim.Run().ok());
  // Members arrive at 1, 2 and 5 us; the all-reduce starts at 5 and takes 1 + 1 = 2 us.
  EXPECT_EQ(sim.times().comm_start[0], TimeNs(5000));
  for (TaskId post : posts) EXPECT_EQ(sim.times().task_end[post.value()], TimeNs(7000));
  const RunSummary summary = sim.Summarize();
  // Rendezvous waits: 5 - 1 = 4, 5 - 2 = 3, 0 us.
  EXPECT_EQ(summary.ranks[0].rendezvous_wait, Microseconds(4));
  EXPECT_EQ(summary.ranks[1].rendezvous_wait, Microseconds(3));
  EXPECT_EQ(summary.ranks[2].rendezvous_wait, Microseconds(0));
  // Busy = compute + the 2 us all-reduce (waiting is not busy): 3, 4, 7 us.
  EXPECT_EQ(summary.ranks[0].busy, Microseconds(3));
  EXPECT_EQ(summary.ranks[1].busy, Microseconds(4));
  EXPECT_EQ(summary.ranks[2].busy, Microseconds(7));
  // The "dp" category counts each member's all-reduce from its start: 3 x 2 us.
  EXPECT_EQ(summary.categories[1].name, "dp");
  EXPECT_EQ(summary.categories[1].total, Microseconds(6));
}

TEST(SimulatorTest, SendAndRecvRendezvous) {
  TaskGraphBuilder builder;
  const StreamId s0 = builder.Stream(0, "compute");
  const StreamId s1 = builder.Stream(1, "compute");
  Compute(builder, s0, 3);
  const TaskId send = builder.AddSend(s0, 1, Bytes(2000), 0, "send", "pp");
  const TaskId recv = builder.AddRecv(s1, 0, 0, "recv", "pp");
  const TaskId after = Compute(builder, s1, 1);
  builder.AddDependency(after, recv);
  const TaskGraph graph = Build(builder);
  FixedCostModel model = OneMicrosecondModel();
  Simulator sim(graph, model);
  ASSERT_TRUE(sim.Run().ok());
  // The recv arrives at 0, the send at 3; the transfer takes 1 + 2000 * 8 / 8e9 s = 1 + 2 us.
  EXPECT_EQ(sim.times().task_start[recv.value()], TimeNs(0));
  EXPECT_EQ(sim.times().task_end[send.value()], TimeNs(6000));
  EXPECT_EQ(sim.times().task_end[recv.value()], TimeNs(6000));
  EXPECT_EQ(sim.times().task_end[after.value()], TimeNs(7000));
}

// ASTRA-sim's non-blocking sends: the transfer starts when the send is posted, whether or not
// the recv is, and the send ends when its data has left.
TEST(SimulatorTest, AnEagerSendDoesNotWaitForItsRecv) {
  TaskGraphBuilder builder;
  const StreamId s0 = builder.Stream(0, "compute");
  const StreamId s1 = builder.Stream(1, "compute");
  const TaskId send =
      builder.AddSend(s0, 1, Bytes(2000), 0, "send", "pp", TaskGraphBuilder::SendMode::kEager);
  const TaskId late =
      builder.AddSend(s0, 1, Bytes(2000), 1, "send", "pp", TaskGraphBuilder::SendMode::kEager);
  Compute(builder, s1, 10);
  const TaskId recv = builder.AddRecv(s1, 0, 0, "recv", "pp");
  const TaskId early = builder.AddRecv(s1, 0, 1, "recv", "pp");
  const TaskGraph graph = Build(builder);
  EXPECT_TRUE(graph.comm(graph.task(send).comm).eager);
  FixedCostModel model = OneMicrosecondModel();
  Simulator sim(graph, model);
  ASSERT_TRUE(sim.Run().ok());
  // The first send starts at 0 and its data has left at 3 us (1 + 2000 × 8 / 8e9 s); the second
  // follows on the stream, 3 to 6 us. Rank 1 computes until 10: its first recv, posted after
  // the data arrived, ends at once; so does the second.
  EXPECT_EQ(sim.times().task_end[send.value()], TimeNs(3000));
  EXPECT_EQ(sim.times().task_end[late.value()], TimeNs(6000));
  EXPECT_EQ(sim.times().task_start[recv.value()], TimeNs(10000));
  EXPECT_EQ(sim.times().task_end[recv.value()], TimeNs(10000));
  EXPECT_EQ(sim.times().task_end[early.value()], TimeNs(10000));
  // The recv's time in communication is none of it: it came after the transfer.
  EXPECT_EQ(sim.Summarize().ranks[1].rendezvous_wait, DurationNs::Zero());
}

// A ring in which every rank sends first, then receives (ASTRA-sim's custom ring all-reduce
// example): with eager sends it runs — each rank's send leaves at 0 and ends at 3 us, its recv
// (posted at 3 us, after the data arrived) ends at once, twice round; as a rendezvous it is a
// deadlock the builder reports.
TEST(SimulatorTest, ARingThatSendsFirstRunsWithEagerSendsOnly) {
  for (const auto mode :
       {TaskGraphBuilder::SendMode::kEager, TaskGraphBuilder::SendMode::kRendezvous}) {
    TaskGraphBuilder builder;
    for (int32_t rank = 0; rank < 4; ++rank) {
      const StreamId stream = builder.Stream(rank, "comm");
      for (int64_t round = 0; round < 2; ++round) {
        builder.AddSend(stream, (rank + 1) % 4, Bytes(2000), round, "send", "ring", mode);
        builder.AddRecv(stream, (rank + 3) % 4, round, "recv", "ring");
      }
    }
    Expected<TaskGraph> graph = std::move(builder).Build();
    if (mode == TaskGraphBuilder::SendMode::kRendezvous) {
      ASSERT_FALSE(graph.ok());
      EXPECT_THAT(graph.error().ToString(), HasSubstr("deadlock"));
      continue;
    }
    ASSERT_TRUE(graph.ok()) << graph.error().ToString();
    FixedCostModel model = OneMicrosecondModel();
    Simulator sim(*graph, model);
    ASSERT_TRUE(sim.Run().ok());
    EXPECT_EQ(sim.Summarize().makespan, TimeNs(6000));
  }
}

// An eager recv posted first waits for the send, then ends with the transfer.
TEST(SimulatorTest, AnEagerRecvPostedFirstWaitsForTheTransfer) {
  TaskGraphBuilder builder;
  const StreamId s0 = builder.Stream(0, "compute");
  const StreamId s1 = builder.Stream(1, "compute");
  Compute(builder, s0, 5);
  const TaskId send =
      builder.AddSend(s0, 1, Bytes(2000), 0, "send", "pp", TaskGraphBuilder::SendMode::kEager);
  const TaskId recv = builder.AddRecv(s1, 0, 0, "recv", "pp");
  const TaskGraph graph = Build(builder);
  FixedCostModel model = OneMicrosecondModel();
  Simulator sim(graph, model);
  ASSERT_TRUE(sim.Run().ok());
  // The send is posted at 5 us; the transfer ends at 8 us, and the recv with it.
  EXPECT_EQ(sim.times().task_end[send.value()], TimeNs(8000));
  EXPECT_EQ(sim.times().task_end[recv.value()], TimeNs(8000));
  EXPECT_EQ(sim.Summarize().ranks[1].rendezvous_wait, Microseconds(5));
}

TEST(SimulatorTest, StreamsAreFifoEvenWhenALaterTaskIsReady) {
  TaskGraphBuilder builder;
  const TaskId slow = Compute(builder, builder.Stream(0, "compute"), 10);
  const StreamId s = builder.Stream(1, "compute");
  const TaskId blocked = Compute(builder, s, 1);
  const TaskId ready = Compute(builder, s, 1);
  builder.AddDependency(blocked, slow);
  const TaskGraph graph = Build(builder);
  FixedCostModel model = OneMicrosecondModel();
  Simulator sim(graph, model);
  ASSERT_TRUE(sim.Run().ok());
  // `ready` has no dependencies but sits behind `blocked`, which waits until 10: 10-11, 11-12.
  EXPECT_EQ(sim.times().task_start[blocked.value()], TimeNs(10'000));
  EXPECT_EQ(sim.times().task_start[ready.value()], TimeNs(11'000));
}

TEST(SimulatorTest, DelaysTakeTimeButAreNotBusy) {
  TaskGraphBuilder builder;
  const StreamId s = builder.Stream(0, "host");
  builder.AddTask(s, TaskKind::kDelay, "dataloader", "", Microseconds(5));
  Compute(builder, s, 2);
  const TaskGraph graph = Build(builder);
  FixedCostModel model = OneMicrosecondModel();
  Simulator sim(graph, model);
  ASSERT_TRUE(sim.Run().ok());
  // 5 us of delay then 2 us of compute: makespan 7, busy 2, idle 5.
  const RunSummary summary = sim.Summarize();
  EXPECT_EQ(summary.makespan, TimeNs(7000));
  EXPECT_EQ(summary.ranks[0].busy, Microseconds(2));
  EXPECT_EQ(summary.ranks[0].idle, Microseconds(5));
}

TEST(SimulatorTest, ZeroDurationTasksAndEmptyGraphs) {
  TaskGraphBuilder empty;
  const TaskGraph nothing = Build(empty);
  FixedCostModel model = OneMicrosecondModel();
  Simulator idle(nothing, model);
  ASSERT_TRUE(idle.Run().ok());
  EXPECT_EQ(idle.makespan(), TimeNs(0));

  TaskGraphBuilder builder;
  const StreamId s = builder.Stream(0, "compute");
  for (int i = 0; i < 1000; ++i) Compute(builder, s, 0);
  const TaskGraph zeros = Build(builder);
  Simulator sim(zeros, model);
  ASSERT_TRUE(sim.Run().ok());
  EXPECT_EQ(sim.makespan(), TimeNs(0));
  EXPECT_EQ(sim.events_processed(), 1000u);
}

// A model that loses every communication: the run must end in a deadlock report, not a hang
// or a silent early end.
class LosingModel final : public CommunicationModel {
 public:
  std::string_view name() const override { return "losing"; }
  void Start(CommId, CommunicationContext&) override {}
};

TEST(SimulatorTest, DeadlockIsReportedByName) {
  TaskGraphBuilder builder;
  builder.SetExternalId(Compute(builder, builder.Stream(0, "compute"), 1), "warmup");
  const std::vector<int32_t> group = {0, 1};
  const CommId ar = builder.AddCollective(CommKind::kAllReduce, Bytes(8), group, "grads");
  const TaskId post0 = builder.AddCollectiveTask(builder.Stream(0, "compute"), ar, "ar", "");
  builder.AddCollectiveTask(builder.Stream(1, "compute"), ar, "ar", "");
  const TaskId after = Compute(builder, builder.Stream(1, "other"), 1);
  builder.AddDependency(after, post0);
  builder.SetExternalId(after, "optimizer");
  const TaskGraph graph = Build(builder);
  LosingModel model;
  Simulator sim(graph, model);
  const Status status = sim.Run();
  ASSERT_FALSE(status.ok());
  const std::string& report = status.error().message();
  // Three tasks never finish: both all-reduce posts and the task after them.
  EXPECT_THAT(report, HasSubstr("deadlock at 1.000 us: 3 of 4 tasks never finished"));
  EXPECT_THAT(report, HasSubstr("is in collective \"grads\" (all_reduce of 8 B over ranks [0, 1]), "
                                "started at 1.000 us, which the \"losing\" communication model "
                                "never completed"));
  EXPECT_THAT(report, HasSubstr("task \"optimizer\" (rank 1, stream \"other\", op) waits for 1 "
                                "unfinished dependency: task #1 (rank 0, stream \"compute\", ar)"));
}

// A model that uses its own events: it schedules a decoy it then cancels, and completes from
// its handler. Exercises RegisterHandler, Schedule, Cancel and CompleteAt.
class TwoStepModel final : public CommunicationModel, public EventHandler {
 public:
  std::string_view name() const override { return "two-step"; }
  void Attach(CommunicationContext& context) override {
    context_ = &context;
    handler_ = context.RegisterHandler(*this);
  }
  void Start(CommId comm, CommunicationContext& context) override {
    const EventId decoy = context.Schedule(context.Now() + Microseconds(1), handler_, kDecoy);
    context.Cancel(decoy);
    context.Schedule(context.Now() + Microseconds(3), handler_, comm.value());
  }
  void OnEvent(uint64_t payload) override {
    ASSERT_NE(payload, kDecoy) << "a cancelled event was delivered";
    context_->CompleteAt(CommId(static_cast<uint32_t>(payload)), context_->Now());
  }

 private:
  static constexpr uint64_t kDecoy = 999;
  CommunicationContext* context_ = nullptr;
  HandlerId handler_ = 0;
};

TEST(SimulatorTest, ModelsCanScheduleAndCancelTheirOwnEvents) {
  TaskGraphBuilder builder;
  builder.AddSend(builder.Stream(0, "pp"), 1, Bytes(1), 0, "", "");
  const TaskId recv = builder.AddRecv(builder.Stream(1, "pp"), 0, 0, "", "");
  const TaskGraph graph = Build(builder);
  TwoStepModel model;
  Simulator sim(graph, model);
  ASSERT_TRUE(sim.Run().ok());
  // Both arrive at 0; the model completes 3 us later. Events: its completion event and the
  // engine's end event (the cancelled decoy is not delivered).
  EXPECT_EQ(sim.times().task_end[recv.value()], TimeNs(3000));
  EXPECT_EQ(sim.events_processed(), 2u);
}

TaskGraph RingGraph(int64_t last_duration_us) {
  TaskGraphBuilder builder;
  std::vector<int32_t> group;
  for (int32_t r = 0; r < 4; ++r) group.push_back(r);
  for (int step = 0; step < 3; ++step) {
    const CommId ar = builder.AddCollective(CommKind::kAllReduce, Bytes(4096), group);
    for (int32_t r : group) {
      const StreamId s = builder.Stream(r, "compute");
      Compute(builder, s, r == 3 && step == 2 ? last_duration_us : 1 + r);
      builder.AddCollectiveTask(builder.Stream(r, "nccl"), ar, "", "");
    }
  }
  return Build(builder);
}

uint64_t Fingerprint(const TaskGraph& graph) {
  FixedCostModel model = OneMicrosecondModel();
  Simulator sim(graph, model);
  EXPECT_TRUE(sim.Run().ok());
  return sim.fingerprint();
}

TEST(SimulatorTest, SameGraphTwiceGivesTheSameFingerprint) {
  const TaskGraph graph = RingGraph(4);
  const uint64_t first = Fingerprint(graph);
  EXPECT_EQ(first, Fingerprint(graph));
  EXPECT_EQ(first, Fingerprint(RingGraph(4)));  // rebuilt from scratch
  EXPECT_NE(first, Fingerprint(RingGraph(5)));  // one duration differs
}

// Simulated time ends at Simulator::kHorizon (2^53 ns, ~104 days): whatever would end past it
// stops the run with an error naming it, and sums that pass int64 are refused, never wrapped.
constexpr DurationNs kHorizon = Simulator::kHorizon - TimeNs::Zero();

// Ranks 0 and 1 all-reduce `size`, after computing for `before` (nothing when zero).
TaskGraph TwoRankAllReduce(Bytes size, std::string_view name,
                           DurationNs before = DurationNs::Zero()) {
  TaskGraphBuilder builder;
  const std::vector<int32_t> group = {0, 1};
  const CommId ar = builder.AddCollective(CommKind::kAllReduce, size, group, name);
  for (int32_t rank : group) {
    const StreamId stream = builder.Stream(rank, "comm");
    if (before > DurationNs::Zero()) builder.AddTask(stream, TaskKind::kCompute, "op", "", before);
    builder.AddCollectiveTask(stream, ar, "all-reduce", "dp");
  }
  return Build(builder);
}

TEST(HorizonTest, IsAboutAHundredDays) {
  // 2^53 ns = 9,007,199.25 s = 104.25 days.
  EXPECT_EQ(kHorizon.ns(), 9'007'199'254'740'992);
  EXPECT_NEAR(kHorizon.ToSecondsDouble() / 86400, 104.25, 0.01);
}

TEST(HorizonTest, ATaskEndingAtTheHorizonRuns) {
  TaskGraphBuilder builder;
  const StreamId s = builder.Stream(0, "compute");
  // Two halves end exactly at 2^52 + 2^52 = 2^53.
  builder.AddTask(s, TaskKind::kCompute, "first", "x", kHorizon - DurationNs(int64_t{1} << 52));
  builder.AddTask(s, TaskKind::kCompute, "second", "x", DurationNs(int64_t{1} << 52));
  const TaskGraph graph = Build(builder);
  FixedCostModel model = OneMicrosecondModel();
  Simulator sim(graph, model);
  ASSERT_TRUE(sim.Run().ok());
  EXPECT_EQ(sim.makespan(), Simulator::kHorizon);
  EXPECT_FALSE(sim.passed_horizon());
}

TEST(HorizonTest, ATaskEndingPastItStopsTheRunNamingIt) {
  TaskGraphBuilder builder;
  const StreamId s = builder.Stream(0, "compute");
  builder.AddTask(s, TaskKind::kCompute, "first", "x", kHorizon);
  builder.AddTask(s, TaskKind::kCompute, "one-too-many", "x", Nanoseconds(1));
  builder.AddTask(s, TaskKind::kCompute, "never-started", "x", Nanoseconds(1));
  const TaskGraph graph = Build(builder);
  FixedCostModel model = OneMicrosecondModel();
  Simulator sim(graph, model);
  const Status status = sim.Run();
  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(sim.passed_horizon());
  const std::string message = status.error().ToString();
  EXPECT_THAT(message, HasSubstr("horizon"));
  EXPECT_THAT(message, HasSubstr("one-too-many"));
  EXPECT_THAT(message, HasSubstr("takes 1 ns and would end at 9007199.255 s (104 days)"));
  EXPECT_THAT(message, Not(HasSubstr("never-started")));
  // The run stops at the last event before the horizon: the first task's end.
  EXPECT_EQ(sim.makespan(), Simulator::kHorizon);
}

// A duration of int64's maximum after another task: now + duration saturates instead of
// overflowing (UBSan reported it, and a release build wrapped to a negative time).
TEST(HorizonTest, TheLargestDurationAfterAnotherTaskSaturates) {
  TaskGraphBuilder builder;
  const StreamId s = builder.Stream(0, "compute");
  builder.AddTask(s, TaskKind::kCompute, "a", "x", Seconds(1));
  builder.AddTask(s, TaskKind::kCompute, "b", "x", DurationNs::Max());
  const TaskGraph graph = Build(builder);
  FixedCostModel model = OneMicrosecondModel();
  Simulator sim(graph, model);
  const Status status = sim.Run();
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.error().ToString(), HasSubstr("would end at more than 292 years"));
}

// 2^62 bytes at 1 bit/s is 3.7e28 ns: the fixed model's price saturates, and the engine names
// the communication rather than failing its "completed in the past" check.
TEST(HorizonTest, ACommunicationPricedPastItIsNamed) {
  const TaskGraph graph = TwoRankAllReduce(Bytes(int64_t{1} << 62), "huge");
  FixedCostModel model(Microseconds(5), Bandwidth::BitsPerSecond(1));
  Simulator sim(graph, model);
  const Status status = sim.Run();
  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(sim.passed_horizon());
  EXPECT_THAT(status.error().ToString(), HasSubstr("huge"));
  EXPECT_THAT(status.error().ToString(),
              HasSubstr("priced at more than 292 years by the \"fixed\" communication model"));
  // Posted after 1 s of compute the end saturates the same way; its price is still the
  // saturated one, not int64's maximum less the 1 s.
  const TaskGraph later = TwoRankAllReduce(Bytes(int64_t{1} << 62), "huge", Seconds(1));
  Simulator late(later, model);
  EXPECT_THAT(late.Run().error().ToString(),
              HasSubstr("priced at more than 292 years by the \"fixed\" communication model"));
}

// A model that schedules its own event a year from now.
class LateModel final : public CommunicationModel, public EventHandler {
 public:
  std::string_view name() const override { return "late"; }
  void Attach(CommunicationContext& context) override {
    context_ = &context;
    handler_ = context.RegisterHandler(*this);
  }
  void Start(CommId comm, CommunicationContext& context) override {
    comm_ = comm;
    context.Schedule(context.Now() + Seconds(365 * 86400), handler_, 0);
  }
  void OnEvent(uint64_t /*payload*/) override { context_->CompleteAt(comm_, context_->Now()); }

 private:
  CommunicationContext* context_ = nullptr;
  HandlerId handler_ = 0;
  CommId comm_;
};

TEST(HorizonTest, AModelEventPastItIsNamed) {
  const TaskGraph graph = TwoRankAllReduce(Bytes(1), "small");
  LateModel model;
  Simulator sim(graph, model);
  const Status status = sim.Run();
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.error().ToString(), HasSubstr("an event of the \"late\" communication model"));
}

// `ranks` ranks each run one task, of category "forever", from 0 to the horizon.
TaskGraph RanksSpanningTheHorizon(int32_t ranks) {
  TaskGraphBuilder builder;
  for (int32_t rank = 0; rank < ranks; ++rank) {
    builder.AddTask(builder.Stream(rank, "compute"), TaskKind::kCompute, "long", "forever",
                    kHorizon);
  }
  return Build(builder);
}

// 1,100 ranks each run one task of the whole horizon: every time is in range, but the category
// sums 1,100 * 2^53 = 9.9e18 ns, past int64's 9.2e18. The run refuses it rather than report a
// wrapped (negative) or saturated total.
TEST(HorizonTest, ACategoryTotalPastInt64IsAnError) {
  const TaskGraph graph = RanksSpanningTheHorizon(1100);
  FixedCostModel model = OneMicrosecondModel();
  Simulator sim(graph, model);
  const Status status = sim.Run();
  ASSERT_FALSE(status.ok());
  EXPECT_FALSE(sim.passed_horizon());
  EXPECT_THAT(status.error().ToString(),
              HasSubstr("the 1100 tasks of category \"forever\" add up to more than 292 years"));
}

// 1,000 such ranks sum to 9.007e18 ns, inside int64: the total is exact.
TEST(HorizonTest, ACategoryTotalJustInsideInt64IsExact) {
  const TaskGraph graph = RanksSpanningTheHorizon(1000);
  FixedCostModel model = OneMicrosecondModel();
  Simulator sim(graph, model);
  ASSERT_TRUE(sim.Run().ok());
  const RunSummary summary = sim.Summarize();
  ASSERT_EQ(summary.categories.size(), 2u);  // "" and "forever"
  EXPECT_EQ(summary.categories[1].total, kHorizon * 1000);
  EXPECT_EQ(summary.categories[1].total.ns(), 9'007'199'254'740'992'000);
}

}  // namespace
}  // namespace dtsim::engine
