// The contract between the CLI's main and its commands: a command parses its own arguments,
// does its work and returns an outcome; only main turns outcomes into exit codes
// (0 ok, 1 failure: bad input or a failed run, 2 usage: bad command line; a program run by
// `dtsim profile` that fails passes its own status through).
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
  // A command that ran a program (`dtsim profile`) exits with the program's status when it
  // failed: the failure's error says so and main returns this instead of 1.
  std::optional<int> program_exit_status;

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
