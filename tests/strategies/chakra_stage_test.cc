// STAGE's Chakra traces (tests/data/stage: 8 ranks, data 2 × tensor 2 × pipeline 2, GPT of 2
// layers): its conventions read (element counts, einsums' multiply-adds) and its pipelines
// replayed the way ASTRA-sim runs them (ready-first streams), on recorded durations and priced.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "network/cluster.h"
#include "strategies/replay.h"
#include "traces/chakra_graph.h"
#include "traces/chakra_reader.h"

namespace dtsim::strategies {
namespace {

using testing::HasSubstr;

const std::string kStageDir = DTSIM_TEST_DATA_DIR "/stage/";

std::vector<traces::ChakraTrace> StageRanks() {
  std::vector<traces::ChakraTrace> ranks;
  for (int rank = 0; rank < 8; ++rank) {
    Expected<traces::ChakraTrace> trace =
        traces::ReadChakraTrace(kStageDir + "stage_gpt." + std::to_string(rank) + ".et.gz");
    EXPECT_TRUE(trace.ok()) << trace.error().ToString();
    ranks.push_back(std::move(trace).value());
  }
  return ranks;
}

// 1 ns per 1,000 FLOPs, whatever the bytes: durations a test can derive.
traces::ChakraImportOptions StageOptions(std::optional<int64_t> element_bytes = {}) {
  Expected<traces::ChakraCommGroups> groups =
      traces::ReadChakraCommGroups(kStageDir + "stage_gpt.comm_groups.json");
  EXPECT_TRUE(groups.ok()) << groups.error().ToString();
  return {.comm_groups = *groups,
          .price_compute =
              [](const traces::ChakraComputeWork& work) {
                return DurationNs(static_cast<int64_t>(work.flops / 1000));
              },
          .element_bytes = element_bytes};
}

graph::TaskId TaskOfNode(const graph::TaskGraph& graph, const std::string& external) {
  for (uint32_t t = 0; t < graph.task_count(); ++t) {
    if (graph.external_id(graph::TaskId(t)) == external) return graph::TaskId(t);
  }
  ADD_FAILURE() << "no task " << external;
  return graph::TaskId(0);
}

TEST(ChakraStage, ItsConventionsAreRecognizedAndApplied) {
  const std::vector<traces::ChakraTrace> ranks = StageRanks();
  const Expected<traces::ChakraGraph> chakra = traces::BuildChakraGraph(ranks, StageOptions());
  ASSERT_TRUE(chakra.ok()) << chakra.error().ToString();
  EXPECT_EQ(chakra->conventions.producer, "STAGE");
  EXPECT_TRUE(chakra->conventions.sizes_in_elements);
  // Every compute node: 132 on each first-stage rank, 140 on each last-stage one.
  EXPECT_EQ(chakra->stats.compute_priced, 4 * 132 + 4 * 140);
  EXPECT_EQ(chakra->stats.compute_unpriced, 0);

  // Node 7 of rank 0, the QKV projection: an einsum of 256 tokens × 512 in × 768 out (1536
  // over tensor 2): num_ops 100,663,296 multiply-adds, 2 FLOPs each, at 1 ns per 1,000:
  // 2 × 100,663,296 / 1,000 = 201,326 ns.
  const graph::TaskGraph& g = chakra->graph;
  EXPECT_EQ(g.task(TaskOfNode(g, "0:7")).duration, DurationNs(201'326));
  // Node 8, its sequence-parallel all-gather: comm_size 65,536 elements (128 tokens × 512),
  // 2 bytes each: 131,072 B a rank, over ranks 0 and 2 (comm group "5").
  const graph::Communication& gather = g.comm(g.task(TaskOfNode(g, "0:8")).comm);
  EXPECT_EQ(gather.kind, graph::CommKind::kAllGather);
  EXPECT_EQ(gather.size, Bytes(131'072));
  EXPECT_THAT(g.group(gather.group), testing::ElementsAre(0, 2));

  // With 4 bytes an element the same all-gather moves twice as much.
  const Expected<traces::ChakraGraph> fp32 = traces::BuildChakraGraph(ranks, StageOptions(4));
  ASSERT_TRUE(fp32.ok()) << fp32.error().ToString();
  EXPECT_EQ(fp32->graph.comm(fp32->graph.task(TaskOfNode(fp32->graph, "0:8")).comm).size,
            Bytes(262'144));

  // Without a pricer the compute nodes take no time, and are counted.
  traces::ChakraImportOptions unpriced = StageOptions();
  unpriced.price_compute = nullptr;
  const Expected<traces::ChakraGraph> bare = traces::BuildChakraGraph(ranks, unpriced);
  ASSERT_TRUE(bare.ok()) << bare.error().ToString();
  EXPECT_EQ(bare->stats.compute_unpriced, 4 * 132 + 4 * 140);
  EXPECT_EQ(bare->graph.task(TaskOfNode(bare->graph, "0:7")).duration, DurationNs(0));
}

TEST(ChakraStage, AnEinsumRunsOnTheTensorCoresAndTheOtherOpsOnTheVectorUnits) {
  const std::vector<traces::ChakraTrace> ranks = StageRanks();
  const traces::ChakraConventions stage = traces::DetectChakraConventions(ranks[0]);
  std::map<std::string, int> seen;
  for (const traces::ChakraNode& node : ranks[0].nodes) {
    const std::optional<traces::ChakraComputeWork> work = traces::ChakraNodeWork(node, stage, 2);
    if (node.type != traces::ChakraNodeType::kCompute) {
      EXPECT_FALSE(work.has_value()) << node.name;
      continue;
    }
    ASSERT_TRUE(work.has_value()) << node.name;
    const traces::ChakraAttribute* op = node.Attr("op_type");
    ASSERT_NE(op, nullptr);
    const bool einsum = op->AsString() == "M";
    EXPECT_EQ(work->matmul, einsum) << node.name;
    const double ops = static_cast<double>(*node.Attr("num_ops")->AsInteger());
    EXPECT_EQ(work->flops, einsum ? 2 * ops : ops) << node.name;
    EXPECT_EQ(work->bytes, 2.0 * static_cast<double>(*node.Attr("tensor_size")->AsInteger()));
    ++seen[std::string(*op->AsString())];
  }
  EXPECT_EQ(seen["M"], 60);
  // Another producer's trace (no schema attribute) keeps the schema's reading: operations on
  // the tensor cores, bytes.
  const auto qkv_node = std::find_if(ranks[0].nodes.begin(), ranks[0].nodes.end(),
                                     [](const traces::ChakraNode& n) { return n.id == 7; });
  ASSERT_NE(qkv_node, ranks[0].nodes.end());
  const traces::ChakraNode& qkv = *qkv_node;
  ASSERT_EQ(qkv.name, "mb0.transformer.0.mha.qkv@0_COMP");
  const std::optional<traces::ChakraComputeWork> plain =
      traces::ChakraNodeWork(qkv, traces::ChakraConventions{}, 2);
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->flops, 100'663'296.0);
  EXPECT_EQ(plain->bytes, 196'608.0);
  EXPECT_TRUE(plain->matmul);
}

TEST(ChakraStage, ItsPipelinesReplayOnReadyFirstStreams) {
  const std::vector<traces::ChakraTrace> ranks = StageRanks();
  const Expected<traces::ChakraGraph> chakra = traces::BuildChakraGraph(ranks, StageOptions());
  ASSERT_TRUE(chakra.ok()) << chakra.error().ToString();
  const graph::TaskGraph& g = chakra->graph;
  std::map<std::string, graph::StreamOrder> rank0;
  for (uint32_t s = 0; s < g.stream_count(); ++s) {
    const graph::Stream& stream = g.stream(graph::StreamId(s));
    if (stream.rank == 0) rank0[std::string(g.name(stream.name))] = stream.order;
  }
  EXPECT_EQ(rank0, (std::map<std::string, graph::StreamOrder>{
                       {"gpu", graph::StreamOrder::kReadyFirst},
                       {"gpu comm", graph::StreamOrder::kReadyFirst},
                       {"gpu comm recv", graph::StreamOrder::kUnbounded}}));

  // On the priced compute and recorded (zero) communication, then priced on a DGX H100: every
  // task finishes, and ranks that hold the same work (the two tensor-parallel peers of each
  // stage and data-parallel replica: 0 and 2, 1 and 3, 4 and 6, 5 and 7) finish together.
  const Expected<MeasuredRun> measured = SimulateMeasured(g, chakra->comm_durations);
  ASSERT_TRUE(measured.ok()) << measured.error().ToString();
  const Expected<MeasuredRun> priced = SimulateOnCluster(g, *network::ClusterPreset("dgx-h100", 1));
  ASSERT_TRUE(priced.ok()) << priced.error().ToString();
  for (const MeasuredRun* run : {&*measured, &*priced}) {
    EXPECT_EQ(run->summary.tasks, g.task_count());
    for (const int peer : {0, 1, 4, 5}) {
      EXPECT_EQ(run->summary.ranks[peer].finish, run->summary.ranks[peer + 2].finish) << peer;
    }
  }
  EXPECT_GT(priced->summary.makespan, measured->summary.makespan);
}

// Another tool's dtsim.stream attribute is not dtsim's: it cannot put a node on a stream whose
// name a receive's unbounded stream has ("gpu comm recv"), which would ask for one stream in
// two orders.
TEST(ChakraStage, AForeignDtsimStreamAttributeIsIgnored) {
  std::vector<traces::ChakraTrace> ranks = StageRanks();
  for (traces::ChakraNode& node : ranks[0].nodes) {
    node.attrs.push_back(traces::ChakraAttribute::String("dtsim.stream", "gpu comm recv"));
  }
  const Expected<traces::ChakraGraph> chakra = traces::BuildChakraGraph(ranks, StageOptions());
  ASSERT_TRUE(chakra.ok()) << chakra.error().ToString();
  const graph::TaskGraph& g = chakra->graph;
  EXPECT_EQ(g.name(g.stream(g.task(TaskOfNode(g, "0:7")).stream).name), "gpu");
}

TEST(ChakraStage, RanksOfDifferentProducersDoNotBelongTogether) {
  std::vector<traces::ChakraTrace> ranks = StageRanks();
  ranks[1].metadata.clear();  // no schema attribute: another producer's reading
  const Expected<traces::ChakraGraph> mixed = traces::BuildChakraGraph(ranks, StageOptions());
  ASSERT_FALSE(mixed.ok());
  EXPECT_THAT(mixed.error().ToString(),
              HasSubstr("stage_gpt.1.et.gz: written by another tool where "));
  EXPECT_THAT(mixed.error().ToString(),
              HasSubstr("stage_gpt.0.et.gz was written by STAGE: the ranks' traces do not "
                        "belong together"));
  traces::ChakraImportOptions zero = StageOptions();
  zero.element_bytes = 0;
  EXPECT_THAT(traces::BuildChakraGraph(StageRanks(), zero).error().ToString(),
              HasSubstr("bytes an element must be 1 to 16 (complex128), got 0"));
}

}  // namespace
}  // namespace dtsim::strategies
