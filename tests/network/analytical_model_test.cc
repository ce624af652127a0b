// The analytical model inside the engine. Cluster: dgx-a100 (8 GPUs per node, 300 GB/s
// NVLink per GPU, α_intra = 2 us; 8 NICs of 200 Gbps = 25 GB/s, α_inter = 5 us) with its
// calibrated efficiencies set to 1, for round numbers.
#include "network/analytical_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/engine/simulator.h"
#include "sim/graph/builder.h"

namespace dtsim::network {
namespace {

using graph::CommKind;
using graph::TaskGraph;
using graph::TaskGraphBuilder;
using graph::TaskId;
using testing::HasSubstr;

// A data-parallel all-reduce over `ranks` ranks after 1 ms of compute each.
TaskGraph AllReduceGraph(int32_t ranks, int64_t bytes, std::string_view algorithm = "") {
  TaskGraphBuilder builder;
  std::vector<int32_t> group;
  for (int32_t r = 0; r < ranks; ++r) group.push_back(r);
  const graph::CommId ar =
      builder.AddCollective(CommKind::kAllReduce, Bytes(bytes), group, "grads", algorithm);
  for (int32_t r : group) {
    const graph::StreamId s = builder.Stream(r, "compute");
    const TaskId work = builder.AddTask(s, graph::TaskKind::kCompute, "bwd", "", Milliseconds(1));
    const TaskId post = builder.AddCollectiveTask(builder.Stream(r, "dp"), ar, "ar", "dp");
    builder.AddDependency(post, work);
  }
  return std::move(builder).Build().value();
}

ClusterSpec DgxA100AtLineRate(int nodes) {
  ClusterSpec cluster = *ClusterPreset("dgx-a100", nodes);
  cluster.intra.efficiency = 1.0;
  cluster.inter.efficiency = 1.0;
  return cluster;
}

TEST(AnalyticalModelTest, PricesAnAllReduceInTheEngine) {
  // 16 ranks: nodes sized to the graph, 2. Every collective first pays the preset's 8.4 us
  // collective latency. Ring: a circuit of 16 hops crosses 2 node boundaries, (14 · 2 us + 2 ·
  // 5 us) / 16 = 2.375 us a hop, 2 · 15 hops = 71.25 us; a node's 8 NICs (2e11 B/s) carry
  // 2 · 15/16 · 1e9 = 1.875e9 B: 9.375 ms; 9.44625 ms. Tree: 2 · (7 chain hops · 2 us + 1 level
  // · 5 us) = 38 us; on 2 nodes each node sends S = 1e9 B over its NICs (5 ms) while the 8-GPU
  // chain moves 2S = 2e9 B per GPU over NVLink at 3e11 B/s (6666667 ns): 6704667 ns. NCCL's
  // tuner runs the ring all the same: it gives the tree the ring's bus bandwidth (200 GB/s),
  // capped at 110 GB/s on two nodes, times 0.5 — 18.2 ms — against the ring's 9.51 ms (its
  // latency counted 1.9 times). The ring: 8.4 us + 9.44625 ms = 9454650 ns.
  const TaskGraph graph = AllReduceGraph(16, 1'000'000'000);
  AnalyticalModel model(DgxA100AtLineRate(0));
  ASSERT_TRUE(model.Prepare(graph).ok());
  EXPECT_EQ(model.cluster().nodes, 2);
  EXPECT_EQ(model.AlgorithmOf(graph::CommId(0)), "ring");
  engine::Simulator sim(graph, model);
  ASSERT_TRUE(sim.Run().ok());
  EXPECT_EQ(sim.makespan(), TimeNs(Milliseconds(1).ns() + 9'454'650));
}

TEST(AnalyticalModelTest, ForcedAlgorithmIsUsed) {
  // Forcing the ring on the same graph overrides the default: 8.4 us + 9.44625 ms.
  const TaskGraph graph = AllReduceGraph(16, 1'000'000'000, "ring");
  AnalyticalModel model(DgxA100AtLineRate(0));
  ASSERT_TRUE(model.Prepare(graph).ok());
  EXPECT_EQ(model.AlgorithmOf(graph::CommId(0)), "ring");
  EXPECT_EQ(model.Cost(graph::CommId(0)), Nanoseconds(9'454'650));
}

TEST(AnalyticalModelTest, Nvl72KeepsA64RankGroupOnNvlink) {
  // A 64-rank ring all-reduce of 1 GB at line rate. On a GB200 NVL72 rack all 64 GPUs share
  // one NVLink domain: 8.4 us + 2 · 63 hops × 2 us + 2 · 63/64 · 1e9 B at 900 GB/s per GPU
  // (2.1875 ms) = 2,447,900 ns. On DGX B200 nodes (same NVLink 5 inside, 8 GPUs each) the ring
  // crosses 8 nodes, whose 8 × 400 Gb/s NICs (4e11 B/s) carry 2 · 63/64 · 1e9 B: 4.92 ms.
  const TaskGraph graph = AllReduceGraph(64, 1'000'000'000, "ring");
  const auto line_rate = [](ClusterSpec cluster) {
    cluster.intra.efficiency = 1.0;
    cluster.inter.efficiency = 1.0;
    return cluster;
  };
  AnalyticalModel nvl72(line_rate(*ClusterPreset("gb200-nvl72", 1)));
  ASSERT_TRUE(nvl72.Prepare(graph).ok());
  EXPECT_EQ(nvl72.Cost(graph::CommId(0)), Nanoseconds(2'447'900));
  AnalyticalModel b200(line_rate(*ClusterPreset("dgx-b200", 8)));
  ASSERT_TRUE(b200.Prepare(graph).ok());
  EXPECT_GT(b200.Cost(graph::CommId(0)), Nanoseconds(4'920'000));
}

TEST(AnalyticalModelTest, RejectsWhatCannotRun) {
  AnalyticalModel small(DgxA100AtLineRate(1));
  EXPECT_EQ(small.Prepare(AllReduceGraph(16, 1000)).error().message(),
            "the graph has 16 ranks but the cluster has 8 GPUs (1 nodes of 8)");
  AnalyticalModel model(DgxA100AtLineRate(0));
  const Status unknown = model.Prepare(AllReduceGraph(4, 1000, "rnig"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.error().ToString(),
              HasSubstr("collective \"grads\" (all_reduce of 1000 B over ranks [0, 1, 2, 3]): "
                        "unknown all_reduce algorithm (did you mean \"ring\"?)"));
}

}  // namespace
}  // namespace dtsim::network
