// `simulate`: a config in, one simulated training iteration out — the task graph built from
// the plan, run on the engine with the configured network model, and the figures a result
// reports (docs/formats/simulate-result.md).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/cost_model.h"
#include "network/cluster_model.h"
#include "sim/engine/simulator.h"
#include "sim/graph/task_times.h"
#include "strategies/collective_summary.h"
#include "strategies/config.h"
#include "strategies/diloco.h"
#include "strategies/time_to_train.h"
#include "strategies/transformer_iteration.h"
#include "traces/op_cost_table.h"

namespace dtsim::strategies {

// Where one rank's iteration went, on its compute stream (durations add up to the iteration).
struct TimeBreakdown {
  int32_t rank = 0;
  DurationNs compute;    // forward and backward ops
  DurationNs recompute;  // the recomputed forward
  DurationNs tensor;     // tensor-parallel collectives blocking the compute stream, and
                         // waits for those on the "tp" stream (SUMMA)
  DurationNs pipeline;   // waiting in pipeline receives
  DurationNs expert;     // expert-parallel all-to-alls (blocking the compute stream)
  DurationNs context;    // context parallelism: its all-to-alls (a2a) and waits for ring
                         // attention's K/V shifts on the "cp" stream (p2p)
  // Exposed data-parallel time: waiting for the gradient reduction before the optimizer step,
  // for ZeRO-3 gathers, and DeepSpeed's synchronized ZeRO-3 collectives on the compute stream.
  DurationNs data_exposed;
  DurationNs optimizer;
  DurationNs idle;  // the rest: pipeline bubble and other waits
  // Of compute and recompute: what communication kernels beside them took by holding SMs
  // (docs/models.md, "SMs shared with communication"): their time beyond their durations.
  DurationNs sm_shared;
};

// With gradient compression: one phase of the training run (docs/strategies.md).
struct PhaseResult {
  CompressionPhase phase = CompressionPhase::kCompressed;
  int64_t steps = 0;
  DurationNs iteration_time;
};

struct SimulationResult {
  std::optional<IterationGraph> iteration;  // always set in a returned result
  engine::RunSummary summary;
  graph::TaskTimes times;
  network::CommMethods methods;                // how the network model ran each communication
  std::vector<CollectiveSummary> collectives;  // summed by op, size, group and method
  std::string cost_model;
  DurationNs iteration_time;
  double samples_per_second = 0;
  double tokens_per_second = 0;
  double model_tflops_per_gpu = 0;
  double hardware_tflops_per_gpu = 0;
  double mfu = 0;  // model FLOP/s over the GPU's dense peak for the training dtype (BF16 for FP8)
  double hfu = 0;
  double mfu_fp8 = 0;                 // FP8 training: model FLOP/s over the GPU's dense FP8 peak
  std::vector<TimeBreakdown> stages;  // the first rank of each pipeline stage
  // Layers per stage (over its chunks) when not uniform (given, derived with the embedding
  // or loss counted as layers, or balanced); empty when uniform.
  std::vector<int> stage_layers;
  // Compressing with a warm-up: the full-precision warm-up and the compressed phase (the one
  // the rest of the result describes), and the iteration time averaged over the run. Without:
  // no phases, and the average is the iteration time.
  std::vector<PhaseResult> phases;
  DurationNs average_iteration_time;
  // DiLoCo: the rest of the result is one replica's inner step (its graph, breakdown, memory);
  // the throughput is the whole job's batch over that step, and average_iteration_time the
  // run's average with the outer synchronizations.
  std::optional<DilocoResult> diloco;
  // The whole training run, when the config has a "time_to_train" section.
  std::optional<TimeToTrain> time_to_train;
  // What the result cannot show (symmetric ranks with skewed routing, …).
  std::vector<std::string> warnings;
  double build_seconds = 0;
  double simulate_seconds = 0;
};

// The config's op cost model: its profile's table (when it has one) and the model over it.
struct ConfigCostModel {
  std::unique_ptr<traces::OpCostTable> table;
  std::unique_ptr<models::OpCostModel> model;  // prices from `table`; safe to share by threads
};
Expected<ConfigCostModel> LoadCostModel(const SimulationConfig& config);

Expected<SimulationResult> Simulate(const ResolvedConfig& config);
// With a cost model loaded once for many configs of the same GPU and profile (`dtsim search`).
Expected<SimulationResult> Simulate(const ResolvedConfig& config, const models::OpCostModel& cost);

// Every distinct op signature the config's iteration prices (both phases with a compression
// warm-up), through the config's cost model: what a GPU must measure for `simulate` to price
// the plan from measurements alone.
Expected<std::vector<models::RecordingCostModel::Recorded>> PricedOps(const ResolvedConfig& config);

}  // namespace dtsim::strategies
