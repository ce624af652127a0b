// The flow model: agreement with the analytical model where nothing contends, and contention
// where traffic shares links. Cluster: tests/network/test_cluster.h.
#include "network/flow_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "network/analytical_model.h"
#include "network/cluster.h"
#include "sim/engine/simulator.h"
#include "sim/graph/builder.h"
#include "tests/network/test_cluster.h"

namespace dtsim::network {
namespace {

using graph::CommKind;
using graph::TaskGraph;
using graph::TaskGraphBuilder;
using testing_support::Ranks;
using testing_support::TestCluster;

constexpr int64_t kS = 100'000'000;

struct Collective {
  CommKind kind;
  std::vector<int32_t> group;
  int64_t size = kS;
  std::string_view algorithm;
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

// On a DGX-1's NVLink mesh both models move a group's all-reduce at the rings its GPUs' links
// hold (MeshRingsTest derives the analytical times): the flow model caps each on-node transfer
// at that rate, so isolated they agree.
TEST(FlowModelMeshTest, BothModelsPriceTheRingsOfTheGroupsGpus) {
  const ClusterSpec cluster = *ClusterPreset("dgx1-v100");
  for (int gpus : {2, 4, 5, 8}) {
    const Collective all_reduce{CommKind::kAllReduce, Ranks(0, gpus), kS, "ring"};
    const TimeNs analytical = Makespan<AnalyticalModel>({all_reduce}, cluster);
    const TimeNs flow = Makespan<FlowModel>({all_reduce}, cluster);
    EXPECT_NEAR(Ratio(flow, analytical), 1.0, 0.01)
        << gpus << " GPUs: flow " << flow.ns() << " ns, analytical " << analytical.ns() << " ns";
  }
  EXPECT_EQ(Makespan<AnalyticalModel>({{CommKind::kAllReduce, Ranks(0, 2), kS, "ring"}}, cluster),
            TimeNs(4'508'783));
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

// NVLS moves its port volume at its own rate in both models: the flow program scales its
// bytes by intra efficiency × bandwidth / NVLS rate so that links priced at the intra
// efficiency take the analytical time. p = 4, S = 1e8: NCCL's chunk is 64 KiB (16 channels ×
// 4 heads: 64 KiB below 512 MiB, 32 KiB below 32 MiB); at 1e11 · 0.5 B/s a channel moves
// 3.125e9 B/s and the 640 ns chunk overhead is 2,000 B of it, so the rate is 5e10 ·
// (1 + 2000/131072) / (1 + 2000/65536) = 4.92597e10 B/s, and 5/4 · 1e8 B take 2,537,574 ns
// (rounded up), after 3 us.
TEST(FlowModelTest, NvlsMatchesAnalytical) {
  ClusterSpec cluster = TestCluster();
  cluster.intra.efficiency = 0.8;
  cluster.intra.nvls = {.enabled = true, .latency = Microseconds(3), .efficiency = 0.5};
  const Collective nvls{CommKind::kAllReduce, Ranks(0, 4), kS, "nvls"};
  EXPECT_EQ(Makespan<AnalyticalModel>({nvls}, cluster), TimeNs(3'000 + 2'537'574));
  EXPECT_NEAR(Ratio(Makespan<FlowModel>({nvls}, cluster), TimeNs(3'000 + 2'537'574)), 1.0, 0.001);
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
  // A send crosses the network in NCCL's 128 KiB messages, which keep f = 0.9117629 of a NIC
  // (NetMessageEfficiency; collective_algorithms_test.cc derives it): 1.139704e10 B/s.
  // At 1:1 each transfer gets a full NIC: 10 us + 1e8 / 1.139704e10 s = 8.784212 ms; at 2:1
  // the two share an uplink of one NIC's rate: 10 us + 17.548423 ms.
  ClusterSpec cluster = TestCluster(4);
  cluster.inter.nics_per_node = 1;
  cluster.inter.nodes_per_leaf = 2;
  const std::vector<Collective> traffic = {{CommKind::kSendRecv, {0, 8}, kS},
                                           {CommKind::kSendRecv, {4, 12}, kS}};
  EXPECT_EQ(Makespan<FlowModel>(traffic, cluster), TimeNs(8'784'212));
  cluster.inter.oversubscription = 2;
  EXPECT_EQ(Makespan<FlowModel>(traffic, cluster), TimeNs(17'558'423));
}

// 8 nodes of 4 GPUs and `nics` NICs, 2 nodes a leaf (1:1), 4 a pod, pods at 1:`oversubscription`.
ClusterSpec Pods(int nics, double oversubscription) {
  ClusterSpec cluster = TestCluster(8);
  cluster.inter.nics_per_node = nics;
  cluster.inter.nodes_per_leaf = 2;
  cluster.inter.nodes_per_pod = 4;
  cluster.inter.pod_oversubscription = oversubscription;
  return cluster;
}

TEST(FlowContentionTest, PodUplinksCarryOnlyTrafficBetweenPods) {
  // 8 nodes of 1 NIC, 2 a leaf (1:1), 4 a pod, pods at 1:4: pod 0's up-link to the core is
  // 4 nodes · 1 NIC / 4 = one NIC's rate. Nodes 0 and 1 sending to nodes 4 and 5 share it: half
  // a NIC each, as in the 2:1 spine test (17.558423 ms). Sending to nodes 2 and 3 instead
  // crosses leaves but not pods: a full NIC each (8.784212 ms).
  const ClusterSpec cluster = Pods(1, 4);
  EXPECT_EQ(Makespan<FlowModel>(
                {{CommKind::kSendRecv, {0, 16}, kS}, {CommKind::kSendRecv, {4, 20}, kS}}, cluster),
            TimeNs(17'558'423));
  EXPECT_EQ(Makespan<FlowModel>(
                {{CommKind::kSendRecv, {0, 8}, kS}, {CommKind::kSendRecv, {4, 12}, kS}}, cluster),
            TimeNs(8'784'212));
}

TEST(FlowContentionTest, RingsAcrossPodsAgreeWithTheAnalyticalShareThatClimbs) {
  // 8 nodes of 4 GPUs and 4 NICs, 2 a leaf, 4 a pod, pods at 1:8: each pod's up-link carries
  // 16 NICs / 8 = 2 NICs' rate. Four rings, one per local GPU (each on its own rail), over all
  // 8 nodes: each leaves each pod on one edge, 4 edges through 2 NICs' worth — half a NIC each,
  // what the analytical model charges one ring on copies of it: max(1, 8 · 1/4) = 2.
  ClusterSpec cluster = Pods(4, 8);
  std::vector<Collective> rings;
  for (int gpu = 0; gpu < 4; ++gpu) {
    std::vector<int32_t> group;
    for (int node = 0; node < 8; ++node) group.push_back(node * 4 + gpu);
    rings.push_back({CommKind::kAllReduce, group, kS, "ring"});
  }
  const TimeNs analytical = Makespan<AnalyticalModel>({rings.front()}, cluster);
  const TimeNs flow = Makespan<FlowModel>(rings, cluster);
  EXPECT_NEAR(Ratio(flow, analytical), 1.0, 0.01)
      << "flow " << flow.ns() << " ns, analytical " << analytical.ns() << " ns";
  // In a training step (every GPU communicating at once) one ring stands for its copies: its
  // climbing transfers are capped at their share of the pods' up-links, and it alone takes as
  // long as the four.
  cluster.gpus_share_nics = true;
  EXPECT_NEAR(Ratio(Makespan<FlowModel>({rings.front()}, cluster), analytical), 1.0, 0.01);
  cluster.gpus_share_nics = false;
  EXPECT_NEAR(Ratio(Makespan<FlowModel>({rings.front()}, cluster), analytical), 0.5, 0.01);
  // Without the pods' oversubscription both run at a full NIC: about half as long.
  cluster.inter.pod_oversubscription = 1;
  EXPECT_NEAR(Ratio(Makespan<AnalyticalModel>({rings.front()}, cluster), analytical), 0.5, 0.01);
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
  // 0 → 5 is (0,0) → (1,1): +x then +y, two links of 1.25e10 B/s, in NCCL's 128 KiB network
  // messages (f = 0.9117629 of a link, NetMessageEfficiency): 10 us + 1e8 / 1.139704e10 s.
  EXPECT_EQ(Makespan<FlowModel>({{CommKind::kSendRecv, {0, 5}}}, torus), TimeNs(8'784'212));
  // 0 → 1 (+x) and 0 → 2 (+x twice) share node 0's +x link: each at half rate, 17.558423 ms.
  EXPECT_EQ(
      Makespan<FlowModel>({{CommKind::kSendRecv, {0, 1}}, {CommKind::kSendRecv, {0, 2}}}, torus),
      TimeNs(17'558'423));
  // 0 → 3 goes the other way round (−x, one hop): no shared link with 0 → 1.
  EXPECT_EQ(
      Makespan<FlowModel>({{CommKind::kSendRecv, {0, 1}}, {CommKind::kSendRecv, {0, 3}}}, torus),
      TimeNs(8'784'212));
}

// A send/recv runs at what NCCL's channels for the pair move (network/nccl_p2p.h), in both
// models, after the 8.4 us collective latency and the hop's. On a DGX H100 a pair on one node
// is a 2-rank communicator: 32 / 2 = 16 channels of 450 GB/s × 0.822 / 18 = 20.55 GB/s,
// 328.8 GB/s for 32 MiB: 8.4 + 2 us + 33,554,432 B / 328.8 GB/s = 10.4 us + 102,052 ns (rounded
// up). Two such sends from GPU 0 (to 1 and to 2) share its 369.9 GB/s port: 184.95 GB/s each, 10.4
// us + 181,425 ns, where the analytical model, blind to the shared port, keeps 112,452 ns. Across
// nodes 4 channels of 13.58 GB/s would pass the NIC's 48.5 GB/s: the NIC's rate in NCCL's
// 128 KiB network messages, 48.5 GB/s × 0.9117629 (NetMessageEfficiency) = 44.22 GB/s,
// 8.4 + 5 us + 758,799 ns.
TEST(FlowSendRecvTest, RunsAtTheRateOfItsNcclChannels) {
  const ClusterSpec dgx = ClusterPreset("dgx-h100", 2).value();
  constexpr int64_t kSize = 32 << 20;
  const Collective near{CommKind::kSendRecv, {0, 1}, kSize};
  EXPECT_EQ(Makespan<AnalyticalModel>({near}, dgx), TimeNs(10'400 + 102'052));
  EXPECT_EQ(Makespan<FlowModel>({near}, dgx), TimeNs(10'400 + 102'052));
  const std::vector<Collective> fan = {near, {CommKind::kSendRecv, {0, 2}, kSize}};
  EXPECT_EQ(Makespan<AnalyticalModel>(fan, dgx), TimeNs(10'400 + 102'052));
  EXPECT_NEAR(static_cast<double>(Makespan<FlowModel>(fan, dgx).ns()), 10'400 + 181'425, 2);
  const Collective far{CommKind::kSendRecv, {0, 8}, kSize};
  EXPECT_EQ(Makespan<AnalyticalModel>({far}, dgx), TimeNs(13'400 + 758'799));
  EXPECT_NEAR(static_cast<double>(Makespan<FlowModel>({far}, dgx).ns()), 13'400 + 758'799, 2);
}

// A shift (ring attention's K/V exchange) is a group of NCCL sends in the group's communicator,
// each hop at what NCCL's channels for it move. Eight ranks of one DGX H100: the communicator's
// 32 channels give each of the 8 hops 32 / 8 = 4, and a 32 MiB hop in parts of 8 MiB (within
// the 16 MiB NVLink part limit) stays on them: 4 × 20.55 GB/s = 82.2 GB/s, 33,554,432 B in
// 408,205 ns (rounded up) after 8.4 + 2 us, where NVLink's 369.9 GB/s would take 90,712 ns.
// Sixteen ranks on two nodes: the hops leaving a node (7 → 8, 15 → 0) run on a NIC in 128 KiB
// network messages at 48.5 × 0.9117629 = 44.22 GB/s, 758,799 ns after 8.4 + 5 us, and the 14
// on-node hops (4 channels each in the 2-node communicator, 408,205 ns) finish under them.
TEST(FlowShiftTest, EachHopRunsAtTheRateOfItsNcclChannels) {
  const ClusterSpec dgx = ClusterPreset("dgx-h100", 2).value();
  constexpr int64_t kSize = 32 << 20;
  const Collective node{CommKind::kShift, Ranks(0, 8), kSize};
  EXPECT_EQ(Makespan<AnalyticalModel>({node}, dgx), TimeNs(10'400 + 408'205));
  EXPECT_NEAR(static_cast<double>(Makespan<FlowModel>({node}, dgx).ns()), 10'400 + 408'205, 2);
  const Collective two{CommKind::kShift, Ranks(0, 16), kSize};
  EXPECT_EQ(Makespan<AnalyticalModel>({two}, dgx), TimeNs(13'400 + 758'799));
  EXPECT_NEAR(static_cast<double>(Makespan<FlowModel>({two}, dgx).ns()), 13'400 + 758'799, 2);
}

// Both models record how they run each communication, for results and timelines: the
// algorithm, and for a send/recv or a shift its NCCL channels (16 on one DGX H100 node for a
// pair, 4 to another node, 4 a hop for a shift of 8 ranks; see RunsAtTheRateOfItsNcclChannels).
TEST(CommMethodsTest, BothModelsNameTheAlgorithmAndChannels) {
  const ClusterSpec dgx = ClusterPreset("dgx-h100", 2).value();
  const TaskGraph graph = Graph({{CommKind::kAllReduce, Ranks(0, 8), kS, ""},
                                 {CommKind::kAllReduce, Ranks(0, 16), kS, "ring"},
                                 {CommKind::kSendRecv, {0, 1}, 32 << 20},
                                 {CommKind::kSendRecv, {0, 8}, 32 << 20},
                                 {CommKind::kShift, Ranks(0, 8), 32 << 20}});
  AnalyticalModel analytical(dgx);
  FlowModel flow(dgx);
  ASSERT_TRUE(analytical.Prepare(graph).ok());
  ASSERT_TRUE(flow.Prepare(graph).ok());
  for (const ClusterModel* model :
       {static_cast<const ClusterModel*>(&analytical), static_cast<const ClusterModel*>(&flow)}) {
    const CommMethods& methods = model->methods();
    ASSERT_EQ(methods.of_comm.size(), 5u);
    EXPECT_EQ(methods.of(graph::CommId(0)), "nvls");
    EXPECT_EQ(methods.of(graph::CommId(1)), "ring");
    // The builder numbers collectives first, then the send/recvs.
    EXPECT_EQ(methods.of(graph::CommId(2)), "direct on 4 channels");  // the shift
    EXPECT_EQ(methods.of(graph::CommId(3)), "direct on 16 channels");
    EXPECT_EQ(methods.of(graph::CommId(4)), "direct on 4 channels");
  }
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

// Two runs of the same collective (two communications with one program: the model plans
// each distinct (kind, size, group, algorithm) once) on each member's stream `stream`, after
// `delay` of compute: the second run of a step that ran alone is the one the fast path takes.
void PostTwice(TaskGraphBuilder& builder, CommKind kind, const std::vector<int32_t>& group,
               std::string_view stream, DurationNs delay = DurationNs::Zero()) {
  const graph::CommId first = builder.AddCollective(kind, Bytes(kS), group, "", "ring");
  const graph::CommId second = builder.AddCollective(kind, Bytes(kS), group, "", "ring");
  for (int32_t r : group) {
    const graph::StreamId s = builder.Stream(r, stream);
    if (delay > DurationNs::Zero()) builder.AddTask(s, graph::TaskKind::kCompute, "", "", delay);
    builder.AddCollectiveTask(s, first, "", "");
    builder.AddCollectiveTask(s, second, "", "");
  }
}

// A ring is one pipelined flow per channel: a 64-rank all-reduce over 16 nodes of the test
// cluster (2 channels, one per NIC) starts 2 flows, not 2 × 64 per step for 126 steps, and
// takes the analytical time.
TEST(FlowPipelineTest, ARingIsOneFlowPerChannel) {
  const TaskGraph graph = Graph({{CommKind::kAllReduce, Ranks(0, 64), kS, "ring"}});
  FlowModel model(TestCluster(16));
  ASSERT_TRUE(model.Prepare(graph).ok());
  engine::Simulator sim(graph, model);
  ASSERT_TRUE(sim.Run().ok());
  EXPECT_EQ(model.flows_started(), 2u);
  EXPECT_NEAR(Ratio(sim.makespan(),
                    Makespan<AnalyticalModel>({{CommKind::kAllReduce, Ranks(0, 64), kS, "ring"}},
                                              TestCluster(16))),
              1.0, 0.01);
}

// A pipeline runs at the rate of its most contended edge, on every edge. Ring {0, 1, 4, 5}
// (2 channels) all-reduces S: each edge carries 2(p − 1) = 6 steps of S/(4 · 2) = 7.5e7 B
// after 6 ring hops of (2 · 1 + 2 · 10) / 4 = 5.5 us. Its NIC edges are the bottleneck:
// 7.5e7 / 1.25e10 s = 6 ms, so 6.033 ms. A send 0 -> 1 of S posted with it shares GPU 0's
// out-port (1e11 B/s) with channel 0's NVLink edge 0 -> 1, which moves only 1.25e10 B/s: max-min
// fair, the send gets the other 8.75e10 B/s after its 1 us latency (the ring's flows start at
// 33 us; before that the send is alone at 1e11): 32 us · 1e11 = 3.2e6 B, then
// (1e8 − 3.2e6) / 8.75e10 s = 1.106286 ms, ending at 33 us + 1.106286 ms = 1.139286 ms. Had
// the ring's edges moved independently, the NVLink edge would have taken half the port.
TEST(FlowPipelineTest, EveryEdgeMovesAtTheRateOfTheSlowest) {
  const std::vector<int32_t> group = {0, 1, 4, 5};
  TaskGraphBuilder builder;
  const graph::CommId ring =
      builder.AddCollective(CommKind::kAllReduce, Bytes(kS), group, "ring", "ring");
  for (int32_t r : group) builder.AddCollectiveTask(builder.Stream(r, "nccl"), ring, "", "");
  builder.AddSend(builder.Stream(0, "p2p"), 1, Bytes(kS), 0, "", "");
  builder.AddRecv(builder.Stream(1, "p2p"), 0, 0, "", "");
  const TaskGraph graph = std::move(builder).Build().value();
  FlowModel model(TestCluster(2));
  ASSERT_TRUE(model.Prepare(graph).ok());
  engine::Simulator sim(graph, model);
  ASSERT_TRUE(sim.Run().ok());
  EXPECT_EQ(sim.makespan(), TimeNs(6'033'000));
  const auto& end = sim.times().task_end;
  EXPECT_EQ(*std::min_element(end.begin(), end.end()), TimeNs(1'139'286));
}

// Group A = {0, 4, 8, 12} all-reduces twice from 0; group B = {1, 5, 9, 13} once, after
// `delay` of compute, through the same NICs. Returns every task's end time.
std::vector<TimeNs> TwoRingsEndTimes(bool fast, DurationNs delay, uint64_t* fast_steps) {
  graph::TaskGraphBuilder builder;
  const std::vector<int32_t> a = {0, 4, 8, 12};
  const std::vector<int32_t> b = {1, 5, 9, 13};
  const graph::CommId ring_b =
      builder.AddCollective(CommKind::kAllReduce, Bytes(kS), b, "b", "ring");
  PostTwice(builder, CommKind::kAllReduce, a, "nccl");
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
  *fast_steps = model.fast_steps();
  return {sim.times().task_end.begin(), sim.times().task_end.end()};
}

TEST(FlowFastPathTest, IsExactWhenAloneAndWhenJoinedMidStep) {
  // A's all-reduce: one channel, 6 ring hops of 10 us, then each edge moves 6 · S/4 = 1.5e8 B
  // at 1.25e10 B/s: 60 us + 12 ms. Run 1 is alone (its time is learned) over 0-12.06 ms; run
  // 2's flows would start at 12.12 ms and it goes fast. B's flows start at delay + 60 us:
  // inside run 1 (0, 5,300 us: both contend, run 2 then starts beside B), just before run 2's
  // (12,040 us: run 2 is not isolated), inside run 2 while it is fast (15,000 us: it is replayed
  // up to then and its flow joins with the bytes it has left), after it (30,000 us: run 2 ran
  // fast to the end, the one fast step).
  for (const int64_t delay_us : {0, 5'300, 12'040, 15'000, 30'000}) {
    uint64_t slow_steps = 0;
    uint64_t fast_steps = 0;
    const auto slow = TwoRingsEndTimes(false, Microseconds(delay_us), &slow_steps);
    const auto fast = TwoRingsEndTimes(true, Microseconds(delay_us), &fast_steps);
    EXPECT_EQ(slow, fast) << "B delayed by " << delay_us << " us";
    EXPECT_EQ(slow_steps, 0u);
    EXPECT_EQ(fast_steps, delay_us == 30'000 ? 1u : 0u) << "B delayed by " << delay_us << " us";
  }
}

// Ring all-reduces inside node 0 (ranks 0-3) and node 1 (4-7), each twice, run at the same
// time on disjoint NVLink ports, while a ring over nodes 2 and 3 (8, 12) keeps the NICs busy;
// optionally a send 1 -> 2 after `delay` joins node 0's ring on its ports. Returns every task's
// end time and the fast steps taken.
std::pair<std::vector<TimeNs>, uint64_t> ConcurrentRingsEndTimes(bool fast,
                                                                 std::optional<DurationNs> delay) {
  TaskGraphBuilder builder;
  PostTwice(builder, CommKind::kAllReduce, {0, 1, 2, 3}, "nccl");
  PostTwice(builder, CommKind::kAllReduce, {4, 5, 6, 7}, "nccl");
  PostTwice(builder, CommKind::kAllReduce, {8, 12}, "nccl");
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
  // Each ring's first run is simulated as flows and its second is one event — for the two
  // intra-node rings while the NIC ring runs elsewhere, which touches none of their links.
  const auto [slow, none] = ConcurrentRingsEndTimes(false, std::nullopt);
  const auto [fast, fast_steps] = ConcurrentRingsEndTimes(true, std::nullopt);
  EXPECT_EQ(none, 0u);
  EXPECT_EQ(fast_steps, 3u);
  EXPECT_EQ(slow, fast);
  // Node 0's ring: 6 hops of 1 us, then 6 · S/4 = 1.5e8 B per edge at 1e11 B/s: 1.506 ms a
  // run. A send after 0 or 900 us joins run 1 (which then never ran alone: run 2 is simulated
  // as flows); after 2,000 us it joins run 2 while it is fast (replayed, then contended). Node
  // 1's and the NIC ring's second runs stay fast throughout.
  for (const int64_t delay_us : {0, 900, 2'000}) {
    const auto [joined_slow, unused] = ConcurrentRingsEndTimes(false, Microseconds(delay_us));
    const auto [joined_fast, joined_steps] = ConcurrentRingsEndTimes(true, Microseconds(delay_us));
    EXPECT_EQ(joined_slow, joined_fast) << "send after " << delay_us << " us";
    EXPECT_EQ(joined_steps, 2u) << "send after " << delay_us << " us";
  }
}

// The ring over ranks {0, 1, 4, 5} (nodes 0 and 1) all-reduces twice from 100 us. Rank 0 sends
// 1 MB to rank 1 at 0 (alone: the send's time is learned) and again at `second_send`, inside
// the ring's second run (fast by then): the send finds its port held by the ring, whose fast
// step is replayed and whose flows must still complete beside the send's.
std::pair<std::vector<TimeNs>, Status> RingAndLateSendEndTimes(bool fast, DurationNs second_send) {
  TaskGraphBuilder builder;
  const std::vector<int32_t> group = {0, 1, 4, 5};
  PostTwice(builder, CommKind::kAllReduce, group, "nccl", Microseconds(100));
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

TEST(FlowFastPathTest, AFastStepDisturbedByAnotherStepStillCompletes) {
  // Ring runs: 33 us + 6 ms (FlowPipelineTest above); run 2 from 6,133 us to 12,166 us, its
  // flows from 6,166 us. The second send starts at 11 us (the first send: 1 us + 1e6 / 1e11 s)
  // + 8,000 us.
  const auto [slow, slow_run] = RingAndLateSendEndTimes(false, Microseconds(8'000));
  const auto [fast, fast_run] = RingAndLateSendEndTimes(true, Microseconds(8'000));
  ASSERT_TRUE(slow_run.ok()) << slow_run.error().ToString();
  ASSERT_TRUE(fast_run.ok()) << fast_run.error().ToString();
  EXPECT_EQ(slow, fast);
}

}  // namespace
}  // namespace dtsim::network
