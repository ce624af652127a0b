// The accuracy report of `dtsim validate -o` (docs/formats/validation-report.md): every
// measured point with dtsim's prediction and its error, and the mean absolute error.
#pragma once

#include <string>
#include <vector>

#include "sim/base/file_format.h"
#include "sim/base/status.h"
#include "strategies/calibration.h"
#include "strategies/memory_validation.h"
#include "strategies/validation.h"

namespace dtsim::results {

// 2.1: the peak-memory rows ("memory") of memory points files; 2.2: the calibration the points
// were simulated under ("calibration"), when one was given.
inline constexpr FileFormat kValidationReportFormat{"dtsim.validation_report", 2, 3,
                                                    "not a validation report"};

OrderedJson ValidationReportJson(const std::vector<std::string>& points_paths,
                                 const strategies::ValidationReport& report,
                                 const strategies::MemoryReport& memory,
                                 const strategies::Calibration* calibration = nullptr);

// What a reader gets back: the files, the rows, the points not simulated and the mean, as
// written.
struct ValidationReportRecord {
  std::vector<std::string> points;
  std::vector<strategies::ValidationRow> rows;  // `how` is the "simulated" text
  std::vector<strategies::UnsimulatedPoint> unsimulated;
  double mean_absolute_percentage_error = 0;
  std::vector<strategies::MemoryRow> memory;  // absent before 2.1: none
};

Expected<ValidationReportRecord> ValidationReportFromJson(const Json& document);

}  // namespace dtsim::results
