#include "strategies/calibrate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sim/base/parallel.h"
#include "sim/base/strings.h"
#include "strategies/memory_validation.h"

namespace dtsim::strategies {
namespace {

using Rows = std::vector<ValidationRow>;

// Simulates entries[i] for every i of `indices` under `calibration`, in parallel.
Expected<Rows> SimulateEntries(const std::vector<CalibrationPoints::Entry>& entries,
                               const std::vector<size_t>& indices, const Calibration* calibration,
                               int threads) {
  std::vector<std::optional<Expected<ValidationRow>>> rows(indices.size());
  ParallelFor(indices.size(), threads, [&](size_t i) {
    const CalibrationPoints::Entry& entry = entries[indices[i]];
    rows[i] = ValidatePoint(entry.point, entry.source, calibration);
  });
  Rows out;
  out.reserve(rows.size());
  for (std::optional<Expected<ValidationRow>>& row : rows) {
    if (!row->ok()) return std::move(*row).error();
    out.push_back(std::move(**row));
  }
  return out;
}

// log(dtsim's speed / measured speed): 0 when exact, symmetric in over- and under-prediction.
double Residual(const ValidationRow& row) { return std::log1p(row.Error()); }

// Solves the k × k system a · x = b by Gaussian elimination with partial pivoting; false when
// singular.
bool Solve(std::vector<std::vector<double>> a, std::vector<double> b, std::vector<double>& x) {
  const size_t k = b.size();
  for (size_t col = 0; col < k; ++col) {
    size_t pivot = col;
    for (size_t r = col + 1; r < k; ++r) {
      if (std::abs(a[r][col]) > std::abs(a[pivot][col])) pivot = r;
    }
    if (std::abs(a[pivot][col]) < 1e-300) return false;
    std::swap(a[pivot], a[col]);
    std::swap(b[pivot], b[col]);
    for (size_t r = col + 1; r < k; ++r) {
      const double f = a[r][col] / a[col][col];
      for (size_t c = col; c < k; ++c) a[r][c] -= f * a[col][c];
      b[r] -= f * b[col];
    }
  }
  x.assign(k, 0);
  for (size_t i = k; i-- > 0;) {
    double sum = b[i];
    for (size_t c = i + 1; c < k; ++c) sum -= a[i][c] * x[c];
    x[i] = sum / a[i][i];
  }
  return true;
}

// The least-squares problem of one fit: which constants, over which points.
class Problem {
 public:
  Problem(const CalibrationPoints& points, const FitOptions& options)
      : entries_(points.entries()), options_(options) {}

  // Chooses the constants and the points each depends on; `skipped` gets those with fewer
  // than two points.
  Status Setup(std::vector<std::string>& skipped) {
    std::vector<ConstantName> wanted = options_.constants;
    if (wanted.empty() && options_.fit_defaults) wanted = DefaultConstants();
    for (const ConstantName& name : wanted) {
      if (IsFixed(name)) {
        return Error(
            "the constant was fitted from an op-cost table (--profile): fit it from "
            "one or the other",
            options_.constants_path.empty() ? "constants" : options_.constants_path,
            Quote(name.ToString()));
      }
      std::vector<size_t> rows;
      for (size_t i : Included()) {
        if (entries_[i].gpu == name.gpu) rows.push_back(i);
      }
      if (rows.size() < 2 && !options_.constants_path.empty() && !options_.constants.empty()) {
        return Error(fmt::format("{} point{} on {}: a constant needs two or more to be fitted",
                                 rows.size(), rows.size() == 1 ? "" : "s", name.gpu),
                     options_.constants_path, Quote(name.ToString()));
      }
      if (rows.size() < 2) {
        skipped.push_back(fmt::format("{}: {} point{} (a constant needs two or more)",
                                      name.ToString(), rows.size(), rows.size() == 1 ? "" : "s"));
        continue;
      }
      DTSIM_ASSIGN_OR_RETURN(const models::GpuSpec gpu, models::GpuPreset(name.gpu));
      CalibrationConstant constant{.name = name, .preset = FieldValue(gpu, name.field)};
      constant.value = constant.preset;
      for (size_t i : rows) constant.points.push_back(entries_[i].point.id);
      constants_.push_back(std::move(constant));
      columns_.push_back(std::move(rows));
    }
    std::set<size_t> active;
    for (const std::vector<size_t>& rows : columns_) active.insert(rows.begin(), rows.end());
    active_.assign(active.begin(), active.end());
    return Status::Ok();
  }

  size_t size() const { return constants_.size(); }
  int simulations() const { return simulations_; }

  // The fixed constants, then the fitted ones at x.
  Calibration At(const std::vector<double>& x) const {
    Calibration calibration;
    calibration.command = options_.command;
    calibration.constants = options_.fixed;
    for (size_t j = 0; j < x.size(); ++j) {
      calibration.constants.push_back(constants_[j]);
      calibration.constants.back().value = x[j];
    }
    return calibration;
  }

  // The residuals of `indices` (ascending) at x.
  Expected<std::vector<double>> Residuals(const std::vector<double>& x,
                                          const std::vector<size_t>& indices) {
    const Calibration calibration = At(x);
    DTSIM_ASSIGN_OR_RETURN(const Rows rows,
                           SimulateEntries(entries_, indices, &calibration, options_.threads));
    simulations_ += static_cast<int>(indices.size());
    std::vector<double> r;
    r.reserve(rows.size());
    for (const ValidationRow& row : rows) r.push_back(Residual(row));
    return r;
  }

  const std::vector<size_t>& active() const { return active_; }

  // ∂r/∂x_j by a forward step (backward at the upper bound), re-simulating only the points
  // of constant j's GPU; rows in active() order.
  Expected<std::vector<std::vector<double>>> Jacobian(const std::vector<double>& x,
                                                      const std::vector<double>& r) {
    std::vector<std::vector<double>> jacobian(active_.size(), std::vector<double>(x.size(), 0));
    for (size_t j = 0; j < x.size(); ++j) {
      const auto [low, high] = FieldBounds(constants_[j].name.field);
      const double step =
          IsTimeField(constants_[j].name.field) ? 0.25 : std::max(1e-3, 0.01 * x[j]);
      std::vector<double> moved = x;
      moved[j] = x[j] + step <= high ? x[j] + step : x[j] - step;
      moved[j] = std::max(low, moved[j]);
      const double delta = moved[j] - x[j];
      DTSIM_ASSIGN_OR_RETURN(const std::vector<double> r_moved, Residuals(moved, columns_[j]));
      for (size_t k = 0; k < columns_[j].size(); ++k) {
        const size_t row = RowOf(columns_[j][k]);
        jacobian[row][j] = (r_moved[k] - r[row]) / delta;
      }
    }
    return jacobian;
  }

  std::vector<double> Start() const {
    std::vector<double> x;
    for (const CalibrationConstant& constant : constants_) x.push_back(constant.value);
    return x;
  }

  std::vector<double> Clamp(std::vector<double> x) const {
    for (size_t j = 0; j < x.size(); ++j) {
      const auto [low, high] = FieldBounds(constants_[j].name.field);
      x[j] = std::clamp(x[j], low, high);
    }
    return x;
  }

 private:
  std::vector<size_t> Included() const {
    std::vector<size_t> included;
    for (size_t i = 0; i < entries_.size(); ++i) {
      const auto& excluded = options_.exclude_categories;
      if (std::find(excluded.begin(), excluded.end(), entries_[i].point.category) ==
          excluded.end()) {
        included.push_back(i);
      }
    }
    return included;
  }

  bool IsFixed(const ConstantName& name) const {
    return std::any_of(options_.fixed.begin(), options_.fixed.end(),
                       [&](const CalibrationConstant& c) {
                         return c.name.gpu == name.gpu && c.name.field == name.field;
                       });
  }

  std::vector<ConstantName> DefaultConstants() const {
    std::vector<ConstantName> names;
    for (size_t i : Included()) {
      const std::string& gpu = entries_[i].gpu;
      const Expected<models::GpuSpec> spec = models::GpuPreset(gpu);
      if (!spec.ok() || spec->measured_curves) continue;
      if (IsFixed({.gpu = gpu, .field = CalibratedField::kMatrixEfficiency})) continue;
      auto same = [&](const ConstantName& n) { return n.gpu == gpu; };
      if (std::none_of(names.begin(), names.end(), same)) {
        names.push_back({.gpu = gpu, .field = CalibratedField::kMatrixEfficiency});
      }
    }
    return names;
  }

  size_t RowOf(size_t entry) const {
    return static_cast<size_t>(std::lower_bound(active_.begin(), active_.end(), entry) -
                               active_.begin());
  }

  const std::vector<CalibrationPoints::Entry>& entries_;
  const FitOptions& options_;
  std::vector<CalibrationConstant> constants_;
  std::vector<std::vector<size_t>> columns_;  // per constant, the entries that depend on it
  std::vector<size_t> active_;                // every entry some constant depends on
  int simulations_ = 0;
};

// Huber's loss over the residuals: squares within kHuber of 0 (log speed ratio: about 10%),
// linear beyond, so that a point off for a reason no constant stands for (a mechanism dtsim
// does not model) pulls a physical constant no harder than a 10% miss would, in proportion.
constexpr double kHuber = 0.1;

double HuberCost(const std::vector<double>& r) {
  double sum = 0;
  for (double v : r) {
    const double a = std::abs(v);
    sum += a <= kHuber ? v * v : 2 * kHuber * a - kHuber * kHuber;
  }
  return sum;
}

// The weight of a residual in the iteratively reweighted least squares of Huber's loss.
double HuberWeight(double r) { return std::abs(r) <= kHuber ? 1.0 : kHuber / std::abs(r); }

// Levenberg–Marquardt on Huber's loss (reweighted each iteration) from the presets' values;
// returns the constants and the iterations.
Expected<std::vector<double>> Minimize(Problem& problem, int max_iterations, int& iterations) {
  std::vector<double> x = problem.Start();
  DTSIM_ASSIGN_OR_RETURN(std::vector<double> r, problem.Residuals(x, problem.active()));
  double cost = HuberCost(r);
  double lambda = 1e-3;
  const size_t k = x.size();
  for (iterations = 0; iterations < max_iterations; ++iterations) {
    DTSIM_ASSIGN_OR_RETURN(const auto jacobian, problem.Jacobian(x, r));
    std::vector<std::vector<double>> jtj(k, std::vector<double>(k, 0));
    std::vector<double> jtr(k, 0);
    for (size_t i = 0; i < r.size(); ++i) {
      const double w = HuberWeight(r[i]);
      for (size_t a = 0; a < k; ++a) {
        jtr[a] += w * jacobian[i][a] * r[i];
        for (size_t b = 0; b < k; ++b) jtj[a][b] += w * jacobian[i][a] * jacobian[i][b];
      }
    }
    bool improved = false;
    for (int attempt = 0; attempt < 8 && !improved; ++attempt) {
      std::vector<std::vector<double>> damped = jtj;
      std::vector<double> minus_jtr(k);
      for (size_t a = 0; a < k; ++a) {
        damped[a][a] += lambda * std::max(jtj[a][a], 1e-12);
        minus_jtr[a] = -jtr[a];
      }
      std::vector<double> step;
      if (!Solve(damped, minus_jtr, step)) break;
      std::vector<double> trial = x;
      for (size_t a = 0; a < k; ++a) trial[a] += step[a];
      trial = problem.Clamp(trial);
      DTSIM_ASSIGN_OR_RETURN(std::vector<double> r_trial,
                             problem.Residuals(trial, problem.active()));
      const double trial_cost = HuberCost(r_trial);
      if (trial_cost < cost) {
        const double gain = cost - trial_cost;
        x = std::move(trial);
        r = std::move(r_trial);
        cost = trial_cost;
        lambda = std::max(lambda / 3, 1e-9);
        improved = true;
        if (gain <= 1e-9 * std::max(cost, 1e-12) + 1e-14) return x;
      } else {
        lambda *= 4;
      }
    }
    if (!improved) break;
  }
  return x;
}

// The calibrated rows grouped by (GPU, framework), groups of two or more.
std::vector<ErrorBand> ErrorBands(const Rows& rows) {
  std::vector<ErrorBand> bands;
  for (const ValidationRow& row : rows) {
    auto same = [&](const ErrorBand& b) {
      return b.gpu == row.gpu && b.framework == row.framework;
    };
    auto it = std::find_if(bands.begin(), bands.end(), same);
    if (it == bands.end()) {
      bands.push_back({.gpu = row.gpu, .framework = row.framework});
      it = std::prev(bands.end());
    }
    ++it->points;
    it->mean_absolute_percentage_error += 100 * std::abs(row.Error());
    it->mean_error += 100 * row.Error();
  }
  std::erase_if(bands, [](const ErrorBand& band) { return band.points < 2; });
  for (ErrorBand& band : bands) {
    band.mean_absolute_percentage_error /= band.points;
    band.mean_error /= band.points;
  }
  return bands;
}

std::vector<size_t> AllEntries(const CalibrationPoints& points) {
  std::vector<size_t> indices(points.entries().size());
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = i;
  return indices;
}

}  // namespace

Expected<CalibrationPoints> CalibrationPoints::Read(const std::vector<std::string>& files,
                                                    int threads) {
  CalibrationPoints points;
  for (const std::string& file : files) {
    DTSIM_ASSIGN_OR_RETURN(Json json, ReadJsonFile(file));
    if (IsMemoryPointsFile(json)) {
      return Error(
                 "a memory points file: dtsim calibrate fits time, from measured training "
                 "runs (dtsim validate compares memory)")
          .InFile(file);
    }
    points.documents_.push_back(std::make_unique<Json>(std::move(json)));
    DTSIM_ASSIGN_OR_RETURN(const std::vector<MeasuredPoint> measured,
                           MeasuredPoints(*points.documents_.back(), file));
    for (const MeasuredPoint& point : measured) {
      points.entries_.push_back({.point = point, .source = file});
    }
  }
  std::vector<std::pair<const Json*, std::string>> documents;
  for (size_t f = 0; f < files.size(); ++f)
    documents.emplace_back(points.documents_[f].get(), files[f]);
  DTSIM_RETURN_IF_ERROR(CheckUniquePointIds(documents));
  std::vector<std::optional<Expected<ValidationRow>>> rows(points.entries_.size());
  ParallelFor(rows.size(), threads, [&](size_t i) {
    rows[i] = ValidatePoint(points.entries_[i].point, points.entries_[i].source);
  });
  std::vector<Entry> simulated;
  for (size_t i = 0; i < rows.size(); ++i) {
    Entry& entry = points.entries_[i];
    if (!rows[i]->ok()) {
      points.unsimulated_.push_back(
          {entry.point.id, entry.point.category, std::move(*rows[i]).error().ToString()});
      continue;
    }
    entry.gpu = (*rows[i])->gpu;
    points.uncalibrated_.rows.push_back(std::move(**rows[i]));
    simulated.push_back(std::move(entry));
  }
  points.entries_ = std::move(simulated);
  points.uncalibrated_ = MergeReports({std::move(points.uncalibrated_)});
  return points;
}

Expected<FitResult> FitCalibration(const CalibrationPoints& points, const FitOptions& options) {
  FitResult result;
  Problem problem(points, options);
  DTSIM_RETURN_IF_ERROR(problem.Setup(result.skipped));
  std::vector<double> x;
  if (problem.size() > 0) {
    DTSIM_ASSIGN_OR_RETURN(x, Minimize(problem, options.max_iterations, result.iterations));
  }
  result.calibration = problem.At(x);
  result.simulations = problem.simulations();
  DTSIM_ASSIGN_OR_RETURN(Rows rows, SimulateEntries(points.entries(), AllEntries(points),
                                                    &result.calibration, options.threads));
  result.calibrated = MergeReports({ValidationReport{.rows = std::move(rows)}});
  result.calibration.bands = ErrorBands(result.calibrated.rows);
  for (const CategoryAccuracy& category : result.calibrated.categories) {
    result.calibration.residuals.push_back(
        {.category = category.category,
         .points = category.points,
         .mean_absolute_percentage_error = category.mean_absolute_percentage_error,
         .mean_error = category.mean_error});
  }
  return result;
}

Expected<std::vector<HeldOutCategory>> LeaveOneCategoryOut(const CalibrationPoints& points,
                                                           const FitOptions& options,
                                                           const FitResult& full) {
  auto find = [](const ValidationReport& report, const std::string& name) {
    auto same = [&](const CategoryAccuracy& c) { return c.category == name; };
    const auto it = std::find_if(report.categories.begin(), report.categories.end(), same);
    return it == report.categories.end() ? CategoryAccuracy{} : *it;
  };
  std::vector<HeldOutCategory> table;
  for (const CategoryAccuracy& category : points.uncalibrated().categories) {
    FitOptions held_out = options;
    held_out.exclude_categories.push_back(category.category);
    held_out.constants_path.clear();  // a constant left with one point is skipped, not an error
    DTSIM_ASSIGN_OR_RETURN(const FitResult fit, FitCalibration(points, held_out));
    // FitCalibration simulated every point under the held-out fit; read the category's rows.
    const CategoryAccuracy predicted = find(fit.calibrated, category.category);
    const CategoryAccuracy fitted = find(full.calibrated, category.category);
    HeldOutCategory row{.category = category.category,
                        .points = category.points,
                        .uncalibrated_mape = category.mean_absolute_percentage_error,
                        .uncalibrated_mean_error = category.mean_error,
                        .held_out_mape = predicted.mean_absolute_percentage_error,
                        .held_out_mean_error = predicted.mean_error,
                        .fitted_mape = fitted.mean_absolute_percentage_error,
                        .fitted_mean_error = fitted.mean_error};
    for (const CalibrationConstant& constant : fit.calibration.constants) {
      if (!constant.profile.empty()) continue;  // the same in every fit
      row.constants.push_back(fmt::format("{}={:.4g}", constant.name.ToString(), constant.value));
    }
    table.push_back(std::move(row));
  }
  return table;
}

}  // namespace dtsim::strategies
