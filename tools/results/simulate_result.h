// The result of one simulation (docs/formats/simulate-result.md): written by
// `dtsim simulate -o` and inside every point of a sweep; read back by `dtsim report`.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/file_format.h"
#include "sim/base/status.h"
#include "strategies/simulate.h"

namespace dtsim::results {

// 1.1 added "precision" and "fp8_recipe" to the plan, "mfu_fp8" (0 without FP8) and each
// stage's "fp8_weights_bytes"; 1.2 "context" and "context_comm" to the plan and each stage's
// "cp_exposed_ns"; 1.3 "collectives" (every distinct communication and how the network model
// ran it); 1.4 "recompute_every", "framework" and "param_precision" in the plan where they
// apply, each stage's memory as its composition at the peak (gradients that exist then), and
// its "runtime_bytes" (the CUDA context, in the total); 1.5 "framework_version" in the plan
// (DeepSpeed's release), "input.calibration" (its source and the constants it set) and
// "error_band" (the calibration's error over its measured runs on this GPU and framework) where
// they apply; 1.6 "param_precision" "fp8" (FP8 parameters), "grad_precision",
// "master_precision", "moment_precision" and "recompute_modules" in the plan where they are not
// the defaults; 1.7 "virtual_stages" in the plan and "provenance"; 1.8 each stage's
// "nccl_bytes" (NCCL's buffers for the rank's communicators, in the total); 1.9 the first
// stage's "allocator_reserve_bytes" where the caching allocator's reserve is modelled (in the
// total); 1.10 each stage's "sm_shared_ns" (of compute and recompute: what communication
// kernels took by holding SMs), which a reader takes as 0 when absent; 1.11 "time_to_train"
// where the config has that section; 1.12 "diloco" where the config has that section, and
// "time_to_train"'s "unit".
inline constexpr FileFormat kSimulateResultFormat{"dtsim.simulate_result", 1, 12,
                                                  "not a simulation result"};

OrderedJson SimulateResultJson(const strategies::SimulationConfig& config,
                               const strategies::SimulationResult& result);

// The columns of a stage's time breakdown in every CSV that has them (the sweep's, the
// simulate result's), in seconds, and the breakdown's parts in that order.
inline constexpr std::string_view kBreakdownCsvColumns =
    "compute_s,recompute_s,tp_exposed_s,ep_exposed_s,cp_exposed_s,pp_wait_s,dp_exposed_s,"
    "optimizer_s,idle_s";
std::array<DurationNs, 9> BreakdownCsvParts(const strategies::TimeBreakdown& b);

// The CSV beside a result FILE.json (FILE.json.gz): FILE.csv; any other name gets ".csv" added.
std::string CsvPathBeside(const std::string& result_path);

// One row per pipeline stage: its time by category and its memory at the peak, with the
// iteration (docs/formats/simulate-result.md, "CSV"); written atomically.
Status WriteSimulateCsv(const std::string& path, const strategies::SimulationConfig& config,
                        const strategies::SimulationResult& result);

// What a reader gets back: the inputs that name the run and the figures `dtsim report` plots.
struct SimulateResultRecord {
  std::string config, model, gpu, cluster, network_model, cost_model, compression;
  int64_t nodes = 0;
  int64_t gpus_per_node = 0;
  DurationNs iteration_time;
  DurationNs average_iteration_time;  // over the compression phases (0 without compression)
  double samples_per_second = 0;
  double tokens_per_second = 0;
  double mfu = 0;
  double mfu_fp8 = 0;  // 0 unless FP8
  double hfu = 0;
  std::vector<strategies::TimeBreakdown> stage_times;  // on each stage's first rank
  std::vector<models::MemoryBreakdown> stage_memory;   // parameter_count is not written
  std::vector<std::string> warnings;
  uint64_t fingerprint = 0;
  std::optional<double> time_to_train_s;  // the run's wall clock, where the result has one
};

// Reads a simulation result (a whole file, or a sweep point's "result" at `path`); errors name
// the JSON path and the value.
Expected<SimulateResultRecord> SimulateResultFromJson(const Json& document,
                                                      const std::string& path = "");

}  // namespace dtsim::results
