// The JSON form of a task graph, documented in docs/formats/task-graph.md:
//   {"format": "dtsim.task_graph", "version": "1.2",
//    "collectives": [{"id", "op", "size" | "size_bytes", "group", "algorithm"?, "root"?,
//                     "priced_as"?}],
//    "streams"?: [{"rank", "name", "order"}],
//    "tasks": [{"id", "rank", "stream"?, "kind"?, "name"?, "category"?, "deps"?,
//               "duration" | "duration_ns", "collective", "peer", "tag"?, "size" | "size_bytes",
//               "eager"?}],
//    "metadata"?: {...}}
// Every error names the file, the JSON path and the offending value.
#pragma once

#include <string>

#include "sim/base/file_format.h"
#include "sim/base/json_reader.h"
#include "sim/base/status.h"
#include "sim/graph/task_graph.h"

namespace dtsim::graph {

// 1.1: collectives may carry "priced_as". 1.2: "streams" (stream orders), sends' "eager".
inline constexpr FileFormat kTaskGraphFormat{"dtsim.task_graph", 1, 2, "not a task graph"};
inline constexpr int32_t kMaxRank = (1 << 22) - 1;

// Builds a graph from its JSON form; `file` is used in error messages only.
Expected<TaskGraph> TaskGraphFromJson(const Json& document, const std::string& file);
// Reads and builds a graph file.
Expected<TaskGraph> LoadTaskGraph(const std::string& path);

// The JSON form of a graph, with integer quantities (duration_ns, size_bytes). Tasks keep their
// external ids; tasks without one are named "t<index>", collectives "c<index>".
Json TaskGraphToJson(const TaskGraph& graph);

}  // namespace dtsim::graph
