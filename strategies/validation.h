// Accuracy against published measurements (`dtsim validate`, docs/validation.md): every point
// of a measurements file (../shared/validation/published-points.json, calibration-points.json)
// turned into a simulation, its predicted metric against the measured one.
#pragma once

#include <array>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/base/json_reader.h"
#include "sim/base/status.h"
#include "strategies/calibration.h"

namespace dtsim::strategies {

// The shared measurements files `dtsim validate` and `dtsim calibrate` read by default
// (relative to the repository root).
inline constexpr std::array<std::string_view, 2> kSharedPointsFiles = {
    "../shared/validation/published-points.json", "../shared/validation/calibration-points.json"};

// The string at `key` of `object`, or "" when `object` is not an object or the value is absent
// or not a string: a measurements file's free-text fields, read without throwing.
std::string TextField(const Json& object, std::string_view key);

struct ValidationRow {
  std::string id;
  std::string category;
  std::string metric;  // the measured metric compared ("achieved_tflops_per_gpu", ...)
  std::string unit;
  double measured = 0;
  double predicted = 0;
  bool is_time = false;   // a duration (lower is faster), not a rate
  std::string how;        // what was simulated, and what was assumed where the point is silent
  std::string gpu;        // the GPU (preset) simulated
  std::string framework;  // training.framework simulated ("megatron", "deepspeed", ...)

  // dtsim's speed over the measured speed, − 1: positive is optimistic, whether the metric is
  // a rate (predicted / measured − 1) or a time (measured / predicted − 1).
  double Error() const { return is_time ? measured / predicted - 1 : predicted / measured - 1; }
};

// A point that gives no full configuration or absolute measurement, or that dtsim cannot
// express: why (the error, naming the point's field).
struct UnsimulatedPoint {
  std::string id;
  std::string category;
  std::string reason;
};

struct CategoryAccuracy {
  std::string category;
  int points = 0;
  double mean_absolute_percentage_error = 0;  // percent
  double mean_error = 0;                      // signed, percent: positive is optimistic
};

struct ValidationReport {
  std::vector<ValidationRow> rows;
  std::vector<UnsimulatedPoint> unsimulated;
  std::vector<CategoryAccuracy> categories;   // in order of first appearance
  double mean_absolute_percentage_error = 0;  // over every row, in percent
};

struct LayerTimes {
  double forward_seconds = 0;
  double backward_seconds = 0;  // with what recompute re-runs
  std::string how;              // what was simulated, for the report
};

// One transformer layer of a layer-microbenchmark point (Korthikanti et al. Table 4's setting:
// one DGX A100, TP t, fp16, the point's recompute and sequence parallelism) as the simulator
// lays out a micro-batch on one rank: the search bound's pass times (strategies/pass_times.h)
// — its ops priced by the config's cost model, its tensor-parallel collectives analytically
// over the node, the re-gathers and the async input-gradient reductions beside their GEMMs.
// Errors name the point's field.
Expected<LayerTimes> PredictLayerTimes(const Json& point, const std::string& path,
                                       const Calibration* calibration);

// Whether a point of `category` is a measured training run (TrainingRunPoint), not one of the
// two categories with a simulation of their own below.
bool IsTrainingRunCategory(std::string_view category);

// Points of category "megatron_weak_scaling" are simulated whole (symmetric ranks, analytical
// network, full recompute as the paper's FLOP formula assumes, micro-batch 1 where the
// source gives none) and compared on achieved TFLOP/s per GPU (hardware FLOPs, as the paper
// counts); "layer_microbenchmark" points are one layer's forward + backward at their tensor-
// parallel size; any other point is a measured training run (strategies/training_run_point.h).
// A point that cannot be simulated is listed in `unsimulated` with the reason; a file that is
// not a measurements file is an error. A calibration, when given, applies to every point's GPU.
Expected<ValidationReport> Validate(const Json& points, const std::string& source,
                                    const Calibration* calibration = nullptr);

// The points of a measurements file, each to simulate on its own (`dtsim calibrate` simulates
// them again and again under changing constants).
struct MeasuredPoint {
  const Json* point = nullptr;  // into the file's JSON, which must outlive it
  std::string path;             // "points[3]"
  std::string id;
  std::string category;
};
Expected<std::vector<MeasuredPoint>> MeasuredPoints(const Json& points, const std::string& source);
// One point simulated and compared, the error naming `source` and the point's field.
Expected<ValidationRow> ValidatePoint(const MeasuredPoint& point, const std::string& source,
                                      const Calibration* calibration = nullptr);

// Points files given together (`documents`: each file's JSON and path), before any is
// simulated: a point id in two of them, or twice in one, would count that run twice — in a
// MAPE, and with double weight in dtsim calibrate's fit. The error names both places. Points
// without an id are not compared.
Status CheckUniquePointIds(std::span<const std::pair<const Json*, std::string>> documents);

// The rows of several reports together, the accuracy per category and overall recomputed.
ValidationReport MergeReports(std::vector<ValidationReport> reports);

}  // namespace dtsim::strategies
