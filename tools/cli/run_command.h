// `dtsim run GRAPH [-o result.json] [--timeline timeline.json] [--comm-latency Q]
//  [--comm-bandwidth Q] [--quiet]`: simulates a task-graph file (docs/formats/task-graph.md)
// with the fixed-cost communication model and reports the run (docs/cli.md).
#pragma once

#include <ostream>
#include <span>
#include <string>

#include "tools/cli/command.h"

namespace dtsim::cli {

CommandOutcome RunCommand(std::span<const std::string> args, std::ostream& out);

}  // namespace dtsim::cli
