// The result of `dtsim replay TRACE -o` (docs/formats/replay-result.md): what was imported,
// the graph rebuilt from it, the simulated span, the step-by-step comparison with the
// measured run and, with a what-if, its steps. A profiler trace and a Chakra trace share the
// document; the trace and graph statistics are those of the importer that read the file.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/file_format.h"
#include "sim/base/status.h"
#include "strategies/replay.h"
#include "traces/chakra_graph.h"
#include "traces/chakra_trace.h"
#include "traces/trace.h"

namespace dtsim::results {

inline constexpr FileFormat kReplayResultFormat{"dtsim.replay_result", 1, 5, "not a replay result"};

// A profiler (Kineto) trace replayed; `what_if` with its result when one was asked for.
struct WhatIfOutcome {
  const strategies::ReplayWhatIf& what_if;
  const strategies::WhatIfResult& result;
};
// `job`: the traces replayed, one per rank (one for a single trace).
OrderedJson ReplayResultJson(std::span<const traces::Trace* const> job,
                             const traces::ReplayGraph& replay,
                             const strategies::ReplayResult& result,
                             std::optional<WhatIfOutcome> what_if);

// A Chakra trace replayed with its recorded durations (no steps to compare); with `priced`,
// also with its communication priced on that cluster, over `priced_span`.
struct ChakraNetworkOutcome {
  std::string cluster;
  DurationNs span;
};
// `compute_gpu`: the GPU whose roofline priced the compute nodes without a duration, if any.
OrderedJson ChakraReplayResultJson(const traces::ChakraTrace& trace,
                                   const traces::ChakraGraph& chakra, DurationNs span,
                                   const std::optional<ChakraNetworkOutcome>& priced = {},
                                   std::string_view compute_gpu = {});

// What a reader gets back.
struct ReplayResultRecord {
  std::string trace_file;
  std::string trace_format;  // "kineto", "chrome", "chakra"
  int64_t tasks = 0;
  double simulated_span_ms = 0;
  struct Step {
    int64_t number = 0;
    double measured_ms = 0;
    double simulated_ms = 0;
  };
  std::vector<Step> steps;
  std::optional<double> mean_absolute_error;  // with steps to compare
  struct WhatIf {
    std::string description;
    double replayed_span_ms = 0;
    double what_if_span_ms = 0;
  };
  std::optional<WhatIf> what_if;
};

Expected<ReplayResultRecord> ReplayResultFromJson(const Json& document);

}  // namespace dtsim::results
