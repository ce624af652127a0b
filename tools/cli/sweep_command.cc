#include "tools/cli/sweep_command.h"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>

#include "sim/base/quantity.h"
#include "sim/base/strings.h"
#include "strategies/search.h"
#include "strategies/time_to_train.h"
#include "tools/api/api.h"
#include "tools/cli/command_line.h"
#include "tools/cli/progress.h"
#include "tools/results/provenance.h"
#include "tools/results/simulate_result.h"
#include "tools/results/sweep_result.h"

namespace dtsim::cli {
namespace {

namespace po = boost::program_options;

struct SweepOptions {
  std::string config;
  std::vector<std::string> overrides;
  std::vector<std::string> vary;
  std::string output_prefix;
  std::string max_memory;
  int threads = 0;
  bool quiet = false;
  bool help = false;
};

po::options_description Describe(SweepOptions& o) {
  po::options_description description(
      "Usage: dtsim sweep CONFIG --vary KEY.PATH=V1,V2,... [--vary ...] [options]\n\n"
      "Simulates CONFIG at every combination of the values given for config keys (bandwidth,\n"
      "nodes, compression, batch size, any field docs/config.md names) and tabulates iteration\n"
      "time, throughput, MFU and memory per point (docs/search.md).\n\nOptions");
  description.add_options()("help,h", po::bool_switch(&o.help), "show this help")(
      "vary", po::value(&o.vary)->value_name("KEY.PATH=V1,V2,...")->composing(),
      "a config key and its values, separated by commas (a value is JSON when it parses as "
      "JSON, text otherwise; commas inside [], {} or quotes do not separate); repeatable: "
      "the sweep is the cartesian product, the first --vary changing slowest")(
      "set", po::value(&o.overrides)->value_name("KEY.PATH=VALUE")->composing(),
      "override a config field at every point (repeatable)")("threads,j", ThreadsValue(&o.threads),
                                                             kThreadsHelp)(
      "max-memory", po::value(&o.max_memory)->value_name("SIZE"), kMaxMemoryHelp)(
      "output,o", po::value(&o.output_prefix)->value_name("PREFIX"),
      "write PREFIX.json (every point's full result) and PREFIX.csv "
      "(docs/formats/sweep-result.md)")("quiet,q", po::bool_switch(&o.quiet),
                                        "print nothing on success");
  return description;
}

using api::Axis;
using results::SweepPoint;

void PrintTable(std::ostream& out, const SweepOptions& options, const std::vector<Axis>& axes,
                const std::vector<SweepPoint>& points) {
  fmt::print(out, "dtsim sweep {}: {} points\n\n", options.config, points.size());
  std::vector<size_t> widths;
  for (const Axis& axis : axes) {
    size_t width = axis.key.size();
    for (const std::string& value : axis.values) width = std::max(width, value.size());
    widths.push_back(width);
  }
  fmt::print(out, " ");
  for (size_t a = 0; a < axes.size(); ++a) fmt::print(out, " {:<{}}", axes[a].key, widths[a]);
  // A column for the training run's wall clock when any point has one (docs/time_to_train.md).
  const bool trains = std::any_of(points.begin(), points.end(), [](const SweepPoint& point) {
    return point.figures && point.figures->time_to_train_s;
  });
  fmt::print(out, " {:>12} {:>12} {:>6} {:>10}{}\n", "iteration", "samples/s", "MFU", "memory",
             trains ? fmt::format(" {:>14}", "time to train") : "");
  for (const SweepPoint& point : points) {
    fmt::print(out, " ");
    for (size_t a = 0; a < axes.size(); ++a) {
      fmt::print(out, " {:<{}}", axes[a].values[point.choice[a]], widths[a]);
    }
    if (!point.figures) {
      fmt::print(out, " failed: {}\n", point.error);
      continue;
    }
    const strategies::PlanFigures& f = *point.figures;
    fmt::print(out, " {:>12} {:>12.2f} {:>5.1f}% {:>6.1f} GiB",
               FormatDuration(f.average_iteration_time), f.samples_per_second, 100 * f.mfu,
               static_cast<double>(point.memory_bytes) / kGibi);
    if (trains) {
      fmt::print(out, " {:>14}",
                 f.time_to_train_s ? strategies::FormatSeconds(*f.time_to_train_s) : "-");
    }
    fmt::print(out, "\n");
  }
  fmt::print(
      out,
      "  (iteration: the run's average with a compression warm-up or DiLoCo's "
      "synchronizations; memory: the largest stage's, per GPU{})\n",
      trains ? "; time to train: the run's wall clock with its failures and checkpoints" : "");
}

Status Execute(const SweepOptions& options, std::ostream& out) {
  const std::string& prefix = options.output_prefix;
  DTSIM_RETURN_IF_ERROR(RefuseOutputsOverInputs(
      {options.config},
      {prefix.empty() ? "" : prefix + ".json", prefix.empty() ? "" : prefix + ".csv"}));
  api::ConfigInput input{.path = options.config, .overrides = options.overrides};
  DTSIM_RETURN_IF_ERROR(AddMaxMemoryOverride(options.max_memory, input.overrides));
  std::vector<Axis> axes;
  for (const std::string& text : options.vary) {
    DTSIM_ASSIGN_OR_RETURN(Axis axis, api::ParseVary(text));
    axes.push_back(std::move(axis));
  }
  Progress progress = Progress::ForTerminal();
  Expected<results::SweepDocument> sweep = api::RunSweep(
      input, axes, options.threads, [&progress](std::string_view phase, size_t done, size_t total) {
        progress.Update(phase, done, total);
      });
  progress.Finish();
  if (!sweep.ok()) return std::move(sweep).error();
  if (!options.output_prefix.empty()) {
    DTSIM_RETURN_IF_ERROR(results::WriteSweepFiles(options.output_prefix, *sweep));
  }
  if (!options.quiet) {
    PrintTable(out, options, axes, sweep->points);
    if (!options.output_prefix.empty()) {
      fmt::print(out, "\n  every point    {0}.json, {0}.csv\n", options.output_prefix);
    }
  }
  return Status::Ok();
}

}  // namespace

CommandOutcome SweepCommand(std::span<const std::string> args, std::ostream& out) {
  results::ResetProvenance("sweep", {args.begin(), args.end()});
  SweepOptions options;
  const po::options_description description = Describe(options);
  return RunCommandLine(
      args, description, "config", options.config, options.help, "missing the CONFIG file", out,
      [&] {
        if (options.vary.empty()) {
          return CommandOutcome::Usage(Error("give at least one --vary KEY.PATH=V1,V2,..."));
        }
        for (const std::string& text : options.vary) {
          if (Expected<Axis> axis = api::ParseVary(text); !axis.ok()) {
            return CommandOutcome::Usage(axis.error());
          }
        }
        return FailureUnlessOk(Execute(options, out));
      });
}

}  // namespace dtsim::cli
