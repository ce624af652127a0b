// What `dtsim run` reports: the versioned result JSON (docs/formats/run-result.md) and the
// human summary printed on stdout.
#pragma once

#include <ostream>
#include <string>

#include "sim/base/json_reader.h"
#include "sim/engine/simulator.h"

namespace dtsim::cli {

inline constexpr std::string_view kRunResultFormat = "dtsim.run_result";
inline constexpr std::string_view kRunResultVersion = "1.0";

// Outputs keep their keys in the order written, so "format" and "version" come first.
using OrderedJson = nlohmann::ordered_json;

struct RunContext {
  std::string graph_path;
  OrderedJson communication_model;  // the model's name and parameters, as given
  size_t streams = 0;
  double wall_seconds = 0;  // of the simulation alone (not loading or writing)
};

OrderedJson RunResultToJson(const engine::RunSummary& summary, const RunContext& context);

// The summary table: totals, then per rank (every rank up to 16, else min / mean / max), then
// per category and per kind.
void PrintRunSummary(std::ostream& out, const engine::RunSummary& summary,
                     const RunContext& context);

}  // namespace dtsim::cli
