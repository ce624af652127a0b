// Chakra export and import of task graphs: dtsim's ET output read back gives the same graph
// (the hand-made pipeline example, a replay graph of a real Kineto trace, and a graph with
// every task kind, roots, priced groups, labels, a dependency on a later task and one across
// ranks); the shared chakra.0.et as a graph; multi-rank matching and the errors of traces that
// cannot be a graph.
#include "traces/chakra_graph.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "sim/base/atomic_file.h"
#include "sim/base/json_reader.h"
#include "sim/graph/builder.h"
#include "sim/graph/graph_json.h"
#include "tests/testing/temp_dir.h"
#include "tests/traces/chakra_test_traces.h"
#include "tests/traces/trace_test_files.h"
#include "traces/chakra_reader.h"
#include "traces/chakra_writer.h"
#include "traces/kineto_reader.h"
#include "traces/replay_graph.h"

namespace dtsim::traces {
namespace {

using graph::TaskKind;
using testing::HasSubstr;

class ChakraGraphTest : public testing_support::TempDirTest {
 protected:
  // Writes `graph` as Chakra files, reads every rank back and rebuilds the graph.
  Expected<ChakraGraph> RoundTrip(const graph::TaskGraph& graph) {
    const Expected<std::vector<std::string>> paths = WriteChakraGraph(graph, Path("workload"));
    EXPECT_TRUE(paths.ok()) << paths.error().ToString();
    std::vector<ChakraTrace> traces;
    for (int32_t rank = 0; rank < graph.rank_count(); ++rank) {
      Expected<ChakraTrace> trace = ReadChakraTrace(paths->at(rank));
      EXPECT_TRUE(trace.ok()) << trace.error().ToString();
      EXPECT_EQ(trace->version, kChakraSchemaVersion);
      traces.push_back(std::move(trace).value());
    }
    return BuildChakraGraph(traces);
  }

  void ExpectSameGraphAfterRoundTrip(const graph::TaskGraph& graph) {
    const Expected<ChakraGraph> back = RoundTrip(graph);
    ASSERT_TRUE(back.ok()) << back.error().ToString();
    EXPECT_TRUE(back->written_by_dtsim);
    EXPECT_EQ(graph::TaskGraphToJson(back->graph), graph::TaskGraphToJson(graph));
  }
};

TEST_F(ChakraGraphTest, ThePipelineExampleRoundTrips) {
  const Expected<graph::TaskGraph> graph =
      graph::LoadTaskGraph(std::string(DTSIM_SOURCE_DIR) + "/tools/examples/pipeline_2x2.json");
  ASSERT_TRUE(graph.ok()) << graph.error().ToString();
  ExpectSameGraphAfterRoundTrip(*graph);
}

TEST_F(ChakraGraphTest, AReplayGraphOfARealTraceRoundTrips) {
  const Expected<Trace> trace = ReadKinetoTrace(SharedKineto(kSampledRank0Trace));
  ASSERT_TRUE(trace.ok()) << trace.error().ToString();
  const Expected<ReplayGraph> replay = BuildReplayGraph(*trace);
  ASSERT_TRUE(replay.ok()) << replay.error().ToString();
  ExpectSameGraphAfterRoundTrip(replay->graph);
}

TEST_F(ChakraGraphTest, EveryTaskKindAndCollectiveFieldRoundTrips) {
  graph::TaskGraphBuilder b;
  const auto s0 = b.Stream(0, "compute");
  const auto c0 = b.Stream(0, "cpu host");
  const auto s1 = b.Stream(1, "compute");
  const auto s2 = b.Stream(2, "comm");
  const std::vector<int32_t> group = {0, 1};
  const auto bcast =
      b.AddCollective(graph::CommKind::kBroadcast, Bytes(1000), group, "bcast", "ring", 1);
  const auto all_reduce = b.AddCollective(graph::CommKind::kAllReduce, Bytes(4096), group);
  b.PriceAs(all_reduce, std::vector<int32_t>{0, 1, 2, 3});
  const auto late = b.AddTask(s0, TaskKind::kCompute, "gemm", "compute", DurationNs(1234567));
  const auto host = b.AddTask(c0, TaskKind::kDelay, "launch", "host", DurationNs(1499));
  const auto copy = b.AddTask(s0, TaskKind::kMemcpy, "h2d", "memcpy", DurationNs(3));
  b.AddCollectiveTask(s0, bcast, "bcast", "dp");
  b.AddCollectiveTask(s1, bcast, "bcast", "dp");
  b.AddCollectiveTask(s0, all_reduce, "ar", "");
  b.AddCollectiveTask(s1, all_reduce, "ar", "");
  const auto send = b.AddSend(s1, 2, Bytes(77), 5, "send", "pp");
  const auto recv = b.AddRecv(s2, 1, 5, "recv", "pp", Bytes(77));
  b.AddDependency(copy, host);
  b.AddDependency(late, host);  // a dependency on a task created after it
  b.AddDependency(recv, copy);
  b.AddDependency(send, late);
  b.SetExternalId(late, "the gemm");
  Expected<graph::TaskGraph> graph = std::move(b).Build();
  ASSERT_TRUE(graph.ok()) << graph.error().ToString();
  ExpectSameGraphAfterRoundTrip(*graph);

  // What ASTRA-sim reads: microseconds, Chakra's comm attributes, the stream order in data_deps.
  const std::vector<ChakraTrace> traces = ChakraTracesFromGraph(*graph);
  const ChakraNode& gemm = traces[0].nodes[0];
  EXPECT_EQ(gemm.duration_micros, 1235u);  // 1,234,567 ns rounded to µs
  EXPECT_EQ(gemm.data_deps, std::vector<uint64_t>{host.value()});
  EXPECT_FALSE(gemm.is_cpu_op());
  EXPECT_TRUE(traces[0].nodes[1].is_cpu_op());  // the "cpu host" stream
  const ChakraNode& h2d = traces[0].nodes[2];
  EXPECT_EQ(h2d.data_deps, (std::vector<uint64_t>{host.value(), late.value()}));  // + stream
  const ChakraNode& broadcast = traces[0].nodes[3];
  EXPECT_EQ(broadcast.type, ChakraNodeType::kCommCollective);
  EXPECT_EQ(broadcast.Attr("comm_type")->AsInteger(), 5);  // BROADCAST
  EXPECT_EQ(broadcast.Attr("comm_size")->AsInteger(), 1000);
  // Its communicator, dtsim's group 0, is "1": ASTRA-sim rejects id 0. The comm-group file
  // written beside the traces uses the same names.
  EXPECT_EQ(broadcast.Attr("pg_name")->AsString(), "1");
  const Expected<Json> groups = ReadJsonFile(Path("workload.comm_groups.json"));
  ASSERT_TRUE(groups.ok()) << groups.error().ToString();
  EXPECT_EQ(*groups, Json::parse(R"({"1": [0, 1]})"));
  // The files, written rank by rank node by node, hold exactly these traces.
  for (int32_t rank = 0; rank < graph->rank_count(); ++rank) {
    const Expected<std::string> file = ReadFile(Path(fmt::format("workload.{}.et", rank)));
    ASSERT_TRUE(file.ok()) << file.error().ToString();
    EXPECT_EQ(*file, SerializeChakraTrace(traces[static_cast<size_t>(rank)])) << rank;
  }
  const ChakraNode& send_node = traces[1].nodes[2];
  EXPECT_EQ(send_node.type, ChakraNodeType::kCommSend);
  EXPECT_EQ(send_node.Attr("comm_src")->AsInteger(), 1);
  EXPECT_EQ(send_node.Attr("comm_dst")->AsInteger(), 2);
  EXPECT_EQ(send_node.Attr("comm_dst")->type, AttributeType::kInt32);

  // Files whose dtsim attributes contradict the node are errors, not crashes.
  std::vector<ChakraTrace> broken = traces;
  broken[0].nodes[3].type = ChakraNodeType::kCompute;
  EXPECT_THAT(BuildChakraGraph(broken).error().ToString(),
              HasSubstr("dtsim.kind says collective but the node is no COMM_COLL_NODE"));
  broken = traces;
  for (ChakraAttribute& attr : broken[0].nodes[3].attrs) {
    if (attr.name == "dtsim.group") attr.integers = {0, 0};
  }
  EXPECT_THAT(BuildChakraGraph(broken).error().ToString(), HasSubstr("distinct ranks"));
}

// chakra.0.et: 3,643 COMP_NODEs and 21 COMM_COLL_NODEs; 2,448 CPU ops (the 14 c10d
// COMM_COLL_NODEs among them) become host tasks, the 1,216 GPU ops GPU tasks, the 7 NCCL
// kernels single-rank collectives that take their measured time.
TEST_F(ChakraGraphTest, TheSharedChakraTraceBecomesAGraph) {
  const Expected<ChakraTrace> trace = ReadChakraTrace(SharedChakra(kChakraEt));
  ASSERT_TRUE(trace.ok()) << trace.error().ToString();
  const Expected<ChakraGraph> graph = BuildChakraGraph(std::span(&*trace, 1));
  ASSERT_TRUE(graph.ok()) << graph.error().ToString();
  EXPECT_FALSE(graph->written_by_dtsim);
  EXPECT_EQ(graph->graph.task_count(), 3664u);
  EXPECT_EQ(graph->stats.host_tasks, 2448);
  EXPECT_EQ(graph->stats.gpu_tasks, 1216);
  EXPECT_EQ(graph->stats.collectives, 7);
  EXPECT_EQ(graph->stats.dependencies, trace->stats.data_deps);
  EXPECT_EQ(graph->stats.dangling_dependencies, 0);
  ASSERT_EQ(graph->comm_durations.size(), 7u);
  EXPECT_EQ(graph->graph.external_id(graph::TaskId(0)), "0:216");
}

TEST_F(ChakraGraphTest, RanksOfAnotherToolsTraceMatchTheirCollectivesByOrder) {
  const auto make_rank = [](int64_t rank, int64_t comm_type, uint64_t micros) {
    ChakraTrace trace;
    trace.file = "rank" + std::to_string(rank) + ".et";
    trace.metadata = {ChakraAttribute::Integer("rank", AttributeType::kInt64, rank)};
    ChakraNode compute;
    compute.id = 1;
    compute.type = ChakraNodeType::kCompute;
    compute.duration_micros = 10 * (rank + 1);
    ChakraNode collective;
    collective.id = 2;
    collective.type = ChakraNodeType::kCommCollective;
    collective.data_deps = {1};
    collective.duration_micros = micros;
    collective.attrs = {ChakraAttribute::Integer("comm_type", AttributeType::kInt64, comm_type),
                        ChakraAttribute::Integer("comm_size", AttributeType::kInt64, 1 << 20)};
    trace.nodes = {compute, collective};
    return trace;
  };
  std::vector<ChakraTrace> ranks = {make_rank(1, 0, 40), make_rank(0, 0, 30)};
  const Expected<ChakraGraph> graph = BuildChakraGraph(ranks);
  ASSERT_TRUE(graph.ok()) << graph.error().ToString();
  ASSERT_EQ(graph->graph.comm_count(), 1u);
  const auto group = graph->graph.group(graph->graph.comm(graph::CommId(0)).group);
  EXPECT_EQ(std::vector<int32_t>(group.begin(), group.end()), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(graph->comm_durations[0], Microseconds(40));  // the longer of the two

  ranks[0] = make_rank(1, 5, 40);  // a broadcast where rank 0 all-reduces
  EXPECT_THAT(BuildChakraGraph(ranks).error().ToString(),
              HasSubstr("collective #0 is a all_reduce here but a broadcast on another rank"));
  ranks[0] = make_rank(0, 0, 40);
  EXPECT_THAT(BuildChakraGraph(ranks).error().ToString(),
              HasSubstr("rank 0 is also the rank of rank0.et"));
  ranks = {make_rank(0, 0, 1)};
  ranks[0].nodes[0].data_deps = {2};  // 1 waits for 2, which waits for 1
  EXPECT_THAT(BuildChakraGraph(ranks).error().ToString(),
              HasSubstr("rank0.et: the data_deps of 2 nodes form a cycle (among them ids 1, 2)"));
  ranks[0].nodes[0].data_deps = {99};
  const Expected<ChakraGraph> dangling = BuildChakraGraph(ranks);
  ASSERT_TRUE(dangling.ok());
  EXPECT_EQ(dangling->stats.dangling_dependencies, 1);
  ranks[0].nodes[1].id = 1;
  EXPECT_THAT(BuildChakraGraph(ranks).error().ToString(),
              HasSubstr("node 1 (id 1): node id 1 is also the id of node 0"));
}

// Four ranks of TwoGroupRank: the comm group file (ASTRA-sim's) says which ranks each pg_name
// spans.
TEST_F(ChakraGraphTest, CommGroupsSayWhichRanksACollectiveSpans) {
  const auto make_rank = TwoGroupRank;
  std::ofstream(Path("groups.json")) << kTwoGroupCommGroups;
  const Expected<ChakraCommGroups> groups = ReadChakraCommGroups(Path("groups.json"));
  ASSERT_TRUE(groups.ok()) << groups.error().ToString();
  const auto group_of = [](const ChakraGraph& g, uint32_t comm) {
    const auto ranks = g.graph.group(g.graph.comm(graph::CommId(comm)).group);
    return std::vector<int32_t>(ranks.begin(), ranks.end());
  };
  std::vector<ChakraTrace> ranks = {make_rank(0), make_rank(1), make_rank(2), make_rank(3)};
  const Expected<ChakraGraph> grouped = BuildChakraGraph(ranks, {.comm_groups = *groups});
  ASSERT_TRUE(grouped.ok()) << grouped.error().ToString();
  ASSERT_EQ(grouped->graph.comm_count(), 4u);
  // Created in trace order: rank 0's tp0 and dp0, then rank 1's dp1, rank 2's tp1.
  EXPECT_EQ(group_of(*grouped, 0), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(group_of(*grouped, 1), (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(group_of(*grouped, 2), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(group_of(*grouped, 3), (std::vector<int32_t>{2, 3}));
  // Without the file every collective spans the world, the k-th of each rank together.
  const Expected<ChakraGraph> world = BuildChakraGraph(ranks);
  ASSERT_TRUE(world.ok());
  EXPECT_EQ(world->graph.comm_count(), 2u);
  EXPECT_EQ(group_of(*world, 0), (std::vector<int32_t>{0, 1, 2, 3}));

  // Ranks 0 and 1 alone: their TP collective is whole, each DP one has one member given and is
  // priced as its whole group.
  const std::vector<ChakraTrace> pair = {make_rank(0), make_rank(1)};
  const Expected<ChakraGraph> partial = BuildChakraGraph(pair, {.comm_groups = *groups});
  ASSERT_TRUE(partial.ok()) << partial.error().ToString();
  ASSERT_EQ(partial->graph.comm_count(), 3u);
  EXPECT_EQ(group_of(*partial, 1), (std::vector<int32_t>{0}));
  const auto priced = partial->graph.group(partial->graph.comm(graph::CommId(1)).priced_group);
  EXPECT_EQ(std::vector<int32_t>(priced.begin(), priced.end()), (std::vector<int32_t>{0, 2}));

  // A pg_name the file does not list spans the world, counted; a rank outside its group errs.
  ranks[0].nodes[0].attrs.back() = ChakraAttribute::String("pg_name", "pp0");
  ranks[1].nodes[0].attrs.back() = ChakraAttribute::String("pg_name", "pp0");
  ranks[2].nodes[0].attrs.back() = ChakraAttribute::String("pg_name", "pp0");
  ranks[3].nodes[0].attrs.back() = ChakraAttribute::String("pg_name", "pp0");
  const Expected<ChakraGraph> unlisted = BuildChakraGraph(ranks, {.comm_groups = *groups});
  ASSERT_TRUE(unlisted.ok()) << unlisted.error().ToString();
  EXPECT_EQ(unlisted->stats.collectives_outside_groups, 4);
  ranks[0].nodes[0].attrs.back() = ChakraAttribute::String("pg_name", "tp1");
  EXPECT_THAT(BuildChakraGraph(ranks, {.comm_groups = *groups}).error().ToString(),
              HasSubstr("rank0.et: node 0 (id 1): a collective of comm group \"tp1\" (2, 3), "
                        "which does not list this trace's rank 0"));
  ranks = {make_rank(0), make_rank(1), make_rank(2), make_rank(3)};
  ranks[3].nodes.pop_back();  // rank 3 skips its DP all-reduce
  EXPECT_THAT(BuildChakraGraph(ranks, {.comm_groups = *groups}).error().ToString(),
              HasSubstr("rank3.et: posts 0 collectives of comm group \"dp1\" where another "
                        "rank posts 1"));

  const auto bad = [&](const char* text) {
    std::ofstream(Path("bad.json")) << text;
    const Expected<ChakraCommGroups> read = ReadChakraCommGroups(Path("bad.json"));
    return read.ok() ? std::string("(accepted)") : read.error().ToString();
  };
  EXPECT_THAT(bad("[0, 1]"), HasSubstr("bad.json: a comm group file is an object"));
  EXPECT_THAT(bad(R"({"tp0": []})"), HasSubstr("tp0: must be a non-empty array"));
  EXPECT_THAT(bad(R"({"tp0": [0, -1]})"), HasSubstr("tp0[1]"));
  EXPECT_THAT(bad(R"({"tp0": [0, 0]})"), HasSubstr("tp0[1]: lists a rank twice"));
  EXPECT_THAT(bad(R"({"tp0": [0, 1)"), HasSubstr("bad.json"));
}

}  // namespace
}  // namespace dtsim::traces

namespace dtsim::traces {
namespace {

// A collective forced to one of dtsim's algorithms is written as the plain Chakra collective:
// the export says so, once per (algorithm, kind), with the count; a graph without one has
// nothing to say.
TEST(ChakraExportCaveatsTest, ForcedAlgorithmsAreNamedWithTheirCount) {
  graph::TaskGraphBuilder b;
  const auto s0 = b.Stream(0, "compute");
  const auto s1 = b.Stream(1, "compute");
  const std::vector<int32_t> group = {0, 1};
  for (int i = 0; i < 3; ++i) {
    const auto pushed =
        b.AddCollective(graph::CommKind::kAllReduce, Bytes(64), group, "", "parameter_server");
    b.AddCollectiveTask(s0, pushed, "ps", "dp");
    b.AddCollectiveTask(s1, pushed, "ps", "dp");
  }
  const auto ring = b.AddCollective(graph::CommKind::kAllGather, Bytes(64), group, "", "ring");
  b.AddCollectiveTask(s0, ring, "ag", "tp");
  b.AddCollectiveTask(s1, ring, "ag", "tp");
  const auto plain = b.AddCollective(graph::CommKind::kAllReduce, Bytes(64), group);
  b.AddCollectiveTask(s0, plain, "ar", "dp");
  b.AddCollectiveTask(s1, plain, "ar", "dp");
  Expected<graph::TaskGraph> graph = std::move(b).Build();
  ASSERT_TRUE(graph.ok()) << graph.error().ToString();
  const std::vector<std::string> caveats = ChakraExportCaveats(*graph);
  ASSERT_EQ(caveats.size(), 2u);
  EXPECT_THAT(caveats[0], testing::StartsWith("3 all_reduce communications forced to dtsim's "
                                              "parameter_server algorithm (its push and pull"));
  EXPECT_THAT(caveats[0], testing::HasSubstr("written as plain Chakra all_reduce nodes"));
  EXPECT_THAT(caveats[1], testing::StartsWith("1 all_gather communication forced to dtsim's "
                                              "ring algorithm is written as plain Chakra"));

  graph::TaskGraphBuilder plain_builder;
  const auto p0 = plain_builder.Stream(0, "compute");
  plain_builder.AddTask(p0, graph::TaskKind::kCompute, "gemm", "compute", DurationNs(1));
  Expected<graph::TaskGraph> without = std::move(plain_builder).Build();
  ASSERT_TRUE(without.ok());
  EXPECT_TRUE(ChakraExportCaveats(*without).empty());
}

}  // namespace
}  // namespace dtsim::traces
