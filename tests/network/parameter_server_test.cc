// The parameter-server all-reduce (BytePS): the servers spec, routing to servers, the
// analytical cost derived by hand, agreement of the flow model with it where nothing contends,
// and server sharing where it does. Cluster: tests/network/test_cluster.h (4 GPUs per node,
// 1e11 B/s and 1 us inside a node; 2 NICs of 1.25e10 B/s per node, 10 us across nodes).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <utility>
#include <vector>

#include "network/analytical_model.h"
#include "network/collective_algorithms.h"
#include "network/flow_model.h"
#include "network/topology.h"
#include "sim/engine/simulator.h"
#include "sim/graph/builder.h"
#include "tests/network/test_cluster.h"

namespace dtsim::network {
namespace {

using graph::CommKind;
using testing::HasSubstr;
using testing_support::Ranks;
using testing_support::TestCluster;

constexpr int64_t kS = 100'000'000;

ClusterSpec WithServers(int count, ServerPlacement placement, int nodes = 4) {
  ClusterSpec cluster = TestCluster(nodes);
  cluster.servers = {
      .count = count, .placement = placement, .nic_bandwidth = cluster.inter.nic_bandwidth};
  return cluster;
}

// All-reduces of kS bytes over `groups`, each forced to `algorithm`, posted at time 0.
graph::TaskGraph Graph(const std::vector<std::vector<int32_t>>& groups,
                       std::string_view algorithm) {
  graph::TaskGraphBuilder builder;
  int index = 0;
  for (const auto& group : groups) {
    const std::string stream = "dp" + std::to_string(index++);
    const graph::CommId comm =
        builder.AddCollective(CommKind::kAllReduce, Bytes(kS), group, "", algorithm);
    for (int32_t rank : group)
      builder.AddCollectiveTask(builder.Stream(rank, stream), comm, "", "");
  }
  return std::move(builder).Build().value();
}

template <typename Model>
Expected<TimeNs> Makespan(const std::vector<std::vector<int32_t>>& groups,
                          const ClusterSpec& cluster,
                          std::string_view algorithm = "parameter_server") {
  const graph::TaskGraph graph = Graph(groups, algorithm);
  Model model(cluster);
  DTSIM_RETURN_IF_ERROR(model.Prepare(graph));
  engine::Simulator sim(graph, model);
  DTSIM_RETURN_IF_ERROR(sim.Run());
  return sim.makespan();
}

const std::vector<int32_t> kOnePerNode = {0, 4, 8, 12};

TEST(ParameterServerTest, DedicatedServersHalveTheBytesOnEachNic) {
  // p = 4 ranks, one per node (k = 1: no on-node phases); m = 4 dedicated servers with NICs as
  // fast as a worker's, B = 1.25e10 B/s. Shard = S = 1e8 B, partition 4,096,000 B → c =
  // ⌈1e8 / 4.096e6⌉ = 25 slices of 4e6 B, each spread over 4 servers (1e6 B per server).
  // Per step a worker sends (and receives) 4e6 B: 320 us; a server receives 4 · 1e6 B: 320 us.
  // c + 1 = 26 steps of 10 us + 320 us = 8.58 ms — about (c+1)/c · S/B, where a ring all-reduce
  // takes 2 · 3 · 10 us + 2 · 3/4 · 1e8 / 1.25e10 s = 12.06 ms.
  const ClusterSpec cluster = WithServers(4, ServerPlacement::kDedicated);
  EXPECT_EQ(*Makespan<AnalyticalModel>({kOnePerNode}, cluster), TimeNs(8'580'000));
  EXPECT_EQ(*Makespan<AnalyticalModel>({kOnePerNode}, cluster, "ring"), TimeNs(12'060'000));
  const TimeNs flow = *Makespan<FlowModel>({kOnePerNode}, cluster);
  EXPECT_NEAR(static_cast<double>(flow.ns()), 8'580'000, 8'580'000 * 0.01);
}

TEST(ParameterServerTest, ColocatedServersSaveNothingOnAHomogeneousCluster) {
  // One server on each of the 4 nodes (BytePS's rationale: PS pays off only with extra server
  // bandwidth). Per slice a node pushes 3/4 of its 4e6 B to the 3 other nodes' servers, 3e6 B,
  // and its server receives 3 · 1e6 B; in the steps that push and pull, each direction of the
  // NIC carries 6e6 B: 480 us. The first (push only) and last (pull only) steps carry 3e6 B:
  // 240 us. 26 · 10 us + 2 · 240 us + 24 · 480 us = 12.26 ms, against the ring's 12.06 ms.
  const ClusterSpec cluster = WithServers(4, ServerPlacement::kColocated);
  EXPECT_EQ(*Makespan<AnalyticalModel>({kOnePerNode}, cluster), TimeNs(12'260'000));
  const TimeNs flow = *Makespan<FlowModel>({kOnePerNode}, cluster);
  EXPECT_NEAR(static_cast<double>(flow.ns()), 12'260'000, 12'260'000 * 0.01);
}

TEST(ParameterServerTest, FewServersBoundTheExchange) {
  // One dedicated server for 4 workers: it receives 4 · 4e6 B per slice, 1.28 ms;
  // 26 · (10 us + 1.28 ms) = 33.54 ms ≈ N · S / (m · B) · (c+1)/c.
  const ClusterSpec cluster = WithServers(1, ServerPlacement::kDedicated);
  EXPECT_EQ(*Makespan<AnalyticalModel>({kOnePerNode}, cluster), TimeNs(33'540'000));
  const TimeNs flow = *Makespan<FlowModel>({kOnePerNode}, cluster);
  EXPECT_NEAR(static_cast<double>(flow.ns()), 33'540'000, 33'540'000 * 0.01);
}

TEST(ParameterServerTest, WholeNodesPipelineTheOnNodeStagesWithPushAndPull) {
  // 16 ranks, 4 per node, 4 dedicated servers. c = 25 partitions of 4e6 B, each through
  // reduce-scatter (RS), push, pull, all-gather (AG): 28 steps, stage i on partition t − i.
  //   RS or AG: each rank sends 3/4 · 4e6 B over NVLink, 30 us, after 3 · 1 us;
  //   push or pull: a node's 2 NICs (2.5e10 B/s) carry 4e6 B, 160 us; a server receives
  //   16 ranks · 4e6/16 B = 4e6 B at 1.25e10 B/s, 320 us — the servers bound it; α 10 us.
  // Step 0 {RS}: 33 us; steps 1–26 (push or pull active, NVLink's ≤ 60 us hidden): 330 us;
  // step 27 {AG}: 33 us. Total 2 · 33 + 26 · 330 = 8,646 us.
  const ClusterSpec cluster = WithServers(4, ServerPlacement::kDedicated);
  EXPECT_EQ(*Makespan<AnalyticalModel>({Ranks(0, 16)}, cluster), TimeNs(8'646'000));
  const TimeNs flow = *Makespan<FlowModel>({Ranks(0, 16)}, cluster);
  EXPECT_NEAR(static_cast<double>(flow.ns()), 8'646'000, 8'646'000 * 0.01);
}

TEST(ParameterServerTest, PipelineRunsCoverEveryStageOfEveryPartition) {
  // 3 partitions through 4 stages: steps {RS}, {RS, push}, {RS, push, pull},
  // {push, pull, AG}, {pull, AG}, {AG}; with 10 partitions the full step repeats 7 times.
  ClusterSpec cluster = WithServers(2, ServerPlacement::kDedicated);
  cluster.servers.partition = Bytes(1000);
  const ServerPipeline three = PlanServerPipeline(cluster, 3000, 4);
  EXPECT_EQ(three.partitions, 3);
  EXPECT_EQ(three.piece, 1000.0 / 4 / 2);
  std::vector<std::pair<unsigned, int64_t>> runs;
  for (const ServerRun& run : three.runs) runs.emplace_back(run.stages, run.steps);
  const unsigned rs = kServerScatter, push = kServerPush, pull = kServerPull, ag = kServerGather;
  EXPECT_EQ(runs, (std::vector<std::pair<unsigned, int64_t>>{{rs, 1},
                                                             {rs | push, 1},
                                                             {rs | push | pull, 1},
                                                             {push | pull | ag, 1},
                                                             {pull | ag, 1},
                                                             {ag, 1}}));
  const ServerPipeline ten = PlanServerPipeline(cluster, 9500, 4);
  EXPECT_EQ(ten.partitions, 10);
  EXPECT_EQ(ten.runs.size(), 7u);
  EXPECT_EQ(ten.runs[3].stages, rs | push | pull | ag);
  EXPECT_EQ(ten.runs[3].steps, 7);
  // One rank per node: push and pull only, c + 1 steps.
  const ServerPipeline flat = PlanServerPipeline(cluster, 3000, 1);
  ASSERT_EQ(flat.runs.size(), 3u);
  EXPECT_EQ(flat.runs[1].stages, push | pull);
  EXPECT_EQ(flat.runs[1].steps, 2);
}

TEST(ParameterServerTest, OneNodeReducesWithoutTheServers) {
  // BytePS with one worker machine runs NCCL alone: a ring all-reduce, 2 · 3 · 1 us +
  // 2 · 3/4 · 1e8 B / 1e11 B/s = 1.506 ms.
  const ClusterSpec cluster = WithServers(2, ServerPlacement::kDedicated);
  EXPECT_EQ(*Makespan<AnalyticalModel>({Ranks(0, 4)}, cluster), TimeNs(1'506'000));
  EXPECT_EQ(*Makespan<FlowModel>({Ranks(0, 4)}, cluster), TimeNs(1'506'000));
}

TEST(ParameterServerTest, GroupsSharingTheServersSlowEachOtherInTheFlowModel) {
  // Two data-parallel groups (local index 0 and 1, on different NIC rails) push to the same 4
  // servers: each server receives 8 · 1e6 B per slice, 640 us, so each step takes 10 us +
  // 640 us and the pair 26 · 650 us = 16.9 ms. The analytical model, blind to contention,
  // prices each group alone (8.58 ms).
  const ClusterSpec cluster = WithServers(4, ServerPlacement::kDedicated);
  const std::vector<std::vector<int32_t>> groups = {kOnePerNode, {1, 5, 9, 13}};
  EXPECT_EQ(*Makespan<AnalyticalModel>(groups, cluster), TimeNs(8'580'000));
  const TimeNs flow = *Makespan<FlowModel>(groups, cluster);
  EXPECT_NEAR(static_cast<double>(flow.ns()), 16'900'000, 16'900'000 * 0.01);
}

TEST(ParameterServerTest, RoutesToDedicatedAndColocatedServers) {
  // Links: 16 GPUs' ports (0–31), then per node 2 NICs up/down (32–47); dedicated servers
  // after the NICs (48, 49: server 0 up, down).
  {
    const ClusterSpec cluster = WithServers(2, ServerPlacement::kDedicated);
    FluidNetwork net;
    const Topology topology = *Topology::Build(cluster, net);
    std::vector<FluidNetwork::LinkId> path;
    topology.Route(5, cluster.ServerEndpoint(1), path);  // node 1, rail 1
    EXPECT_EQ(path, (std::vector<FluidNetwork::LinkId>{32 + 2 * (1 * 2 + 1), 48 + 2 * 1 + 1}));
    path.clear();
    topology.Route(cluster.ServerEndpoint(0), 2, path);  // node 0, rail 0
    EXPECT_EQ(path, (std::vector<FluidNetwork::LinkId>{48, 32 + 1}));
  }
  {
    // Server 2 lives on node 2: GPU 1 reaches it by its rail (1) on both nodes.
    const ClusterSpec cluster = WithServers(4, ServerPlacement::kColocated);
    FluidNetwork net;
    const Topology topology = *Topology::Build(cluster, net);
    std::vector<FluidNetwork::LinkId> path;
    topology.Route(1, cluster.ServerEndpoint(2), path);
    EXPECT_EQ(path, (std::vector<FluidNetwork::LinkId>{32 + 2 * 1, 32 + 2 * (2 * 2 + 1) + 1}));
    EXPECT_EQ(net.link_count(), 48u);  // no server links
  }
}

TEST(ParameterServerTest, ClearErrors) {
  EXPECT_THAT(
      Makespan<AnalyticalModel>({kOnePerNode}, TestCluster()).error().ToString(),
      HasSubstr("the parameter_server algorithm needs parameter servers (cluster.servers)"));
  EXPECT_THAT(
      Makespan<FlowModel>({kOnePerNode}, TestCluster()).error().ToString(),
      HasSubstr("the parameter_server algorithm needs parameter servers (cluster.servers)"));
  const ClusterSpec cluster = WithServers(2, ServerPlacement::kDedicated);
  EXPECT_THAT(Makespan<AnalyticalModel>({{0, 1, 4}}, cluster).error().ToString(),
              HasSubstr("the parameter_server algorithm needs the same number of group members "
                        "on every node"));
}

std::string ErrorOf(const std::string& text) {
  const Expected<ClusterSpec> cluster = ClusterFromJson(Json::parse(text), "cluster");
  return cluster.ok() ? "(loaded fine)" : cluster.error().ToString();
}

TEST(ServerSpecTest, ReadsAndDefaults) {
  const Expected<ClusterSpec> cluster = ClusterFromJson(
      Json::parse(R"({"preset": "ethernet-25g", "nodes": 8, "servers": {"count": 8}})"), "cluster");
  ASSERT_TRUE(cluster.ok()) << cluster.error().ToString();
  EXPECT_EQ(cluster->servers.count, 8);
  EXPECT_EQ(cluster->servers.placement, ServerPlacement::kDedicated);
  EXPECT_EQ(cluster->servers.nic_bandwidth, cluster->inter.nic_bandwidth);  // the workers' NIC
  EXPECT_EQ(cluster->servers.partition, Bytes(4'096'000));                  // BytePS's default
  const Expected<ClusterSpec> custom = ClusterFromJson(
      Json::parse(R"({"preset": "ethernet-25g", "servers": {"count": 2, "nic_bandwidth":
                      "100 Gbps", "partition": "8 MiB"}})"),
      "cluster");
  ASSERT_TRUE(custom.ok()) << custom.error().ToString();
  EXPECT_EQ(custom->servers.nic_bandwidth.bits_per_second(), 100 * kGiga);
  EXPECT_EQ(custom->servers.partition, Bytes(8 * kMebi));
}

TEST(ServerSpecTest, BadInputNamesThePath) {
  EXPECT_EQ(ErrorOf(R"({"preset": "ethernet-25g", "servers": {}})"),
            "cluster.servers.count: missing required field");
  EXPECT_EQ(ErrorOf(R"({"preset": "ethernet-25g", "servers": {"count": 0}})"),
            "cluster.servers.count: must be in [1, 1048576], got 0");
  EXPECT_EQ(ErrorOf(R"({"preset": "ethernet-25g", "servers": {"count": 2, "placement": "local"}})"),
            "cluster.servers.placement: unknown server placement; registered: \"dedicated\", "
            "\"colocated\", got \"local\"");
  EXPECT_EQ(ErrorOf(R"({"preset": "ethernet-25g", "nodes": 2,
                        "servers": {"count": 3, "placement": "colocated"}})"),
            "cluster.servers.count: 3 colocated servers need as many nodes, but the cluster has "
            "2, got 3");
  EXPECT_EQ(ErrorOf(R"({"preset": "ethernet-25g", "servers": {"count": 2, "placement":
                        "colocated", "nic_bandwidth": "10 Gbps"}})"),
            "cluster.servers.nic_bandwidth: colocated servers use their node's NICs; "
            "nic_bandwidth is for dedicated ones");
  EXPECT_EQ(ErrorOf(R"({"preset": "ethernet-25g", "servers": {"count": 2, "nic_bandwidth":
                        "0 Gbps"}})"),
            "cluster.servers.nic_bandwidth: bandwidth must be positive, got \"0 Gbps\"");
  EXPECT_EQ(ErrorOf(R"({"preset": "ethernet-25g", "servers": {"count": 2, "partition": "0 B"}})"),
            "cluster.servers.partition: must be positive, got \"0 B\"");
  EXPECT_EQ(ErrorOf(R"({"preset": "dgx-a100", "nodes": 4, "inter_node": {"topology":
                        "torus-2d", "dimensions": [2, 2]}, "servers": {"count": 2}})"),
            "cluster.servers.placement: dedicated parameter servers attach to a switched fabric "
            "(fat-tree or rail-optimized), not a torus-2d; colocate them instead, got "
            "\"dedicated\"");
  EXPECT_EQ(ErrorOf(R"({"preset": "ethernet-25g", "servers": {"count": 2, "nics": 1}})"),
            "cluster.servers.nics: unknown key (expected one of \"count\", \"placement\", "
            "\"nic_bandwidth\", \"partition\")");
  // Sized to the workload later: colocated servers must still fit on the nodes.
  ClusterSpec cluster = *ClusterFromJson(
      Json::parse(R"({"preset": "ethernet-25g", "servers": {"count": 4, "placement":
                      "colocated"}})"),
      "cluster");
  EXPECT_EQ(FitCluster(cluster, 16).error().ToString(),
            "servers.count: 4 colocated servers need as many nodes, but the cluster has 2, got 4");
}

// The parameter-server pipeline is the flow programs' one step that repeats (a ring streams its
// steps as one pipeline): its later repeats take the flow model's fast path, one event for all
// of them, and a send joining its NICs at any moment — inside a repeat's transfers or in the
// latency between two — replays it exactly. Returns every task's end time and the fast steps.
std::pair<std::vector<TimeNs>, uint64_t> PipelineAndSendEndTimes(bool fast,
                                                                 std::optional<DurationNs> send) {
  graph::TaskGraphBuilder builder;
  const graph::CommId comm =
      builder.AddCollective(CommKind::kAllReduce, Bytes(kS), kOnePerNode, "", "parameter_server");
  for (int32_t rank : kOnePerNode)
    builder.AddCollectiveTask(builder.Stream(rank, "dp"), comm, "", "");
  if (send.has_value()) {
    const graph::StreamId from = builder.Stream(0, "p2p");
    builder.AddTask(from, graph::TaskKind::kCompute, "", "", *send);
    builder.AddSend(from, 4, Bytes(kS / 10), 0, "", "");
    builder.AddRecv(builder.Stream(4, "p2p"), 0, 0, "", "");
  }
  const graph::TaskGraph graph = std::move(builder).Build().value();
  FlowModel model(WithServers(4, ServerPlacement::kDedicated), fast);
  EXPECT_TRUE(model.Prepare(graph).ok());
  engine::Simulator sim(graph, model);
  EXPECT_TRUE(sim.Run().ok());
  const auto& end = sim.times().task_end;
  return {std::vector<TimeNs>(end.begin(), end.end()), model.fast_steps()};
}

TEST(ParameterServerTest, RepeatedStepsRunFastAndExactly) {
  const auto [slow, none] = PipelineAndSendEndTimes(false, std::nullopt);
  const auto [fast, fast_steps] = PipelineAndSendEndTimes(true, std::nullopt);
  EXPECT_EQ(slow, fast);
  EXPECT_EQ(none, 0u);
  EXPECT_GT(fast_steps, 10u);  // 25 partitions: most of the c + 3 steps are repeats
  const int64_t whole = slow.back().ns();
  for (const int64_t at : {whole / 10, whole * 37 / 100, whole / 2, whole * 83 / 100}) {
    const auto [joined_slow, unused] = PipelineAndSendEndTimes(false, DurationNs(at));
    const auto [joined_fast, joined_steps] = PipelineAndSendEndTimes(true, DurationNs(at));
    EXPECT_EQ(joined_slow, joined_fast) << "send at " << at << " ns";
    EXPECT_GT(joined_steps, 0u) << "send at " << at << " ns";
  }
}

}  // namespace
}  // namespace dtsim::network
