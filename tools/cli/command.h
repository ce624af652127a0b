// The contract between the CLI's main and its commands: a command parses its own arguments,
// does its work and returns an outcome; only main turns outcomes into exit codes
// (0 ok, 1 failure: bad input or a failed run, 2 usage: bad command line).
#pragma once

#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>

#include "sim/base/status.h"

namespace dtsim::cli {

struct CommandOutcome {
  enum class Kind { kOk, kUsage, kFailure };
  Kind kind = Kind::kOk;
  std::optional<Error> error;

  static CommandOutcome Ok() { return {}; }
  static CommandOutcome Usage(Error error) { return {Kind::kUsage, std::move(error)}; }
  static CommandOutcome Failure(Error error) { return {Kind::kFailure, std::move(error)}; }
};

struct Command {
  std::string_view name;
  std::string_view summary;
  // `args` are the arguments after the command name; normal output goes to `out`.
  CommandOutcome (*run)(std::span<const std::string> args, std::ostream& out);
};

}  // namespace dtsim::cli
