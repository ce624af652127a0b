// A calibration (docs/calibration.md): named physical constants that `dtsim calibrate` fitted
// to measured training runs, each with its value, the preset's value it replaces and the points
// that fixed it, and the fit's residuals per category. A config names one with "calibration"
// (a file, or the same object inline); `dtsim validate --calibration` applies one to every
// point. File format "dtsim.calibration" 1.1 (docs/formats/calibration.md).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/gpu.h"
#include "sim/base/file_format.h"
#include "sim/base/json_reader.h"
#include "sim/base/status.h"

namespace dtsim::strategies {

inline constexpr FileFormat kCalibrationFormat{"dtsim.calibration", 1, 1, "not a calibration"};

// What a constant sets on its GPU preset ("<preset>/<field>").
enum class CalibratedField {
  kMatrixEfficiency,     // "matrix_efficiency": the GEMM curve's maximum, a fraction of peak
  kFp8MatrixEfficiency,  // "fp8_matrix_efficiency": the FP8 GEMM curve's maximum
  kMemoryEfficiency,     // "memory_efficiency": the memory-bound curve's maximum
  kLaunchOverhead,       // "launch_overhead": the fixed cost of every op, in µs
  kHostLaunchTime,       // "host_launch_time": the host's time in one CUDA call, in µs
  // The curves' fixed costs (EfficiencyCurve::ramp, µs) and flash attention's own curves, as
  // `dtsim calibrate --profile` fits them from an op-cost table (strategies/profile_fit.h).
  kMatrixRamp,                   // "matrix_ramp"
  kFp8MatrixRamp,                // "fp8_matrix_ramp"
  kAttentionEfficiency,          // "attention_efficiency": flash attention forward's maximum
  kAttentionRamp,                // "attention_ramp"
  kAttentionBackwardEfficiency,  // "attention_backward_efficiency"
  kAttentionBackwardRamp,        // "attention_backward_ramp"
};
// Whether the field is a time in µs (else a fraction of peak).
bool IsTimeField(CalibratedField field);

struct ConstantName {
  std::string gpu;  // a GPU preset
  CalibratedField field = CalibratedField::kMatrixEfficiency;

  std::string ToString() const;  // "a100-sxm4-80gb/matrix_efficiency"
};

// Errors name `path`, the value, the known presets and fields.
Expected<ConstantName> ParseConstantName(std::string_view text, const std::string& path);
std::string_view FieldName(CalibratedField field);
std::string_view FieldUnit(CalibratedField field);  // "fraction of peak", "µs"
// The physical range of the field's values: efficiencies in [0.05, 1], fixed costs per op
// 0 … 100 µs, the curves' ramps 0 … 1000 µs.
std::pair<double, double> FieldBounds(CalibratedField field);
// The field's value on `gpu` (the preset's value before any calibration).
double FieldValue(const models::GpuSpec& gpu, CalibratedField field);

struct CalibrationConstant {
  ConstantName name;
  double value = 0;
  double preset = 0;                // the preset's value the constant replaces
  std::vector<std::string> points;  // the ids of the measured points that fixed it
  // Or the op-cost tables that fixed it, and which of their ops ("81 bf16 GEMMs of
  // tools/examples/profiles/h100-sxm5-80gb.json"); empty for a constant fitted to points.
  std::string profile;
};

// How far the calibrated predictions are from the measurements of one category of points:
// mean absolute and signed percentage errors (positive: dtsim optimistic).
struct CategoryResidual {
  std::string category;
  int points = 0;
  double mean_absolute_percentage_error = 0;
  double mean_error = 0;
};

// The error band of a prediction (issue 24): how far the calibrated predictions were from the
// measured runs on one GPU under one framework — mean absolute and signed percentage errors
// over `points` runs (two or more).
struct ErrorBand {
  std::string gpu;        // a GPU preset
  std::string framework;  // "megatron", "pytorch", "deepspeed"
  int points = 0;
  double mean_absolute_percentage_error = 0;
  double mean_error = 0;  // positive: dtsim optimistic
};

struct Calibration {
  std::string source;   // the file it was read from; "" when built or given inline
  std::string command;  // the command that made it, for provenance
  std::vector<CalibrationConstant> constants;
  std::vector<CategoryResidual> residuals;
  std::vector<ErrorBand> bands;

  // The band of runs on `gpu` under `framework`, if the calibration's points had two or more.
  std::optional<ErrorBand> BandFor(std::string_view gpu, std::string_view framework) const;

  // The constants grouped by GPU preset, to apply when a preset is read.
  std::vector<models::GpuCalibration> GpuCalibrations() const;
  // The constants applied to a GPU named `gpu`: "name=value" each.
  std::vector<std::string> AppliedTo(std::string_view gpu) const;
};

// Reads a calibration object strictly (format, version, every key); errors name `path` and the
// JSON path of the bad value.
Expected<Calibration> CalibrationFromJson(const Json& value, const std::string& path);
Expected<Calibration> ReadCalibrationFile(const std::string& path);
OrderedJson CalibrationToJson(const Calibration& calibration);

}  // namespace dtsim::strategies
