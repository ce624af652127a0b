// Time to train (docs/time_to_train.md): from one simulated iteration to the whole training
// run — how many tokens the run needs (given, per parameter, or from a scaling law's target
// loss), how a global batch beyond the critical batch raises that (McCandlish et al. 2018),
// and what failures cost a synchronous job: restarts, the work lost since the last
// checkpoint, and the checkpoints themselves at the interval that minimizes the loss (Young
// 1974 and Daly 2006, in the first-order form derived in the doc).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "models/model_spec.h"
#include "models/ops.h"
#include "sim/base/json_reader.h"
#include "sim/base/status.h"
#include "sim/base/time.h"
#include "sim/base/units.h"

namespace dtsim::strategies {

// L(N, D) = E + A / N^alpha + B / D^beta, N the model's parameters, D its training tokens.
struct ScalingLaw {
  std::string name;  // "chinchilla", "chinchilla-replication" or "custom"
  double irreducible = 0;
  double model_coefficient = 0;
  double data_coefficient = 0;
  double model_exponent = 0;
  double data_exponent = 0;

  double Loss(double parameters, double tokens) const;
};

// Hoffmann et al. 2022 (Chinchilla), Approach 3: E 1.69, A 406.4, B 410.7, α 0.34, β 0.28.
ScalingLaw ChinchillaLaw();
// Besiroglu et al. 2024, "Chinchilla Scaling: A replication attempt": E 1.8172,
// A 482.01, B 2085.43, α 0.3478, β 0.3658.
ScalingLaw ChinchillaReplicationLaw();

// Llama 3 405B's pre-training: 419 unexpected interruptions in a 54-day snapshot on 16,384
// H100s (Dubey et al. 2024, §3.3.4, Table 5), 419 / (16,384 · 54 · 24) = 1.973e-5 a GPU-hour.
inline constexpr double kLlama3FailuresPerGpuHour = 419.0 / (16384.0 * 54.0 * 24.0);

// What fails and what recovery costs ("time_to_train.reliability").
struct ReliabilityConfig {
  // Unexpected interruptions per GPU-hour of the job; absent: kLlama3FailuresPerGpuHour.
  std::optional<double> failures_per_gpu_hour;
  DurationNs restart;          // detection, rescheduling and start-up, before loading
  Bandwidth checkpoint_write;  // the storage's aggregate write rate, for the whole job
  Bandwidth checkpoint_read;   // and read rate (default: the write rate)
  // Saved asynchronously (Megatron-Core's --async-save, torch.distributed.checkpoint's
  // async_save): training waits only for the copy to host memory; the write follows.
  bool async_save = false;
  std::optional<DurationNs> interval;  // of training between checkpoints; default: the optimum
};

// The config's "time_to_train" section (docs/config.md). Exactly one budget: tokens (given, per
// parameter, or from a target loss) for a model of sequences, or samples — sequences, images,
// DLRM samples — for any model (the one budget a model without a sequence takes).
struct TimeToTrainConfig {
  enum class Budget { kTokens, kTokensPerParameter, kTargetLoss, kSamples };
  Budget budget = Budget::kTokens;
  double tokens = 0;
  double samples = 0;
  double tokens_per_parameter = 0;
  double target_loss = 0;
  ScalingLaw law = ChinchillaLaw();
  // McCandlish et al.'s noise scale in tokens, and the global batch (tokens) the budget holds
  // at: a batch B needs D · (1 + B / critical) / (1 + reference / critical) tokens.
  std::optional<double> critical_batch_tokens;
  double reference_batch_tokens = 0;
  std::optional<ReliabilityConfig> reliability;
  std::optional<double> gpu_hour_cost;  // in any currency, per GPU-hour
};

Expected<TimeToTrainConfig> TimeToTrainFromJson(const Json& value, const std::string& path);

// What the run is: its model, its batch, its GPUs, what a checkpoint holds, and the time of
// its iterations (with a compression warm-up, the warm-up's first).
struct TrainingRun {
  const models::ModelSpec* model = nullptr;
  int64_t global_batch = 0;  // samples a step
  int64_t sequence = 0;      // tokens a sample; 0: a model without a sequence (counts samples)
  int64_t gpus = 0;
  int64_t checkpoint_bytes = 0;  // weights and optimizer state of the whole model
  Bandwidth host_bandwidth;      // one GPU to host memory (async saves)
  DurationNs iteration_time;
  int64_t warmup_steps = 0;  // compression: full-precision steps first, at warmup_time
  DurationNs warmup_time;
};

struct ReliabilityEstimate {
  double mtbf_s = 0;              // the job's: 1 / (failures per GPU-hour · GPUs)
  double save_blocking_s = 0;     // training stopped per checkpoint
  double save_write_s = 0;        // the write to storage (async: in the background)
  double restart_s = 0;           // a failure's restart and checkpoint load
  double interval_s = 0;          // training between checkpoints
  bool interval_optimal = true;   // the optimum (or the background write's floor), not given
  double lost_per_failure_s = 0;  // expected: half a period, and the write not yet finished
  double effective_training_time_ratio = 0;
  double expected_failures = 0;
  double checkpoints = 0;
};

// The tokens and iterations a run of `global_batch` samples of `sequence` tokens a step needs:
// the budget and the batch's correction, nothing simulated (launch flags write the iterations:
// --train-iters). A model without a sequence (`sequence` 0: ResNet, DLRM) counts samples
// instead, in the same fields (`unit` "samples"), and takes only a samples budget.
struct TokenBudget {
  std::string how;  // how the budget was set, for the report
  std::string unit = "tokens";
  double budget_tokens = 0;  // at the reference batch
  double batch_factor = 1;
  double tokens = 0;  // at this batch
  int64_t iterations = 0;
};
Expected<TokenBudget> TokensToTrain(const TimeToTrainConfig& config, const models::ModelSpec& model,
                                    int64_t global_batch, int64_t sequence);

struct TimeToTrain {
  TokenBudget budget;    // the tokens and iterations at this batch
  double compute_s = 0;  // iterations back to back, nothing failing
  std::optional<ReliabilityEstimate> reliability;
  double wall_s = 0;  // compute_s / the effective training time ratio
  double gpu_hours = 0;
  std::optional<double> cost;
  std::vector<std::string> assumptions;
};

// Errors name the time_to_train field: a loss the law cannot reach with this model, a law for
// a MoE model, a run that fails faster than it restarts.
Expected<TimeToTrain> EstimateTimeToTrain(const TimeToTrainConfig& config, const TrainingRun& run);

// A span of seconds as a reader says it: "0.0213 s", "42 s", "12.5 min", "3.1 h", "61.2 days".
std::string FormatSeconds(double seconds);
// A large count as a reader says it: "15.6T", "28.4M", "929.8k", "512".
std::string FormatAmount(double amount);

// The checkpoint of a model: its weights as stored and the optimizer's state (master copy,
// moments), each once over the job (a distributed checkpoint saves every shard once).
int64_t CheckpointBytes(int64_t parameters, models::Optimizer optimizer, DType param_dtype,
                        models::OptimizerState state);

}  // namespace dtsim::strategies
