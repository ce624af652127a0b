#include "tools/cli/validate_command.h"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include "sim/base/atomic_file.h"
#include "strategies/validation.h"
#include "tools/cli/command_line.h"
#include "tools/results/result_file.h"
#include "tools/results/validation_report.h"

namespace dtsim::cli {
namespace {

namespace po = boost::program_options;

struct ValidateOptions {
  std::string points = "../shared/validation/published-points.json";
  std::string report_path;
  bool help = false;
};

po::options_description Describe(ValidateOptions& o) {
  po::options_description description(
      "Usage: dtsim validate [POINTS] [options]\n\n"
      "Simulates every point of a published-measurements file (default\n"
      "../shared/validation/published-points.json) and prints predicted against measured with\n"
      "the error per point and the mean absolute percentage error.\n\nOptions");
  description.add_options()("help,h", po::bool_switch(&o.help), "show this help")(
      "output,o", po::value(&o.report_path)->value_name("FILE"), "write the report as JSON");
  return description;
}

Status Execute(const ValidateOptions& options, std::ostream& out) {
  DTSIM_RETURN_IF_ERROR(RefuseOutputsOverInputs({options.points}, {options.report_path}));
  DTSIM_ASSIGN_OR_RETURN(const Json points, ReadJsonFile(options.points));
  DTSIM_ASSIGN_OR_RETURN(const strategies::ValidationReport report,
                         strategies::Validate(points, options.points));
  fmt::print(out, "dtsim validate {}\n\n  {:<56} {:<24} {:>10} {:>10} {:>8}\n", options.points,
             "point", "metric", "measured", "dtsim", "error");
  for (const strategies::ValidationRow& row : report.rows) {
    fmt::print(out, "  {:<56} {:<24} {:>10.2f} {:>10.2f} {:>+7.1f}%\n", row.id, row.metric,
               row.measured, row.predicted, 100 * row.Error());
  }
  fmt::print(out, "\n  mean absolute percentage error over {} points: {:.1f}%\n",
             report.rows.size(), report.mean_absolute_percentage_error);
  if (!options.report_path.empty()) {
    DTSIM_RETURN_IF_ERROR(results::WriteResultFile(
        options.report_path, results::ValidationReportJson(options.points, report)));
  }
  return Status::Ok();
}

}  // namespace

CommandOutcome ValidateCommand(std::span<const std::string> args, std::ostream& out) {
  ValidateOptions options;
  const po::options_description description = Describe(options);
  std::string points;  // optional: the default path stays when none is given
  return RunCommandLine(args, description, "points", points, options.help, "", out, [&] {
    if (!points.empty()) options.points = points;
    return FailureUnlessOk(Execute(options, out));
  });
}

}  // namespace dtsim::cli
