// A launch command's words as pretrain_gpt.py's flags (launch_import.h reads them): each flag's
// values as given, which of them a reader asked for, and the environment assignments before the
// first flag.
#pragma once

#include <fmt/format.h>

#include <charconv>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/base/status.h"
#include "sim/base/strings.h"

namespace dtsim::strategies {

// The flags as given: name (without "--") → its values (none for a switch), the last
// occurrence winning; and the order they came in, for the list of those not modelled.
struct LaunchFlags {
  std::map<std::string, std::vector<std::string>, std::less<>> values;
  std::vector<std::string> order;
  std::set<std::string, std::less<>> used;
  // Assignments before the first flag ("NCCL_P2P_NET_CHUNKSIZE=2097152"): the environment the
  // script was launched with, as a shell reads them before a command.
  std::vector<std::pair<std::string, std::string>> environment;

  bool Has(std::string_view name) {
    if (!values.contains(name)) return false;
    used.emplace(name);
    return true;
  }
  // The flag's one value; an error when it has none or several.
  Expected<std::string> Value(std::string_view name) {
    used.emplace(name);
    const std::vector<std::string>& given = values.find(name)->second;
    if (given.size() != 1) {
      return Error(fmt::format("expected one value, got {}", given.size()),
                   fmt::format("--{}", name));
    }
    return given.front();
  }
  // A positive integer (non-negative with `zero`), or nothing when the flag is absent.
  Expected<std::optional<int64_t>> Int(std::string_view name, bool zero = false) {
    if (!Has(name)) return std::optional<int64_t>();
    DTSIM_ASSIGN_OR_RETURN(const std::string text, Value(name));
    int64_t value = 0;
    const auto [end, code] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (code != std::errc() || end != text.data() + text.size() || value < (zero ? 0 : 1)) {
      return Error(zero ? "expected a non-negative integer" : "expected a positive integer",
                   fmt::format("--{}", name), Quote(text));
    }
    return std::optional<int64_t>(value);
  }
  // A positive number, or nothing when the flag is absent.
  Expected<std::optional<double>> Number(std::string_view name) {
    if (!Has(name)) return std::optional<double>();
    DTSIM_ASSIGN_OR_RETURN(const std::string text, Value(name));
    double value = 0;
    const auto [end, code] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (code != std::errc() || end != text.data() + text.size() || value <= 0) {
      return Error("expected a positive number", fmt::format("--{}", name), Quote(text));
    }
    return std::optional<double>(value);
  }
  Expected<int64_t> RequiredInt(std::string_view name) {
    DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> value, Int(name));
    if (!value) return Error("required: pretrain_gpt.py needs it too", fmt::format("--{}", name));
    return *value;
  }
};

// The words as flags: "--name value...", "--name=value"; assignments before the first flag are
// the environment; a word outside any flag is an error naming it.
Expected<LaunchFlags> ParseLaunchFlags(std::span<const std::string> args);

// The flags given but no reader asked for, as given ("--lr 3e-4").
std::vector<std::string> UnusedFlags(const LaunchFlags& flags);

}  // namespace dtsim::strategies
