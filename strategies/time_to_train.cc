#include "strategies/time_to_train.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string_view>

#include "models/parameters.h"
#include "sim/base/check.h"
#include "sim/base/quantity.h"
#include "sim/base/strings.h"

namespace dtsim::strategies {
namespace {

constexpr double kSecondsPerHour = 3600;
// Past 10^18 tokens (a million times today's largest runs) a budget is a typo.
constexpr double kMostTokens = 1e18;

// An optional number above 0 (at least 0 with `allow_zero`) and at most `max` into `out`:
// whether the key was there.
Expected<bool> ReadPositive(JsonObjectReader& reader, std::string_view key, double max, double& out,
                            bool allow_zero = false) {
  reader.Allow(key);
  if (!reader.Has(key)) return false;
  DTSIM_ASSIGN_OR_RETURN(out, reader.Number(key));
  const bool low = allow_zero ? out < 0 : out <= 0;
  if (!std::isfinite(out) || low || out > max) {
    return Error(
        fmt::format("must be {} and at most {:g}", allow_zero ? "at least 0" : "above 0", max),
        JsonChildPath(reader.path(), key), JsonValueForError(*reader.Find(key)));
  }
  return true;
}

Expected<ScalingLaw> LawFromJson(const Json& value, const std::string& path) {
  if (value.is_string()) {
    const std::string name = value.get<std::string>();
    if (name == "chinchilla") return ChinchillaLaw();
    if (name == "chinchilla-replication") return ChinchillaReplicationLaw();
    return Error(
        "unknown scaling law; expected \"chinchilla\", \"chinchilla-replication\" or an object "
        "{\"E\", \"A\", \"B\", \"alpha\", \"beta\"}",
        path, JsonValueForError(value));
  }
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, path));
  ScalingLaw law{.name = "custom"};
  const std::array<std::pair<std::string_view, double*>, 5> fields = {
      {{"E", &law.irreducible},
       {"A", &law.model_coefficient},
       {"B", &law.data_coefficient},
       {"alpha", &law.model_exponent},
       {"beta", &law.data_exponent}}};
  for (const auto& [key, out] : fields) {
    DTSIM_ASSIGN_OR_RETURN(const bool present,
                           ReadPositive(reader, key, 1e12, *out, /*allow_zero=*/key == "E"));
    if (!present) return Error("missing required field", JsonChildPath(path, key));
  }
  DTSIM_RETURN_IF_ERROR(reader.Finish());
  return law;
}

Expected<ReliabilityConfig> ReliabilityFromJson(const Json& value, const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, path));
  ReliabilityConfig config;
  double failures = 0;
  DTSIM_ASSIGN_OR_RETURN(const bool failures_given,
                         ReadPositive(reader, "failures_per_gpu_hour", 1, failures,
                                      /*allow_zero=*/true));
  if (failures_given) config.failures_per_gpu_hour = failures;
  DTSIM_ASSIGN_OR_RETURN(config.restart, reader.Duration("restart"));
  DTSIM_ASSIGN_OR_RETURN(config.checkpoint_write, reader.Rate("checkpoint_write"));
  config.checkpoint_read = config.checkpoint_write;
  if (reader.Has("checkpoint_read")) {
    DTSIM_ASSIGN_OR_RETURN(config.checkpoint_read, reader.Rate("checkpoint_read"));
  }
  for (const auto& [key, rate] : {std::pair{"checkpoint_write", config.checkpoint_write},
                                  std::pair{"checkpoint_read", config.checkpoint_read}}) {
    const Json* given = reader.Find(key);
    if (rate.bits_per_second() == 0 && given != nullptr) {
      return Error("must be above 0", JsonChildPath(path, key), JsonValueForError(*given));
    }
  }
  DTSIM_RETURN_IF_ERROR(reader.ReadOptional("async_save", config.async_save));
  if (reader.Has("checkpoint_interval")) {
    DTSIM_ASSIGN_OR_RETURN(const DurationNs interval, reader.Duration("checkpoint_interval"));
    if (interval.ns() == 0) {
      return Error("must be above 0", JsonChildPath(path, "checkpoint_interval"),
                   JsonValueForError(*reader.Find("checkpoint_interval")));
    }
    config.interval = interval;
  }
  DTSIM_RETURN_IF_ERROR(reader.Finish());
  return config;
}

Status ReadBudget(JsonObjectReader& reader, TimeToTrainConfig& config) {
  using Budget = TimeToTrainConfig::Budget;
  DTSIM_ASSIGN_OR_RETURN(const bool tokens,
                         ReadPositive(reader, "tokens", kMostTokens, config.tokens));
  DTSIM_ASSIGN_OR_RETURN(const bool per_parameter, ReadPositive(reader, "tokens_per_parameter", 1e9,
                                                                config.tokens_per_parameter));
  DTSIM_ASSIGN_OR_RETURN(const bool loss,
                         ReadPositive(reader, "target_loss", 1e6, config.target_loss));
  DTSIM_ASSIGN_OR_RETURN(const bool samples,
                         ReadPositive(reader, "samples", kMostTokens, config.samples));
  const int budgets = static_cast<int>(tokens) + static_cast<int>(per_parameter) +
                      static_cast<int>(loss) + static_cast<int>(samples);
  config.budget = loss            ? Budget::kTargetLoss
                  : per_parameter ? Budget::kTokensPerParameter
                  : samples       ? Budget::kSamples
                                  : Budget::kTokens;
  if (budgets != 1) {
    return Error(budgets == 0 ? "missing the token budget: give one of \"tokens\", "
                                "\"tokens_per_parameter\", \"target_loss\" or \"samples\""
                              : "give one budget: \"tokens\", \"tokens_per_parameter\", "
                                "\"target_loss\" or \"samples\", not several",
                 reader.path());
  }
  if (const Json* law = reader.Find("scaling_law")) {
    const std::string path = JsonChildPath(reader.path(), "scaling_law");
    if (!loss) return Error("a scaling law sets the tokens of a \"target_loss\" only", path);
    DTSIM_ASSIGN_OR_RETURN(config.law, LawFromJson(*law, path));
  }
  return Status::Ok();
}

// The tokens (samples, for a model without a sequence) the budget asks for at the reference
// batch, and how it was set.
Expected<double> BudgetTokens(const TimeToTrainConfig& config, const models::ModelSpec& model,
                              int64_t sequence, std::string& how) {
  using Budget = TimeToTrainConfig::Budget;
  if (config.budget == Budget::kSamples) {
    how = sequence > 0
              ? fmt::format("{} samples of {} tokens", FormatAmount(config.samples), sequence)
              : "given";
    const double units = config.samples * static_cast<double>(std::max<int64_t>(sequence, 1));
    if (!(units <= kMostTokens)) {
      return Error(fmt::format("{:.3g} {}, past the {:g} dtsim takes", units,
                               sequence > 0 ? "tokens" : "samples", kMostTokens),
                   "time_to_train.samples", fmt::format("{:g}", config.samples));
    }
    return units;
  }
  if (sequence <= 0) {
    return Error(
        "this model has no sequence to count tokens of: give the samples to train "
        "(\"samples\": images, or a recommendation model's samples)",
        "time_to_train");
  }
  const models::ParameterCount count = models::CountParameters(model);
  const auto parameters = static_cast<double>(count.total);
  switch (config.budget) {
    case Budget::kTokens:
      how = "given";
      return config.tokens;
    case Budget::kTokensPerParameter:
      how = fmt::format("{:g} tokens a parameter of {}", config.tokens_per_parameter,
                        FormatAmount(parameters));
      return config.tokens_per_parameter * parameters;
    case Budget::kTargetLoss:
    case Budget::kSamples:
      break;
  }
  if (count.active != count.total) {
    return Error(
        "a scaling law's target loss is for dense models (the laws were fitted on them); give "
        "this mixture of experts \"tokens\" or \"tokens_per_parameter\"",
        "time_to_train.target_loss", fmt::format("{:g}", config.target_loss));
  }
  const ScalingLaw& law = config.law;
  // L = E + A / N^α + B / D^β  ⇒  D = (B / (L − E − A / N^α))^(1/β).
  const double floor =
      law.irreducible + law.model_coefficient / std::pow(parameters, law.model_exponent);
  if (config.target_loss <= floor) {
    return Error(fmt::format("the {} law puts this model's loss above {:.4f} however long it "
                             "trains (E + A / N^alpha at N = {:.4g} parameters)",
                             law.name, floor, parameters),
                 "time_to_train.target_loss", fmt::format("{:g}", config.target_loss));
  }
  const double tokens =
      std::pow(law.data_coefficient / (config.target_loss - floor), 1 / law.data_exponent);
  how = fmt::format("loss {:g} by the {} law", config.target_loss, law.name);
  if (!(tokens <= kMostTokens)) {
    return Error(fmt::format("the {} law needs {:.3g} tokens for it, past the {:g} dtsim takes",
                             law.name, tokens, kMostTokens),
                 "time_to_train.target_loss", fmt::format("{:g}", config.target_loss));
  }
  return tokens;
}

// Training time between checkpoints, from the period p = interval + blocking save: the p that
// maximizes the effective training time ratio (1 − δ/p) · (1 − (p/2 + lag + R) / M) is
// sqrt(2 δ (M − lag − R)) (docs/time_to_train.md derives it).
Expected<ReliabilityEstimate> EstimateReliability(const ReliabilityConfig& config,
                                                  const TrainingRun& run,
                                                  std::vector<std::string>& assumptions) {
  ReliabilityEstimate r;
  const auto bytes = static_cast<double>(run.checkpoint_bytes);
  r.save_write_s = bytes / config.checkpoint_write.bytes_per_second();
  r.save_blocking_s = r.save_write_s;
  double lag = 0;
  if (config.async_save) {
    if (run.host_bandwidth.bits_per_second() == 0) {
      return Error(
          "an async save copies each GPU's share to host memory at the GPU's host_bandwidth, "
          "which this GPU does not give (cluster.gpu.host_bandwidth)",
          "time_to_train.reliability.async_save", "true");
    }
    // Each GPU copies its share to host memory; the storage write follows in the background,
    // and a failure before it ends falls back to the checkpoint before.
    r.save_blocking_s =
        bytes / static_cast<double>(run.gpus) / run.host_bandwidth.bytes_per_second();
    lag = r.save_write_s;
  }
  r.restart_s =
      config.restart.ToSecondsDouble() + bytes / config.checkpoint_read.bytes_per_second();
  const double rate = config.failures_per_gpu_hour.value_or(kLlama3FailuresPerGpuHour) *
                      static_cast<double>(run.gpus);
  if (!config.failures_per_gpu_hour) {
    assumptions.push_back(
        "failures at Llama 3 405B's rate: 419 unexpected interruptions in 54 days on 16,384 "
        "H100s (1.97e-5 per GPU-hour)");
  }
  if (rate <= 0) {
    r.mtbf_s = std::numeric_limits<double>::infinity();
    r.interval_s = config.interval ? config.interval->ToSecondsDouble() : 0;
    r.interval_optimal = !config.interval;
    const double period = r.interval_s + r.save_blocking_s;
    r.effective_training_time_ratio = r.interval_s > 0 ? r.interval_s / period : 1;
    return r;
  }
  r.mtbf_s = kSecondsPerHour / rate;
  const double usable = r.mtbf_s - lag - r.restart_s;
  double period = 0;
  if (config.interval) {
    period = config.interval->ToSecondsDouble() + r.save_blocking_s;
    r.interval_optimal = false;
  } else if (usable > 0) {
    period = std::sqrt(2 * r.save_blocking_s * usable);
  }
  if (config.async_save && period < r.save_write_s + r.save_blocking_s) {
    // A save cannot start before the last one is written.
    period = r.save_write_s + r.save_blocking_s;
    assumptions.push_back(
        fmt::format("checkpoints no closer than their {:.0f} s write", r.save_write_s));
  }
  r.interval_s = period - r.save_blocking_s;
  r.lost_per_failure_s = period / 2 + lag;
  r.effective_training_time_ratio =
      (r.interval_s / period) * (1 - (r.lost_per_failure_s + r.restart_s) / r.mtbf_s);
  if (!(r.interval_s > 0) || !(r.effective_training_time_ratio > 0)) {
    return Error(
        fmt::format("the run never finishes: with a failure every {} on average it loses {} "
                    "to each (restart, checkpoint load and lost work), and saving takes {}",
                    FormatSeconds(r.mtbf_s), FormatSeconds(r.lost_per_failure_s + r.restart_s),
                    FormatSeconds(r.save_blocking_s)),
        "time_to_train.reliability");
  }
  return r;
}

}  // namespace

std::string FormatSeconds(double seconds) {
  if (!std::isfinite(seconds)) return "never";
  if (seconds < 120) return fmt::format("{:.3g} s", seconds);
  if (seconds < 2 * kSecondsPerHour) return fmt::format("{:.1f} min", seconds / 60);
  if (seconds < 48 * kSecondsPerHour) return fmt::format("{:.1f} h", seconds / kSecondsPerHour);
  return fmt::format("{:.1f} days", seconds / (24 * kSecondsPerHour));
}

std::string FormatAmount(double amount) {
  constexpr std::array<std::pair<double, std::string_view>, 4> kScales = {
      {{1e12, "T"}, {1e9, "B"}, {1e6, "M"}, {1e3, "k"}}};
  for (const auto& [scale, suffix] : kScales) {
    if (amount >= scale) return fmt::format("{:.1f}{}", amount / scale, suffix);
  }
  return fmt::format("{:.4g}", amount);
}

Expected<TokenBudget> TokensToTrain(const TimeToTrainConfig& config, const models::ModelSpec& model,
                                    int64_t global_batch, int64_t sequence) {
  DTSIM_CHECK(global_batch > 0 && sequence >= 0, "TokensToTrain needs a batch");
  TokenBudget b;
  if (sequence <= 0) b.unit = "samples";
  DTSIM_ASSIGN_OR_RETURN(b.budget_tokens, BudgetTokens(config, model, sequence, b.how));
  const int64_t batch_tokens = global_batch * std::max<int64_t>(sequence, 1);
  const auto batch = static_cast<double>(batch_tokens);
  if (config.critical_batch_tokens && sequence <= 0) {
    return Error("the critical batch is in tokens; this model has no sequence",
                 "time_to_train.critical_batch_tokens",
                 fmt::format("{:g}", *config.critical_batch_tokens));
  }
  if (config.critical_batch_tokens) {
    // McCandlish et al. 2018: to reach a loss, E = E_min (1 + B / B_noise) examples.
    const double critical = *config.critical_batch_tokens;
    b.batch_factor = (1 + batch / critical) / (1 + config.reference_batch_tokens / critical);
  }
  b.tokens = b.budget_tokens * b.batch_factor;
  const double iterations = std::ceil(b.tokens / batch);
  if (!(iterations <= 1e15)) {
    return Error(fmt::format("{:.3g} iterations of {} {}: past the 10^15 dtsim takes", iterations,
                             batch_tokens, b.unit),
                 "time_to_train");
  }
  b.iterations = static_cast<int64_t>(iterations);
  return b;
}

Expected<TimeToTrain> EstimateTimeToTrain(const TimeToTrainConfig& config, const TrainingRun& run) {
  DTSIM_CHECK(run.model != nullptr && run.global_batch > 0 && run.gpus > 0,
              "EstimateTimeToTrain needs a model, a batch and GPUs");
  TimeToTrain t;
  DTSIM_ASSIGN_OR_RETURN(t.budget,
                         TokensToTrain(config, *run.model, run.global_batch, run.sequence));
  if (!config.critical_batch_tokens) {
    t.assumptions.push_back(
        run.sequence > 0
            ? "the budget's tokens at any batch (no critical_batch_tokens: no large-batch penalty)"
            : "the budget's samples at any batch (no large-batch penalty: a critical batch is in "
              "tokens, which this model has none of)");
  }
  const int64_t iterations = t.budget.iterations;
  const int64_t warmup = std::min(iterations, run.warmup_steps);
  t.compute_s = static_cast<double>(warmup) * run.warmup_time.ToSecondsDouble() +
                static_cast<double>(iterations - warmup) * run.iteration_time.ToSecondsDouble();
  t.wall_s = t.compute_s;
  if (config.reliability) {
    DTSIM_ASSIGN_OR_RETURN(t.reliability,
                           EstimateReliability(*config.reliability, run, t.assumptions));
    ReliabilityEstimate& r = *t.reliability;
    t.wall_s = t.compute_s / r.effective_training_time_ratio;
    r.expected_failures = std::isfinite(r.mtbf_s) ? t.wall_s / r.mtbf_s : 0;
    r.checkpoints = r.interval_s > 0 ? std::floor(t.compute_s / r.interval_s) : 0;
  } else {
    t.assumptions.push_back("nothing fails (no reliability section)");
  }
  t.gpu_hours = t.wall_s * static_cast<double>(run.gpus) / kSecondsPerHour;
  if (config.gpu_hour_cost) t.cost = t.gpu_hours * *config.gpu_hour_cost;
  return t;
}

double ScalingLaw::Loss(double parameters, double tokens) const {
  return irreducible + model_coefficient / std::pow(parameters, model_exponent) +
         data_coefficient / std::pow(tokens, data_exponent);
}

ScalingLaw ChinchillaLaw() { return {"chinchilla", 1.69, 406.4, 410.7, 0.34, 0.28}; }

ScalingLaw ChinchillaReplicationLaw() {
  return {"chinchilla-replication", 1.8172, 482.01, 2085.43, 0.3478, 0.3658};
}

Expected<TimeToTrainConfig> TimeToTrainFromJson(const Json& value, const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, path));
  TimeToTrainConfig config;
  DTSIM_RETURN_IF_ERROR(ReadBudget(reader, config));
  double critical = 0;
  DTSIM_ASSIGN_OR_RETURN(const bool has_critical,
                         ReadPositive(reader, "critical_batch_tokens", kMostTokens, critical));
  DTSIM_ASSIGN_OR_RETURN(
      const bool has_reference,
      ReadPositive(reader, "reference_batch_tokens", kMostTokens, config.reference_batch_tokens));
  if (has_critical != has_reference) {
    return Error(
        "\"critical_batch_tokens\" and \"reference_batch_tokens\" go together: the budget's "
        "tokens hold at the reference batch, and the critical batch scales them to this one",
        JsonChildPath(path, has_critical ? "reference_batch_tokens" : "critical_batch_tokens"));
  }
  if (has_critical) config.critical_batch_tokens = critical;
  if (const Json* reliability = reader.Find("reliability")) {
    DTSIM_ASSIGN_OR_RETURN(config.reliability,
                           ReliabilityFromJson(*reliability, JsonChildPath(path, "reliability")));
  }
  double cost = 0;
  DTSIM_ASSIGN_OR_RETURN(const bool has_cost,
                         ReadPositive(reader, "gpu_hour_cost", 1e9, cost, /*allow_zero=*/true));
  if (has_cost) config.gpu_hour_cost = cost;
  DTSIM_RETURN_IF_ERROR(reader.Finish());
  return config;
}

int64_t CheckpointBytes(int64_t parameters, models::Optimizer optimizer, DType param_dtype,
                        models::OptimizerState state) {
  const int64_t per_parameter =
      DTypeBytes(param_dtype) + models::OptimizerStateBytes(optimizer, param_dtype, state);
  return parameters * per_parameter;
}

}  // namespace dtsim::strategies
