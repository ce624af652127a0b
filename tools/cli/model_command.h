// `dtsim model MODEL [--gpu G] [--micro-batch B] [--seq S] [--dtype D] [--tp T] [--sp]
//  [--flash] [--no-dropout] [--recompute R] [--ops]`: what dtsim knows about a model — its
// parameters, one layer's ops on one tensor-parallel rank with FLOPs, bytes and roofline
// times on a GPU, and activation memory per layer (docs/cli.md, docs/models.md).
#pragma once

#include <ostream>
#include <span>
#include <string>

#include "tools/cli/command.h"

namespace dtsim::cli {

CommandOutcome ModelCommand(std::span<const std::string> args, std::ostream& out);

}  // namespace dtsim::cli
