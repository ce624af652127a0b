#include "tools/cli/sweep_command.h"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <optional>

#include "sim/base/parallel.h"
#include "sim/base/quantity.h"
#include "sim/base/strings.h"
#include "strategies/search.h"
#include "tools/cli/command_line.h"
#include "tools/cli/progress.h"
#include "tools/cli/sweep_axes.h"
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
      "override a config field at every point (repeatable)")(
      "threads,j", po::value(&o.threads)->value_name("N"), "threads (default: every core)")(
      "max-memory", po::value(&o.max_memory)->value_name("SIZE"), kMaxMemoryHelp)(
      "output,o", po::value(&o.output_prefix)->value_name("PREFIX"),
      "write PREFIX.json (every point's full result) and PREFIX.csv "
      "(docs/formats/sweep-result.md)")("quiet,q", po::bool_switch(&o.quiet),
                                        "print nothing on success");
  return description;
}

using results::SweepPoint;

Status Evaluate(const Json& base, const std::vector<Axis>& axes, const std::string& source,
                SweepPoint& point) {
  Json json = base;
  for (size_t a = 0; a < axes.size(); ++a) {
    DTSIM_RETURN_IF_ERROR(
        strategies::ApplyOverride(json, axes[a].key + "=" + axes[a].values[point.choice[a]]));
  }
  Expected<strategies::ResolvedConfig> config = strategies::ConfigFromJson(json, source);
  if (!config.ok()) return std::move(config).error().InFile(source);
  Expected<strategies::SimulationResult> result = strategies::Simulate(*config);
  if (!result.ok()) return std::move(result).error().InFile(source);
  point.result = results::SimulateResultJson(*config, *result);
  point.figures = strategies::FiguresOf(*result);
  for (const models::MemoryBreakdown& stage : result->iteration->stats.stage_memory) {
    point.memory_bytes = std::max(point.memory_bytes, stage.total());
  }
  return Status::Ok();
}

// The files' view of the sweep: each axis's values as text and as the JSON they became.
results::SweepDocument Document(const SweepOptions& options, const std::vector<Axis>& axes,
                                std::vector<SweepPoint> points) {
  results::SweepDocument sweep{.config = options.config, .set = options.overrides};
  for (const Axis& axis : axes) {
    results::SweepAxis& out = sweep.axes.emplace_back();
    out.key = axis.key;
    out.texts = axis.values;
    for (const std::string& value : axis.values) out.values.push_back(ValueJson(value));
  }
  sweep.points = std::move(points);
  return sweep;
}

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
  fmt::print(out, " {:>12} {:>12} {:>6} {:>10}\n", "iteration", "samples/s", "MFU", "memory");
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
    fmt::print(out, " {:>12} {:>12.2f} {:>5.1f}% {:>6.1f} GiB\n",
               FormatDuration(f.average_iteration_time), f.samples_per_second, 100 * f.mfu,
               static_cast<double>(point.memory_bytes) / kGibi);
  }
  fmt::print(out,
             "  (iteration: the run's average with a compression warm-up; memory: the largest "
             "stage's, per GPU)\n");
}

Status Execute(const SweepOptions& options, std::ostream& out) {
  const std::string& prefix = options.output_prefix;
  DTSIM_RETURN_IF_ERROR(RefuseOutputsOverInputs(
      {options.config},
      {prefix.empty() ? "" : prefix + ".json", prefix.empty() ? "" : prefix + ".csv"}));
  DTSIM_ASSIGN_OR_RETURN(Json base, ReadJsonFile(options.config));
  std::vector<std::string> overrides = options.overrides;
  AddMaxMemoryOverride(options.max_memory, overrides);
  for (const std::string& assignment : overrides) {
    DTSIM_RETURN_IF_ERROR(strategies::ApplyOverride(base, assignment));
  }
  results::RecordConfig(base, overrides, nullptr);
  std::vector<Axis> axes;
  for (const std::string& text : options.vary) {
    DTSIM_ASSIGN_OR_RETURN(Axis axis, ParseVary(text));
    for (const Axis& other : axes) {
      if (other.key == axis.key) return Error("key varied twice", "--vary", Quote(axis.key));
    }
    DTSIM_RETURN_IF_ERROR(CheckKey(base, axis, options.config));
    axes.push_back(std::move(axis));
  }
  // Points in order, the last axis changing fastest.
  std::vector<SweepPoint> points(1);
  for (const Axis& axis : axes) {
    std::vector<SweepPoint> next;
    for (const SweepPoint& point : points) {
      for (size_t v = 0; v < axis.values.size(); ++v) {
        next.push_back(point);
        next.back().choice.push_back(v);
      }
    }
    points = std::move(next);
  }
  Progress progress = Progress::ForTerminal();
  std::atomic<size_t> done{0};
  ParallelFor(points.size(), options.threads > 0 ? options.threads : DefaultThreads(),
              [&](size_t i) {
                if (Status status = Evaluate(base, axes, options.config, points[i]); !status.ok()) {
                  points[i].error = status.error().ToString();
                }
                progress.Update("simulating", ++done, points.size());
              });
  progress.Finish();
  const bool any = std::any_of(points.begin(), points.end(),
                               [](const SweepPoint& p) { return p.result.has_value(); });
  if (!any) {
    return Error(fmt::format("every point failed; the first: {}", points.front().error), "--vary");
  }
  const results::SweepDocument sweep = Document(options, axes, std::move(points));
  if (!options.output_prefix.empty()) {
    DTSIM_RETURN_IF_ERROR(results::WriteSweepFiles(options.output_prefix, sweep));
  }
  if (!options.quiet) {
    PrintTable(out, options, axes, sweep.points);
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
          if (Expected<Axis> axis = ParseVary(text); !axis.ok()) {
            return CommandOutcome::Usage(axis.error());
          }
        }
        return FailureUnlessOk(Execute(options, out));
      });
}

}  // namespace dtsim::cli
