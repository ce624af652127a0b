// One description of a micro-batch's layout, two consumers: the work the search's lower bound
// prices (PricePassTimes) is the work the simulated graph's compute stream does. With one
// micro-batch on one pipeline stage, rank 0's compute stream runs each
// piece's forward, backward and recompute once and nothing waits on another rank's earlier
// work, so its busy time — ops, tensor-parallel reductions (priced the same way by the
// analytical network model), a grid's row statistics, and the part of sequence parallelism's
// backward re-gathers (on the "tp" stream, beside a dgrad) that outlasts the compute beside it
// — must equal the bound's pieces summed:
// embedding + L layers + output, each forward + backward + recompute. Left out on both sides:
// the embedding's collectives (the bound leaves them out), the optimizer step, the expert
// all-to-alls and FP8's amax all-reduces (not in the bound).
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
    "cluster": {"preset": "dgx-a100", "gpu": "a100-sxm4-80gb", "nodes": 1},
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
  std::vector<std::pair<int64_t, int64_t>> computing, regathers;
  for (size_t i = 0; i < graph.task_count(); ++i) {
    const graph::TaskId id(static_cast<uint32_t>(i));
    const graph::Task& task = graph.task(id);
    const graph::Stream& stream = graph.stream(task.stream);
    const std::pair<int64_t, int64_t> span = {result.times.task_start[i].ns(),
                                              result.times.task_end[i].ns()};
    if (stream.rank != 0) continue;
    if (graph.name(stream.name) == StreamName(StreamRole::kTensor) &&
        graph.comm(task.comm).kind == graph::CommKind::kAllGather) {
      regathers.push_back(span);  // not a grid's SUMMA broadcasts and reduces
    }
    if (graph.name(stream.name) != StreamName(StreamRole::kCompute)) continue;
    computing.push_back(span);
    const std::string_view category = graph.category_name(task.category);
    if (category == kOptimizerCategory || category == kExpertCategory) continue;
    const std::string_view name = graph.name(task.name);
    if (name == "embedding tp" || name == "fp8 amax all-reduce") continue;
    busy += span.second - span.first;
  }
  // A re-gather's time while the compute stream is idle (waiting for it).
  for (const auto& [start, end] : regathers) {
    int64_t covered = 0;
    for (const auto& [from, to] : computing) {
      covered += std::max<int64_t>(0, std::min(end, to) - std::max(start, from));
    }
    busy += end - start - covered;
  }
  return busy;
}

void ExpectBoundIsTheGraphsWork(const Json& json) {
  const ResolvedConfig config = ConfigOf(json);
  const auto cost = LoadCostModel(config);
  ASSERT_TRUE(cost.ok());
  const Expected<PassTimes> times = PricePassTimes(config, *cost->model);
  ASSERT_TRUE(times.ok()) << times.error().ToString();
  const SimulationResult result = SimulateJson(json);
  ASSERT_TRUE(result.iteration.has_value());
  EXPECT_EQ(ComputeStreamWork(result), BoundWork(config, *times)) << json.dump();
}

TEST(MicrobatchLayoutTest, TensorParallelReductionsAreTheBoundsWork) {
  ExpectBoundIsTheGraphsWork(OneMicrobatch({{"data", 2}, {"tensor", 4}}, false));
}

TEST(MicrobatchLayoutTest, SequenceParallelSplitsAreTheBoundsWork) {
  ExpectBoundIsTheGraphsWork(
      OneMicrobatch({{"data", 2}, {"tensor", {{"size", 4}, {"sequence_parallel", true}}}}, false));
}

TEST(MicrobatchLayoutTest, GridRowStatisticsAreTheBoundsWork) {
  ExpectBoundIsTheGraphsWork(
      OneMicrobatch({{"data", 2}, {"tensor", {{"size", 4}, {"mode", "2d"}}}}, false));
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
