// `dtsim calibrate --profile` (docs/calibration.md, "From op-cost tables"): a GPU preset's
// efficiency curves fitted to the ops measured on it — its GEMM curves (bf16 or fp16, fp8) and
// flash attention's forward and backward curves, each the maximum and the ramp that
// models::FitMatrixEfficiency and FitAttentionEfficiency recover — as calibration constants
// that name the tables and ops that fixed them.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "sim/base/status.h"
#include "strategies/calibration.h"
#include "traces/op_cost_table.h"

namespace dtsim::strategies {

// One op-cost table and the file it was read from.
struct ProfileTable {
  std::string path;
  traces::OpCostTable table;
};

struct ProfileFit {
  std::vector<CalibrationConstant> constants;
  std::vector<std::string> skipped;  // the curves no table had the ops to fix, with why
};

// Fits the curves of every GPU preset the tables were measured on (a table's "gpu" must name
// a preset; the tables of one preset are pooled and must share their timing). A curve is fitted
// from two or more ops of its kind, else listed as skipped. An `in_run` table's compute-bound
// ops ran at the power limit: its maxima are divided by the preset's power_limited_compute
// (flash attention's by attention_power_limited_compute) back to the burst curves the roofline
// slows itself. Errors name the table: not a preset, mixed timings, a fit outside (0, 1].
Expected<ProfileFit> FitProfileTables(std::span<const ProfileTable> tables);
// Reads each file (errors name it), then FitProfileTables.
Expected<ProfileFit> FitProfiles(std::span<const std::string> paths);

}  // namespace dtsim::strategies
