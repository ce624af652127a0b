#include "sim/base/check.h"

#include <cstdio>
#include <cstdlib>

namespace dtsim::internal {

void CheckFailed(const char* condition, const char* file, int line, std::string_view message) {
  std::fprintf(stderr, "dtsim: internal check failed at %s:%d: %s: %.*s\n", file, line, condition,
               static_cast<int>(message.size()), message.data());
  std::abort();
}

}  // namespace dtsim::internal
