#include "tools/cli/validate_command.h"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/base/atomic_file.h"
#include "sim/base/strings.h"
#include "strategies/calibration.h"
#include "strategies/memory_validation.h"
#include "strategies/training_run_point.h"
#include "strategies/validation.h"
#include "tools/cli/command_line.h"
#include "tools/results/provenance.h"
#include "tools/results/result_file.h"
#include "tools/results/validation_report.h"

namespace dtsim::cli {
namespace {

namespace po = boost::program_options;

struct ValidateOptions {
  std::vector<std::string> points;
  std::string report_path;
  std::string configs_dir;
  std::string calibration;
  bool help = false;
};

std::vector<std::string> DefaultPoints() {
  std::vector<std::string> points(strategies::kSharedPointsFiles.begin(),
                                  strategies::kSharedPointsFiles.end());
  points.emplace_back("tools/validation/memory-points.json");
  return points;
}

po::options_description Describe(ValidateOptions& o) {
  po::options_description description(
      "Usage: dtsim validate [POINTS...] [options]\n\n"
      "Simulates every point of measurements files (default ../shared/validation/\n"
      "published-points.json and calibration-points.json) and prints, by category, measured\n"
      "against predicted with the error per point (dtsim's speed over the measured one, − 1:\n"
      "positive is optimistic), each category's and the overall mean absolute percentage error,\n"
      "and every point that could not be simulated with the reason. Memory points files\n"
      "(default also tools/validation/memory-points.json) compare the predicted peak memory\n"
      "with measured peaks and fit/OOM verdicts (docs/validation.md).\n\n"
      "Options");
  description.add_options()("help,h", po::bool_switch(&o.help), "show this help")(
      "output,o", po::value(&o.report_path)->value_name("FILE"), "write the report as JSON")(
      "write-configs", po::value(&o.configs_dir)->value_name("DIR"),
      "write each measured training run's simulation config to DIR/ID.json (created if "
      "missing), to run or change with dtsim simulate")(
      "calibration", po::value(&o.calibration)->value_name("FILE"),
      "apply a calibration (dtsim calibrate -o FILE) to every point's GPU; the configs "
      "--write-configs writes carry it");
  return description;
}

// A training-run point's config as --write-configs writes it: DIR/ID.json.
struct PointConfig {
  std::string file;
  std::string text;
  std::string source;  // "POINTS points[i] (ID)", for an error naming two of them
};

// Each training-run point's config (strategies::TrainingRunConfigOf) as DIR/ID.json; points
// it cannot read are skipped (the report lists them).
Status AddPointConfigs(const std::string& dir, const std::string& path, const Json& points,
                       const strategies::Calibration* calibration,
                       std::vector<PointConfig>& configs) {
  if (!points.contains("points") || !points["points"].is_array()) return Status::Ok();
  const Json& list = points["points"];
  for (size_t i = 0; i < list.size(); ++i) {
    const Json& point = list[i];
    if (!point.is_object() || !point.contains("id") || !point["id"].is_string()) continue;
    const std::string category = strategies::TextField(point, "category");
    if (!strategies::IsTrainingRunCategory(category)) continue;
    Expected<strategies::TrainingRunConfig> run =
        strategies::TrainingRunConfigOf(point, JsonIndexPath("points", i));
    if (!run.ok()) continue;
    if (calibration != nullptr) {
      run->config["calibration"] = Json(strategies::CalibrationToJson(*calibration));
    }
    const std::string id = point["id"].get<std::string>();
    if (id.find_first_of("/\\") != std::string::npos || id.empty() || id.starts_with(".")) {
      return Error("a point id that is not a file name", JsonIndexPath("points", i), Quote(id))
          .InFile(path);
    }
    configs.push_back(
        {.file = fmt::format("{}/{}.json", dir, id),
         .text = run->config.dump(2) + "\n",
         .source = fmt::format("{} {} ({})", path, JsonIndexPath("points", i), Quote(id))});
  }
  return Status::Ok();
}

// Before anything is simulated: -o inside DIR would be replaced by a point's config (or
// replace it). Two points of one id, whose configs would be one file, are refused before this
// (strategies::CheckUniquePointIds).
Status CheckPointConfigs(const std::vector<PointConfig>& configs, const std::string& report) {
  if (report.empty()) return Status::Ok();
  const std::filesystem::path report_file = ResolvedPath(report);
  for (const PointConfig& config : configs) {
    if (ResolvedPath(config.file) == report_file) {
      return Error(fmt::format("--write-configs writes {}'s config here, where -o writes the "
                               "report: give -o another path",
                               config.source))
          .InFile(report);
    }
  }
  return Status::Ok();
}

void PrintCategory(const strategies::CategoryAccuracy& category,
                   const strategies::ValidationReport& report, std::ostream& out) {
  fmt::print(out, "\n  {} — {} point{}, MAPE {:.1f}%, mean error {:+.1f}%\n", category.category,
             category.points, category.points == 1 ? "" : "s",
             category.mean_absolute_percentage_error, category.mean_error);
  for (const strategies::ValidationRow& row : report.rows) {
    if (row.category != category.category) continue;
    fmt::print(out, "    {:<44} {:<24} {:>10.2f} {:>10.2f} {:>+7.1f}%\n", row.id, row.metric,
               row.measured, row.predicted, 100 * row.Error());
  }
}

std::string GiB(double bytes) { return fmt::format("{:.1f}", bytes / (1024.0 * 1024 * 1024)); }

void PrintMemory(const strategies::MemoryReport& memory, std::ostream& out) {
  fmt::print(out,
             "\n  peak memory per GPU (GiB; error: dtsim over measured − 1; * does what dtsim "
             "does not model)\n  {:<60} {:<9} {:>8} {:>8} {:>9} {:>7}  {}\n",
             "point", "kind", "measured", "dtsim", "capacity", "error", "fit");
  for (const strategies::MemoryRow& row : memory.rows) {
    const std::string verdict =
        std::string(row.PredictedFits() ? "fits" : "OOM") + (row.VerdictRight() ? "" : " (wrong)");
    fmt::print(out, "    {:<58} {:<9} {:>8} {:>8} {:>9} {:>7}  {}\n",
               row.id + (row.unmodelled.empty() ? "" : " *"),
               std::string(strategies::MeasuredMemoryName(row.kind)),
               row.HasPeak() ? GiB(row.measured_bytes) : std::string(row.ran ? "ran" : "OOM"),
               GiB(row.predicted_bytes), GiB(row.capacity_bytes),
               row.HasPeak() ? fmt::format("{:+.1f}%", 100 * row.Error()) : std::string("—"),
               verdict);
  }
  fmt::print(out,
             "\n  memory: {} points from {} sources; MAPE {:.1f}% (mean {:+.1f}%) over the {} "
             "comparable, {:.1f}% over all {} measured; {} wrong fit/OOM verdict{}\n",
             memory.rows.size(), memory.sources.size(), memory.comparable_mape,
             memory.comparable_mean_error, memory.comparable, memory.all_mape, memory.measured,
             memory.wrong_verdicts, memory.wrong_verdicts == 1 ? "" : "s");
}

Status Execute(const ValidateOptions& options, std::ostream& out) {
  std::vector<std::string> inputs = options.points;
  if (!options.calibration.empty()) inputs.push_back(options.calibration);
  DTSIM_RETURN_IF_ERROR(RefuseOutputsOverInputs(inputs, {options.report_path}));
  // Before the points are simulated: a file, a device or a path that cannot be made failed
  // only after them.
  if (!options.configs_dir.empty()) {
    DTSIM_RETURN_IF_ERROR(MakeOutputDirectory(options.configs_dir, "--write-configs"));
  }
  std::optional<strategies::Calibration> calibration;
  if (!options.calibration.empty()) {
    DTSIM_ASSIGN_OR_RETURN(calibration, strategies::ReadCalibrationFile(options.calibration));
  }
  const strategies::Calibration* constants = calibration ? &*calibration : nullptr;
  std::vector<Json> documents;
  std::vector<PointConfig> configs;
  for (const std::string& path : options.points) {
    DTSIM_ASSIGN_OR_RETURN(Json document, ReadJsonFile(path));
    documents.push_back(std::move(document));
    if (!options.configs_dir.empty() && !strategies::IsMemoryPointsFile(documents.back())) {
      DTSIM_RETURN_IF_ERROR(
          AddPointConfigs(options.configs_dir, path, documents.back(), constants, configs));
    }
  }
  std::vector<std::pair<const Json*, std::string>> named;
  for (size_t f = 0; f < documents.size(); ++f)
    named.emplace_back(&documents[f], options.points[f]);
  DTSIM_RETURN_IF_ERROR(strategies::CheckUniquePointIds(named));
  DTSIM_RETURN_IF_ERROR(CheckPointConfigs(configs, options.report_path));
  for (const PointConfig& config : configs) {
    DTSIM_RETURN_IF_ERROR(WriteFileAtomically(config.file, config.text));
  }
  std::vector<strategies::ValidationReport> reports;
  std::vector<strategies::MemoryRow> memory_rows;  // of every memory points file
  for (size_t f = 0; f < options.points.size(); ++f) {
    const std::string& path = options.points[f];
    const Json& points = documents[f];
    if (strategies::IsMemoryPointsFile(points)) {
      DTSIM_ASSIGN_OR_RETURN(strategies::MemoryReport memory,
                             strategies::ValidateMemory(points, path));
      std::move(memory.rows.begin(), memory.rows.end(), std::back_inserter(memory_rows));
      continue;
    }
    DTSIM_ASSIGN_OR_RETURN(strategies::ValidationReport report,
                           strategies::Validate(points, path, constants));
    reports.push_back(std::move(report));
  }
  const bool performance = !reports.empty();
  const strategies::ValidationReport report = strategies::MergeReports(std::move(reports));
  const strategies::MemoryReport memory = strategies::SummarizeMemory(std::move(memory_rows));
  fmt::print(out, "dtsim validate {}\n", fmt::join(options.points, " "));
  if (calibration) {
    std::vector<std::string> constants_text;
    for (const strategies::CalibrationConstant& constant : calibration->constants) {
      constants_text.push_back(fmt::format("{} {:.4g}", constant.name.ToString(), constant.value));
    }
    fmt::print(out, "  calibration {}: {}\n", options.calibration, fmt::join(constants_text, ", "));
  }
  if (performance) {
    fmt::print(out, "\n  {:<46} {:<24} {:>10} {:>10} {:>8}\n", "category / point", "metric",
               "measured", "dtsim", "error");
    for (const strategies::CategoryAccuracy& category : report.categories) {
      PrintCategory(category, report, out);
    }
    fmt::print(out, "\n  mean absolute percentage error over {} points: {:.1f}%\n",
               report.rows.size(), report.mean_absolute_percentage_error);
  }
  if (!memory.rows.empty()) PrintMemory(memory, out);
  if (!report.unsimulated.empty()) {
    fmt::print(out, "\n  not simulated ({}):\n", report.unsimulated.size());
    for (const strategies::UnsimulatedPoint& point : report.unsimulated) {
      fmt::print(out, "    {} ({}): {}\n", point.id, point.category, point.reason);
    }
  }
  if (!options.report_path.empty()) {
    DTSIM_RETURN_IF_ERROR(results::WriteResultFile(
        options.report_path,
        results::ValidationReportJson(options.points, report, memory, constants)));
  }
  return Status::Ok();
}

}  // namespace

CommandOutcome ValidateCommand(std::span<const std::string> args, std::ostream& out) {
  results::ResetProvenance("validate", {args.begin(), args.end()});
  ValidateOptions options;
  const po::options_description description = Describe(options);
  return RunCommandLine(args, description, "points", options.points, options.help, out, [&] {
    if (options.points.empty()) options.points = DefaultPoints();
    return FailureUnlessOk(Execute(options, out));
  });
}

}  // namespace dtsim::cli
