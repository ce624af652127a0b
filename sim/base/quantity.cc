#include "sim/base/quantity.h"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "sim/base/strings.h"

namespace dtsim {
namespace {

struct Unit {
  std::string_view name;
  long double factor;  // storage units (ns, bytes, bits/s, FLOP/s) per one of this unit
};

// The order matters only for suggestions: on a tie the earlier unit is suggested.
constexpr std::array kByteUnits = {
    Unit{"B", 1},
    Unit{"kB", 1e3},
    Unit{"KB", 1e3},
    Unit{"MB", 1e6},
    Unit{"GB", 1e9},
    Unit{"TB", 1e12},
    Unit{"PB", 1e15},
    Unit{"KiB", 1024.0L},
    Unit{"MiB", 1048576.0L},
    Unit{"GiB", 1073741824.0L},
    Unit{"TiB", 1099511627776.0L},
    Unit{"PiB", 1125899906842624.0L},
};
constexpr std::array kDurationUnits = {
    Unit{"ns", 1},  Unit{"us", 1e3},   Unit{"\u00b5s", 1e3}, Unit{"ms", 1e6},
    Unit{"s", 1e9}, Unit{"min", 60e9}, Unit{"h", 3600e9},
};
constexpr std::array kBandwidthUnits = {
    // factors in bits per second
    Unit{"bps", 1},
    Unit{"kbps", 1e3},
    Unit{"Kbps", 1e3},
    Unit{"Mbps", 1e6},
    Unit{"Gbps", 1e9},
    Unit{"Tbps", 1e12},
    Unit{"b/s", 1},
    Unit{"kb/s", 1e3},
    Unit{"Mb/s", 1e6},
    Unit{"Gb/s", 1e9},
    Unit{"Tb/s", 1e12},
    Unit{"B/s", 8},
    Unit{"kB/s", 8e3},
    Unit{"KB/s", 8e3},
    Unit{"MB/s", 8e6},
    Unit{"GB/s", 8e9},
    Unit{"TB/s", 8e12},
    Unit{"KiB/s", 8 * 1024.0L},
    Unit{"MiB/s", 8 * 1048576.0L},
    Unit{"GiB/s", 8 * 1073741824.0L},
    Unit{"TiB/s", 8 * 1099511627776.0L},
};
constexpr std::array kFlopRateUnits = {
    Unit{"FLOP/s", 1}, Unit{"GFLOP/s", 1e9}, Unit{"TFLOP/s", 1e12}, Unit{"PFLOP/s", 1e15},
    Unit{"FLOPS", 1},  Unit{"GFLOPS", 1e9},  Unit{"TFLOPS", 1e12},  Unit{"PFLOPS", 1e15},
};

// A decimal number read exactly: significand * 10^exponent. Going through binary floating
// point first would round "1.2345 us" to 1234.4999… ns and then to 1234 instead of 1235.
struct ExactDecimal {
  uint64_t significand = 0;
  int exponent = 0;
  size_t length = 0;  // characters consumed

  // significand * factor * 10^exponent, correctly rounded in long double: the product of the
  // significand and an integral factor is exact below 2^64, and so is 10^k for k <= 27.
  // A zero significand is zero whatever the exponent ("0e9999 s" would be 0 * inf = NaN).
  long double Scale(long double factor) const {
    if (significand == 0) return 0;
    const long double scaled = static_cast<long double>(significand) * factor;
    if (exponent >= 0) return scaled * std::pow(10.0L, exponent);
    return scaled / std::pow(10.0L, -exponent);
  }
};

// digits [ "." digits ] [ ("e" | "E") [sign] digits ], at least one digit before the exponent.
std::optional<ExactDecimal> ParseDecimal(std::string_view text) {
  constexpr uint64_t kMaxSignificand = 1'000'000'000'000'000'000ULL;  // keep 18 digits exactly
  ExactDecimal number;
  size_t i = 0;
  int digits = 0;
  auto is_digit = [&](size_t at) {
    return at < text.size() && std::isdigit(static_cast<unsigned char>(text[at]));
  };
  for (bool fraction = false;; ++i) {
    if (!fraction && i < text.size() && text[i] == '.') {
      fraction = true;
      continue;
    }
    if (!is_digit(i)) break;
    ++digits;
    if (number.significand < kMaxSignificand) {
      number.significand = number.significand * 10 + static_cast<uint64_t>(text[i] - '0');
      if (fraction) --number.exponent;
    } else if (!fraction) {
      ++number.exponent;  // digits past the 18th only scale the value
    }
  }
  if (digits == 0) return std::nullopt;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    size_t j = i + 1;
    const bool negative = j < text.size() && text[j] == '-';
    if (j < text.size() && (text[j] == '-' || text[j] == '+')) ++j;
    if (!is_digit(j)) return std::nullopt;
    int exponent = 0;
    for (; is_digit(j); ++j) exponent = std::min(exponent * 10 + (text[j] - '0'), 9999);
    number.exponent += negative ? -exponent : exponent;
    i = j;
  }
  number.length = i;
  return number;
}

// Parses "<number> [spaces] <unit>" into a value in storage units (not yet rounded).
template <size_t N>
Expected<long double> ParseScaled(std::string_view original, std::string_view kind,
                                  const std::array<Unit, N>& units) {
  const std::string value = Quote(original);
  const std::string_view text = Trim(original);
  if (text.empty()) return Error(fmt::format("empty {}", kind), "", value);
  if (text.front() == '-') return Error(fmt::format("{} must not be negative", kind), "", value);
  if (!std::isdigit(static_cast<unsigned char>(text.front())) && text.front() != '.') {
    return Error(fmt::format("{} must start with a number, as in \"{}\"", kind,
                             "1 " + std::string(units[0].name)),
                 "", value);
  }
  const std::optional<ExactDecimal> number = ParseDecimal(text);
  if (!number.has_value()) return Error(fmt::format("malformed number in {}", kind), "", value);
  const std::string_view unit_text = Trim(text.substr(number->length));
  std::vector<std::string_view> names;
  for (const Unit& unit : units) {
    if (unit.name == unit_text) return number->Scale(unit.factor);
    names.push_back(unit.name);
  }
  if (unit_text.empty()) {
    return Error(fmt::format("{} needs a unit, one of {}", kind, JoinQuoted(names)), "", value);
  }
  std::string hint = DidYouMean(unit_text, names);
  if (hint.empty()) hint = fmt::format(" (expected one of {})", JoinQuoted(names));
  return Error(fmt::format("unknown {} unit {}{}", kind, Quote(unit_text), hint), "", value);
}

// Rounds a scaled value to an integer count of storage units, rejecting overflow and
// non-zero values below the resolution.
Expected<int64_t> RoundToStorage(long double scaled, std::string_view original,
                                 std::string_view kind, std::string_view resolution) {
  // Written so that NaN is refused too: llround(NaN) is INT64_MIN.
  if (!(scaled < static_cast<long double>(std::numeric_limits<int64_t>::max()))) {
    return Error(fmt::format("{} is too large", kind), "", Quote(original));
  }
  const auto rounded = static_cast<int64_t>(std::llround(scaled));
  if (rounded == 0 && scaled > 0) {
    return Error(fmt::format("{} is below the resolution of {}", kind, resolution), "",
                 Quote(original));
  }
  return rounded;
}

}  // namespace

Expected<Bytes> ParseBytes(std::string_view text) {
  DTSIM_ASSIGN_OR_RETURN(const long double scaled, ParseScaled(text, "size", kByteUnits));
  DTSIM_ASSIGN_OR_RETURN(const int64_t count, RoundToStorage(scaled, text, "size", "1 B"));
  return Bytes(count);
}

Expected<DurationNs> ParseDuration(std::string_view text) {
  DTSIM_ASSIGN_OR_RETURN(const long double scaled, ParseScaled(text, "duration", kDurationUnits));
  DTSIM_ASSIGN_OR_RETURN(const int64_t ns, RoundToStorage(scaled, text, "duration", "1 ns"));
  return DurationNs(ns);
}

Expected<Bandwidth> ParseBandwidth(std::string_view text) {
  DTSIM_ASSIGN_OR_RETURN(const long double scaled, ParseScaled(text, "bandwidth", kBandwidthUnits));
  DTSIM_ASSIGN_OR_RETURN(const int64_t bits, RoundToStorage(scaled, text, "bandwidth", "1 bps"));
  return Bandwidth::BitsPerSecond(bits);
}

Expected<FlopRate> ParseFlopRate(std::string_view text) {
  DTSIM_ASSIGN_OR_RETURN(const long double scaled, ParseScaled(text, "FLOP rate", kFlopRateUnits));
  if (!std::isfinite(static_cast<double>(scaled))) {
    return Error("FLOP rate is too large", "", Quote(text));
  }
  return FlopRate(static_cast<double>(scaled));
}

std::string FormatDuration(DurationNs duration) {
  const int64_t ns = duration.ns();
  const double magnitude = std::abs(static_cast<double>(ns));  // -INT64_MIN overflows int64
  if (magnitude < kKilo) return fmt::format("{} ns", ns);
  if (magnitude < kMega) return fmt::format("{:.3f} us", static_cast<double>(ns) / 1e3);
  if (magnitude < kGiga) {
    return fmt::format("{:.3f} ms", static_cast<double>(ns) / 1e6);
  }
  return fmt::format("{:.3f} s", static_cast<double>(ns) / 1e9);
}

std::string FormatMilliseconds(DurationNs duration, int decimals) {
  return fmt::format("{:.{}f}", static_cast<double>(duration.ns()) / 1e6, decimals);
}

std::string FormatGiB(int64_t bytes) {
  return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / kGibi);
}

std::string FormatBandwidth(Bandwidth bandwidth) {
  const double bytes = bandwidth.bytes_per_second();
  if (bytes >= 1e12) return fmt::format("{:.3g} TB/s", bytes / 1e12);
  if (bytes >= 1e9) return fmt::format("{:.3g} GB/s", bytes / 1e9);
  if (bytes >= 1e6) return fmt::format("{:.3g} MB/s", bytes / 1e6);
  return fmt::format("{:.3g} B/s", bytes);
}

std::string FormatDurationExact(DurationNs duration) {
  const int64_t ns = duration.ns();
  if (ns != 0 && ns % 1000000 == 0) return fmt::format("{} ms", ns / 1000000);
  if (ns != 0 && ns % 1000 == 0) return fmt::format("{} us", ns / 1000);
  return fmt::format("{} ns", ns);
}

std::string FormatBandwidthExact(Bandwidth bandwidth, bool in_bits) {
  const int64_t bits = bandwidth.bits_per_second();
  constexpr std::array<std::pair<int64_t, std::string_view>, 4> kDecimal = {
      {{1000000000000, "T"}, {1000000000, "G"}, {1000000, "M"}, {1000, "k"}}};
  if (!in_bits && bits % 8 == 0) {
    const int64_t bytes = bits / 8;
    for (const auto& [factor, prefix] : kDecimal) {
      if (bytes % factor == 0) return fmt::format("{} {}B/s", bytes / factor, prefix);
    }
    return fmt::format("{} B/s", bytes);
  }
  for (const auto& [factor, prefix] : kDecimal) {
    if (bits % factor == 0) return fmt::format("{} {}bps", bits / factor, prefix);
  }
  return fmt::format("{} bps", bits);
}

}  // namespace dtsim
