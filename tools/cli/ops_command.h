// `dtsim ops TRACE [-o profile.json] [--gpu NAME] [--top N]`: aggregates the GPU time of every
// framework op of a PyTorch profiler trace per op signature (traces/op_profile.h) and writes
// the measured op-cost table the cost models read first (docs/formats/op-costs.md).
#pragma once

#include <ostream>
#include <span>
#include <string>

#include "tools/cli/command.h"

namespace dtsim::cli {

CommandOutcome OpsCommand(std::span<const std::string> args, std::ostream& out);

}  // namespace dtsim::cli
