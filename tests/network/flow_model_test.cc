// The flow model: agreement with the analytical model where nothing contends, and contention
// where traffic shares links. Cluster: tests/network/test_cluster.h.
#include "network/flow_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "network/analytical_model.h"
#include "sim/engine/simulator.h"
#include "sim/graph/builder.h"
#include "tests/network/test_cluster.h"

namespace dtsim::network {
namespace {

using graph::CommKind;
using graph::TaskGraph;
using graph::TaskGraphBuilder;
using testing::HasSubstr;
using testing_support::Ranks;
using testing_support::TestCluster;

constexpr int64_t kS = 100'000'000;

struct Collective {
  CommKind kind;
  std::vector<int32_t> group;
  int64_t size = kS;
  std::string_view algorithm = "";
  int32_t root = -1;
};

// Each collective on its own stream of every member, all posted at time 0.
TaskGraph Graph(const std::vector<Collective>& collectives) {
  TaskGraphBuilder builder;
  int index = 0;
  for (const Collective& c : collectives) {
    const std::string stream = "comm" + std::to_string(index++);
    if (c.kind == CommKind::kSendRecv) {
      builder.AddSend(builder.Stream(c.group[0], stream), c.group[1], Bytes(c.size), 0, "", "");
      builder.AddRecv(builder.Stream(c.group[1], stream), c.group[0], 0, "", "");
      continue;
    }
    const graph::CommId comm =
        builder.AddCollective(c.kind, Bytes(c.size), c.group, "", c.algorithm, c.root);
    for (int32_t rank : c.group)
      builder.AddCollectiveTask(builder.Stream(rank, stream), comm, "", "");
  }
  return std::move(builder).Build().value();
}

template <typename Model>
TimeNs Makespan(const std::vector<Collective>& collectives, const ClusterSpec& cluster) {
  const TaskGraph graph = Graph(collectives);
  Model model(cluster);
  const Status prepared = model.Prepare(graph);
  EXPECT_TRUE(prepared.ok()) << prepared.error().ToString();
  engine::Simulator sim(graph, model);
  EXPECT_TRUE(sim.Run().ok());
  return sim.makespan();
}

double Ratio(TimeNs flow, TimeNs analytical) {
  return static_cast<double>(flow.ns()) / static_cast<double>(analytical.ns());
}

class AgreementTest : public testing::TestWithParam<Collective> {};

// Where nothing contends the flow model moves the analytical model's volumes at the same
// rates: the two agree within 1%.
TEST_P(AgreementTest, FlowMatchesAnalyticalWithinOnePercent) {
  const ClusterSpec cluster = TestCluster();
  const TimeNs analytical = Makespan<AnalyticalModel>({GetParam()}, cluster);
  const TimeNs flow = Makespan<FlowModel>({GetParam()}, cluster);
  EXPECT_NEAR(Ratio(flow, analytical), 1.0, 0.01)
      << "flow " << flow.ns() << " ns, analytical " << analytical.ns() << " ns";
}

// A collective latency is paid once per collective by both models, before the first step.
TEST_P(AgreementTest, CollectiveLatencyIsPaidOnceByBoth) {
  ClusterSpec cluster = TestCluster();
  const TimeNs analytical = Makespan<AnalyticalModel>({GetParam()}, cluster);
  const TimeNs flow = Makespan<FlowModel>({GetParam()}, cluster);
  cluster.collective_latency = Microseconds(7);
  EXPECT_EQ(Makespan<AnalyticalModel>({GetParam()}, cluster), analytical + Microseconds(7));
  EXPECT_EQ(Makespan<FlowModel>({GetParam()}, cluster), flow + Microseconds(7));
}

INSTANTIATE_TEST_SUITE_P(
    Algorithms, AgreementTest,
    testing::Values(Collective{CommKind::kAllReduce, Ranks(0, 4), kS, "ring"},
                    Collective{CommKind::kAllReduce, Ranks(0, 16), kS, "ring"},
                    Collective{CommKind::kAllReduce, {0, 4, 8, 12}, kS, "ring"},
                    Collective{CommKind::kAllReduce, Ranks(0, 8), kS, "ring"},
                    Collective{CommKind::kAllReduce, Ranks(0, 16), kS, "hierarchical"},
                    Collective{CommKind::kAllReduce, Ranks(0, 4), kS, "tree"},
                    Collective{CommKind::kAllReduce, Ranks(0, 16), kS, "tree"},
                    Collective{CommKind::kAllReduce, {0, 4, 8, 12}, kS, "tree"},
                    Collective{CommKind::kAllReduce, Ranks(0, 12), 1000, "tree"},
                    Collective{CommKind::kAllReduce, Ranks(0, 16), kS, "halving_doubling"},
                    Collective{CommKind::kAllReduce, Ranks(0, 4), kS, "halving_doubling"},
                    Collective{CommKind::kAllReduce, Ranks(0, 6), kS, "halving_doubling"},
                    Collective{CommKind::kReduceScatter, Ranks(0, 16), kS, "ring"},
                    Collective{CommKind::kAllGather, Ranks(0, 16), kS / 16, "ring"},
                    Collective{CommKind::kBroadcast, Ranks(0, 4), kS, "ring", 2},
                    Collective{CommKind::kReduce, Ranks(0, 16), kS, "ring", 0},
                    Collective{CommKind::kBroadcast, Ranks(0, 16), kS, "binomial_tree", 0},
                    Collective{CommKind::kReduce, Ranks(0, 16), kS, "binomial_tree", 5},
                    Collective{CommKind::kBroadcast, {0, 1, 2, 4, 9}, kS, "binomial_tree", 9},
                    Collective{CommKind::kAllToAll, Ranks(0, 16), kS, "direct"},
                    Collective{CommKind::kAllToAll, Ranks(0, 4), kS, "direct"},
                    Collective{CommKind::kAllToAll, Ranks(0, 16), kS, "hierarchical"},
                    Collective{CommKind::kShift, Ranks(0, 4), kS, "direct"},
                    Collective{CommKind::kShift, Ranks(0, 8), kS, "direct"},
                    Collective{CommKind::kShift, {0, 4, 8, 12}, kS, "direct"},
                    Collective{CommKind::kBarrier, Ranks(0, 16), 0, ""},
                    Collective{CommKind::kSendRecv, {0, 1}, kS, ""},
                    Collective{CommKind::kSendRecv, {0, 5}, kS, ""}));

// NVLS moves its port volume at its own efficiency in both models: the flow program scales its
// bytes by intra efficiency / NVLS efficiency (here 0.8 / 0.5) so that links priced at the
// intra efficiency take the analytical time. p = 4, S = 1e8: 5/4 · 1e8 B at 1e11 · 0.5 B/s =
// 2.5 ms, after 3 us.
TEST(FlowModelTest, NvlsMatchesAnalytical) {
  ClusterSpec cluster = TestCluster();
  cluster.intra.efficiency = 0.8;
  cluster.intra.nvls = {.enabled = true, .latency = Microseconds(3), .efficiency = 0.5};
  const Collective nvls{CommKind::kAllReduce, Ranks(0, 4), kS, "nvls"};
  EXPECT_EQ(Makespan<AnalyticalModel>({nvls}, cluster), TimeNs(2'503'000));
  EXPECT_NEAR(Ratio(Makespan<FlowModel>({nvls}, cluster), TimeNs(2'503'000)), 1.0, 0.001);
}

TEST(FlowContentionTest, TwoAllReducesSharingTheNicsTakeTwiceAsLong) {
  // One NIC per node, 2 nodes. Groups {0, 4} and {1, 5} each run a ring all-reduce across the
  // two nodes through the same NICs. Alone: 2 · 1/2 · 2 steps... = 2 · 10 us + 1e8 / 1.25e10 s
  // = 8.02 ms. Together each gets half of each NIC: the bandwidth term doubles, 16.02 ms.
  ClusterSpec cluster = TestCluster(2);
  cluster.inter.nics_per_node = 1;
  const TimeNs one = Makespan<FlowModel>({{CommKind::kAllReduce, {0, 4}, kS, "ring"}}, cluster);
  const TimeNs two = Makespan<FlowModel>(
      {{CommKind::kAllReduce, {0, 4}, kS, "ring"}, {CommKind::kAllReduce, {1, 5}, kS, "ring"}},
      cluster);
  EXPECT_EQ(one, TimeNs(8'020'000));
  EXPECT_EQ(two, TimeNs(16'020'000));
  // The analytical model, blind to contention, gives the single time for both.
  EXPECT_EQ(Makespan<AnalyticalModel>({{CommKind::kAllReduce, {0, 4}, kS, "ring"},
                                       {CommKind::kAllReduce, {1, 5}, kS, "ring"}},
                                      cluster),
            one);
}

TEST(FlowContentionTest, IntraNodeAllReduceIsNotSlowedByTrafficItDoesNotShare) {
  // A tensor-parallel all-reduce over node 0's four GPUs uses only NVLink ports; a
  // data-parallel all-reduce between GPU 0 and GPU 4 uses only NICs. Run together, the TP one
  // still takes its own time: 6 · 1 us + 1.5 ms = 1.506 ms.
  const ClusterSpec cluster = TestCluster(2);
  const Collective tp{CommKind::kAllReduce, Ranks(0, 4), kS, "ring"};
  const Collective dp{CommKind::kAllReduce, {0, 4}, kS / 100, "ring"};
  EXPECT_EQ(Makespan<FlowModel>({tp}, cluster), TimeNs(1'506'000));
  // The DP ring is shorter (2 · 10 us + 1e6 / 1.25e10 s = 100 us), so the makespan is TP's.
  EXPECT_EQ(Makespan<FlowModel>({tp, dp}, cluster), TimeNs(1'506'000));
}

TEST(FlowContentionTest, IntraNodeTrafficIsSlowedWhereItSharesAPort) {
  // Two TP all-reduces on the same four GPUs share every NVLink port: twice the bandwidth
  // term, 6 us + 3 ms.
  const ClusterSpec cluster = TestCluster(1);
  const Collective tp{CommKind::kAllReduce, Ranks(0, 4), kS, "ring"};
  EXPECT_EQ(Makespan<FlowModel>({tp, tp}, cluster), TimeNs(3'006'000));
}

TEST(FlowContentionTest, TwoToOneOversubscriptionHalvesCrossSpineThroughput) {
  // 4 nodes, 2 per leaf, 1 NIC each. Node 0 sends to node 2 and node 1 to node 3, both across
  // the spine. Leaf 0's uplink is 2 nodes · 1 NIC · 1.25e10 B/s / oversubscription.
  // At 1:1 each transfer gets a full NIC: 10 us + 1e8 / 1.25e10 s = 8.01 ms; at 2:1 the two
  // share an uplink of one NIC's rate: 10 us + 16 ms.
  ClusterSpec cluster = TestCluster(4);
  cluster.inter.nics_per_node = 1;
  cluster.inter.nodes_per_leaf = 2;
  const std::vector<Collective> traffic = {{CommKind::kSendRecv, {0, 8}, kS},
                                           {CommKind::kSendRecv, {4, 12}, kS}};
  EXPECT_EQ(Makespan<FlowModel>(traffic, cluster), TimeNs(8'010'000));
  cluster.inter.oversubscription = 2;
  EXPECT_EQ(Makespan<FlowModel>(traffic, cluster), TimeNs(16'010'000));
}

TEST(FlowModelTest, EveryRegisteredAlgorithmsFlowProgramBuilds) {
  // The flow model runs whatever algorithm the analytical chooser picks or a graph forces: every
  // entry has a cost and a program, and each program builds for a plain group.
  ClusterSpec cluster = TestCluster();
  cluster.servers = {.count = 2, .nic_bandwidth = cluster.inter.nic_bandwidth};
  cluster.intra.nvls = {.enabled = true, .latency = Microseconds(3), .efficiency = 0.5};
  const std::vector<int32_t> group = Ranks(0, 8);  // 2 nodes of 4: uniform, power of two
  for (const CollectiveAlgorithm& algorithm : CollectiveAlgorithms()) {
    ASSERT_NE(algorithm.cost, nullptr) << algorithm.name;
    ASSERT_NE(algorithm.program, nullptr) << algorithm.name;
    // Send/recv takes a pair; NVLS runs inside one node.
    const std::span<const int32_t> ranks = algorithm.kind == CommKind::kSendRecv
                                               ? std::span(group).first(2)
                                           : algorithm.name == "nvls" ? std::span(group).first(4)
                                                                      : std::span(group);
    const Expected<FlowProgram> program = algorithm.program({.kind = algorithm.kind,
                                                             .size = Bytes(kS),
                                                             .ranks = ranks,
                                                             .root = 0,
                                                             .cluster = &cluster});
    EXPECT_TRUE(program.ok()) << graph::CommKindName(algorithm.kind) << " " << algorithm.name
                              << ": " << program.error().ToString();
  }
}

// A 4 × 4 torus of single-GPU nodes with 4 NICs of 100 Gbps: each node's 5e10 B/s is split
// over its 4 direction links (±x, ±y), 1.25e10 B/s each; α_inter = 10 us.
ClusterSpec Torus4x4() {
  ClusterSpec torus = TestCluster(16);
  torus.gpus_per_node = 1;
  torus.inter.topology = InterTopology::kTorus2d;
  torus.inter.dimensions = {4, 4};
  torus.inter.nics_per_node = 4;
  return torus;
}

TEST(FlowTorusTest, RoutesDimensionOrderTheShorterWayRound) {
  const ClusterSpec torus = Torus4x4();
  // 0 → 5 is (0,0) → (1,1): +x then +y, two links of 1.25e10 B/s: 10 us + 1e8 / 1.25e10 s.
  EXPECT_EQ(Makespan<FlowModel>({{CommKind::kSendRecv, {0, 5}}}, torus), TimeNs(8'010'000));
  // 0 → 1 (+x) and 0 → 2 (+x twice) share node 0's +x link: each at half rate, 16.01 ms.
  EXPECT_EQ(
      Makespan<FlowModel>({{CommKind::kSendRecv, {0, 1}}, {CommKind::kSendRecv, {0, 2}}}, torus),
      TimeNs(16'010'000));
  // 0 → 3 goes the other way round (−x, one hop): no shared link with 0 → 1.
  EXPECT_EQ(
      Makespan<FlowModel>({{CommKind::kSendRecv, {0, 1}}, {CommKind::kSendRecv, {0, 3}}}, torus),
      TimeNs(8'010'000));
}

TEST(FlowTorusTest, RingAllReduceOnARingFabricMatchesAnalytical) {
  // 4 nodes of 4 GPUs on a node ring, 2 NICs pooled per node: the +/− links carry 1.25e10 B/s
  // each; the two channels run opposite ways, so a node moves 2.5e10 B/s, the analytical
  // model's min(k, NICs) × NIC rate. Both give 2·15 hops of (12 · 1 us + 4 · 10 us) / 16 =
  // 3.25 us + 2·15/16 · 1e8 / 2.5e10 s.
  ClusterSpec ring = TestCluster(4);
  ring.inter.topology = InterTopology::kRing;
  const Collective all_reduce{CommKind::kAllReduce, Ranks(0, 16), kS, "ring"};
  const TimeNs analytical = Makespan<AnalyticalModel>({all_reduce}, ring);
  EXPECT_EQ(analytical, TimeNs(97'500 + 7'500'000));
  EXPECT_NEAR(Ratio(Makespan<FlowModel>({all_reduce}, ring), analytical), 1.0, 0.01);
}

TEST(FlowTorusTest, NvlinkRingInsideANode) {
  // Four GPUs on an NVLink ring: each GPU's 1e11 B/s is two links of 5e10 B/s. GPU 0 → 2 is two
  // hops (0→1→2): 1 us + 1e8 / 5e10 s = 2.001 ms, twice the switch's 1.001 ms.
  ClusterSpec ring = TestCluster(1);
  ring.intra.topology = IntraTopology::kRing;
  EXPECT_EQ(Makespan<FlowModel>({{CommKind::kSendRecv, {0, 2}}}, ring), TimeNs(2'001'000));
  EXPECT_EQ(Makespan<FlowModel>({{CommKind::kSendRecv, {0, 2}}}, TestCluster(1)),
            TimeNs(1'001'000));
  // The ring all-reduce runs both directions and matches the analytical model's
  // 6 · 1 us + 6/4 · 1e8 / 1e11 s = 1.506 ms.
  const Collective all_reduce{CommKind::kAllReduce, Ranks(0, 4), kS, "ring"};
  EXPECT_EQ(Makespan<AnalyticalModel>({all_reduce}, ring), TimeNs(1'506'000));
  EXPECT_NEAR(Ratio(Makespan<FlowModel>({all_reduce}, ring), TimeNs(1'506'000)), 1.0, 0.01);
}

TEST(FlowTorusTest, EveryAlgorithmRunsOnATorus) {
  ClusterSpec torus = TestCluster(4);
  torus.inter.topology = InterTopology::kTorus2d;
  torus.inter.dimensions = {2, 2};
  for (const Collective& c :
       {Collective{CommKind::kAllReduce, Ranks(0, 16), kS, "tree"},
        Collective{CommKind::kAllReduce, Ranks(0, 16), kS, "hierarchical"},
        Collective{CommKind::kAllToAll, Ranks(0, 16), kS, "direct"},
        Collective{CommKind::kAllReduce, Ranks(0, 16), kS, "halving_doubling"}}) {
    EXPECT_GT(Makespan<FlowModel>({c}, torus), TimeNs(0)) << c.algorithm;
  }
}

}  // namespace
}  // namespace dtsim::network

namespace dtsim::network {
namespace {

// Group A = {0, 4, 8, 12} starts at 0; group B = {1, 5, 9, 13} after `delay` of compute, so it
// joins A's NICs mid-way through one of A's steps (forcing A's fast step to be replayed and
// materialized). Returns every task's end time.
std::vector<TimeNs> TwoRingsEndTimes(bool fast, DurationNs delay, int64_t size) {
  graph::TaskGraphBuilder builder;
  const std::vector<int32_t> a = {0, 4, 8, 12};
  const std::vector<int32_t> b = {1, 5, 9, 13};
  const graph::CommId ring_a =
      builder.AddCollective(CommKind::kAllReduce, Bytes(size), a, "a", "ring");
  const graph::CommId ring_b =
      builder.AddCollective(CommKind::kAllReduce, Bytes(size), b, "b", "ring");
  for (int32_t r : a) builder.AddCollectiveTask(builder.Stream(r, "nccl"), ring_a, "", "");
  for (int32_t r : b) {
    const graph::StreamId s = builder.Stream(r, "nccl");
    builder.AddTask(s, graph::TaskKind::kCompute, "", "", delay);
    builder.AddCollectiveTask(s, ring_b, "", "");
  }
  const TaskGraph graph = std::move(builder).Build().value();
  ClusterSpec cluster = testing_support::TestCluster(4);
  cluster.inter.nics_per_node = 1;  // A and B share every NIC
  FlowModel model(cluster, fast);
  EXPECT_TRUE(model.Prepare(graph).ok());
  engine::Simulator sim(graph, model);
  EXPECT_TRUE(sim.Run().ok());
  // With no delay the rings contend from their first step: nothing is isolated, nothing fast.
  // B joining inside A's first fast repeat (2,012 us) replays it before it completes: none
  // counts. Later, A's repeats before B's arrival ran fast.
  if (fast) {
    EXPECT_EQ(model.fast_steps() > 0, delay > Microseconds(2'012)) << delay.ns();
  }
  return {sim.times().task_end.begin(), sim.times().task_end.end()};
}

TEST(FlowFastPathTest, IsExactWhenAloneAndWhenJoinedMidStep) {
  // A's ring: 6 steps of 10 us + 2.5e7 B / 1.25e10 B/s = 2 ms each. B joins at 5.3 ms, inside
  // A's third step, which is on the fast path by then (one event for A's repeats 2-6); its
  // flows start at delay + 10 us: 4,022 us is in the latency gap between A's repeats 2 and 3
  // (4,020-4,030 us); 2,012 us inside A's second repeat, whose first 2 us ran fast.
  for (const int64_t delay_us : {0, 2'012, 4'012, 5'300, 20'000}) {
    const auto slow = TwoRingsEndTimes(false, Microseconds(delay_us), kS);
    const auto fast = TwoRingsEndTimes(true, Microseconds(delay_us), kS);
    EXPECT_EQ(slow, fast) << "B delayed by " << delay_us << " us";
  }
}

TEST(FlowFastPathTest, MakesLargeRingsCheap) {
  // 64 ranks on 16 nodes of the test cluster: 126 ring steps, of which only the first is
  // simulated flow by flow.
  const TaskGraph graph = Graph({{CommKind::kAllReduce, Ranks(0, 64), kS, "ring"}});
  FlowModel fast(TestCluster(16));
  ASSERT_TRUE(fast.Prepare(graph).ok());
  engine::Simulator sim(graph, fast);
  ASSERT_TRUE(sim.Run().ok());
  EXPECT_EQ(fast.fast_steps(), 2u * 63 - 1);
  FlowModel slow(TestCluster(16), false);
  ASSERT_TRUE(slow.Prepare(graph).ok());
  engine::Simulator reference(graph, slow);
  ASSERT_TRUE(reference.Run().ok());
  EXPECT_EQ(sim.makespan(), reference.makespan());
}

// Ring all-reduces inside node 0 (ranks 0-3) and node 1 (4-7) run at the same time on disjoint
// NVLink ports, while a ring over nodes 2 and 3 (8, 12) keeps the NICs busy; optionally a
// send 1 -> 2 after `delay` joins node 0's ring on its ports. Returns every task's end time and
// the fast steps taken.
std::pair<std::vector<TimeNs>, uint64_t> ConcurrentRingsEndTimes(bool fast,
                                                                 std::optional<DurationNs> delay) {
  TaskGraphBuilder builder;
  auto ring = [&](std::vector<int32_t> group, std::string_view name) {
    const graph::CommId comm =
        builder.AddCollective(CommKind::kAllReduce, Bytes(kS), group, name, "ring");
    for (int32_t r : group) builder.AddCollectiveTask(builder.Stream(r, "nccl"), comm, "", "");
  };
  ring({0, 1, 2, 3}, "node0");
  ring({4, 5, 6, 7}, "node1");
  ring({8, 12}, "nics");
  if (delay.has_value()) {
    const graph::StreamId from = builder.Stream(1, "p2p");
    builder.AddTask(from, graph::TaskKind::kCompute, "", "", *delay);
    builder.AddSend(from, 2, Bytes(kS), 0, "", "");
    builder.AddRecv(builder.Stream(2, "p2p"), 1, 0, "", "");
  }
  const TaskGraph graph = std::move(builder).Build().value();
  FlowModel model(TestCluster(4), fast);
  EXPECT_TRUE(model.Prepare(graph).ok());
  engine::Simulator sim(graph, model);
  EXPECT_TRUE(sim.Run().ok());
  const auto& end = sim.times().task_end;
  return {std::vector<TimeNs>(end.begin(), end.end()), model.fast_steps()};
}

TEST(FlowFastPathTest, StepsOnIdleLinksRunFastWhileOtherLinksAreBusy) {
  // Each intra-node ring: one step of 3 transfers of S/4 repeated 2(p-1) = 6 times; the first
  // repeat is simulated flow by flow, the other 5 are one event each, for both rings at once
  // (the NIC ring elsewhere does not touch their links). The NIC ring's 2 repeats: 1 fast.
  const auto [slow, none] = ConcurrentRingsEndTimes(false, std::nullopt);
  const auto [fast, fast_steps] = ConcurrentRingsEndTimes(true, std::nullopt);
  EXPECT_EQ(none, 0u);
  EXPECT_EQ(fast_steps, 5u + 5u + 1u);
  EXPECT_EQ(slow, fast);
  // A send joining node 0's ring inside its fourth step (each step: 1 us + 2.5e7 B / 1e11 B/s
  // = 251 us): the ring's fast step is replayed up to then and both contend from there, with
  // the same end times as without the fast path; node 1's ring stays fast throughout.
  for (const int64_t delay_us : {0, 900, 3'000}) {
    const auto [joined_slow, unused] = ConcurrentRingsEndTimes(false, Microseconds(delay_us));
    const auto [joined_fast, joined_steps] = ConcurrentRingsEndTimes(true, Microseconds(delay_us));
    EXPECT_EQ(joined_slow, joined_fast) << "send after " << delay_us << " us";
    EXPECT_GE(joined_steps, 5u) << "send after " << delay_us << " us";
  }
}

// A ring over ranks {0, 1, 4, 5} (nodes 0 and 1): each step moves S/4 over NVLink (0 -> 1,
// 4 -> 5: 250 us at 1e11 B/s) and over NICs (1 -> 4, 5 -> 0: 2 ms at 1.25e10 B/s), so its
// NVLink flows are done long before the step ends. Rank 0 sends 1 MB to rank 1 at 0 (alone: the
// send's time is learned) and again at `second_send`, inside the ring's third step (fast by
// then) after its NVLink flows are done: the send's links are idle, so it runs fast too, while
// the ring's fast step must be replayed and its NIC flows must still complete.
std::pair<std::vector<TimeNs>, Status> RingAndLateSendEndTimes(bool fast, DurationNs second_send) {
  TaskGraphBuilder builder;
  const std::vector<int32_t> group = {0, 1, 4, 5};
  const graph::CommId ring =
      builder.AddCollective(CommKind::kAllReduce, Bytes(kS), group, "ring", "ring");
  for (int32_t r : group) {
    const graph::StreamId stream = builder.Stream(r, "nccl");
    builder.AddTask(stream, graph::TaskKind::kCompute, "", "", Microseconds(100));
    builder.AddCollectiveTask(stream, ring, "", "");
  }
  const graph::StreamId from = builder.Stream(0, "p2p");
  const graph::StreamId to = builder.Stream(1, "p2p");
  builder.AddSend(from, 1, Bytes(1'000'000), 0, "", "");
  builder.AddRecv(to, 0, 0, "", "");
  builder.AddTask(from, graph::TaskKind::kCompute, "", "", second_send);
  builder.AddSend(from, 1, Bytes(1'000'000), 1, "", "");
  builder.AddRecv(to, 0, 1, "", "");
  const TaskGraph graph = std::move(builder).Build().value();
  FlowModel model(TestCluster(2), fast);
  EXPECT_TRUE(model.Prepare(graph).ok());
  engine::Simulator sim(graph, model);
  Status run = sim.Run();
  const auto& end = sim.times().task_end;
  return {std::vector<TimeNs>(end.begin(), end.end()), run};
}

TEST(FlowFastPathTest, AFastStepDisturbedByAnotherFastStepStillCompletes) {
  // Ring steps: 10 us + 2 ms; the third runs from 100 + 2·2010 = 4120 us to 6130 us. The
  // second send starts at 11 us (the first send: 1 us + 1e6 / 1e11 s = 11 us) + 5000 us.
  const auto [slow, slow_run] = RingAndLateSendEndTimes(false, Microseconds(5'000));
  const auto [fast, fast_run] = RingAndLateSendEndTimes(true, Microseconds(5'000));
  ASSERT_TRUE(slow_run.ok()) << slow_run.error().ToString();
  ASSERT_TRUE(fast_run.ok()) << fast_run.error().ToString();
  EXPECT_EQ(slow, fast);
}

}  // namespace
}  // namespace dtsim::network
