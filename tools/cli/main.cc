// dtsim's entry point: dispatches to a command and maps its outcome to an exit code. The only
// place in dtsim that decides how the process ends.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <array>
#include <iostream>
#include <string>
#include <vector>

#include "sim/base/strings.h"
#include "sim/base/temp_files.h"
#include "tools/cli/calibrate_command.h"
#include "tools/cli/command.h"
#include "tools/cli/diff_command.h"
#include "tools/cli/import_command.h"
#include "tools/cli/model_command.h"
#include "tools/cli/ops_command.h"
#include "tools/cli/profile_command.h"
#include "tools/cli/replay_command.h"
#include "tools/cli/report_command.h"
#include "tools/cli/run_command.h"
#include "tools/cli/search_command.h"
#include "tools/cli/simulate_command.h"
#include "tools/cli/sweep_command.h"
#include "tools/cli/validate_command.h"

namespace {

using dtsim::cli::Command;
using dtsim::cli::CommandOutcome;

constexpr std::array kCommands = {
    Command{"simulate", "simulate one training iteration of a config (model, cluster, plan)",
            dtsim::cli::SimulateCommand},
    Command{"search", "rank every parallel plan of a model on a cluster by simulated throughput",
            dtsim::cli::SearchCommand},
    Command{"sweep", "simulate a config over every combination of values of its keys",
            dtsim::cli::SweepCommand},
    Command{"report", "compare simulate, sweep and search results in an HTML page with plots",
            dtsim::cli::ReportCommand},
    Command{"diff", "what differs between two results: their inputs, and where the time moved",
            dtsim::cli::DiffCommand},
    Command{"import", "turn a Megatron-LM launch command into a config; list what is not modelled",
            dtsim::cli::ImportCommand},
    Command{"run", "simulate a task-graph file; write a result and a timeline",
            dtsim::cli::RunCommand},
    Command{"replay", "replay a profiler or Chakra trace; compare steps; run what-ifs on it",
            dtsim::cli::ReplayCommand},
    Command{"ops", "aggregate a profiler trace's GPU time per op signature into an op-cost table",
            dtsim::cli::OpsCommand},
    Command{"profile", "run a CUDA program under dtsim's CUPTI profiler; write a Kineto trace",
            dtsim::cli::ProfileCommand},
    Command{"model", "show a model's parameters, ops, FLOPs, roofline times and activations",
            dtsim::cli::ModelCommand},
    Command{"validate", "simulate published measurements; print the error per point and MAPE",
            dtsim::cli::ValidateCommand},
    Command{"calibrate", "fit GPU constants to measured training runs; write a calibration",
            dtsim::cli::CalibrateCommand},
};

void PrintUsage(std::ostream& out) {
  fmt::print(out,
             "dtsim {} — trace-driven simulator of distributed deep-learning training\n\n"
             "Usage: dtsim COMMAND [options]\n"
             "       dtsim COMMAND --help\n"
             "       dtsim --version\n\nCommands:\n",
             DTSIM_VERSION);
  for (const Command& command : kCommands) {
    fmt::print(out, "  {:<10} {}\n", command.name, command.summary);
  }
  fmt::print(
      out,
      "\nExit status: 0 success, 1 bad input or failed run, 2 bad command line (dtsim profile: "
      "a failing program's own status).\n"
      "Documentation: docs/cli.md\n");
}

int Report(std::string_view command, const CommandOutcome& outcome) {
  if (outcome.kind == CommandOutcome::Kind::kOk) return 0;
  const std::string message = outcome.error ? outcome.error->ToString() : "failed";
  if (outcome.kind == CommandOutcome::Kind::kUsage) {
    fmt::print(std::cerr, "dtsim {}: {}\nTry 'dtsim {} --help'.\n", command, message, command);
    return 2;
  }
  fmt::print(std::cerr, "dtsim {}: error: {}\n", command, message);
  return outcome.program_exit_status.value_or(1);
}

int Main(const std::vector<std::string>& args) {
  if (args.empty()) {
    PrintUsage(std::cerr);
    return 2;
  }
  const std::string& first = args[0];
  if (first == "--help" || first == "-h" || first == "help") {
    PrintUsage(std::cout);
    return 0;
  }
  if (first == "--version") {
    fmt::print("dtsim {}\n", DTSIM_VERSION);
    return 0;
  }
  std::vector<std::string_view> names;
  for (const Command& command : kCommands) {
    if (command.name == first) {
      const std::span<const std::string> rest(args.begin() + 1, args.end());
      return Report(command.name, command.run(rest, std::cout));
    }
    names.push_back(command.name);
  }
  fmt::print(std::cerr, "dtsim: unknown command {}{}\nTry 'dtsim --help'.\n", dtsim::Quote(first),
             dtsim::DidYouMean(first, names));
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // Ctrl-C during a long write leaves no "<output>.tmp-<pid>" behind.
  dtsim::RemoveTemporaryFilesOnSignals();
  try {
    return Main(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception& e) {
    // Input errors are Status values; an exception here is a resource failure (out of memory)
    // or a bug. Report it instead of terminating with no message.
    std::cerr << "dtsim: internal error: " << e.what() << "\n";
    return 1;
  }
}
