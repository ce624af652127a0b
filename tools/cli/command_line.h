// Command-line parsing shared by the commands: Boost.Program_options with one positional
// argument kept out of the help text.
#pragma once

#include <span>
#include <string>

#include <boost/program_options.hpp>

#include "sim/base/status.h"

namespace dtsim::cli {

// Parses `args` against `visible` plus a hidden option `positional_name` that takes the one
// positional argument into `positional_value`. A malformed command line is an Error (the
// caller reports it as a usage error).
Status ParseCommandLine(std::span<const std::string> args,
                        const boost::program_options::options_description& visible,
                        const char* positional_name, std::string& positional_value);

}  // namespace dtsim::cli
