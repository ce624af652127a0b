// DLRM training plans (docs/strategies.md, "DLRM"): the tables' placement and the bytes it
// exchanges derived by hand, the iteration of one GPU equal to the sum of its ops, symmetric
// and full ranks agreeing, and the plan's errors named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>

#include "strategies/dlrm_iteration.h"
#include "strategies/embedding_sharding.h"
#include "strategies/search.h"
#include "strategies/simulate.h"
#include "strategies/stage_memory.h"

namespace dtsim::strategies {
namespace {

using testing::ElementsAre;
using testing::HasSubstr;

// Four tables of 1,000, 500, 200 and 100 rows of 16, two lookups each; bf16.
models::DlrmSpec SmallSpec() {
  models::DlrmSpec spec;
  spec.table_rows = {1000, 500, 200, 100};
  spec.embedding_dim = 16;
  spec.lookups_per_table = 2;
  spec.bottom_mlp = {64, 16};
  spec.top_mlp = {32, 1};
  return spec;
}

TEST(EmbeddingShardingTest, TableWiseTablesGoToTheLeastLoadedRank) {
  // 2 ranks of 4 samples: 8 a micro-batch. Largest first: table 0 to rank 0, table 1 to rank 1
  // (no work yet), table 2 to rank 1 (the same work, fewer parameters: 500·16 < 1,000·16),
  // table 3 to rank 0 (one table's work against two).
  const EmbeddingLayout layout =
      LayoutEmbeddings(SmallSpec(), {EmbeddingSharding::kTableWise}, 2, 4, DType::kBf16);
  EXPECT_THAT(layout.ranks[0].tables, ElementsAre(0, 3));
  EXPECT_THAT(layout.ranks[1].tables, ElementsAre(1, 2));
  EXPECT_EQ(layout.ranks[0].parameters, (1000 + 100) * 16);
  EXPECT_EQ(layout.ranks[1].parameters, (500 + 200) * 16);
  // Each table's lookups for all 8 samples: 16 rows read, 8 pooled vectors written.
  ASSERT_EQ(layout.ranks[0].lookups.size(), 2u);
  EXPECT_EQ(layout.ranks[0].lookups[0].rows_read, 16);
  EXPECT_EQ(layout.ranks[0].lookups[0].outputs, 8);
  EXPECT_EQ(layout.busiest, 0);  // equal work: the first
  EXPECT_EQ(layout.table_wise, 4);
  // Indices: 4 samples × 4 tables × (2 × 8 B + a 4 B length) = 320 B from each rank.
  EXPECT_EQ(layout.index_all_to_all.count(), 320);
  // Pooled: 8 samples × 2 tables × 16 × 2 B = 512 B from the busiest sender.
  EXPECT_EQ(layout.output_all_to_all.count(), 512);
  EXPECT_EQ(layout.output_reduce_scatter.count(), 0);
  EXPECT_EQ(layout.gradient_all_gather.count(), 0);
}

TEST(EmbeddingShardingTest, RowWiseSplitsEveryTableAndReducesPartialSums) {
  const EmbeddingLayout layout =
      LayoutEmbeddings(SmallSpec(), {EmbeddingSharding::kRowWise}, 3, 4, DType::kBf16);
  // 3 ranks × 4 samples = 12; 24 lookups a table, 8 on each rank; blocks of ceil(rows / 3).
  for (const RankEmbeddings& rank : layout.ranks) {
    ASSERT_EQ(rank.lookups.size(), 4u);
    EXPECT_EQ(rank.lookups[0].rows_read, 8);
    EXPECT_EQ(rank.lookups[0].outputs, 12);
    EXPECT_TRUE(rank.tables.empty());
  }
  // Table 0: 334, 334, 332 rows; table 3: 34, 34, 32.
  EXPECT_EQ(layout.ranks[2].parameters, (332 + 166 + 66 + 32) * 16);
  int64_t held = 0;
  for (const RankEmbeddings& rank : layout.ranks) held += rank.parameters;
  EXPECT_EQ(held, 1800 * 16);
  EXPECT_EQ(layout.output_all_to_all.count(), 0);
  // Partial sums of all 12 samples × 4 tables × 16 × 2 B; back, each rank's 4 samples'.
  EXPECT_EQ(layout.output_reduce_scatter.count(), 12 * 4 * 16 * 2);
  EXPECT_EQ(layout.gradient_all_gather.count(), 4 * 4 * 16 * 2);
  EXPECT_EQ(layout.index_all_to_all.count(), 4 * 4 * (2 * 8 + 4));
}

TEST(EmbeddingShardingTest, TablesMayEachBeShardedTheirOwnWay) {
  const EmbeddingLayout layout =
      LayoutEmbeddings(SmallSpec(),
                       {EmbeddingSharding::kRowWise, EmbeddingSharding::kTableWise,
                        EmbeddingSharding::kTableWise, EmbeddingSharding::kDataParallel},
                       2, 4, DType::kFp32);
  EXPECT_EQ(layout.row_wise, 1);
  EXPECT_EQ(layout.table_wise, 2);
  EXPECT_EQ(layout.replicated, 1);
  EXPECT_EQ(layout.replicated_parameters, 100 * 16);
  // Table 0 split (500 rows each), table 1 and 2 on ranks 0 and 1, table 3 on both.
  EXPECT_EQ(layout.ranks[0].parameters, (500 + 500 + 100) * 16);
  EXPECT_EQ(layout.ranks[1].parameters, (500 + 200 + 100) * 16);
  // The replicated table is looked up for the rank's own 4 samples, sends nothing.
  EXPECT_EQ(layout.index_all_to_all.count(), 4 * 3 * (2 * 8 + 4));
  EXPECT_EQ(layout.output_all_to_all.count(), 8 * 1 * 16 * 4);
  EXPECT_EQ(layout.output_reduce_scatter.count(), 8 * 1 * 16 * 4);
}

TEST(EmbeddingShardingTest, TableRowWiseTablesGoToANodeAndSplitOverItsRanks) {
  // 4 ranks, 2 to a node, 4 samples each: 16 a micro-batch. Largest first: table 0 to node 0,
  // table 1 to node 1 (no work yet), table 2 to node 1 (the same work, fewer rows: 500 < 1,000),
  // table 3 to node 0 (one table's work against two).
  const EmbeddingLayout layout =
      LayoutEmbeddings(SmallSpec(), {EmbeddingSharding::kTableRowWise}, 4, 4, DType::kBf16, 2);
  EXPECT_EQ(layout.table_row_wise, 4);
  EXPECT_EQ(layout.ranks_per_node, 2);
  // Rank 0 (node 0): blocks of ceil(1,000 / 2) and ceil(100 / 2) rows; rank 2 (node 1): of 500
  // and 200.
  EXPECT_EQ(layout.ranks[0].parameters, (500 + 50) * 16);
  EXPECT_EQ(layout.ranks[1].parameters, (500 + 50) * 16);
  EXPECT_EQ(layout.ranks[2].parameters, (250 + 100) * 16);
  // Each of a node's 2 ranks reads half of every sample's 2 rows and sums all 16 samples.
  ASSERT_EQ(layout.ranks[0].lookups.size(), 2u);
  EXPECT_EQ(layout.ranks[0].lookups[0].rows_read, 16);
  EXPECT_EQ(layout.ranks[0].lookups[0].outputs, 16);
  // Inside the node: 16 samples × 2 tables × 16 × 2 B reduce-scattered; each rank keeps 8
  // samples' sums (512 B), which go across the nodes by all-to-all and come back gathered.
  EXPECT_EQ(layout.node_reduce_scatter.count(), 1024);
  EXPECT_EQ(layout.cross_node_all_to_all.count(), 512);
  EXPECT_EQ(layout.node_all_gather.count(), 512);
  EXPECT_EQ(layout.index_all_to_all.count(), 4 * 4 * (2 * 8 + 4));
  // On one node nothing crosses: it is row-wise over the node.
  const EmbeddingLayout one_node =
      LayoutEmbeddings(SmallSpec(), {EmbeddingSharding::kTableRowWise}, 4, 4, DType::kBf16);
  EXPECT_EQ(one_node.cross_node_all_to_all.count(), 0);
  EXPECT_EQ(one_node.ranks_per_node, 4);
}

// A config of a small DLRM on `gpus` H100s of one node: four tables of 64 fp32 columns, 100
// lookups a sample each (a pooling factor production models reach), 1,024 samples per GPU.
Json DlrmConfig(int gpus, const char* sharding) {
  Json config = Json::parse(R"json({
    "model": {"family": "dlrm", "table_rows": [1000000, 500000, 200000, 100000],
              "embedding_dim": 64, "lookups_per_table": 100, "bottom_mlp": [256, 64],
              "top_mlp": [256, 1]},
    "training": {"global_batch": 8192, "micro_batch": 1024, "precision": "fp32",
                 "optimizer": "sgd"},
    "cluster": {"preset": "dgx-h100", "nodes": 1, "gpu": "h100-sxm5-80gb"},
    "simulation": {"network_model": "analytical"}
  })json");
  config["cluster"]["gpus_per_node"] = gpus;
  config["parallelism"] = {{"data", gpus}, {"embedding_sharding", sharding}};
  config["training"]["global_batch"] = 1024 * gpus;
  return config;
}

Expected<SimulationResult> SimulateDlrm(const Json& json, RanksMode ranks = RanksMode::kSymmetric) {
  DTSIM_ASSIGN_OR_RETURN(ResolvedConfig config, ConfigFromJson(json, "dlrm.json"));
  config.ranks = ranks;
  return Simulate(config);
}

// On one GPU nothing is exchanged: the iteration is the ops back to back and the step.
TEST(DlrmIterationTest, OneGpuRunsItsOpsBackToBack) {
  Expected<SimulationResult> result = SimulateDlrm(DlrmConfig(1, "table_wise"));
  ASSERT_TRUE(result.ok()) << result.error().ToString();
  ASSERT_EQ(result->stages.size(), 1u);
  const TimeBreakdown& time = result->stages[0];
  EXPECT_EQ(time.expert, DurationNs::Zero());
  EXPECT_EQ(time.data_exposed, DurationNs::Zero());
  EXPECT_EQ(time.idle, DurationNs::Zero());
  EXPECT_EQ(time.compute + time.optimizer, result->iteration_time);
  EXPECT_GT(time.compute, DurationNs::Zero());
}

// All ranks wait for the busiest at the exchanges: simulating it alone gives every rank's time.
TEST(DlrmIterationTest, SymmetricRanksSimulateTheBusiestRank) {
  for (const char* sharding : {"table_wise", "row_wise", "data_parallel"}) {
    Expected<SimulationResult> symmetric = SimulateDlrm(DlrmConfig(8, sharding));
    ASSERT_TRUE(symmetric.ok()) << sharding << ": " << symmetric.error().ToString();
    Expected<SimulationResult> full = SimulateDlrm(DlrmConfig(8, sharding), RanksMode::kFull);
    ASSERT_TRUE(full.ok()) << sharding << ": " << full.error().ToString();
    EXPECT_EQ(symmetric->iteration_time, full->iteration_time) << sharding;
    // The exchanges are the breakdown's all-to-all line (none for replicated tables).
    EXPECT_EQ(symmetric->stages[0].expert > DurationNs::Zero(),
              std::string(sharding) != "data_parallel")
        << sharding;
  }
}

// Two nodes of four: table-row-wise keeps each table's partial sums inside its node (a
// reduce-scatter over NVLink, then a quarter of them across), where row-wise reduce-scatters
// every table's sums over all eight ranks, across the NICs. Symmetric ranks agree with full.
TEST(DlrmIterationTest, TableRowWiseKeepsThePartialSumsInsideTheNode) {
  const auto two_nodes = [](const char* sharding) {
    Json json = DlrmConfig(8, sharding);
    json["cluster"]["nodes"] = 2;
    json["cluster"]["gpus_per_node"] = 4;
    return json;
  };
  Expected<SimulationResult> twrw = SimulateDlrm(two_nodes("table_row_wise"));
  ASSERT_TRUE(twrw.ok()) << twrw.error().ToString();
  Expected<SimulationResult> full = SimulateDlrm(two_nodes("table_row_wise"), RanksMode::kFull);
  ASSERT_TRUE(full.ok()) << full.error().ToString();
  EXPECT_EQ(twrw->iteration_time, full->iteration_time);
  Expected<SimulationResult> rw = SimulateDlrm(two_nodes("row_wise"));
  ASSERT_TRUE(rw.ok());
  EXPECT_LT(twrw->iteration_time, rw->iteration_time);
  EXPECT_LT(twrw->stages[0].expert, rw->stages[0].expert);
}

// Four tables on eight GPUs: table-wise leaves four GPUs without a table and gives each of the
// others a whole table's lookups for the global batch; row-wise splits every table's lookups
// eight ways. At 100 lookups a sample the lookups dominate (the busiest table-wise rank reads
// 8,192 × 100 × 64 × 4 B = 210 MB, each row-wise rank half that) and row-wise is faster for all
// its larger exchange (a reduce-scatter of 8 MiB of partial sums against a 2 MiB all-to-all).
TEST(DlrmIterationTest, RowWiseSpreadsWhatTableWiseLeavesOnFewRanks) {
  const EmbeddingLayout table_wise =
      LayoutEmbeddings(SmallSpec(), {EmbeddingSharding::kTableWise}, 8, 1024, DType::kFp32);
  const EmbeddingLayout row_wise =
      LayoutEmbeddings(SmallSpec(), {EmbeddingSharding::kRowWise}, 8, 1024, DType::kFp32);
  const auto busiest = [](const EmbeddingLayout& layout) {
    return layout.ranks[static_cast<size_t>(layout.busiest)].lookup_bytes;
  };
  // Table-wise: one table, 8,192 samples × 2 lookups × 16; row-wise: 4 tables × 1/8 of that.
  EXPECT_EQ(busiest(table_wise), 8192.0 * 2 * 16);
  EXPECT_EQ(busiest(row_wise), 4 * 8192.0 * 2 * 16 / 8);
  Expected<SimulationResult> tw = SimulateDlrm(DlrmConfig(8, "table_wise"));
  Expected<SimulationResult> rw = SimulateDlrm(DlrmConfig(8, "row_wise"));
  ASSERT_TRUE(tw.ok() && rw.ok());
  EXPECT_LT(rw->iteration_time, tw->iteration_time);
}

TEST(DlrmIterationTest, MemoryHoldsTheRanksTablesAndNoSparseGradients) {
  const auto memory = [](const char* sharding) {
    Expected<ResolvedConfig> resolved = ConfigFromJson(DlrmConfig(8, sharding), "dlrm.json");
    EXPECT_TRUE(resolved.ok()) << resolved.error().ToString();
    Expected<std::vector<models::MemoryBreakdown>> stages = StageMemory(*resolved);
    EXPECT_TRUE(stages.ok());
    return stages->front();
  };
  // Dense weights: bottom 13·256+256 + 256·64+64, top (64 + 4·5/2 = 74)·256+256 + 256+1.
  const int64_t dense = (13 * 256 + 256) + (256 * 64 + 64) + (74 * 256 + 256) + (256 + 1);
  // Table-wise on 8 ranks: the largest rank holds the 1,000,000-row table.
  const models::MemoryBreakdown tw = memory("table_wise");
  EXPECT_EQ(tw.parameter_count, dense + 1'000'000 * 64);
  EXPECT_EQ(tw.parameters, (dense + 1'000'000 * 64) * 4);
  EXPECT_EQ(tw.gradients, dense * 4);  // the table's gradient is applied row by row
  // Row-wise: 1/8 of every table (125,000 + 62,500 + 25,000 + 12,500 rows).
  const models::MemoryBreakdown rw = memory("row_wise");
  EXPECT_EQ(rw.parameter_count, dense + 225'000 * 64);
  // Replicated: every table on every rank, and their gradients dense.
  const models::MemoryBreakdown dp = memory("data_parallel");
  EXPECT_EQ(dp.parameter_count, dense + 1'800'000 * 64);
  EXPECT_EQ(dp.gradients, (dense + 1'800'000 * 64) * 4);
}

TEST(DlrmIterationTest, GradientPointsFollowTheBackward) {
  EXPECT_EQ(DlrmGradientPoints(SmallSpec()).size(), 4u);
  const std::vector<GradientTensors> points = DlrmGradientPoints(SmallSpec());
  // Top MLP from its last layer (32 → 1), then the bottom's (64 → 16 first).
  EXPECT_EQ(points[0].matrices[0], (std::array<int64_t, 2>{1, 32}));
  EXPECT_EQ(points[2].matrices[0], (std::array<int64_t, 2>{16, 64}));
  EXPECT_EQ(points[3].matrices[0], (std::array<int64_t, 2>{64, 13}));
}

TEST(DlrmIterationTest, BadPlansAreNamed) {
  const auto error = [](Json json) {
    Expected<ResolvedConfig> resolved = ConfigFromJson(json, "dlrm.json");
    return resolved.ok() ? std::string() : resolved.error().ToString();
  };
  Json json = DlrmConfig(2, "table_wise");
  json["parallelism"]["embedding_sharding"] = "row_wize";
  EXPECT_THAT(error(json), HasSubstr("parallelism.embedding_sharding: unknown sharding (did you "
                                     "mean \"row_wise\"?)"));
  json["parallelism"]["embedding_sharding"] = {"row_wise", "table_wise"};
  EXPECT_THAT(error(json), HasSubstr("one sharding for every table, or one per table: the model "
                                     "has 4 tables, got 2 entries"));
  json["parallelism"]["embedding_sharding"] = {"row_wise", "table_wise", "row_wise", 3};
  EXPECT_THAT(error(json), HasSubstr("parallelism.embedding_sharding[3]"));
  json = DlrmConfig(2, "table_wise");
  json["parallelism"]["zero_stage"] = 1;
  EXPECT_THAT(error(json), HasSubstr("parallelism.zero_stage: a DLRM's dense part is replicated"));
  json = DlrmConfig(2, "table_wise");
  json["parallelism"] = {{"data", 1}, {"tensor", 2}};
  EXPECT_THAT(error(json), HasSubstr("parallelism.tensor: dlrm plans are data parallel only"));
  json = DlrmConfig(2, "table_wise");
  json["compression"] = {{"method", "fp16"}};
  EXPECT_THAT(error(json), HasSubstr("compression.method: gradient compression of a DLRM"));
  json = Json::parse(R"({"model": "gpt2-124m", "training": {"global_batch": 8},
      "cluster": {"preset": "dgx-h100", "nodes": 1, "gpu": "h100-sxm5-80gb"},
      "parallelism": {"data": 8, "embedding_sharding": "row_wise"}})");
  EXPECT_THAT(error(json), HasSubstr("parallelism.embedding_sharding: a DLRM's setting"));
}

// search.embedding_sharding: placements of a DLRM only, each checked against its tables.
TEST(DlrmIterationTest, SearchedPlacementsAreCheckedAgainstTheModel) {
  const auto space_error = [](const Json& config, const Json& section) {
    constexpr std::array<std::string_view, 1> kSearch = {"search"};
    Expected<SimulationConfig> base = ReadConfigSections(config, "", kSearch);
    EXPECT_TRUE(base.ok());
    Expected<SearchSpace> space = SearchSpaceFromJson(&section, *base);
    return space.ok() ? std::string() : space.error().ToString();
  };
  const Json dlrm = DlrmConfig(2, "table_wise");
  EXPECT_EQ(
      space_error(dlrm, {{"embedding_sharding",
                          {"row_wise", {"table_wise", "row_wise", "data_parallel", "row_wise"}}}}),
      "");
  EXPECT_EQ(space_error(dlrm, {{"embedding_sharding",
                                {"row_wise", {"table_wise"}, {"row_wise", "row_wise"}}}}),
            "search.embedding_sharding[2]: one sharding for every table, or one per table: the "
            "model has 4 tables, got 2 entries");
  Json gpt = Json::parse(R"({"model": "gpt2-124m", "training": {"global_batch": 8},
      "cluster": {"preset": "dgx-h100", "nodes": 1, "gpu": "h100-sxm5-80gb"}})");
  EXPECT_THAT(space_error(gpt, {{"embedding_sharding", {"row_wise"}}}),
              HasSubstr("search.embedding_sharding: a DLRM's dimension"));
}

}  // namespace
}  // namespace dtsim::strategies
