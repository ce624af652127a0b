// One description of a micro-batch's layout, two consumers: the work the search's lower bound
// prices (PricePassTimes) is the work the simulated graph's compute stream does. With one
// micro-batch on one pipeline stage, rank 0's compute stream runs each
// piece's forward, backward and recompute once and nothing waits on another rank's earlier
// work, so its busy time — ops, tensor-parallel reductions (priced the same way by the
// analytical network model), a grid's row statistics, and the part of the 1D collectives on
// the "tp" stream — sequence parallelism's backward re-gathers beside a dgrad, the async
// input-gradient reductions beside a wgrad — that outlasts the compute beside it — must equal
// the bound's pieces summed:
// embedding + L layers + output, each forward + backward + recompute. Left out on both sides:
// the embedding's collectives (the bound leaves them out), the optimizer step, the expert
// all-to-alls and FP8's amax all-reduces (not in the bound). On a grid the bound counts each
// SUMMA op's span (SummaSpan: the compute stream also waits for the op's first broadcast, and
// for every broadcast after a reduce), so it lies between the compute stream's busy time and
// its elapsed time.
#include "strategies/microbatch_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

#include "strategies/categories.h"
#include "strategies/pass_times.h"
#include "tests/strategies/simulate_helpers.h"

namespace dtsim::strategies {
namespace {

Json OneMicrobatch(const Json& parallelism, bool moe) {
  Json json = Json::parse(R"({
    "model": {"family": "transformer", "layers": 4, "hidden": 1024, "heads": 16,
              "vocab": 32768, "max_seq": 1024},
    "training": {"global_batch": 4, "micro_batch": 4, "seq_len": 1024,
                 "recompute": "selective"},
    "cluster": {"preset": "dgx-a100", "gpu": {"preset": "a100-sxm4-80gb", "sms": 0},
                "nodes": 1},
    "simulation": {"network_model": "analytical"}
  })");
  json["parallelism"] = parallelism;
  json["training"]["global_batch"] = 4 * parallelism["data"].get<int>();  // one micro-batch
  if (moe) json["model"]["moe"] = {{"experts", 8}, {"top_k", 2}};
  return json;
}

int64_t BoundWork(const SimulationConfig& config, const PassTimes& times) {
  const auto piece = [](const PieceTimes& p) {
    return (p.forward + p.backward + p.recompute).ns();
  };
  int64_t total = piece(times.embedding) + piece(times.output);
  for (int i = 0; i < config.model.transformer.layers; ++i) {
    total += piece(times.Layer(config.model.transformer, i));
  }
  return total;
}

int64_t ComputeStreamWork(const SimulationResult& result) {
  const graph::TaskGraph& graph = result.iteration->graph;
  int64_t busy = 0;
  std::vector<std::pair<int64_t, int64_t>> computing, beside;
  for (size_t i = 0; i < graph.task_count(); ++i) {
    const graph::TaskId id(static_cast<uint32_t>(i));
    const graph::Task& task = graph.task(id);
    const graph::Stream& stream = graph.stream(task.stream);
    const std::pair<int64_t, int64_t> span = {result.times.task_start[i].ns(),
                                              result.times.task_end[i].ns()};
    if (stream.rank != 0) continue;
    if (graph.name(stream.name) == StreamName(StreamRole::kTensor)) {
      const graph::CommKind kind = graph.comm(task.comm).kind;
      if (kind == graph::CommKind::kAllGather || kind == graph::CommKind::kReduceScatter ||
          kind == graph::CommKind::kAllReduce) {
        beside.push_back(span);  // not a grid's SUMMA broadcasts and reduces
      }
    }
    if (graph.name(stream.name) != StreamName(StreamRole::kCompute)) continue;
    computing.push_back(span);
    const std::string_view category = graph.category_name(task.category);
    if (category == kOptimizerCategory || category == kExpertCategory) continue;
    const std::string_view name = graph.name(task.name);
    if (name == "embedding tp" || name == "fp8 amax all-reduce") continue;
    busy += span.second - span.first;
  }
  // Their time while the compute stream is idle (waiting for them).
  for (const auto& [start, end] : beside) {
    int64_t covered = 0;
    for (const auto& [from, to] : computing) {
      covered += std::max<int64_t>(0, std::min(end, to) - std::max(start, from));
    }
    busy += end - start - covered;
  }
  return busy;
}

// From the compute stream's first task to the end of its last before the optimizer step.
int64_t ComputeStreamElapsed(const SimulationResult& result) {
  const graph::TaskGraph& graph = result.iteration->graph;
  int64_t first = -1, last = 0;
  for (size_t i = 0; i < graph.task_count(); ++i) {
    const graph::Task& task = graph.task(graph::TaskId(static_cast<uint32_t>(i)));
    const graph::Stream& stream = graph.stream(task.stream);
    if (stream.rank != 0 || graph.name(stream.name) != StreamName(StreamRole::kCompute)) continue;
    if (graph.category_name(task.category) == kOptimizerCategory) continue;
    if (first < 0) first = result.times.task_start[i].ns();
    last = std::max(last, result.times.task_end[i].ns());
  }
  return last - first;
}

// The bound's work for one micro-batch of `json`, and the simulated graph.
void BoundAndGraph(const Json& json, int64_t& bound, SimulationResult& result) {
  const ResolvedConfig config = ConfigOf(json);
  const auto cost = LoadCostModel(config);
  ASSERT_TRUE(cost.ok());
  const Expected<PassTimes> times = PricePassTimes(config, *cost->model);
  ASSERT_TRUE(times.ok()) << times.error().ToString();
  bound = BoundWork(config, *times);
  result = SimulateJson(json);
  ASSERT_TRUE(result.iteration.has_value());
}

void ExpectBoundIsTheGraphsWork(const Json& json) {
  int64_t bound = 0;
  SimulationResult result;
  ASSERT_NO_FATAL_FAILURE(BoundAndGraph(json, bound, result));
  EXPECT_EQ(ComputeStreamWork(result), bound) << json.dump();
}

// The layouts' work on GPUs whose SMs are not counted (`sms` 0): compute takes what it takes
// alone. With them counted, the ops beside a collective are slowed; the bound counts it for the
// collective laid beside the weight-gradient GEMM (PassTimer::Overlapped), the graph's only one
// without data parallelism.
TEST(MicrobatchLayoutTest, TheBoundCountsTheSmsOfTheReductionBesideTheWgrad) {
  Json json = OneMicrobatch({{"data", 1}, {"tensor", 8}}, false);
  json["cluster"]["gpu"] = "a100-sxm4-80gb";
  ExpectBoundIsTheGraphsWork(json);
  json["parallelism"]["tensor"] = {{"size", 8}, {"sequence_parallel", true}};
  ExpectBoundIsTheGraphsWork(json);
  // With data parallelism its reductions slow the backward too: the bound, which leaves them
  // out, stays below.
  json = OneMicrobatch({{"data", 2}, {"tensor", 4}}, false);
  json["cluster"]["gpu"] = "a100-sxm4-80gb";
  int64_t bound = 0;
  SimulationResult result;
  ASSERT_NO_FATAL_FAILURE(BoundAndGraph(json, bound, result));
  EXPECT_GT(ComputeStreamWork(result), bound);
}

TEST(MicrobatchLayoutTest, TensorParallelReductionsAreTheBoundsWork) {
  ExpectBoundIsTheGraphsWork(OneMicrobatch({{"data", 2}, {"tensor", 4}}, false));
}

TEST(MicrobatchLayoutTest, SequenceParallelSplitsAreTheBoundsWork) {
  ExpectBoundIsTheGraphsWork(
      OneMicrobatch({{"data", 2}, {"tensor", {{"size", 4}, {"sequence_parallel", true}}}}, false));
}

// 2D, 2×2 grid: the bound holds the row statistics and the ops, and the SUMMA waits. The
// graph's compute stream waits longer still: for the previous op's reduces (the bound leaves
// those out) and for the embedding's collectives.
TEST(MicrobatchLayoutTest, GridSpansLieBetweenTheGraphsWorkAndItsElapsedTime) {
  int64_t bound = 0;
  SimulationResult result;
  ASSERT_NO_FATAL_FAILURE(
      BoundAndGraph(OneMicrobatch({{"data", 2}, {"tensor", {{"size", 4}, {"mode", "2d"}}}}, false),
                    bound, result));
  EXPECT_LT(ComputeStreamWork(result), bound);
  EXPECT_LE(bound, ComputeStreamElapsed(result));
}

// A QK norm normalizes over one head and a grid keeps a rank's heads whole: on a 2×2 grid it
// adds no row-statistics all-reduce (LayerNorm2D's two a norm, forward and backward: the
// layers' own norms and the loss keep theirs), while every SUMMA op is the same.
TEST(MicrobatchLayoutTest, QkNormsAddNoRowStatisticsOnAGrid) {
  Json json = OneMicrobatch({{"data", 1}, {"tensor", {{"size", 4}, {"mode", "2d"}}}}, false);
  json["cluster"]["gpus_per_node"] = 4;
  const SimulationResult plain = SimulateJson(json);
  json["model"]["qk_norm"] = true;
  const SimulationResult normed = SimulateJson(json);
  const CommTally without = Tally(plain.iteration->graph, graph::CommKind::kAllReduce, 2);
  const CommTally with = Tally(normed.iteration->graph, graph::CommKind::kAllReduce, 2);
  EXPECT_GT(without.count, 0);
  EXPECT_EQ(with.count, without.count);
  EXPECT_EQ(with.bytes, without.bytes);
}

// A SUMMA op of 8 ns (10 ns in the first case) in q steps, each broadcasting for 3 ns first:
// q = 2, no reduces: B0 [0,3], B1 [3,6] (both wait only for the task before the op), C0 [3,8],
//   C1 [8,13] → 13.
// q = 2, a 2 ns reduce after each chunk: B0 [0,3], C0 [3,7], R0 [7,9], B1 [9,12], C1 [12,16]
//   → 16 (R1 [16,18] is left to whatever waits for it).
// q = 4, no reduces: B0 [0,3], B1 [3,6], C0 [3,5], C1 [6,8], B2 waits for C0 and B1: [6,9],
//   C2 [9,11], B3 waits for C1 and B2: [9,12], C3 [12,14] → 14.
// No communication: the op's duration.
TEST(MicrobatchLayoutTest, SummaSpanFollowsTheGraphsOrder) {
  const auto ns = [](int64_t v) { return DurationNs(v); };
  EXPECT_EQ(SummaSpan(ns(10), {{ns(3), ns(0)}, {ns(3), ns(0)}}), ns(13));
  EXPECT_EQ(SummaSpan(ns(8), {{ns(3), ns(2)}, {ns(3), ns(2)}}), ns(16));
  EXPECT_EQ(SummaSpan(ns(8), std::vector<SummaStepTimes>(4, {ns(3), ns(0)})), ns(14));
  EXPECT_EQ(SummaSpan(ns(8), std::vector<SummaStepTimes>(4, SummaStepTimes{})), ns(8));
  EXPECT_EQ(SummaSpan(ns(8), {}), ns(8));
}

TEST(MicrobatchLayoutTest, Fp8CastsAndGathersAreTheBoundsWork) {
  Json json =
      OneMicrobatch({{"data", 2}, {"tensor", {{"size", 4}, {"sequence_parallel", true}}}}, true);
  json["cluster"] = {{"preset", "dgx-h100"}, {"gpu", "h100-sxm5-80gb"}, {"nodes", 1}};
  json["parallelism"]["expert"] = 2;
  json["training"]["precision"] = "fp8";
  ExpectBoundIsTheGraphsWork(json);
}

TEST(MicrobatchLayoutTest, MoeLayersAreTheBoundsWorkBesideTheirAllToAlls) {
  ExpectBoundIsTheGraphsWork(OneMicrobatch({{"data", 4}, {"tensor", 2}, {"expert", 2}}, true));
}

}  // namespace
}  // namespace dtsim::strategies
