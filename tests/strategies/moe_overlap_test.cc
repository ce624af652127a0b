// Megatron-Core's expert all-to-all overlap (parallelism.expert.overlap, delay_wgrad): one more
// warm-up forward, each steady forward beside a backward layer by layer, the all-to-alls on an
// "ep" stream behind the other pass's compute; and the plans it refuses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "models/memory.h"
#include "strategies/stage_memory.h"
#include "tests/strategies/simulate_helpers.h"

namespace dtsim::strategies {
namespace {

using testing::HasSubstr;

// One MoE layer (4 experts, top-2, dropless), hidden 1,024, 2 GPUs on 2 nodes (the all-to-alls
// cross the 200 Gb/s NIC): DP 2 with EP 2, no pipeline, 2 micro-batches of 2 × 1,024 tokens.
// The schedule with the overlap is F0 | F1 beside B0 | B1.
Json OverlapConfig(bool overlap) {
  Json json = Json::parse(R"({
    "model": {"family": "transformer", "layers": 1, "hidden": 1024, "heads": 8, "vocab": 1024,
              "max_seq": 1024, "moe": {"experts": 4, "top_k": 2, "dropless": true}},
    "training": {"global_batch": 8, "micro_batch": 2, "seq_len": 1024},
    "cluster": {"preset": "dgx-a100", "nodes": 2, "gpus_per_node": 1, "gpu": "a100-sxm4-80gb"},
    "parallelism": {"data": 2, "expert": {"size": 2}}
  })");
  json["parallelism"]["expert"]["overlap"] = overlap;
  return json;
}

struct RankTask {
  std::string stream, name;
  graph::TaskKind kind;
  int64_t start = 0, end = 0;
};

// Rank 0's tasks on `stream` ("compute", "ep"), in stream order.
std::vector<RankTask> StreamTasks(const SimulationResult& r, std::string_view stream) {
  const graph::TaskGraph& graph = r.iteration->graph;
  std::vector<RankTask> tasks;
  for (size_t i = 0; i < graph.task_count(); ++i) {
    const graph::TaskId id(static_cast<uint32_t>(i));
    const graph::Task& task = graph.task(id);
    if (graph.rank_of(id) != 0 || graph.name(graph.stream(task.stream).name) != stream) continue;
    tasks.push_back({std::string(stream), std::string(graph.name(task.name)), task.kind,
                     r.times.task_start[i].ns(), r.times.task_end[i].ns()});
  }
  return tasks;
}

int64_t AllToAlls(const std::vector<RankTask>& tasks) {
  return std::count_if(tasks.begin(), tasks.end(), [](const RankTask& t) {
    return t.kind == graph::TaskKind::kCollective && t.name.find("all-to-all") != std::string::npos;
  });
}

TEST(MoeOverlapTest, PairedAllToAllsRunOnTheExpertStreamBesideTheCompute) {
  const SimulationResult plain = SimulateJson(OverlapConfig(false));
  const SimulationResult overlap = SimulateJson(OverlapConfig(true));
  // The same exchanges either way: 4 a micro-batch (dispatch and combine, forward and
  // backward), 8 in all. Without the overlap all block the compute stream; with it the pair
  // (F1 beside B0) moves its 4 to the "ep" stream and the unpaired F0 and B1 keep theirs.
  EXPECT_EQ(AllToAlls(StreamTasks(plain, "compute")), 8);
  EXPECT_TRUE(StreamTasks(plain, "ep").empty());
  const std::vector<RankTask> compute = StreamTasks(overlap, "compute");
  const std::vector<RankTask> ep = StreamTasks(overlap, "ep");
  EXPECT_EQ(AllToAlls(compute), 4);
  ASSERT_EQ(AllToAlls(ep), 4);
  // Each exchange of the pair overlaps some compute of the other pass: the compute stream is
  // busy during part of every "ep" task.
  for (const RankTask& a2a : ep) {
    int64_t busy = 0;
    for (const RankTask& task : compute) {
      if (task.kind != graph::TaskKind::kCompute) continue;
      busy += std::max<int64_t>(0, std::min(task.end, a2a.end) - std::max(task.start, a2a.start));
    }
    EXPECT_GT(busy, 0) << a2a.name << " at " << a2a.start;
  }
  // The saving is real and at most the exchanges' time: each of the 4 hides behind compute,
  // it cannot hide more than itself. The wait that remains shows as "ep" in the breakdown.
  int64_t exchanged = 0;
  for (const RankTask& a2a : ep) exchanged += a2a.end - a2a.start;
  const int64_t saved = plain.iteration_time.ns() - overlap.iteration_time.ns();
  EXPECT_GT(saved, 0);
  EXPECT_LE(saved, exchanged);
  EXPECT_LT(overlap.stages[0].expert, plain.stages[0].expert);
  EXPECT_GT(overlap.stages[0].expert.ns(), 0);
}

TEST(MoeOverlapTest, ComputeWaitsOnlyForTheExchangeItNeeds) {
  // In the pair the ep stream runs B0's combine-backward all-to-all (Ba), F1's dispatch (Fa),
  // B0's dispatch-backward (Bb) and F1's combine (Fb), in that order. F1's attention and router
  // (F0) start when B0's combine backward has been issued, without waiting for Ba; Fa starts
  // once both Ba and F0 are done, and Fb once F1's experts are.
  const SimulationResult r = SimulateJson(OverlapConfig(true));
  const std::vector<RankTask> ep = StreamTasks(r, "ep");
  ASSERT_EQ(ep.size(), 4U);
  for (size_t i = 1; i < ep.size(); ++i) EXPECT_GE(ep[i].start, ep[i - 1].end);
  const std::vector<RankTask> compute = StreamTasks(r, "compute");
  // The first compute task to start after Ba starts and before it ends: F1's attention.
  const auto during = std::find_if(compute.begin(), compute.end(), [&](const RankTask& t) {
    return t.kind == graph::TaskKind::kCompute && t.start >= ep[0].start && t.start < ep[0].end;
  });
  ASSERT_NE(during, compute.end());
  EXPECT_THAT(during->name, HasSubstr("fwd"));
  // No expert compute of B0 (its backward's "moe bwd" after Ba) starts before Ba ends.
  for (const RankTask& t : compute) {
    if (t.start > ep[0].start && t.start < ep[0].end) {
      EXPECT_THAT(t.name, testing::Not(HasSubstr("bwd"))) << t.name << " at " << t.start;
    }
  }
}

TEST(MoeOverlapTest, DelayedWeightGradientsLetTheDispatchBackwardStartSooner) {
  // --delay-wgrad-compute: B0's expert weight gradients run after its dispatch-backward
  // all-to-all (the third on the ep stream) is issued, so it starts earlier — by at most the
  // wgrad GEMMs' time — and the iteration is no longer.
  Json delayed = OverlapConfig(true);
  delayed["parallelism"]["expert"]["delay_wgrad"] = true;
  const SimulationResult a = SimulateJson(OverlapConfig(true));
  const SimulationResult b = SimulateJson(delayed);
  const std::vector<RankTask> ep_a = StreamTasks(a, "ep");
  const std::vector<RankTask> ep_b = StreamTasks(b, "ep");
  ASSERT_EQ(ep_a.size(), 4U);
  ASSERT_EQ(ep_b.size(), 4U);
  EXPECT_LT(ep_b[2].start, ep_a[2].start);
  EXPECT_LE(b.iteration_time, a.iteration_time);
}

TEST(MoeOverlapTest, ThePairedForwardKeepsOneLayerMoreAtThePeak) {
  // 2 MoE layers, no pipeline, 4 micro-batches: 1F1B holds one micro-batch; with the overlap
  // the extra warm-up forward is the one the steady forward no longer adds (one in flight
  // still), and while a layer's backward runs the paired forward's current layer is kept too,
  // with its embedding (it runs before the backward begins): the peak's activations grow by
  // one layer's and the embedding's kept bytes. The memory track the timeline draws climbs as
  // high: its top is the model's peak less the working set.
  Json json = OverlapConfig(false);
  json["model"]["layers"] = 2;
  json["training"]["global_batch"] = 16;  // 4 micro-batches a replica
  const ResolvedConfig plain_config = ConfigOf(json);
  const Expected<std::vector<models::MemoryBreakdown>> plain = StageMemory(plain_config);
  json["parallelism"]["expert"]["overlap"] = true;
  const Expected<std::vector<models::MemoryBreakdown>> overlap = StageMemory(ConfigOf(json));
  ASSERT_TRUE(plain.ok() && overlap.ok());
  EXPECT_DOUBLE_EQ(plain->front().microbatches_in_flight, 1);
  EXPECT_DOUBLE_EQ(overlap->front().microbatches_in_flight, 1);
  const models::MemoryPlan memory_plan = MemoryPlanOf(plain_config, 0);
  const int64_t layer = models::LayerKeptBytes(plain_config.model.transformer, memory_plan, 0);
  const int64_t embedding = models::EmbeddingKeptBytes(plain_config.model.transformer, memory_plan);
  EXPECT_GT(layer, 0);
  EXPECT_EQ(overlap->front().activations, plain->front().activations + layer + embedding);

  const SimulationResult result = SimulateJson(json);
  const std::vector<int64_t> track = MemoryTracks(result).front();
  const int64_t top = *std::max_element(track.begin(), track.end());
  const models::MemoryBreakdown& peak = result.iteration->stats.stage_memory.front();
  EXPECT_EQ(top, peak.total() - peak.temporary);
}

TEST(MoeOverlapTest, InterleavedPipelineFullAndSymmetricRanksAgree) {
  // 4 MoE layers on PP 2 × 2 virtual stages, DP 2 with EP 2 per stage (8 GPUs, one node), 4
  // micro-batches: the combined steps pair chunks of different micro-batches across the
  // interleaved order; every rank simulated, or one per stage, give the same iteration, and
  // the overlap is faster than without.
  Json json = OverlapConfig(true);
  json["model"]["layers"] = 4;
  json["cluster"] = {{"preset", "dgx-a100"}, {"nodes", 1}, {"gpu", "a100-sxm4-80gb"}};
  json["parallelism"] = Json::parse(R"({"data": 2, "tensor": 2,
      "pipeline": {"size": 2, "schedule": "interleaved", "virtual_stages": 2},
      "expert": {"size": 2, "overlap": true}})");
  json["training"]["global_batch"] = 8;
  json["training"]["micro_batch"] = 1;
  const SimulationResult full = SimulateJson(json);
  json["simulation"] = {{"ranks", "symmetric"}};
  const SimulationResult symmetric = SimulateJson(json);
  EXPECT_NEAR(symmetric.iteration_time.ToSecondsDouble() / full.iteration_time.ToSecondsDouble(),
              1.0, 0.001);
  json["parallelism"]["expert"]["overlap"] = false;
  EXPECT_LT(symmetric.iteration_time, SimulateJson(json).iteration_time);
}

TEST(MoeOverlapTest, PlansMegatronCoreRefusesNameTheField) {
  const auto error = [](Json json) { return ConfigError(json); };
  Json no_experts = OverlapConfig(true);
  no_experts["parallelism"]["expert"]["size"] = 1;
  EXPECT_THAT(error(no_experts), HasSubstr("needs expert parallelism"));
  Json one_f_one_b = OverlapConfig(true);
  one_f_one_b["model"]["layers"] = 2;
  one_f_one_b["cluster"]["nodes"] = 4;
  one_f_one_b["parallelism"]["pipeline"] = 2;
  EXPECT_THAT(error(one_f_one_b), HasSubstr("interleaved"));
  EXPECT_THAT(error(one_f_one_b), HasSubstr("parallelism.expert.overlap"));
  Json full = OverlapConfig(true);
  full["training"]["recompute"] = "full";
  EXPECT_THAT(error(full), HasSubstr("full recompute"));
  Json gpipe = OverlapConfig(true);
  gpipe["parallelism"]["pipeline"] = {{"size", 1}, {"schedule", "gpipe"}};
  EXPECT_THAT(error(gpipe), HasSubstr("gpipe"));
  Json delay = OverlapConfig(false);
  delay["parallelism"]["expert"]["delay_wgrad"] = true;
  EXPECT_THAT(error(delay), HasSubstr("parallelism.expert.delay_wgrad"));
  Json pytorch = OverlapConfig(true);
  pytorch["training"]["framework"] = "pytorch";
  EXPECT_THAT(error(pytorch), HasSubstr("Megatron-Core"));
}

}  // namespace
}  // namespace dtsim::strategies
