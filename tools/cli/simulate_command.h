// `dtsim simulate CONFIG [--set KEY.PATH=VALUE ...] [-o result.json] [--timeline t.json]
//  [--quiet]`: builds one training iteration from a config (docs/config.md), simulates it and
// reports iteration time, throughput, MFU, where the time went and memory per GPU.
#pragma once

#include <ostream>
#include <span>
#include <string>

#include "strategies/simulate.h"
#include "tools/cli/command.h"
#include "tools/cli/run_report.h"

namespace dtsim::cli {

inline constexpr std::string_view kSimulateResultFormat = "dtsim.simulate_result";
inline constexpr int kSimulateResultVersion = 1;

// The result file of one simulation (docs/formats/simulate-result.md).
OrderedJson SimulateResultJson(const strategies::SimulationConfig& config,
                               const strategies::SimulationResult& result);

CommandOutcome SimulateCommand(std::span<const std::string> args, std::ostream& out);

}  // namespace dtsim::cli
