#include "tools/cli/command_line.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "sim/base/atomic_file.h"
#include "sim/base/input_files.h"
#include "sim/base/json_reader.h"
#include "sim/base/strings.h"
#include "strategies/config.h"

namespace dtsim::cli {

namespace po = boost::program_options;

namespace {

// "--set KEY VALUE" (a space where "=" belongs) would leave VALUE as a positional argument, read
// as one too many or as a config file; the message for it names the fix.
std::optional<std::string> SetWithoutEquals(std::span<const std::string> args) {
  for (size_t i = 0; i + 2 < args.size() && args[i] != "--"; ++i) {
    const std::string& key = args[i + 1];
    if (args[i] == "--set" && key.find('=') == std::string::npos && !key.starts_with("-") &&
        !args[i + 2].starts_with("-")) {
      return fmt::format("--set takes KEY=VALUE in one argument: write --set {}={}", key,
                         args[i + 2]);
    }
  }
  return std::nullopt;
}

// An option given an empty value ("-o $UNSET" after a typo) would read as one not given, and
// what it asked for (a result file, a timeline) would silently not be written.
std::optional<std::string> EmptyValue(const po::variables_map& variables,
                                      const char* positional_name) {
  for (const auto& [name, value] : variables) {
    if (value.defaulted() || name == positional_name) continue;
    const auto* text = boost::any_cast<std::string>(&value.value());
    const auto* texts = boost::any_cast<std::vector<std::string>>(&value.value());
    if ((text != nullptr && text->empty()) ||
        (texts != nullptr && std::ranges::any_of(*texts, &std::string::empty))) {
      return fmt::format("--{} was given an empty value; give it one or leave the option out",
                         name);
    }
  }
  return std::nullopt;
}

// Parses `args` with `visible` plus the hidden positional option `value` (`max` occurrences).
template <typename Value>
Status Parse(std::span<const std::string> args, const po::options_description& visible,
             const char* positional_name, Value& value, int max) {
  if (std::optional<std::string> problem = SetWithoutEquals(args)) return Error(*problem);
  po::options_description all;
  all.add(visible);
  all.add_options()(positional_name, po::value(&value));
  po::positional_options_description positional;
  positional.add(positional_name, max);
  try {
    po::variables_map variables;
    po::store(po::command_line_parser(std::vector<std::string>(args.begin(), args.end()))
                  .options(all)
                  .positional(positional)
                  .run(),
              variables);
    po::notify(variables);
    if (std::optional<std::string> problem = EmptyValue(variables, positional_name)) {
      return Error(*problem);
    }
  } catch (const po::error& e) {
    return Error(e.what());
  }
  return Status::Ok();
}

}  // namespace

Status ParseCommandLine(std::span<const std::string> args, const po::options_description& visible,
                        const char* positional_name, std::string& positional_value) {
  return Parse(args, visible, positional_name, positional_value, 1);
}

Status ParseCommandLine(std::span<const std::string> args, const po::options_description& visible,
                        const char* positional_name, std::vector<std::string>& positional_values) {
  return Parse(args, visible, positional_name, positional_values, -1);
}

CommandOutcome RunCommandLine(std::span<const std::string> args,
                              const po::options_description& visible, const char* positional_name,
                              std::string& positional_value, const bool& help,
                              std::string_view missing, std::ostream& out,
                              const std::function<CommandOutcome()>& execute) {
  Status parsed = ParseCommandLine(args, visible, positional_name, positional_value);
  if (!parsed.ok()) return CommandOutcome::Usage(std::move(parsed).error());
  if (help) {
    out << visible << "\n";
    return CommandOutcome::Ok();
  }
  if (!missing.empty() && positional_value.empty()) {
    return CommandOutcome::Usage(Error(std::string(missing)));
  }
  return execute();
}

CommandOutcome RunCommandLine(std::span<const std::string> args,
                              const po::options_description& visible, const char* positional_name,
                              std::vector<std::string>& positional_values, const bool& help,
                              std::ostream& out, const std::function<CommandOutcome()>& execute) {
  Status parsed = ParseCommandLine(args, visible, positional_name, positional_values);
  if (!parsed.ok()) return CommandOutcome::Usage(std::move(parsed).error());
  if (help) {
    out << visible << "\n";
    return CommandOutcome::Ok();
  }
  return execute();
}

CommandOutcome FailureUnlessOk(Status status) {
  if (status.ok()) return CommandOutcome::Ok();
  return CommandOutcome::Failure(std::move(status).error());
}

po::typed_value<int>* ThreadsValue(int* threads) {
  return po::value(threads)->value_name("N")->notifier([](int value) {
    if (value < 0 || value > kMaxThreads) {
      throw po::error(
          fmt::format("--threads: must be from 0 (every core) to {}, got {}", kMaxThreads, value));
    }
  });
}

namespace {

template <typename Int>
po::typed_value<Int>* AtLeast(Int* value, Int minimum, const char* option) {
  return po::value(value)->value_name("N")->notifier([minimum, option](Int given) {
    if (given < minimum) {
      throw po::error(fmt::format("--{}: must be at least {}, got {}", option, minimum, given));
    }
  });
}

}  // namespace

po::typed_value<int>* AtLeastValue(int* value, int minimum, const char* option) {
  return AtLeast(value, minimum, option);
}

po::typed_value<int64_t>* AtLeastValue(int64_t* value, int64_t minimum, const char* option) {
  return AtLeast(value, minimum, option);
}

Status AddOptionOverride(std::string_view option, std::string_view key,
                         const std::string& value_text, std::vector<std::string>& overrides) {
  if (value_text.empty()) return Status::Ok();
  for (const std::string& set : overrides) {
    if (strategies::OverrideReplaces(set, key)) {
      return Error(fmt::format("sets {}, and so does --set {}: give one of the two", key, set),
                   std::string(option), value_text);
    }
  }
  overrides.push_back(fmt::format("{}={}", key, value_text));
  return Status::Ok();
}

Status AddMaxMemoryOverride(const std::string& size, std::vector<std::string>& overrides) {
  return AddOptionOverride("--max-memory", "simulation.max_memory",
                           size.empty() ? std::string() : Json(size).dump(), overrides);
}

namespace {

// A device or pipe (/dev/null twice) is written in place, so several outputs may share it.
Status RefuseSameOutputTwice(const std::vector<std::string>& outputs) {
  for (size_t j = 0; j < outputs.size(); ++j) {
    if (outputs[j].empty() || WritesInPlace(outputs[j])) continue;
    for (size_t i = 0; i < j; ++i) {
      if (outputs[i].empty() || ResolvedPath(outputs[i]) != ResolvedPath(outputs[j])) continue;
      const std::string which =
          outputs[i] == outputs[j]
              ? std::string()
              : fmt::format(" ({} and {} are one file)", Quote(outputs[i]), Quote(outputs[j]));
      return Error(fmt::format("named for two of the command's outputs{}: one would replace the "
                               "other; give each its own path",
                               which))
          .InFile(outputs[j]);
    }
  }
  return Status::Ok();
}

}  // namespace

std::filesystem::path ResolvedPath(const std::string& path) {
  std::error_code code;
  std::filesystem::path resolved = std::filesystem::weakly_canonical(path, code);
  return code ? std::filesystem::path(path).lexically_normal() : resolved;
}

Status CheckChakraPrefix(const std::string& prefix, const std::vector<std::string>& outputs) {
  constexpr std::string_view kFiles = "PREFIX.<rank>.et and PREFIX.comm_groups.json";
  std::error_code code;
  if (prefix.ends_with('/') || std::filesystem::is_directory(prefix, code)) {
    const std::string dir = prefix.ends_with('/') ? prefix.substr(0, prefix.size() - 1) : prefix;
    return Error(fmt::format("is a directory: --chakra takes a prefix of file names ({}), such "
                             "as {}/trace",
                             kFiles, dir))
        .InFile(prefix);
  }
  const std::filesystem::path resolved = ResolvedPath(prefix);
  const std::string stem = resolved.filename().string() + ".";
  for (const std::string& output : outputs) {
    if (output.empty()) continue;
    const std::filesystem::path file = ResolvedPath(output);
    const std::string name = file.filename().string();
    if (file.parent_path() != resolved.parent_path() || !name.starts_with(stem)) continue;
    const std::string_view suffix = std::string_view(name).substr(stem.size());
    const std::string_view rank = suffix.substr(0, suffix.find('.'));
    const bool rank_file = suffix.ends_with(".et") && !rank.empty() &&
                           std::ranges::all_of(rank, [](char c) { return c >= '0' && c <= '9'; });
    if (rank_file || suffix == "comm_groups.json") {
      return Error(fmt::format("is one of the files of --chakra {} ({}): one would replace the "
                               "other",
                               Quote(prefix), kFiles))
          .InFile(output);
    }
  }
  return Status::Ok();
}

Status RefuseOutputsOverInputs(const std::vector<std::string>& inputs,
                               const std::vector<std::string>& outputs) {
  for (const std::string& input : inputs) {
    if (!input.empty()) NoteInputFile(input);
  }
  for (const std::string& output : outputs) {
    if (output.empty()) continue;
    DTSIM_RETURN_IF_ERROR(CheckOutputPath(output));
    // Before any work: a search that ran for minutes should not fail at its last step because
    // the output's directory does not exist.
    const std::filesystem::path parent = std::filesystem::path(output).parent_path();
    std::error_code code;
    if (!parent.empty() && !std::filesystem::is_directory(parent, code)) {
      return Error(fmt::format("cannot write here: the directory {} does not exist{}",
                               Quote(parent.string()),
                               std::filesystem::exists(parent, code) ? " (it is a file)" : ""))
          .InFile(output);
    }
  }
  return RefuseSameOutputTwice(outputs);
}

Status CheckOutputDirectory(const std::string& dir, std::string_view what) {
  if (WritesInPlace(dir)) {
    return Error(fmt::format("{} is a directory of files, not a device, a pipe or a /dev or /proc "
                             "path",
                             what))
        .InFile(dir);
  }
  std::error_code code;
  if (std::filesystem::exists(dir, code) && !std::filesystem::is_directory(dir, code)) {
    return Error("exists and is not a directory").InFile(dir);
  }
  return Status::Ok();
}

Status MakeOutputDirectory(const std::string& dir, std::string_view what) {
  DTSIM_RETURN_IF_ERROR(CheckOutputDirectory(dir, what));
  std::error_code code;
  std::filesystem::create_directories(dir, code);
  if (code) return Error("cannot create the directory: " + code.message()).InFile(dir);
  return Status::Ok();
}

}  // namespace dtsim::cli
