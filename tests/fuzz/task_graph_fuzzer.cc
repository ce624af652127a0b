// `dtsim run GRAPH`: the task-graph JSON (docs/formats/task-graph.md), its validation in
// TaskGraphBuilder::Build(), and, for a graph small enough to run in a moment, the engine on
// it. Build() promises that every graph it accepts can finish: a deadlock report from a
// graph it accepted is a bug, and traps; so would UBSan on time arithmetic that overflows.
#include "sim/engine/fixed_cost_model.h"
#include "sim/engine/simulator.h"
#include "sim/graph/graph_json.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtsim;  // NOLINT(google-build-using-namespace): a harness's one function
  const Expected<Json> json = ParseJson(fuzz::Text(data, size), "graph.json");
  if (!fuzz::Succeeded(json)) return 0;
  const Expected<graph::TaskGraph> graph = graph::TaskGraphFromJson(*json, "graph.json");
  if (!fuzz::Succeeded(graph)) return 0;
  if (graph->task_count() > 10000 || graph->rank_count() > 4096) return 0;
  engine::FixedCostModel model(Microseconds(5),
                               Bandwidth::BytesPerSecond(int64_t{100} * 1000 * 1000 * 1000));
  engine::Simulator simulator(*graph, model);
  // The one error a graph Build() accepted may give: time past the simulator's horizon, from
  // durations or sizes far beyond any iteration. A deadlock is a bug.
  if (!simulator.Run().ok() && !simulator.passed_horizon()) __builtin_trap();
  return 0;
}
