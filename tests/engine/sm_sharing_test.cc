// Analytic tests of SM sharing (Simulator::ShareSms): a compute task does duration × s SM·ns of
// work at (s − b) SM·ns per ns while communications holding b thread blocks run on its rank.
// Each expected end is derived in a comment; communications cost latency + size / bandwidth
// (1 us + 1 us per 1000 bytes).
#include <gtest/gtest.h>

#include <vector>

#include "sim/engine/fixed_cost_model.h"
#include "sim/engine/simulator.h"
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

// The fixed-cost model whose communication c holds blocks[c] thread blocks.
class BlocksModel final : public CommunicationModel {
 public:
  explicit BlocksModel(std::vector<int> blocks)
      : fixed_(Microseconds(1), Bandwidth::BytesPerSecond(kGiga)), blocks_(std::move(blocks)) {}
  std::string_view name() const override { return "blocks"; }
  void Start(CommId comm, CommunicationContext& context) override { fixed_.Start(comm, context); }
  int KernelBlocks(CommId comm) const override { return blocks_[comm.value()]; }

 private:
  FixedCostModel fixed_;
  std::vector<int> blocks_;
};

TaskGraph Build(TaskGraphBuilder& builder) {
  Expected<TaskGraph> graph = std::move(builder).Build();
  EXPECT_TRUE(graph.ok()) << graph.error().ToString();
  return std::move(graph).value();
}

TaskId Compute(TaskGraphBuilder& b, StreamId s, DurationNs duration) {
  return b.AddTask(s, TaskKind::kCompute, "gemm", "compute", duration);
}

// Ranks 0 and 1 each run `work` on their compute stream while an all-reduce of `bytes` runs on
// their "comm" stream from time 0; rank 2 computes alone. Returns {rank 0's task, rank 2's}.
struct Overlap {
  TaskGraph graph;
  TaskId shared, alone;
};
Overlap OneAllReduceBeside(DurationNs work, std::vector<Bytes> sizes) {
  TaskGraphBuilder builder;
  const std::vector<int32_t> group = {0, 1};
  std::vector<CommId> comms;
  for (const Bytes size : sizes) {
    comms.push_back(builder.AddCollective(CommKind::kAllReduce, size, group, "grads"));
  }
  TaskId shared;
  for (int32_t rank : group) {
    const TaskId task = Compute(builder, builder.Stream(rank, "compute"), work);
    if (rank == 0) shared = task;
    for (size_t c = 0; c < comms.size(); ++c) {
      builder.AddCollectiveTask(builder.Stream(rank, "comm" + std::to_string(c)), comms[c],
                                "all-reduce", "dp");
    }
  }
  const TaskId alone = Compute(builder, builder.Stream(2, "compute"), work);
  return Overlap{Build(builder), shared, alone};
}

TEST(SmSharingTest, ComputeSlowsWhileACommunicationHoldsSms) {
  const Overlap o = OneAllReduceBeside(Microseconds(10), {Bytes(1000)});
  BlocksModel model({25});
  Simulator sim(o.graph, model);
  sim.ShareSms(100);
  ASSERT_TRUE(sim.Run().ok());
  // The all-reduce runs 0–2 us on 25 of 100 SMs: the 10 us GEMM does 2 × 0.75 = 1.5 us of its
  // work meanwhile and the other 8.5 us after, ending at 2 + 8.5 = 10.5 us (10 + 2 × 25/100).
  EXPECT_EQ(sim.times().task_end[o.shared.value()], TimeNs(10'500));
  // Rank 2 holds no communication: its GEMM takes its 10 us.
  EXPECT_EQ(sim.times().task_end[o.alone.value()], TimeNs(10'000));
  // The communication itself is not slowed.
  EXPECT_EQ(sim.times().comm_end[0], TimeNs(2'000));
}

TEST(SmSharingTest, WithoutShareSmsDurationsAreFixed) {
  const Overlap o = OneAllReduceBeside(Microseconds(10), {Bytes(1000)});
  BlocksModel blocks({25});
  Simulator shared(o.graph, blocks);
  ASSERT_TRUE(shared.Run().ok());
  EXPECT_EQ(shared.times().task_end[o.shared.value()], TimeNs(10'000));
  // And sharing with communications that hold no blocks changes nothing, events included.
  BlocksModel none({0});
  Simulator unshared(o.graph, none);
  unshared.ShareSms(100);
  ASSERT_TRUE(unshared.Run().ok());
  EXPECT_EQ(unshared.times().task_end[o.shared.value()], TimeNs(10'000));
  EXPECT_EQ(unshared.fingerprint(), shared.fingerprint());
}

TEST(SmSharingTest, ComputeStopsWhileCommunicationsHoldEverySm) {
  // Two all-reduces on two streams, 60 blocks each of 100 SMs: 1000 B (0–2 us) and 3000 B (0–4
  // us). 0–2 us: 120 blocks held, no SM free, no progress; 2–4 us: 40 SMs free, 2 × 0.4 = 0.8 us
  // of work; then the remaining 9.2 us at full speed: the GEMM ends at 4 + 9.2 = 13.2 us.
  const Overlap o = OneAllReduceBeside(Microseconds(10), {Bytes(1000), Bytes(3000)});
  BlocksModel model({60, 60});
  Simulator sim(o.graph, model);
  sim.ShareSms(100);
  ASSERT_TRUE(sim.Run().ok());
  EXPECT_EQ(sim.times().task_end[o.shared.value()], TimeNs(13'200));
}

TEST(SmSharingTest, AnEmptyTaskEndsAtOnceEvenWithNoSmFree) {
  // 120 of 100 SMs held 0–2 us: a 0 ns task has no work to wait for.
  const Overlap o = OneAllReduceBeside(DurationNs(0), {Bytes(1000), Bytes(1000)});
  BlocksModel model({60, 60});
  Simulator sim(o.graph, model);
  sim.ShareSms(100);
  ASSERT_TRUE(sim.Run().ok());
  EXPECT_EQ(sim.times().task_end[o.shared.value()], TimeNs(0));
}

TEST(SmSharingTest, EndsRoundUpToWholeNanoseconds) {
  // 7 SMs, 4 held for the whole GEMM (a 1000 B all-reduce lasts 2 us): its 500 × 7 SM·ns at
  // 3 SM·ns per ns take ⌈3500 / 3⌉ = 1,167 ns.
  const Overlap o = OneAllReduceBeside(DurationNs(500), {Bytes(1000)});
  BlocksModel model({4});
  Simulator sim(o.graph, model);
  sim.ShareSms(7);
  ASSERT_TRUE(sim.Run().ok());
  EXPECT_EQ(sim.times().task_end[o.shared.value()], TimeNs(1'167));
}

TEST(SmSharingTest, CopiesAndDelaysAreNotSlowed) {
  TaskGraphBuilder builder;
  const std::vector<int32_t> group = {0, 1};
  const CommId ar = builder.AddCollective(CommKind::kAllReduce, Bytes(9000), group, "grads");
  std::vector<TaskId> copies;
  std::vector<TaskId> delays;
  std::vector<TaskId> gemms;
  for (int32_t rank : group) {
    copies.push_back(builder.AddTask(builder.Stream(rank, "copy"), TaskKind::kMemcpy, "d2h",
                                     "offload", Microseconds(4)));
    delays.push_back(builder.AddTask(builder.Stream(rank, "host"), TaskKind::kDelay, "gap", "",
                                     Microseconds(3)));
    gemms.push_back(Compute(builder, builder.Stream(rank, "compute"), Microseconds(2 + 3 * rank)));
    builder.AddCollectiveTask(builder.Stream(rank, "comm"), ar, "all-reduce", "dp");
  }
  const TaskGraph graph = Build(builder);
  BlocksModel model({50});
  Simulator sim(graph, model);
  sim.ShareSms(100);
  ASSERT_TRUE(sim.Run().ok());
  // The 9000 B all-reduce runs 0–10 us on 50 of 100 SMs: the copies (4 us, copy engines) and
  // the delays (3 us, the host) take their durations beside it; the GEMMs run at half speed,
  // 2 us of work in 4 us and 5 us in 10 us.
  for (TaskId copy : copies) EXPECT_EQ(sim.times().task_end[copy.value()], TimeNs(4'000));
  for (TaskId delay : delays) EXPECT_EQ(sim.times().task_end[delay.value()], TimeNs(3'000));
  EXPECT_EQ(sim.times().task_end[gemms[0].value()], TimeNs(4'000));
  EXPECT_EQ(sim.times().task_end[gemms[1].value()], TimeNs(10'000));
}

// An eager send holds its SMs from its post; the recv's rank from when the transfer reaches it.
TEST(SmSharingTest, AnEagerSendHoldsSmsFromItsPost) {
  TaskGraphBuilder builder;
  const StreamId p0 = builder.Stream(0, "pp");
  const StreamId p1 = builder.Stream(1, "pp");
  const TaskId send =
      builder.AddSend(p0, 1, Bytes(3000), 0, "send", "pp", TaskGraphBuilder::SendMode::kEager);
  const TaskId gemm0 = Compute(builder, builder.Stream(0, "compute"), Microseconds(8));
  const TaskId gemm1 = Compute(builder, builder.Stream(1, "compute"), Microseconds(8));
  builder.AddRecv(p1, 0, 0, "recv", "pp");
  (void)send;
  const TaskGraph graph = Build(builder);
  BlocksModel model({20});
  Simulator sim(graph, model);
  sim.ShareSms(100);
  ASSERT_TRUE(sim.Run().ok());
  // The transfer runs 0–4 us (1 + 3 us) on 20 of 100 SMs of both ranks: each GEMM does
  // 4 × 0.8 = 3.2 us of work meanwhile and its other 4.8 us after, ending at 8.8 us.
  EXPECT_EQ(sim.times().task_end[gemm0.value()], TimeNs(8'800));
  EXPECT_EQ(sim.times().task_end[gemm1.value()], TimeNs(8'800));
}

}  // namespace
}  // namespace dtsim::engine
