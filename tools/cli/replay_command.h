// `dtsim replay TRACE [--timeline FILE] [-o FILE]`: imports a PyTorch profiler (Kineto) or
// Chrome trace, prints the import statistics, rebuilds the replay graph, simulates it with the
// measured durations and compares each ProfilerStep's simulated time with the measured one
// (docs/replay.md).
#pragma once

#include <ostream>
#include <span>
#include <string>

#include "tools/cli/command.h"

namespace dtsim::cli {

CommandOutcome ReplayCommand(std::span<const std::string> args, std::ostream& out);

}  // namespace dtsim::cli
