#include "strategies/launch_flags.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>

namespace dtsim::strategies {
namespace {

// NAME=value with NAME a shell variable's name.
bool IsAssignment(std::string_view arg) {
  const size_t equals = arg.find('=');
  if (equals == 0 || equals == std::string_view::npos) return false;
  const std::string_view name = arg.substr(0, equals);
  return std::isdigit(static_cast<unsigned char>(name.front())) == 0 &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
         });
}

}  // namespace

Expected<LaunchFlags> ParseLaunchFlags(std::span<const std::string> args) {
  LaunchFlags flags;
  std::string current;
  for (const std::string& arg : args) {
    if (flags.order.empty() && IsAssignment(arg)) {
      const size_t equals = arg.find('=');
      flags.environment.emplace_back(arg.substr(0, equals), arg.substr(equals + 1));
    } else if (arg.starts_with("--") && arg.size() > 2) {
      const size_t equals = arg.find('=');
      current = arg.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
      std::vector<std::string>& values = flags.values[current];
      values.clear();
      flags.order.push_back(current);
      if (equals != std::string::npos) {
        values.push_back(arg.substr(equals + 1));
        current.clear();
      }
    } else if (!current.empty()) {
      flags.values[current].push_back(arg);
    } else {
      return Error("an argument outside any flag (pretrain_gpt.py takes flags only)", "",
                   Quote(arg));
    }
  }
  return flags;
}

std::vector<std::string> UnusedFlags(const LaunchFlags& flags) {
  std::vector<std::string> unused;
  std::set<std::string, std::less<>> listed;
  for (const std::string& name : flags.order) {
    if (flags.used.contains(name) || !listed.insert(name).second) continue;
    const std::vector<std::string>& values = flags.values.find(name)->second;
    unused.push_back(values.empty() ? "--" + name
                                    : fmt::format("--{} {}", name, fmt::join(values, " ")));
  }
  return unused;
}

}  // namespace dtsim::strategies
