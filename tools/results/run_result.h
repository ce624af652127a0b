// The result of `dtsim run GRAPH -o` (docs/formats/run-result.md): the makespan, per-rank busy
// and idle time, totals per category and kind, and the simulator's counters and fingerprint.
#pragma once

#include <cstdint>
#include <string>

#include "sim/base/file_format.h"
#include "sim/base/status.h"
#include "sim/engine/simulator.h"

namespace dtsim::results {

inline constexpr FileFormat kRunResultFormat{"dtsim.run_result", 1, 1, "not a run result"};

struct RunContext {
  std::string graph_path;
  OrderedJson communication_model;  // the model's name and parameters, as given
  size_t streams = 0;
  double wall_seconds = 0;  // of the simulation alone (not loading or writing)
};

OrderedJson RunResultJson(const engine::RunSummary& summary, const RunContext& context);

// The fingerprint as written: "0x" and 16 hexadecimal digits.
std::string FingerprintText(uint64_t fingerprint);
// Reads it back; errors name `path` and the text.
Expected<uint64_t> FingerprintFromText(const std::string& text, const std::string& path);

// What a reader gets back.
struct RunResultRecord {
  std::string graph;
  DurationNs makespan;
  int64_t ranks = 0;
  int64_t tasks = 0;
  int64_t events = 0;
  uint64_t fingerprint = 0;
};

Expected<RunResultRecord> RunResultFromJson(const Json& document);

}  // namespace dtsim::results
