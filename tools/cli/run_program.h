// Running another program from a command (`dtsim profile` runs the user's program, `dtsim
// report` the plotting script): posix_spawn — no fork of a large process, and an exec failure
// comes back as an error.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "sim/base/status.h"

namespace dtsim::cli {

// Runs `path` with argv `program` and our environment plus (replacing same-named variables)
// `environment`; its output goes where ours goes. Returns its wait status.
Expected<int> RunProgram(const std::string& path, const std::vector<std::string>& program,
                         const std::vector<std::pair<std::string, std::string>>& environment);

}  // namespace dtsim::cli
