// Writes a simulated run as a Chrome trace event file (the JSON Object Format), which Perfetto
// and chrome://tracing both open: one process per rank (pid = rank), one thread per stream
// (tid = the stream's index within its rank, in creation order), named by metadata events.
//
// Every task is a complete event ("ph": "X"). A communication task is drawn from its
// communication's start to its end, with a separate "wait" slice (category
// "rendezvous_wait") from its arrival to that start when it had to wait. Each send/recv pair is
// linked by a flow arrow. A rank the graph gives memory for (TaskGraph::memory_base,
// memory_changes) has a counter track "memory" in GiB ("ph": "C"). Timestamps are microseconds
// written with three decimals, i.e. exact nanoseconds; no displayTimeUnit is written, so both
// viewers read µs as the spec says. The first key, "otherData", names the format and version
// (docs/formats/timeline.md).
#pragma once

#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "sim/base/file_format.h"
#include "sim/base/status.h"
#include "sim/graph/task_graph.h"
#include "sim/graph/task_times.h"

namespace dtsim::traces {

// 1.2: each rank's memory as a counter track, where the graph gives one.
inline constexpr FileFormat kTimelineFormat{"dtsim.timeline", 1, 3, "not a dtsim timeline"};

struct TimelineInfo {
  std::string source;  // what was simulated, e.g. the graph file
  std::string communication_model;
  // How the network model ran each communication ("ring", "direct on 4 channels"): labels, and
  // each communication's index into them (empty: the graph's own "algorithm" where it names
  // one). network::CommMethods holds them after a run.
  std::span<const std::string> method_labels;
  std::span<const uint32_t> comm_methods;
  // What goes in (`--timeline-ranks`, `--timeline-window`): these ranks only (empty: every
  // rank the graph has streams on), and only tasks that overlap [window_start, window_end)
  // (window_end 0: no window). A rank without streams (the ranks a symmetric graph does not
  // simulate) is never declared.
  std::vector<int32_t> ranks;
  // The job's ranks, when the graph simulates fewer (a symmetric graph's ranks end at its last
  // simulated one); 0: the graph's.
  int32_t world_ranks = 0;
  TimeNs window_start;
  TimeNs window_end;
};

void WriteChromeTrace(std::ostream& out, const graph::TaskGraph& graph,
                      const graph::TaskTimes& times, const TimelineInfo& info);

// A selection that would write a timeline without the tasks asked for: a rank the graph does not
// have, ranks none of which ran a task (a symmetric graph's unsimulated ranks), a window that
// starts after the last task ends. Errors name the option (`--timeline-ranks`,
// `--timeline-window`) and what the run has.
Status CheckTimelineSelection(const graph::TaskGraph& graph, const graph::TaskTimes& times,
                              const TimelineInfo& info);

// Writes to `path` atomically (a failed write leaves any previous file in place), after
// CheckTimelineSelection.
Status WriteChromeTraceFile(const std::string& path, const graph::TaskGraph& graph,
                            const graph::TaskTimes& times, const TimelineInfo& info);

}  // namespace dtsim::traces
