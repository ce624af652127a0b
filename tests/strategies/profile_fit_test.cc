// `dtsim calibrate --profile` (strategies/profile_fit.h): a preset's curves fitted to the ops of
// its op-cost tables. On the shipped Hopper tables the fit is the presets' own curves (which
// were fitted to the same tables); on synthetic GEMMs timed from a known curve it recovers
// that curve, dividing out the power limit for ops timed in a run.
#include "strategies/profile_fit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "models/gpu.h"

namespace dtsim::strategies {
namespace {

using testing::HasSubstr;

const CalibrationConstant* Find(const ProfileFit& fit, std::string_view name) {
  auto it = std::find_if(fit.constants.begin(), fit.constants.end(),
                         [&](const CalibrationConstant& c) { return c.name.ToString() == name; });
  return it == fit.constants.end() ? nullptr : &*it;
}

ProfileTable Shipped(const std::string& gpu) {
  const std::string path = DTSIM_EXAMPLES_DIR "/profiles/" + gpu + ".json";
  Expected<traces::OpCostTable> table = traces::ReadOpCostTable(path);
  EXPECT_TRUE(table.ok()) << table.error().ToString();
  return {.path = path, .table = table.ok() ? *std::move(table) : traces::OpCostTable()};
}

// Square bf16 GEMMs of 1024 … 8192 on the H100 (989.4 TFLOP/s dense bf16), each timed as
//   t = 4 µs + 2n³ / (989.4e12 · share · 0.70),
// the curve max 0.70, ramp 4 µs, at `share` of the burst speed.
ProfileTable SyntheticGemms(traces::OpTiming timing, double share, double max = 0.70) {
  std::vector<traces::MeasuredOp> ops;
  for (int64_t n : {1024, 2048, 4096, 8192}) {
    traces::MeasuredOp op;
    op.signature.op = "gemm";
    op.signature.dtype = DType::kBf16;
    for (const char* dim : {"m", "n", "k"}) op.signature.SetDim(dim, n);
    const double seconds = 4e-6 + 2.0 * n * n * n / (989.4e12 * share * max);
    op.duration = DurationNs(std::llround(seconds * 1e9));
    ops.push_back(std::move(op));
  }
  Expected<traces::OpCostTable> table =
      traces::OpCostTable::Make("h100-sxm5-80gb", "synthetic", std::move(ops), timing);
  EXPECT_TRUE(table.ok());
  return {.path = "synthetic.json", .table = *std::move(table)};
}

// The presets' GEMM curves are the fits of their tables (models/gpu.cc): the constants agree
// with the presets' values to 4 decimals and 50 ns, and say what fixed them.
TEST(ProfileFitTest, TheShippedTablesGiveThePresetsCurves) {
  for (const std::string gpu : {"h100-sxm5-80gb", "h200-sxm-141gb"}) {
    const ProfileTable tables[] = {Shipped(gpu)};
    Expected<ProfileFit> fit = FitProfileTables(tables);
    ASSERT_TRUE(fit.ok()) << fit.error().ToString();
    EXPECT_THAT(fit->skipped, testing::IsEmpty());
    ASSERT_EQ(fit->constants.size(), 8u);  // GEMMs bf16 and fp8, attention forward, backward
    for (const std::string field : {"matrix_efficiency", "fp8_matrix_efficiency"}) {
      const CalibrationConstant* constant = Find(*fit, gpu + "/" + field);
      ASSERT_NE(constant, nullptr) << field;
      EXPECT_NEAR(constant->value, constant->preset, 0.0005) << gpu << " " << field;
      EXPECT_TRUE(constant->points.empty());
    }
    for (const std::string field : {"matrix_ramp", "fp8_matrix_ramp"}) {
      const CalibrationConstant* constant = Find(*fit, gpu + "/" + field);
      ASSERT_NE(constant, nullptr) << field;
      EXPECT_NEAR(constant->value, constant->preset, 0.05) << gpu << " " << field;  // µs
    }
    const CalibrationConstant* fp8 = Find(*fit, gpu + "/fp8_matrix_efficiency");
    EXPECT_THAT(fp8->profile, testing::MatchesRegex("185 fp8 GEMMs of .*/profiles/" + gpu +
                                                    "\\.json \\(isolated\\)"));
    // Flash attention from each table's own kernels (the presets pool both dies' kernels):
    // within 7% of the pooled curve's maximum.
    const CalibrationConstant* attention = Find(*fit, gpu + "/attention_efficiency");
    ASSERT_NE(attention, nullptr);
    EXPECT_NEAR(attention->value / attention->preset, 1, 0.07);
    EXPECT_THAT(attention->profile, HasSubstr("bf16 flash attention forward kernels"));
  }
}

// Timed in isolation the curve is the burst curve itself; timed in a run on the H100 (power-
// limited share 0.85) the ops ran at 0.85 × 0.70 = 0.595 of the peak, and the constant is the
// burst curve's 0.70 again, which the roofline slows to 0.595 in a training step. The ramp is
// not scaled (the roofline does not scale it).
TEST(ProfileFitTest, InRunTablesAreTakenBackToTheBurstCurve) {
  for (const auto& [timing, share] :
       {std::pair(traces::OpTiming::kIsolated, 1.0), std::pair(traces::OpTiming::kInRun, 0.85)}) {
    const ProfileTable tables[] = {SyntheticGemms(timing, share)};
    Expected<ProfileFit> fit = FitProfileTables(tables);
    ASSERT_TRUE(fit.ok()) << fit.error().ToString();
    ASSERT_EQ(fit->constants.size(), 2u);
    EXPECT_NEAR(Find(*fit, "h100-sxm5-80gb/matrix_efficiency")->value, 0.70, 1e-4);
    EXPECT_NEAR(Find(*fit, "h100-sxm5-80gb/matrix_ramp")->value, 4.0, 0.01);
    // The table has no FP8 GEMMs and no flash attention: those curves are listed, not fitted.
    EXPECT_THAT(fit->skipped,
                testing::ElementsAre(
                    "h100-sxm5-80gb/fp8_matrix_efficiency: 0 fp8 GEMMs in synthetic.json (a "
                    "curve needs two or more)",
                    HasSubstr("attention_efficiency: 0 bf16 flash attention forward kernels"),
                    HasSubstr("attention_backward_efficiency: 0 bf16 flash attention backward")));
  }
}

TEST(ProfileFitTest, ATableThatCannotBeFittedIsAnErrorNamingIt) {
  // In a run at 0.9 of the peak is 0.9 / 0.85 > 1 at boost clock.
  {
    const ProfileTable tables[] = {SyntheticGemms(traces::OpTiming::kInRun, 1.0, 0.9)};
    Expected<ProfileFit> fit = FitProfileTables(tables);
    ASSERT_FALSE(fit.ok());
    EXPECT_THAT(fit.error().ToString(),
                testing::AllOf(HasSubstr("synthetic.json"), HasSubstr("more than the peak")));
  }
  // A device name is not a preset: the constants could not be applied to any config.
  {
    ProfileTable table = SyntheticGemms(traces::OpTiming::kIsolated, 1.0);
    Expected<traces::OpCostTable> renamed = traces::OpCostTable::Make(
        "NVIDIA H100 80GB HBM3", "", table.table.ops(), traces::OpTiming::kIsolated);
    ASSERT_TRUE(renamed.ok());
    const ProfileTable tables[] = {{.path = "h100.json", .table = *std::move(renamed)}};
    Expected<ProfileFit> fit = FitProfileTables(tables);
    ASSERT_FALSE(fit.ok());
    EXPECT_THAT(
        fit.error().ToString(),
        testing::AllOf(HasSubstr("h100.json"), HasSubstr("gpu"), HasSubstr("NVIDIA H100 80GB HBM3"),
                       HasSubstr("not a GPU preset"), HasSubstr("dtsim ops --gpu")));
  }
  // Tables of one GPU timed two ways cannot be pooled.
  {
    ProfileTable in_run = SyntheticGemms(traces::OpTiming::kInRun, 0.85);
    in_run.path = "run.json";
    const ProfileTable tables[] = {SyntheticGemms(traces::OpTiming::kIsolated, 1.0), in_run};
    Expected<ProfileFit> fit = FitProfileTables(tables);
    ASSERT_FALSE(fit.ok());
    EXPECT_THAT(fit.error().ToString(),
                testing::AllOf(HasSubstr("run.json"), HasSubstr("timed in_run"),
                               HasSubstr("synthetic.json isolated")));
  }
  // The same file twice would weigh double.
  {
    const std::string path = DTSIM_EXAMPLES_DIR "/profiles/h100-sxm5-80gb.json";
    const std::string paths[] = {path, path};
    Expected<ProfileFit> fit = FitProfiles(paths);
    ASSERT_FALSE(fit.ok());
    EXPECT_THAT(fit.error().ToString(), HasSubstr("given twice"));
  }
}

// A preset without curves of its own for flash attention (the A100) gets them from the GEMM
// curve it ran on, with the calibrated parts replaced.
TEST(ProfileFitTest, AttentionConstantsGiveAPresetItsOwnCurve) {
  Expected<models::GpuSpec> a100 = models::GpuPreset("a100-sxm4-80gb");
  ASSERT_TRUE(a100.ok());
  ASSERT_FALSE(a100->attention_efficiency.has_value());
  EXPECT_EQ(FieldValue(*a100, CalibratedField::kAttentionEfficiency), a100->matrix_efficiency.max);
  Calibration calibration;
  calibration.constants.push_back(
      {.name = {.gpu = "a100-sxm4-80gb", .field = CalibratedField::kAttentionEfficiency},
       .value = 0.55});
  calibration.constants.push_back(
      {.name = {.gpu = "a100-sxm4-80gb", .field = CalibratedField::kAttentionBackwardRamp},
       .value = 80});
  for (const models::GpuCalibration& gpu : calibration.GpuCalibrations()) {
    models::ApplyGpuCalibration(gpu, *a100);
  }
  ASSERT_TRUE(a100->attention_efficiency.has_value());
  EXPECT_EQ(a100->attention_efficiency->max, 0.55);
  EXPECT_EQ(a100->attention_efficiency->ramp, a100->matrix_efficiency.ramp);
  ASSERT_TRUE(a100->attention_backward_efficiency.has_value());
  EXPECT_EQ(a100->attention_backward_efficiency->max, a100->matrix_efficiency.max);
  EXPECT_EQ(a100->attention_backward_efficiency->ramp, DurationNs(80'000));
}

}  // namespace
}  // namespace dtsim::strategies
