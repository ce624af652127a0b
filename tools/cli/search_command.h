// `dtsim search CONFIG [--gpus N] [--top K] [--shard K/N] [-o PREFIX]` and `dtsim search
// --merge SHARD.json...`: ranks every parallel plan of a config's model on its cluster
// (strategies/search.h, docs/search.md).
#pragma once

#include <ostream>
#include <span>
#include <string>

#include "tools/cli/command.h"

namespace dtsim::cli {

CommandOutcome SearchCommand(std::span<const std::string> args, std::ostream& out);

}  // namespace dtsim::cli
