// Command-line parsing shared by the commands: Boost.Program_options with one positional
// argument kept out of the help text.
#pragma once

#include <boost/program_options.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/parallel.h"
#include "sim/base/status.h"
#include "tools/cli/command.h"

namespace dtsim::cli {

// Parses `args` against `visible` plus a hidden option `positional_name` that takes the one
// positional argument into `positional_value`. A malformed command line is an Error (the
// caller reports it as a usage error).
Status ParseCommandLine(std::span<const std::string> args,
                        const boost::program_options::options_description& visible,
                        const char* positional_name, std::string& positional_value);

// The same with any number of positional arguments (`dtsim report RESULT...`).
Status ParseCommandLine(std::span<const std::string> args,
                        const boost::program_options::options_description& visible,
                        const char* positional_name, std::vector<std::string>& positional_values);

// The shape every command shares: parse (a bad command line is a usage error), print
// `visible` for --help (`help` is the option's flag, set by the parse), require the positional
// argument unless `missing` is empty (its message is then the usage error), then `execute`.
CommandOutcome RunCommandLine(std::span<const std::string> args,
                              const boost::program_options::options_description& visible,
                              const char* positional_name, std::string& positional_value,
                              const bool& help, std::string_view missing, std::ostream& out,
                              const std::function<CommandOutcome()>& execute);

// The same with any number of positional arguments, none required (`dtsim validate`,
// `dtsim calibrate`).
CommandOutcome RunCommandLine(std::span<const std::string> args,
                              const boost::program_options::options_description& visible,
                              const char* positional_name,
                              std::vector<std::string>& positional_values, const bool& help,
                              std::ostream& out, const std::function<CommandOutcome()>& execute);

// Where `path` leads, for telling whether two names are one file (the path itself, made
// lexically normal, when the file system cannot say).
std::filesystem::path ResolvedPath(const std::string& path);

// Refuses, before any work is done, an output that is one of the inputs named on the command
// line; the inputs are recorded (sim/base/input_files.h), so the writers also refuse them,
// and every file a reader opens later (a profile a config names), when they open it. Empty
// paths are skipped.
// Two outputs that are one file (`-o r.json --timeline r.json`) are refused too: the second
// write would replace the first.
Status RefuseOutputsOverInputs(const std::vector<std::string>& inputs,
                               const std::vector<std::string>& outputs);

// simulate --chakra PREFIX, which writes PREFIX.<rank>.et and PREFIX.comm_groups.json
// (traces/chakra_writer.h): an error when PREFIX names a directory (the files would be hidden
// ".0.et" in it), and when one of the command's other `outputs` is one of those files.
Status CheckChakraPrefix(const std::string& prefix, const std::vector<std::string>& outputs);

// -j/--threads N (search, sweep, calibrate): 0 is every core; a negative N or one past
// kMaxThreads (sim/base/parallel.h) is a command-line error (both were taken silently).
inline constexpr const char* kThreadsHelp = "threads, 0 to 1024 (default and 0: every core)";
boost::program_options::typed_value<int>* ThreadsValue(int* threads);

// An integer option that must be at least `minimum` when given (--nodes 1, --limit 0): a
// smaller value is a command-line error naming the option, where a default that means "not
// given" would otherwise take it silently.
boost::program_options::typed_value<int>* AtLeastValue(int* value, int minimum, const char* option);
boost::program_options::typed_value<int64_t>* AtLeastValue(int64_t* value, int64_t minimum,
                                                           const char* option);

// The help of --max-memory (simulate, search, sweep), which sets simulation.max_memory.
inline constexpr const char* kMaxMemoryHelp =
    "the memory a simulation may take, e.g. \"64 GiB\" (default: three quarters of this "
    "machine's); a config needing more fails before its graph is built. Same as --set "
    "simulation.max_memory=SIZE";

// A directory of outputs (a report, emitted plans) named by the user: an error naming it when
// it is a file, a device or a /dev or /proc path; `what` names the output ("a report").
Status CheckOutputDirectory(const std::string& dir, std::string_view what);
// The same check, then creates the directory and its parents.
Status MakeOutputDirectory(const std::string& dir, std::string_view what);

// The --set an option stands for ("--max-memory SIZE" is "--set simulation.max_memory=SIZE"),
// appended to `overrides` as KEY=VALUE_TEXT; nothing when `value_text` is empty. A --set of the
// same key or one of its parents is an error naming both: one of the two values would be
// dropped silently.
Status AddOptionOverride(std::string_view option, std::string_view key,
                         const std::string& value_text, std::vector<std::string>& overrides);
// --max-memory SIZE as simulation.max_memory.
Status AddMaxMemoryOverride(const std::string& size, std::vector<std::string>& overrides);

// Ok for an ok status, else a failure (exit status 1) carrying its error.
CommandOutcome FailureUnlessOk(Status status);

}  // namespace dtsim::cli
