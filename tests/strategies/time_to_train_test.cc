// Time to train (strategies/time_to_train.h, docs/time_to_train.md): the token budget, the
// large-batch correction and the reliability model, each derived in a comment.
#include "strategies/time_to_train.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "models/parameters.h"
#include "tests/strategies/simulate_helpers.h"

namespace dtsim::strategies {
namespace {

using ::testing::HasSubstr;

models::ModelSpec Model(const char* preset) {
  Expected<models::ModelSpec> model = models::ModelFromJson(Json(preset), "model");
  EXPECT_TRUE(model.ok()) << model.error().ToString();
  return *model;
}

TimeToTrainConfig Read(const Json& json) {
  Expected<TimeToTrainConfig> config = TimeToTrainFromJson(json, "time_to_train");
  EXPECT_TRUE(config.ok()) << config.error().ToString();
  return *config;
}

std::string ReadError(const Json& json) {
  Expected<TimeToTrainConfig> config = TimeToTrainFromJson(json, "time_to_train");
  EXPECT_FALSE(config.ok());
  return config.ok() ? "" : config.error().ToString();
}

// 1,000 GPUs, 4 Mi tokens an iteration of 2 s, a checkpoint of 10^12 bytes.
TrainingRun RunOf(const models::ModelSpec& model) {
  return TrainingRun{.model = &model,
                     .global_batch = 1024,  // of 4,096 tokens: 4 Mi
                     .sequence = 4096,
                     .gpus = 1000,
                     .checkpoint_bytes = 1000000000000,
                     .host_bandwidth = Bandwidth::BytesPerSecond(50000000000),
                     .iteration_time = Seconds(2)};
}

TEST(TimeToTrainTest, ChinchillaLossOfChinchilla) {
  // Chinchilla itself, 70B parameters on 1.4T tokens: 70e9^0.34 = 4,867.8 and
  // 1.4e12^0.28 = 2,517.2, so L = 1.69 + 406.4 / 4,867.8 + 410.7 / 2,517.2
  // = 1.69 + 0.08349 + 0.16316 = 1.93665.
  EXPECT_NEAR(ChinchillaLaw().Loss(70e9, 1.4e12), 1.93665, 1e-5);
  // The replication's law puts the same run at 1.8172 + 482.01 / 70e9^0.3478
  // + 2085.43 / 1.4e12^0.3658: higher irreducible loss, a larger data term.
  const double replication = ChinchillaReplicationLaw().Loss(70e9, 1.4e12);
  EXPECT_GT(replication, 1.8172);
  EXPECT_LT(replication, 2.1);
}

TEST(TimeToTrainTest, BudgetsInTokensPerParameterAndLoss) {
  const models::ModelSpec model = Model("gpt2-124m");
  const auto n = static_cast<double>(models::CountParameters(model).total);
  const TrainingRun run = RunOf(model);

  // 20 tokens a parameter: 20·N tokens, ⌈20·N / 4 Mi⌉ iterations of 2 s.
  Expected<TimeToTrain> per_parameter =
      EstimateTimeToTrain(Read({{"tokens_per_parameter", 20}}), run);
  ASSERT_TRUE(per_parameter.ok()) << per_parameter.error().ToString();
  EXPECT_DOUBLE_EQ(per_parameter->budget.tokens, 20 * n);
  EXPECT_EQ(per_parameter->budget.iterations, static_cast<int64_t>(std::ceil(20 * n / (4 << 20))));
  EXPECT_DOUBLE_EQ(per_parameter->compute_s,
                   2.0 * static_cast<double>(per_parameter->budget.iterations));
  EXPECT_DOUBLE_EQ(per_parameter->wall_s, per_parameter->compute_s);  // nothing fails
  // GPU-hours: 1,000 GPUs over the wall clock.
  EXPECT_DOUBLE_EQ(per_parameter->gpu_hours, per_parameter->wall_s * 1000 / 3600);

  // A target loss: the tokens the law needs, D = (B / (L − E − A / N^α))^(1/β), which the law
  // gives back as L.
  Expected<TimeToTrain> loss = EstimateTimeToTrain(Read({{"target_loss", 3.3}}), run);
  ASSERT_TRUE(loss.ok()) << loss.error().ToString();
  EXPECT_NEAR(ChinchillaLaw().Loss(n, loss->budget.tokens), 3.3, 1e-9);
  EXPECT_THAT(loss->budget.how, HasSubstr("chinchilla"));
  // A loss the model cannot reach: E + A / N^α is its floor however long it trains.
  const double floor = 1.69 + 406.4 / std::pow(n, 0.34);
  Expected<TimeToTrain> unreachable =
      EstimateTimeToTrain(Read({{"target_loss", floor - 0.01}}), run);
  ASSERT_FALSE(unreachable.ok());
  EXPECT_THAT(unreachable.error().ToString(), HasSubstr("time_to_train.target_loss"));
  EXPECT_THAT(unreachable.error().ToString(), HasSubstr("however long it trains"));

  // The laws are for dense models.
  const models::ModelSpec moe = Model("mixtral-8x7b");
  Expected<TimeToTrain> mixture = EstimateTimeToTrain(Read({{"target_loss", 2.0}}), RunOf(moe));
  ASSERT_FALSE(mixture.ok());
  EXPECT_THAT(mixture.error().ToString(), HasSubstr("dense models"));
}

TEST(TimeToTrainTest, LargeBatchesNeedMoreTokens) {
  const models::ModelSpec model = Model("gpt2-124m");
  // McCandlish et al.: tokens ∝ 1 + B / B_noise. A budget of 10^10 tokens at a 1 Mi-token
  // batch, critical batch 2 Mi: at the run's 4 Mi, (1 + 4/2) / (1 + 1/2) = 2× the tokens.
  Expected<TimeToTrain> t = EstimateTimeToTrain(Read({{"tokens", 1e10},
                                                      {"critical_batch_tokens", 2 << 20},
                                                      {"reference_batch_tokens", 1 << 20}}),
                                                RunOf(model));
  ASSERT_TRUE(t.ok()) << t.error().ToString();
  EXPECT_DOUBLE_EQ(t->budget.batch_factor, 2.0);
  EXPECT_DOUBLE_EQ(t->budget.tokens, 2e10);
  EXPECT_DOUBLE_EQ(t->budget.budget_tokens, 1e10);
  // At the reference batch itself, the budget as given.
  TrainingRun reference = RunOf(model);
  reference.global_batch = 256;  // 1 Mi tokens
  Expected<TimeToTrain> same = EstimateTimeToTrain(Read({{"tokens", 1e10},
                                                         {"critical_batch_tokens", 2 << 20},
                                                         {"reference_batch_tokens", 1 << 20}}),
                                                   reference);
  ASSERT_TRUE(same.ok());
  EXPECT_DOUBLE_EQ(same->budget.batch_factor, 1.0);
}

TEST(TimeToTrainTest, FailuresAndTheOptimalCheckpointInterval) {
  const models::ModelSpec model = Model("gpt2-124m");
  // 1,000 GPUs at 10^-4 failures a GPU-hour: one every 3,600 / 0.1 = 36,000 s. A checkpoint of
  // 10^12 B at 1 TB/s: δ = 1 s to save (synchronously) and 1 s to load, so a restart of 600 s
  // costs R = 601 s. The optimal period p = sqrt(2 δ (M − R)) = sqrt(2 · 35,399) = 266.079 s,
  // 265.079 s of it training; a failure loses p / 2 = 133.04 s. Effective training time ratio
  // (265.079 / 266.079) · (1 − (133.04 + 601) / 36,000) = 0.996242 · 0.979610 = 0.975928.
  const Json reliability = {
      {"failures_per_gpu_hour", 1e-4}, {"restart", "10 min"}, {"checkpoint_write", "1 TB/s"}};
  Expected<TimeToTrain> t =
      EstimateTimeToTrain(Read({{"tokens", 4e12}, {"reliability", reliability}}), RunOf(model));
  ASSERT_TRUE(t.ok()) << t.error().ToString();
  ASSERT_TRUE(t->reliability);
  const ReliabilityEstimate& r = *t->reliability;
  EXPECT_DOUBLE_EQ(r.mtbf_s, 36000);
  EXPECT_DOUBLE_EQ(r.save_blocking_s, 1);
  EXPECT_DOUBLE_EQ(r.restart_s, 601);
  EXPECT_NEAR(r.interval_s, 265.0789, 1e-4);
  EXPECT_NEAR(r.effective_training_time_ratio, 0.975928, 1e-6);
  EXPECT_DOUBLE_EQ(t->wall_s, t->compute_s / r.effective_training_time_ratio);
  EXPECT_NEAR(r.expected_failures, t->wall_s / 36000, 1e-9);
  EXPECT_EQ(t->assumptions.size(), 1u);  // the budget at any batch; the failure rate given

  // The optimum: 10% shorter or longer intervals waste more.
  for (const double scale : {0.9, 1.1}) {
    Json longer = reliability;
    longer["checkpoint_interval"] = fmt::format("{} s", r.interval_s * scale);
    Expected<TimeToTrain> other =
        EstimateTimeToTrain(Read({{"tokens", 4e12}, {"reliability", longer}}), RunOf(model));
    ASSERT_TRUE(other.ok()) << other.error().ToString();
    EXPECT_FALSE(other->reliability->interval_optimal);
    EXPECT_LT(other->reliability->effective_training_time_ratio, r.effective_training_time_ratio);
  }
}

TEST(TimeToTrainTest, AsyncSavesBlockForTheCopyToHost) {
  const models::ModelSpec model = Model("gpt2-124m");
  // Each of 1,000 GPUs copies 10^9 B at 50 GB/s: δ = 0.02 s; the 1 s write to storage runs
  // behind, and a failure in it falls back a checkpoint: lag 1 s. p = sqrt(2 · 0.02 ·
  // (36,000 − 1 − 601)) = 37.6287 s; ratio (37.6087 / 37.6287) · (1 − (18.814 + 1 + 601) /
  // 36,000) = 0.982233.
  const Json reliability = {{"failures_per_gpu_hour", 1e-4},
                            {"restart", "600 s"},
                            {"checkpoint_write", "1 TB/s"},
                            {"async_save", true}};
  Expected<TimeToTrain> t =
      EstimateTimeToTrain(Read({{"tokens", 4e12}, {"reliability", reliability}}), RunOf(model));
  ASSERT_TRUE(t.ok()) << t.error().ToString();
  const ReliabilityEstimate& r = *t->reliability;
  EXPECT_DOUBLE_EQ(r.save_blocking_s, 0.02);
  EXPECT_DOUBLE_EQ(r.save_write_s, 1);
  EXPECT_NEAR(r.interval_s + r.save_blocking_s, 37.62871, 1e-5);
  EXPECT_NEAR(r.effective_training_time_ratio, 0.982233, 1e-6);

  // A GPU that does not give its host link's rate cannot say how long the copy takes.
  TrainingRun unknown = RunOf(model);
  unknown.host_bandwidth = Bandwidth();
  Expected<TimeToTrain> refused =
      EstimateTimeToTrain(Read({{"tokens", 4e12}, {"reliability", reliability}}), unknown);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.error().ToString(), HasSubstr("time_to_train.reliability.async_save"));
  EXPECT_THAT(refused.error().ToString(), HasSubstr("host_bandwidth"));
}

TEST(TimeToTrainTest, DefaultFailureRateIsLlamaThrees) {
  // 419 interruptions in 54 days on 16,384 GPUs: 419 / (16,384 · 1,296 h) = 1.9733e-5 a
  // GPU-hour, one every 3,600 / (1.9733e-5 · 16,384) = 11,135 s on the whole cluster.
  const models::ModelSpec model = Model("gpt2-124m");
  TrainingRun run = RunOf(model);
  run.gpus = 16384;
  Expected<TimeToTrain> t = EstimateTimeToTrain(
      Read({{"tokens", 1e12},
            {"reliability", {{"restart", "10 min"}, {"checkpoint_write", "2 TB/s"}}}}),
      run);
  ASSERT_TRUE(t.ok()) << t.error().ToString();
  EXPECT_NEAR(t->reliability->mtbf_s, 11135.08, 0.01);
  EXPECT_THAT(t->assumptions.back(), HasSubstr("Llama 3"));
}

TEST(TimeToTrainTest, NoFailuresNeedNoCheckpoints) {
  // failures_per_gpu_hour 0: nothing to lose, so no checkpoint unless an interval is given; with
  // one of an hour and δ = 1 s (10^12 B at 1 TB/s) the run keeps 3,600 / 3,601 of its time.
  const models::ModelSpec model = Model("gpt2-124m");
  Json reliability = {
      {"failures_per_gpu_hour", 0}, {"restart", "10 min"}, {"checkpoint_write", "1 TB/s"}};
  Expected<TimeToTrain> t =
      EstimateTimeToTrain(Read({{"tokens", 1e12}, {"reliability", reliability}}), RunOf(model));
  ASSERT_TRUE(t.ok()) << t.error().ToString();
  EXPECT_TRUE(std::isinf(t->reliability->mtbf_s));
  EXPECT_EQ(t->reliability->interval_s, 0);
  EXPECT_EQ(t->reliability->effective_training_time_ratio, 1);
  EXPECT_EQ(t->reliability->expected_failures, 0);
  EXPECT_DOUBLE_EQ(t->wall_s, t->compute_s);
  reliability["checkpoint_interval"] = "1 h";
  t = EstimateTimeToTrain(Read({{"tokens", 1e12}, {"reliability", reliability}}), RunOf(model));
  ASSERT_TRUE(t.ok()) << t.error().ToString();
  EXPECT_DOUBLE_EQ(t->reliability->effective_training_time_ratio, 3600.0 / 3601.0);
}

TEST(TimeToTrainTest, ARunThatNeverFinishesIsAnError) {
  // A failure every 36 s (1,000 GPUs at 0.1 a GPU-hour) against a 10-minute restart.
  const models::ModelSpec model = Model("gpt2-124m");
  Expected<TimeToTrain> t = EstimateTimeToTrain(Read({{"tokens", 1e12},
                                                      {"reliability",
                                                       {{"failures_per_gpu_hour", 0.1},
                                                        {"restart", "10 min"},
                                                        {"checkpoint_write", "1 TB/s"}}}}),
                                                RunOf(model));
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.error().ToString(), HasSubstr("never finishes"));
  EXPECT_THAT(t.error().ToString(), HasSubstr("time_to_train.reliability"));
}

TEST(TimeToTrainTest, ConfigErrorsNameTheField) {
  EXPECT_THAT(ReadError(Json::object()), HasSubstr("missing the token budget"));
  EXPECT_THAT(ReadError({{"tokens", 1e9}, {"tokens_per_parameter", 20}}), HasSubstr("not several"));
  EXPECT_THAT(ReadError({{"tokens", -5}}), HasSubstr("time_to_train.tokens"));
  EXPECT_THAT(ReadError({{"tokens", 1e9}, {"scaling_law", "chinchilla"}}),
              HasSubstr("target_loss"));
  EXPECT_THAT(ReadError({{"target_loss", 2}, {"scaling_law", "kaplan"}}),
              HasSubstr("unknown scaling law"));
  EXPECT_THAT(ReadError({{"target_loss", 2}, {"scaling_law", {{"E", 1.7}, {"A", 400}}}}),
              HasSubstr("time_to_train.scaling_law.B: missing required field"));
  EXPECT_THAT(ReadError({{"tokens", 1e9}, {"critical_batch_tokens", 1e6}}),
              HasSubstr("time_to_train.reference_batch_tokens"));
  EXPECT_THAT(ReadError({{"tokens", 1e9}, {"reliability", {{"restart", "1 min"}}}}),
              HasSubstr("time_to_train.reliability.checkpoint_write: missing required field"));
  EXPECT_THAT(ReadError({{"tokens", 1e9},
                         {"reliability", {{"restart", "1 min"}, {"checkpoint_write", "0 GB/s"}}}}),
              HasSubstr("must be above 0"));
  EXPECT_THAT(ReadError({{"tokens", 1e9}, {"tokns", 1}}), HasSubstr("unknown key"));
  // A custom law is read whole.
  const TimeToTrainConfig custom = Read(
      {{"target_loss", 2},
       {"scaling_law", {{"E", 1.8}, {"A", 500}, {"B", 2000}, {"alpha", 0.35}, {"beta", 0.37}}}});
  EXPECT_EQ(custom.law.name, "custom");
  EXPECT_DOUBLE_EQ(custom.law.data_exponent, 0.37);
}

TEST(TimeToTrainTest, SimulatedIterationsMakeTheRun) {
  // A simulated plan: its iteration time times the iterations; a checkpoint of the whole model's
  // weights and Adam state, bf16 weights with an fp32 master copy: 2 + 4 + 8 = 14 B a parameter.
  Json json = {{"model", "gpt2-124m"},
               {"training", {{"global_batch", 64}, {"micro_batch", 8}, {"seq_len", 1024}}},
               {"cluster", {{"preset", "dgx-h100"}, {"nodes", 1}, {"gpu", "h100-sxm5-80gb"}}},
               {"parallelism", {{"data", 8}}},
               {"time_to_train", {{"tokens", 1e9}}}};
  const SimulationResult result = SimulateJson(json);
  ASSERT_TRUE(result.time_to_train);
  const TimeToTrain& t = *result.time_to_train;
  // ⌈10^9 / 65,536⌉ = 15,259 iterations.
  EXPECT_EQ(t.budget.iterations, 15259);
  EXPECT_DOUBLE_EQ(t.compute_s, 15259 * result.iteration_time.ToSecondsDouble());
  const int64_t parameters = models::CountParameters(ConfigOf(json).model).total;
  EXPECT_EQ(CheckpointBytes(parameters, models::Optimizer::kAdam, DType::kBf16, {}),
            14 * parameters);

  // A ResNet has no tokens to count: it takes samples.
  Json resnet = {{"model", "resnet-50"},
                 {"training", {{"global_batch", 64}, {"micro_batch", 8}}},
                 {"cluster", {{"preset", "dgx-h100"}, {"nodes", 1}, {"gpu", "h100-sxm5-80gb"}}},
                 {"parallelism", {{"data", 8}}},
                 {"time_to_train", {{"tokens", 1e9}}}};
  Expected<SimulationResult> images = Simulate(ConfigOf(resnet));
  ASSERT_FALSE(images.ok());
  EXPECT_THAT(images.error().ToString(),
              HasSubstr("time_to_train: this model has no sequence to count tokens of: give the "
                        "samples to train"));
  // 40 epochs of ImageNet's 1,281,167 images at 64 a step: ⌈51,246,680 / 64⌉ = 800,730
  // iterations.
  resnet["time_to_train"] = {{"samples", 40 * 1281167}};
  const SimulationResult epochs = SimulateJson(resnet);
  ASSERT_TRUE(epochs.time_to_train);
  EXPECT_EQ(epochs.time_to_train->budget.unit, "samples");
  EXPECT_EQ(epochs.time_to_train->budget.iterations, 800730);
  EXPECT_DOUBLE_EQ(epochs.time_to_train->compute_s,
                   800730 * epochs.iteration_time.ToSecondsDouble());
  // A critical batch is in tokens, which a ResNet has none of.
  resnet["time_to_train"]["critical_batch_tokens"] = 1e6;
  resnet["time_to_train"]["reference_batch_tokens"] = 1e6;
  EXPECT_THAT(Simulate(ConfigOf(resnet)).error().ToString(),
              HasSubstr("time_to_train.critical_batch_tokens: the critical batch is in tokens"));
  // A transformer's samples are sequences: 10^6 of 1,024 tokens at 64 a step, 15,625 steps.
  json["time_to_train"] = {{"samples", 1e6}};
  const SimulationResult sequences = SimulateJson(json);
  EXPECT_EQ(sequences.time_to_train->budget.unit, "tokens");
  EXPECT_DOUBLE_EQ(sequences.time_to_train->budget.tokens, 1.024e9);
  EXPECT_EQ(sequences.time_to_train->budget.iterations, 15625);
  EXPECT_EQ(sequences.time_to_train->budget.how, "1.0M samples of 1024 tokens");
}

TEST(TimeToTrainTest, SpansAndCountsAsAReaderSaysThem) {
  EXPECT_EQ(FormatSeconds(0.0213), "0.0213 s");
  EXPECT_EQ(FormatSeconds(42), "42 s");
  EXPECT_EQ(FormatSeconds(600), "10.0 min");
  EXPECT_EQ(FormatSeconds(11135), "3.1 h");       // under 48 hours
  EXPECT_EQ(FormatSeconds(6.23e6), "72.1 days");  // 6.23e6 / 86,400 = 72.106
  EXPECT_EQ(FormatSeconds(std::numeric_limits<double>::infinity()), "never");
  EXPECT_EQ(FormatAmount(15.6e12), "15.6T");
  EXPECT_EQ(FormatAmount(28.36e6), "28.4M");
  EXPECT_EQ(FormatAmount(929833), "929.8k");
  EXPECT_EQ(FormatAmount(512), "512");
}

}  // namespace
}  // namespace dtsim::strategies
