#include "tools/cli/report_command.h"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>

#include "sim/base/input_files.h"
#include "sim/base/json_reader.h"
#include "sim/base/strings.h"
#include "tools/cli/command_line.h"
#include "tools/cli/run_program.h"
#include "tools/results/replay_result.h"
#include "tools/results/search_results.h"
#include "tools/results/simulate_result.h"
#include "tools/results/sweep_result.h"

namespace dtsim::cli {
namespace {

namespace po = boost::program_options;

// Debian's interpreter, which has python3-matplotlib (the first python3 on PATH may not).
constexpr std::string_view kDefaultPython = "/usr/bin/python3";
// What the report plots.
constexpr std::array<std::string_view, 4> kResultFormats = {
    results::kSimulateResultFormat.name, results::kSweepFormat.name,
    results::kSearchResultFormat.name, results::kReplayResultFormat.name};

struct ReportOptions {
  std::vector<std::string> results;
  std::string output_dir;
  std::string timeline;
  std::string title = "dtsim report";
  bool help = false;
};

po::options_description Describe(ReportOptions& o) {
  po::options_description description(
      "Usage: dtsim report RESULT... -o DIR [--timeline TIMELINE.json]\n\n"
      "Compares results of dtsim simulate, sweep and search (their -o JSON files) in "
      "DIR/index.html\n"
      "with matplotlib figures: throughput, time breakdown, memory against capacity, scaling,\n"
      "bandwidth sensitivity per compression method, a pipeline Gantt chart from a timeline, and\n"
      "the inputs that differ between runs (docs/report.md). Needs /usr/bin/python3 with\n"
      "python3-matplotlib (DTSIM_PYTHON overrides the interpreter).\n\nOptions");
  description.add_options()("help,h", po::bool_switch(&o.help), "show this help")(
      "output,o", po::value(&o.output_dir)->value_name("DIR"), "the report's directory (created)")(
      "timeline", po::value(&o.timeline)->value_name("FILE"),
      "a timeline (dtsim simulate --timeline) for the pipeline Gantt chart")(
      "title", po::value(&o.title)->value_name("TEXT"), "the page's title");
  return description;
}

// The plotting script: DTSIM_REPORT_SCRIPT, else the source tree's.
std::string ScriptPath() {
  if (const char* script = std::getenv("DTSIM_REPORT_SCRIPT"); script != nullptr && *script != 0) {
    return script;
  }
  return DTSIM_REPORT_SCRIPT;
}

template <typename T>
Status StatusOf(Expected<T> read) {
  if (!read.ok()) return std::move(read).error();
  return Status::Ok();
}

// Reads one result with its family's reader, so that a bad one is named (file, JSON path and
// value) before any plotting.
Status CheckResult(const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(const Json json, ReadJsonFile(path));
  const Json* format = json.is_object() && json.contains("format") ? &json["format"] : nullptr;
  const std::string name =
      format != nullptr && format->is_string() ? format->get<std::string>() : "";
  Status read;
  if (name == results::kSimulateResultFormat.name) {
    read = StatusOf(results::SimulateResultFromJson(json));
  } else if (name == results::kSweepFormat.name) {
    read = StatusOf(results::SweepFromJson(json));
  } else if (name == results::kSearchResultFormat.name) {
    return StatusOf(results::SearchFileFromJson(json, path));
  } else if (name == results::kReplayResultFormat.name) {
    read = StatusOf(results::ReplayResultFromJson(json));
  } else {
    read = Error(
        fmt::format("not a dtsim result (expected \"format\" {})", JoinQuoted(kResultFormats)),
        "format", format != nullptr ? JsonValueForError(*format) : "nothing");
  }
  if (!read.ok()) return std::move(read).error().InFile(path);
  return Status::Ok();
}

Status CheckResults(const ReportOptions& options) {
  for (const std::string& path : options.results) DTSIM_RETURN_IF_ERROR(CheckResult(path));
  // One result twice (a shell glob beside its name) drew its runs twice, as if two runs agreed.
  for (size_t j = 0; j < options.results.size(); ++j) {
    for (size_t i = 0; i < j; ++i) {
      std::error_code code;
      if (std::filesystem::equivalent(options.results[i], options.results[j], code)) {
        return Error(fmt::format("the same result as {}, given twice: its runs would be drawn "
                                 "twice",
                                 Quote(options.results[i])))
            .InFile(options.results[j]);
      }
    }
  }
  if (!options.timeline.empty()) {
    DTSIM_ASSIGN_OR_RETURN(const Json json, ReadJsonFile(options.timeline));
    if (!json.is_object() || !json.contains("traceEvents")) {
      return Error("not a timeline (no traceEvents)", "traceEvents").InFile(options.timeline);
    }
  }
  return Status::Ok();
}

// The report writes DIR/index.html and DIR/*.png (tools/report/report.py): an input at one of
// those paths would be replaced.
Status RefuseInputsInTheReport(const ReportOptions& options) {
  std::vector<std::string> inputs = options.results;
  inputs.push_back(options.timeline);
  // The directory itself may not exist yet (the report creates it and its parents).
  DTSIM_RETURN_IF_ERROR(RefuseOutputsOverInputs(inputs, {}));
  DTSIM_RETURN_IF_ERROR(CheckNotAnInput(options.output_dir));
  std::error_code code;
  const std::filesystem::path dir = std::filesystem::weakly_canonical(options.output_dir, code);
  for (const std::string& input : inputs) {
    if (input.empty()) continue;
    const std::filesystem::path path = std::filesystem::weakly_canonical(input, code);
    const bool written = path.filename() == "index.html" || path.extension() == ".png";
    if (!code && written && path.parent_path() == dir) {
      return Error("refusing to write the report here: it would replace the input " + input)
          .InFile(options.output_dir);
    }
  }
  return Status::Ok();
}

Status Execute(const ReportOptions& options, std::ostream& out) {
  DTSIM_RETURN_IF_ERROR(RefuseInputsInTheReport(options));
  DTSIM_RETURN_IF_ERROR(CheckResults(options));
  DTSIM_RETURN_IF_ERROR(MakeOutputDirectory(options.output_dir, "a report"));
  const char* python_env = std::getenv("DTSIM_PYTHON");
  const std::string python =
      python_env != nullptr && *python_env != 0 ? python_env : std::string(kDefaultPython);
  const std::string script = ScriptPath();
  if (::access(python.c_str(), X_OK) != 0) {
    return Error(
        "the report needs Python 3 with matplotlib (Debian: apt-get install python3-matplotlib)",
        "DTSIM_PYTHON", python);
  }
  if (!std::filesystem::exists(script)) {
    return Error("the report script is missing (set DTSIM_REPORT_SCRIPT)", "DTSIM_REPORT_SCRIPT",
                 script);
  }
  std::vector<std::string> argv = {python,    script,       "--out", options.output_dir,
                                   "--title", options.title};
  if (!options.timeline.empty()) {
    argv.push_back("--timeline");
    argv.push_back(options.timeline);
  }
  argv.insert(argv.end(), options.results.begin(), options.results.end());
  out.flush();
  DTSIM_ASSIGN_OR_RETURN(const int status, RunProgram(python, argv, {{"MPLBACKEND", "Agg"}}));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Error(fmt::format("the report script failed ({}); its message is above",
                             WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status))
                                               : "killed by a signal"),
                 "", script);
  }
  return Status::Ok();
}

}  // namespace

CommandOutcome ReportCommand(std::span<const std::string> args, std::ostream& out) {
  ReportOptions options;
  const po::options_description description = Describe(options);
  if (Status parsed = ParseCommandLine(args, description, "results", options.results);
      !parsed.ok()) {
    return CommandOutcome::Usage(std::move(parsed).error());
  }
  if (options.help) {
    out << description << "\n";
    return CommandOutcome::Ok();
  }
  if (options.results.empty()) return CommandOutcome::Usage(Error("give at least one RESULT file"));
  if (options.output_dir.empty()) return CommandOutcome::Usage(Error("missing -o DIR"));
  return FailureUnlessOk(Execute(options, out));
}

}  // namespace dtsim::cli
