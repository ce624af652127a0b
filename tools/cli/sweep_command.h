// `dtsim sweep CONFIG --vary KEY.PATH=V1,V2,... [--vary ...] [-o PREFIX]`: simulates the
// cartesian product of the given values of config keys on every core and tabulates the
// results (docs/search.md).
#pragma once

#include <ostream>
#include <span>
#include <string>

#include "tools/cli/command.h"

namespace dtsim::cli {

CommandOutcome SweepCommand(std::span<const std::string> args, std::ostream& out);

}  // namespace dtsim::cli
