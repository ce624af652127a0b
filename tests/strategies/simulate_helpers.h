// Helpers shared by the strategies tests: simulate a config given as JSON, or get its error.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "strategies/config.h"
#include "strategies/simulate.h"

namespace dtsim::strategies {

inline ResolvedConfig ConfigOf(const Json& json) {
  Expected<ResolvedConfig> config = ConfigFromJson(json, "");
  EXPECT_TRUE(config.ok()) << config.error().ToString();
  return *config;
}

inline SimulationResult SimulateJson(const Json& json) {
  Expected<SimulationResult> result = Simulate(ConfigOf(json));
  EXPECT_TRUE(result.ok()) << result.error().ToString();
  return std::move(*result);
}

// Each rank's bytes over time as the timeline draws them: its base, then the running sum of the
// memory changes at their tasks' ends.
inline std::vector<std::vector<int64_t>> MemoryTracks(const SimulationResult& result) {
  const graph::TaskGraph& graph = result.iteration->graph;
  std::vector<std::vector<std::pair<TimeNs, int64_t>>> changes(
      static_cast<size_t>(graph.rank_count()));
  for (const graph::MemoryChange& change : graph.memory_changes()) {
    changes[static_cast<size_t>(graph.rank_of(change.task))].emplace_back(
        result.times.task_end[change.task.value()], change.bytes);
  }
  std::vector<std::vector<int64_t>> tracks;
  for (int32_t rank = 0; rank < graph.rank_count(); ++rank) {
    auto& list = changes[static_cast<size_t>(rank)];
    std::stable_sort(list.begin(), list.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<int64_t> track = {graph.memory_base(rank)};
    for (const auto& [at, bytes] : list) track.push_back(track.back() + bytes);
    tracks.push_back(std::move(track));
  }
  return tracks;
}

// A shipped example config (tools/examples/NAME).
inline Json ExampleJson(const std::string& name) {
  Expected<Json> json = ReadJsonFile(std::string(DTSIM_EXAMPLES_DIR "/") + name);
  EXPECT_TRUE(json.ok()) << json.error().ToString();
  return json.ok() ? *json : Json();
}

// An imported config and the example it stands for, each simulated with one rank per stage (how
// dtsim simulates is not in a launch command or a framework's config): the same iteration to
// the nanosecond.
inline void ExpectSameIteration(Json imported, Json example) {
  imported["simulation"] = {{"ranks", "symmetric"}};
  example["simulation"]["ranks"] = "symmetric";
  const SimulationResult a = SimulateJson(imported);
  const SimulationResult b = SimulateJson(example);
  EXPECT_EQ(a.iteration_time, b.iteration_time);
  EXPECT_EQ(a.samples_per_second, b.samples_per_second);
}

// A Llama-style decoder's model section (RMSNorm, SwiGLU, rotary, no biases, untied output:
// the loop models/eager_llama.h replays).
inline Json LlamaStyleModel(int layers, int hidden, int heads, int kv_heads, int ffn_hidden,
                            int vocab, int max_seq) {
  return {{"family", "transformer"}, {"layers", layers},     {"hidden", hidden},
          {"heads", heads},          {"kv_heads", kv_heads}, {"ffn_hidden", ffn_hidden},
          {"vocab", vocab},          {"max_seq", max_seq},   {"norm", "rmsnorm"},
          {"activation", "swiglu"},  {"position", "rotary"}, {"linear_bias", false},
          {"tied_embeddings", false}};
}

// The error reading the config, or (a config that reads) simulating it; empty when both work.
inline std::string ConfigError(const Json& json) {
  Expected<ResolvedConfig> config = ConfigFromJson(json, "");
  if (!config.ok()) return config.error().ToString();
  Expected<SimulationResult> result = Simulate(*config);
  return result.ok() ? "" : result.error().ToString();
}

// Bytes of the collectives of `kind` that rank 0 takes part in from tasks whose name starts
// with `prefix` and, when given, of `category`.
inline int64_t RankBytes(const SimulationResult& result, graph::CommKind kind,
                         std::string_view prefix, std::string_view category = {}) {
  const graph::TaskGraph& graph = result.iteration->graph;
  int64_t bytes = 0;
  for (size_t i = 0; i < graph.task_count(); ++i) {
    const graph::TaskId id(static_cast<uint32_t>(i));
    const graph::Task& task = graph.task(id);
    if (task.kind != graph::TaskKind::kCollective || graph.rank_of(id) != 0) continue;
    if (!graph.name(task.name).starts_with(prefix)) continue;
    if (!category.empty() && graph.category_name(task.category) != category) continue;
    const graph::Communication& comm = graph.comm(task.comm);
    if (comm.kind == kind) bytes += comm.size.count();
  }
  return bytes;
}

// The collectives of `kind` over groups of `group_size` ranks in a graph: how many, and their
// bytes summed.
struct CommTally {
  int count = 0;
  int64_t bytes = 0;
};

inline CommTally Tally(const graph::TaskGraph& graph, graph::CommKind kind, size_t group_size) {
  CommTally tally;
  for (size_t c = 0; c < graph.comm_count(); ++c) {
    const graph::Communication& comm = graph.comm(graph::CommId(static_cast<uint32_t>(c)));
    if (comm.kind != kind || graph.group(comm.group).size() != group_size) continue;
    ++tally.count;
    tally.bytes += comm.size.count();
  }
  return tally;
}

// Simulates `json` with full and with symmetric ranks on both network models and expects the
// same iteration (DESIGN §4: within 0.1%), model FLOPs and MFU, from a graph at least
// `fewer_tasks` times smaller.
inline void ExpectSymmetricMatchesFull(Json json, int fewer_tasks = 1) {
  for (const char* network : {"analytical", "flow"}) {
    json["simulation"] = {{"network_model", network}, {"ranks", "full"}};
    const SimulationResult full = SimulateJson(json);
    json["simulation"]["ranks"] = "symmetric";
    const SimulationResult symmetric = SimulateJson(json);
    EXPECT_NEAR(symmetric.iteration_time.ToSecondsDouble() / full.iteration_time.ToSecondsDouble(),
                1.0, 0.001)
        << json["parallelism"].dump() << " " << network;
    EXPECT_LE(symmetric.summary.tasks * static_cast<size_t>(fewer_tasks), full.summary.tasks);
    EXPECT_DOUBLE_EQ(symmetric.iteration->stats.model_flops, full.iteration->stats.model_flops);
    EXPECT_NEAR(symmetric.mfu, full.mfu, 0.001 * full.mfu);
  }
}

}  // namespace dtsim::strategies
