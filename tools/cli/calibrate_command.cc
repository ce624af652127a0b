#include "tools/cli/calibrate_command.h"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "sim/base/parallel.h"
#include "sim/base/strings.h"
#include "strategies/calibrate.h"
#include "strategies/profile_fit.h"
#include "tools/cli/command_line.h"
#include "tools/results/result_file.h"

namespace dtsim::cli {
namespace {

namespace po = boost::program_options;

struct CalibrateOptions {
  std::vector<std::string> points;
  std::vector<std::string> fit;
  std::vector<std::string> profiles;
  std::string output;
  bool leave_one_out = false;
  int threads = 0;
  int max_iterations = 30;
  bool help = false;
};

po::options_description Describe(CalibrateOptions& o) {
  po::options_description description(
      "Usage: dtsim calibrate [POINTS...] [--profile TABLE]... [options]\n\n"
      "Fits named physical constants of the GPU presets (\"PRESET/FIELD\": matrix_efficiency,\n"
      "fp8_matrix_efficiency, memory_efficiency, launch_overhead, host_launch_time, ...) to the\n"
      "measured training runs of POINTS (default ../shared/validation/published-points.json and\n"
      "calibration-points.json), each point simulated as dtsim validate does: least squares on\n"
      "the log of dtsim's speed over the measured one. With --profile, first fits the GEMM and\n"
      "flash attention curves of each table's GPU preset to its measured ops; the points then\n"
      "only score them, unless --fit names constants to fit too. Prints every constant with what\n"
      "fixed it and the accuracy per category before and after; -o writes the calibration a\n"
      "config names with \"calibration\" (docs/calibration.md).\n\n"
      "Options");
  description.add_options()("help,h", po::bool_switch(&o.help), "show this help")(
      "output,o", po::value(&o.output)->value_name("FILE"), "write the calibration (JSON)")(
      "fit", po::value(&o.fit)->value_name("NAME")->composing(),
      "a constant to fit, PRESET/FIELD as above; two or more points must run on the preset "
      "(repeatable; default: the matrix efficiency of every GPU the points run on whose GEMM "
      "curves were not measured)")(
      "profile", po::value(&o.profiles)->value_name("TABLE")->composing(),
      "an op-cost table (dtsim.op_costs, as dtsim ops or tools/op_benchmark.py write it) whose "
      "GPU preset's curves to fit from its GEMMs and flash attention kernels (repeatable; the "
      "tables of one preset are fitted together)")(
      "leave-one-out", po::bool_switch(&o.leave_one_out),
      "also fit once without each category and print how well that fit predicts it")(
      "threads,j", ThreadsValue(&o.threads), kThreadsHelp)(
      "max-iterations", AtLeastValue(&o.max_iterations, 1, "max-iterations"),
      "Levenberg–Marquardt iterations at most (default 30)");
  return description;
}

std::string Signed(double percent) { return fmt::format("{:+.1f}%", percent); }

void PrintConstants(const strategies::FitResult& fit,
                    const std::vector<strategies::CalibrationPoints::Entry>& entries,
                    std::ostream& out) {
  fmt::print(out, "\n  {:<44} {:>8} {:>8}  {}\n", "constant", "preset", "fitted", "from");
  for (const strategies::CalibrationConstant& constant : fit.calibration.constants) {
    if (!constant.profile.empty()) {
      fmt::print(out, "  {:<44} {:>8.4f} {:>8.4f}  {}\n", constant.name.ToString(), constant.preset,
                 constant.value, constant.profile);
      continue;
    }
    std::map<std::string, int> per_category;
    for (const std::string& id : constant.points) {
      for (const strategies::CalibrationPoints::Entry& entry : entries) {
        if (entry.point.id == id) ++per_category[entry.point.category];
      }
    }
    std::vector<std::string> parts;
    parts.reserve(per_category.size());
    for (const auto& [category, count] : per_category) {
      parts.push_back(fmt::format("{} {}", category, count));
    }
    fmt::print(out, "  {:<44} {:>8.4f} {:>8.4f}  {} points ({})\n", constant.name.ToString(),
               constant.preset, constant.value, constant.points.size(), fmt::join(parts, ", "));
  }
  for (const std::string& skipped : fit.skipped) fmt::print(out, "  not fitted: {}\n", skipped);
}

void PrintAccuracy(const strategies::ValidationReport& before,
                   const strategies::ValidationReport& after, std::ostream& out) {
  fmt::print(out, "\n  {:<34} {:>6}   {:>8} {:>8}   {:>8} {:>8}\n", "category", "points", "MAPE",
             "mean", "MAPE", "mean");
  fmt::print(out, "  {:<34} {:>6}   {:>17}   {:>17}\n", "", "", "uncalibrated", "calibrated");
  for (const strategies::CategoryAccuracy& category : before.categories) {
    auto same = [&](const strategies::CategoryAccuracy& c) {
      return c.category == category.category;
    };
    const auto it = std::find_if(after.categories.begin(), after.categories.end(), same);
    if (it == after.categories.end()) continue;
    fmt::print(out, "  {:<34} {:>6}   {:>7.1f}% {:>8}   {:>7.1f}% {:>8}\n", category.category,
               category.points, category.mean_absolute_percentage_error,
               Signed(category.mean_error), it->mean_absolute_percentage_error,
               Signed(it->mean_error));
  }
  auto mean = [](const strategies::ValidationReport& report) {
    double sum = 0;
    for (const strategies::ValidationRow& row : report.rows) sum += 100 * row.Error();
    return report.rows.empty() ? 0.0 : sum / static_cast<double>(report.rows.size());
  };
  fmt::print(out, "  {:<34} {:>6}   {:>7.1f}% {:>8}   {:>7.1f}% {:>8}\n", "all", before.rows.size(),
             before.mean_absolute_percentage_error, Signed(mean(before)),
             after.mean_absolute_percentage_error, Signed(mean(after)));
}

void PrintHeldOut(const std::vector<strategies::HeldOutCategory>& table, std::ostream& out) {
  fmt::print(out,
             "\n  leave one category out: fitted on the others, predicting it (MAPE / mean "
             "error)\n  {:<34} {:>6}   {:>17}   {:>17}   {:>17}   {}\n",
             "category", "points", "uncalibrated", "held out", "all fitted", "held-out constants");
  for (const strategies::HeldOutCategory& row : table) {
    fmt::print(out, "  {:<34} {:>6}   {:>7.1f}% {:>8}   {:>7.1f}% {:>8}   {:>7.1f}% {:>8}   {}\n",
               row.category, row.points, row.uncalibrated_mape, Signed(row.uncalibrated_mean_error),
               row.held_out_mape, Signed(row.held_out_mean_error), row.fitted_mape,
               Signed(row.fitted_mean_error), fmt::join(row.constants, " "));
  }
}

Status Execute(const CalibrateOptions& options, const std::string& command, std::ostream& out) {
  std::vector<std::string> inputs = options.points;
  inputs.insert(inputs.end(), options.profiles.begin(), options.profiles.end());
  DTSIM_RETURN_IF_ERROR(RefuseOutputsOverInputs(inputs, {options.output}));
  strategies::FitOptions fit_options{
      .threads = options.threads > 0 ? options.threads : DefaultThreads(),
      .max_iterations = options.max_iterations,
      .command = command};
  fit_options.constants_path = "--fit";
  for (const std::string& name : options.fit) {
    DTSIM_ASSIGN_OR_RETURN(strategies::ConstantName parsed,
                           strategies::ParseConstantName(name, "--fit"));
    for (const strategies::ConstantName& earlier : fit_options.constants) {
      if (earlier.ToString() == parsed.ToString()) {
        return Error("the constant is named twice", "--fit", Quote(name));
      }
    }
    fit_options.constants.push_back(std::move(parsed));
  }
  const auto started = std::chrono::steady_clock::now();
  std::vector<std::string> not_fitted;
  if (!options.profiles.empty()) {
    DTSIM_ASSIGN_OR_RETURN(strategies::ProfileFit profile_fit,
                           strategies::FitProfiles(options.profiles));
    fit_options.fixed = std::move(profile_fit.constants);
    not_fitted = std::move(profile_fit.skipped);
    fit_options.fit_defaults = false;  // the points score the tables' curves; --fit adds more
  }
  DTSIM_ASSIGN_OR_RETURN(const strategies::CalibrationPoints points,
                         strategies::CalibrationPoints::Read(options.points, fit_options.threads));
  fmt::print(out, "{}\n  {} points simulated, {} not (dtsim validate says why)\n", command,
             points.entries().size(), points.unsimulated().size());
  DTSIM_ASSIGN_OR_RETURN(strategies::FitResult fit,
                         strategies::FitCalibration(points, fit_options));
  fit.skipped.insert(fit.skipped.begin(), not_fitted.begin(), not_fitted.end());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const size_t from_points = fit.calibration.constants.size() - fit_options.fixed.size();
  if (!options.profiles.empty()) {
    fmt::print(out, "  from {} op-cost table{}: {} constant{}\n", options.profiles.size(),
               options.profiles.size() == 1 ? "" : "s", fit_options.fixed.size(),
               fit_options.fixed.size() == 1 ? "" : "s");
  }
  fmt::print(out, "  fit: {} constant{}, {} iteration{}, {} point simulations, {:.1f} s\n",
             from_points, from_points == 1 ? "" : "s", fit.iterations,
             fit.iterations == 1 ? "" : "s", fit.simulations, seconds);
  PrintConstants(fit, points.entries(), out);
  PrintAccuracy(points.uncalibrated(), fit.calibrated, out);
  if (options.leave_one_out) {
    DTSIM_ASSIGN_OR_RETURN(const std::vector<strategies::HeldOutCategory> table,
                           strategies::LeaveOneCategoryOut(points, fit_options, fit));
    PrintHeldOut(table, out);
  }
  if (!options.output.empty()) {
    DTSIM_RETURN_IF_ERROR(
        results::WriteResultFile(options.output, strategies::CalibrationToJson(fit.calibration)));
    fmt::print(out, "\n  wrote {}\n", options.output);
  }
  return Status::Ok();
}

}  // namespace

CommandOutcome CalibrateCommand(std::span<const std::string> args, std::ostream& out) {
  CalibrateOptions options;
  const po::options_description description = Describe(options);
  return RunCommandLine(args, description, "points", options.points, options.help, out, [&] {
    if (options.points.empty()) {
      options.points.assign(strategies::kSharedPointsFiles.begin(),
                            strategies::kSharedPointsFiles.end());
    }
    const std::string command =
        args.empty() ? fmt::format("dtsim calibrate {}", fmt::join(options.points, " "))
                     : fmt::format("dtsim calibrate {}", fmt::join(args, " "));
    return FailureUnlessOk(Execute(options, command, out));
  });
}

}  // namespace dtsim::cli
