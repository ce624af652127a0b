// dtsim's version (the CMake project's) and the git commit it was built from ("unknown" outside
// a git checkout), generated at configure time from build_info.cc.in; a commit or checkout
// re-runs the configure step, so a build never reports the commit before.
#pragma once

#include <string_view>

namespace dtsim::results {

extern const std::string_view kBuildVersion;
extern const std::string_view kBuildCommit;

}  // namespace dtsim::results
