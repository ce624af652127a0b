// A measured training run of a measurements file (../shared/validation/calibration-points.json's
// schema: model, precision, parallel, hardware, metrics) as a dtsim simulation config, and its
// measured metric against the simulated one (`dtsim validate`, docs/validation.md gives every
// rule and assumption).
#pragma once

#include <string>
#include <vector>

#include "sim/base/json_reader.h"
#include "sim/base/status.h"
#include "strategies/calibration.h"
#include "strategies/validation.h"

namespace dtsim::strategies {

struct TrainingRunConfig {
  Json config;                       // a simulation config (docs/config.md)
  std::vector<std::string> assumed;  // what dtsim chose where the point is silent or unsure
  std::string summary;               // "TP 4 SP, PP 8 (interleaved v=12), DP 4, fp8 (delayed)"
  // What dtsim chose where the point is silent, among the memory savers a run that does not
  // fit dtsim's memory model may have used (TrainingRunConfigOf adds the cheapest that fit):
  // sequence parallelism off, no distributed optimizer, the recompute policy.
  bool sp_assumed = false;
  bool zero_assumed = false;
  bool recompute_assumed = false;
};

// The config of the point at `path`, or an error naming the field dtsim cannot read or
// express. A run ran, so when what dtsim assumed does not fit its memory model, the cheapest
// memory savers the point leaves open that make it fit are added (sequence parallelism, the
// distributed optimizer, selective then full recompute), and `assumed` says so.
Expected<TrainingRunConfig> TrainingRunConfigOf(const Json& point, const std::string& path);

// The point simulated (symmetric ranks, analytical network) and compared on its first
// absolute measured metric: iteration_time, tokens_per_sec_per_gpu, tokens_per_sec,
// throughput (tokens/s or sequences/s) or achieved_tflops_per_gpu (hardware FLOPs). A plan
// dtsim's memory model does not fit on the GPU, even with the savers TrainingRunConfigOf may
// add, is still timed, and the row says by how much. With a
// calibration its constants apply to the point's GPU.
Expected<ValidationRow> TrainingRunPoint(const Json& point, const std::string& path,
                                         const std::string& id,
                                         const Calibration* calibration = nullptr);

}  // namespace dtsim::strategies
