// `dtsim simulate CONFIG [--set KEY.PATH=VALUE ...] [-o result.json] [--timeline t.json]
//  [--quiet]`: builds one training iteration from a config (docs/config.md), simulates it and
// reports iteration time, throughput, MFU, where the time went and memory per GPU.
#pragma once

#include <ostream>
#include <span>
#include <string>

#include "tools/cli/command.h"

namespace dtsim::cli {

CommandOutcome SimulateCommand(std::span<const std::string> args, std::ostream& out);

}  // namespace dtsim::cli
