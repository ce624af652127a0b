// Always-on invariant checks for programmer errors (never for user input, which gets a
// dtsim::Error). A failed check prints the condition, its location and a message, then aborts.
#pragma once

#include <string_view>

namespace dtsim::internal {
[[noreturn]] void CheckFailed(const char* condition, const char* file, int line,
                              std::string_view message);
}  // namespace dtsim::internal

#define DTSIM_CHECK(condition, message)                                          \
  do {                                                                           \
    if (!(condition)) [[unlikely]] {                                             \
      ::dtsim::internal::CheckFailed(#condition, __FILE__, __LINE__, (message)); \
    }                                                                            \
  } while (false)
