// `dtsim calibrate [POINTS...] [--fit NAME...] [--leave-one-out] [-o cal.json]`: fits named
// physical constants of the GPU presets to measured training runs and prints the accuracy
// before and after, per category (docs/calibration.md).
#pragma once

#include <ostream>
#include <span>
#include <string>

#include "tools/cli/command.h"

namespace dtsim::cli {

CommandOutcome CalibrateCommand(std::span<const std::string> args, std::ostream& out);

}  // namespace dtsim::cli
