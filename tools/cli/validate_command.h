// `dtsim validate [POINTS] [-o report.json]`: simulates every published measurement in POINTS
// (default ../shared/validation/published-points.json) and prints predicted against measured,
// the error per point and the mean absolute percentage error (docs/validation.md).
#pragma once

#include <ostream>
#include <span>
#include <string>

#include "tools/cli/command.h"

namespace dtsim::cli {

CommandOutcome ValidateCommand(std::span<const std::string> args, std::ostream& out);

}  // namespace dtsim::cli
