// `dtsim calibrate` (docs/calibration.md): fits named physical constants of the GPU presets
// (strategies/calibration.h) to measured training runs by least squares on the log of
// dtsim's speed over the measured speed, each point simulated as `dtsim validate` does; and
// the leave-one-category-out check of how a fit generalizes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sim/base/json_reader.h"
#include "sim/base/status.h"
#include "strategies/calibration.h"
#include "strategies/validation.h"

namespace dtsim::strategies {

// The measured points of one or more measurements files, each simulated once as it is to find
// the GPU it runs on. Points that cannot be simulated are listed, not fitted.
class CalibrationPoints {
 public:
  struct Entry {
    MeasuredPoint point;
    std::string source;  // its file
    std::string gpu;     // the GPU preset it runs on
  };

  static Expected<CalibrationPoints> Read(const std::vector<std::string>& files, int threads);

  const std::vector<Entry>& entries() const { return entries_; }
  const std::vector<UnsimulatedPoint>& unsimulated() const { return unsimulated_; }
  const ValidationReport& uncalibrated() const { return uncalibrated_; }

 private:
  std::vector<std::unique_ptr<Json>> documents_;  // the points point into them
  std::vector<Entry> entries_;
  std::vector<UnsimulatedPoint> unsimulated_;
  ValidationReport uncalibrated_;  // every entry's row without a calibration
};

struct FitOptions {
  // The constants to fit; empty: the matrix efficiency of every GPU the points run on whose
  // curves were not measured (models::GpuSpec::measured_curves).
  std::vector<ConstantName> constants;
  // Where the constants were named (dtsim calibrate's "--fit"): given, a named constant with
  // fewer than two points is an error there rather than skipped.
  std::string constants_path;
  // Whether, with no `constants` named, the default ones are fitted (else none: the points only
  // score `fixed`).
  bool fit_defaults = true;
  // Constants measured elsewhere (an op-cost table's curves, strategies/profile_fit.h): applied
  // in every simulation, not fitted, and written with the fitted ones. A GPU whose matrix
  // efficiency is among them is left out of the default constants, as a measured one is.
  std::vector<CalibrationConstant> fixed;
  // Categories whose points take no part (the leave-one-category-out check).
  std::vector<std::string> exclude_categories;
  int threads = 1;
  int max_iterations = 30;
  std::string command;  // recorded in the calibration
};

struct FitResult {
  Calibration calibration;           // the fitted constants; residuals over every point
  ValidationReport calibrated;       // every point under the calibration
  std::vector<std::string> skipped;  // constants not fitted, with why ("…: 1 point")
  int iterations = 0;
  int simulations = 0;  // points simulated during the fit
};

// Levenberg–Marquardt on Huber's loss (quadratic to 0.1, linear beyond) of the residuals
// log(predicted speed / measured speed) of the points whose GPU a constant belongs to, each
// constant kept in its physical range (FieldBounds); a constant with fewer than two such points
// is not fitted. Errors name the point that failed to simulate.
Expected<FitResult> FitCalibration(const CalibrationPoints& points, const FitOptions& options);

// One category predicted by a fit on all the others.
struct HeldOutCategory {
  std::string category;
  int points = 0;
  double uncalibrated_mape = 0, uncalibrated_mean_error = 0;  // percent
  double held_out_mape = 0, held_out_mean_error = 0;          // fitted without the category
  double fitted_mape = 0, fitted_mean_error = 0;              // fitted with every category
  std::vector<std::string> constants;  // the held-out fit's constants, "name=value"
};
Expected<std::vector<HeldOutCategory>> LeaveOneCategoryOut(const CalibrationPoints& points,
                                                           const FitOptions& options,
                                                           const FitResult& full);

}  // namespace dtsim::strategies
