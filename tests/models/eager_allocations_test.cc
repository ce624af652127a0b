// The eager PyTorch loop replayed through the caching allocator (models/eager_allocations.h)
// against dtsim's own H200 runs of that loop (tests/data/measured/h200_gpt2_memory.json:
// tools/gpu_checks/gpt2_step.py, GPT-2 355M/774M/1.5B under four checkpointing policies), the
// peaks PyTorch reported after two warm-up steps over three timed ones. Prints every run; the
// bound is a sanity bound (the replay does not fit anything to these runs).
#include "models/eager_allocations.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "models/model_spec.h"
#include "sim/base/json_reader.h"

namespace dtsim::models {
namespace {

using testing::HasSubstr;

constexpr double kGiB = 1 << 30;

EagerRun RunOf(const Json& run) {
  EagerRun out{.micro_batch = run["batch"].get<int64_t>(),
               .seq_len = run["seq"].get<int64_t>(),
               .warmup_steps = run["warmup"].get<int>(),
               .steps = run["steps"].get<int>()};
  const std::string policy = run["recompute"].get<std::string>();
  if (policy == "full") out.recompute = Recompute::kFull;
  if (policy == "every-2nd") {
    out.recompute = Recompute::kFull;
    out.recompute_every = 2;
  }
  if (policy == "op") out.recompute = Recompute::kSelectiveOp;
  return out;
}

TEST(EagerAllocationsTest, PeaksMatchTheMeasuredH200Runs) {
  const Expected<Json> file =
      ReadJsonFile(std::string(DTSIM_TEST_DATA_DIR) + "/measured/h200_gpt2_memory.json");
  ASSERT_TRUE(file.ok()) << file.error().ToString();
  std::printf("%-10s %-9s %22s %22s %18s\n", "model", "recompute", "allocated GiB (err)",
              "reserved GiB (err)", "reserve GiB");
  double worst_allocated = 0, worst_reserved = 0;
  for (const Json& run : (*file)["runs"]) {
    const Expected<ModelSpec> model = ModelPreset(run["model"].get<std::string>());
    ASSERT_TRUE(model.ok()) << model.error().ToString();
    const Expected<EagerPeaks> peaks = ReplayEagerTraining(model->transformer, RunOf(run));
    ASSERT_TRUE(peaks.ok()) << peaks.error().ToString();
    const auto measured_allocated = run["peak_allocated_bytes"].get<double>();
    const auto measured_reserved = run["peak_reserved_bytes"].get<double>();
    const double allocated_error = static_cast<double>(peaks->allocated) / measured_allocated - 1;
    const double reserved_error = static_cast<double>(peaks->reserved) / measured_reserved - 1;
    std::printf("%-10s %-9s %6.2f / %6.2f %+5.1f%% %6.2f / %6.2f %+5.1f%% %6.2f / %6.2f\n",
                run["model"].get<std::string>().c_str(),
                run["recompute"].get<std::string>().c_str(),
                static_cast<double>(peaks->allocated) / kGiB, measured_allocated / kGiB,
                100 * allocated_error, static_cast<double>(peaks->reserved) / kGiB,
                measured_reserved / kGiB, 100 * reserved_error,
                static_cast<double>(peaks->reserved - peaks->allocated) / kGiB,
                (measured_reserved - measured_allocated) / kGiB);
    worst_allocated = std::max(worst_allocated, std::abs(allocated_error));
    worst_reserved = std::max(worst_reserved, std::abs(reserved_error));
    // Reserved is never below allocated, and the replay gives back every tensor it made.
    EXPECT_GE(peaks->reserved, peaks->allocated);
  }
  EXPECT_LT(worst_allocated, 0.06);
  EXPECT_LT(worst_reserved, 0.06);
}

TEST(EagerAllocationsTest, ReplaysOnlyTheLoopItModels) {
  const EagerRun run{.micro_batch = 1, .seq_len = 512};
  Expected<ModelSpec> llama = ModelPreset("llama3-8b");
  ASSERT_TRUE(llama.ok());
  const Expected<EagerPeaks> rotary = ReplayEagerTraining(llama->transformer, run);
  ASSERT_FALSE(rotary.ok());
  EXPECT_THAT(rotary.error().message(), HasSubstr("this model has another norm"));
  Expected<ModelSpec> gpt2 = ModelPreset("gpt2-124m");
  ASSERT_TRUE(gpt2.ok());
  const Expected<EagerPeaks> selective = ReplayEagerTraining(
      gpt2->transformer, {.micro_batch = 1, .seq_len = 512, .recompute = Recompute::kSelective});
  ASSERT_FALSE(selective.ok());
  EXPECT_THAT(selective.error().message(), HasSubstr("not a PyTorch checkpoint policy"));
  // The replay's cost grows with the layers: past 1,024 it is refused (a 10^6-layer toy
  // model took minutes and gigabytes).
  TransformerSpec deep = gpt2->transformer;
  deep.layers = kMaxEagerReplayLayers + 1;
  const Expected<EagerPeaks> too_deep = ReplayEagerTraining(deep, run);
  ASSERT_FALSE(too_deep.ok());
  EXPECT_EQ(too_deep.error().ToString(),
            "layers: more than 1024 layers: the replay's cost grows with them and no model "
            "trained on one GPU has as many, got 1025");
}

TEST(EagerAllocationsTest, TheReserveIsTheCacheTheLossLeavesBehind) {
  // GPT-2 124M, 8 × 1024 tokens: the loss's fp32 tensors are 8,192 × 50,304 × 4 B = 1.54 GiB
  // each, the largest the loop makes. Reserved exceeds allocated by what the allocator cached
  // and could not reuse; without checkpointing, less than one of those tensors (the loss's
  // segments are reused by the next iteration's), and never less than nothing.
  Expected<ModelSpec> gpt2 = ModelPreset("gpt2-124m");
  ASSERT_TRUE(gpt2.ok());
  const Expected<EagerPeaks> peaks =
      ReplayEagerTraining(gpt2->transformer, {.micro_batch = 8, .seq_len = 1024});
  ASSERT_TRUE(peaks.ok()) << peaks.error().ToString();
  const int64_t logits_fp32 = int64_t{8192} * 50304 * 4;
  EXPECT_GE(peaks->reserved, peaks->allocated);
  EXPECT_LT(peaks->reserved - peaks->allocated, logits_fp32);
  // Allocated at least holds the fp32 parameters and their two Adam moments (12 B each of
  // 50,304·768 + 1,024·768 + 12·(12·768² + 13·768) + 2·768 = 124,475,904 parameters) and, as the
  // loss's backward starts, three fp32 loss tensors at once: the saved log-softmax, nll_loss's
  // gradient and log_softmax's.
  const int64_t parameters = 124475904;
  EXPECT_GT(peaks->allocated, 12 * parameters + 3 * logits_fp32);
}

}  // namespace
}  // namespace dtsim::models
