// `dtsim import megatron [options] [-- ARGS...]`: a Megatron-LM launch command (pretrain_gpt.py's
// arguments, on the command line or from a file) as a dtsim config, with every argument dtsim
// does not model listed (strategies/launch_import.h; docs/cli.md).
#pragma once

#include <ostream>
#include <span>
#include <string>

#include "tools/cli/command.h"

namespace dtsim::cli {

CommandOutcome ImportCommand(std::span<const std::string> args, std::ostream& out);

}  // namespace dtsim::cli
