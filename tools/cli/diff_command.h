// `dtsim diff A.json B.json`: what differs between two results of the same family — the inputs
// (from their provenance: the config after --set, what dtsim resolved, the overrides, the
// input files' hashes) and the figures (the iteration time and where it moved: per stage and
// category for simulate results; every changed number otherwise).
#pragma once

#include <ostream>
#include <span>
#include <string>

#include "tools/cli/command.h"

namespace dtsim::cli {

CommandOutcome DiffCommand(std::span<const std::string> args, std::ostream& out);

}  // namespace dtsim::cli
