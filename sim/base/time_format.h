// Exact text for times in trace files: microseconds with three decimals, i.e. exact
// nanoseconds, as Chrome trace and Kineto JSON write them (1234567 ns -> "1234.567").
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string_view>

namespace dtsim {

struct ExactMicros {
  int64_t ns;
};

}  // namespace dtsim

template <>
struct fmt::formatter<dtsim::ExactMicros> : fmt::formatter<std::string_view> {
  auto format(dtsim::ExactMicros m, format_context& ctx) const {
    const char* sign = m.ns < 0 ? "-" : "";
    const uint64_t magnitude =
        m.ns < 0 ? 0 - static_cast<uint64_t>(m.ns) : static_cast<uint64_t>(m.ns);
    return fmt::format_to(ctx.out(), "{}{}.{:03d}", sign, magnitude / 1000, magnitude % 1000);
  }
};
