// `dtsim calibrate`'s fit (strategies/calibrate.h) on points whose measurements dtsim made
// itself under a known constant: the fit must find the constant, and the leave-one-category-out
// check must predict each category from the other.
#include "strategies/calibrate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "tests/testing/temp_dir.h"

namespace dtsim::strategies {
namespace {

Json WeakScalingPoint(const std::string& id, int64_t hidden, int64_t dp) {
  Json point = {{"id", id}, {"category", "megatron_weak_scaling"}};
  point["model"] = {{"layers", 4},     {"hidden", hidden},
                    {"heads", 16},     {"ffn_hidden", 4 * hidden},
                    {"seq_len", 1024}, {"vocab", 1024}};
  point["parallel"] = {
      {"tp", 1}, {"pp", 1}, {"dp", dp}, {"global_batch", 4 * dp}, {"micro_batch", 1}};
  point["metrics"] = Json::array({{{"name", "achieved_tflops_per_gpu"}, {"value", 1.0}}});
  return point;
}

Json LayerPoint(const std::string& id, int64_t hidden) {
  Json point = {{"id", id}, {"category", "layer_microbenchmark"}};
  point["model"] = {{"hidden", hidden},
                    {"heads", 16},
                    {"ffn_hidden", 4 * hidden},
                    {"seq_len", 2048},
                    {"vocab", 1024}};
  point["parallel"] = {{"tp", 1}, {"micro_batch", 1}, {"recompute", "none"}};
  point["metrics"] = Json::array({{{"name", "fwd+bwd_time"}, {"value", 1.0}}});
  return point;
}

Calibration A100At(double efficiency) {
  Calibration calibration;
  calibration.constants.push_back(
      {.name = {.gpu = "a100-sxm4-80gb", .field = CalibratedField::kMatrixEfficiency},
       .value = efficiency});
  return calibration;
}

class CalibrateTest : public testing_support::TempDirTest {
 protected:
  // Three weak-scaling points and two layer points, "measured" as dtsim predicts them with the
  // A100's GEMMs at 0.7 of peak (the preset says 0.8).
  std::string WritePoints() {
    Json file = {
        {"points", Json::array({WeakScalingPoint("w1", 1024, 1), WeakScalingPoint("w2", 1536, 2),
                                WeakScalingPoint("w3", 2048, 1), LayerPoint("l1", 2048),
                                LayerPoint("l2", 3072)})}};
    const Calibration truth = A100At(0.7);
    Expected<std::vector<MeasuredPoint>> points = MeasuredPoints(file, "points.json");
    EXPECT_TRUE(points.ok());
    std::vector<double> measured;
    for (const MeasuredPoint& point : *points) {
      Expected<ValidationRow> row = ValidatePoint(point, "points.json", &truth);
      EXPECT_TRUE(row.ok()) << row.error().ToString();
      measured.push_back(row->predicted);
    }
    for (size_t i = 0; i < measured.size(); ++i) {
      file["points"][i]["metrics"][0]["value"] = measured[i];
    }
    std::ofstream(Path("points.json")) << file.dump();
    return Path("points.json");
  }
};

TEST_F(CalibrateTest, FindsTheConstantTheMeasurementsWereMadeWith) {
  Expected<CalibrationPoints> points = CalibrationPoints::Read({WritePoints()}, 2);
  ASSERT_TRUE(points.ok()) << points.error().ToString();
  ASSERT_EQ(points->entries().size(), 5u);
  EXPECT_GT(points->uncalibrated().mean_absolute_percentage_error, 5);
  Expected<FitResult> fit = FitCalibration(*points, {.threads = 2});
  ASSERT_TRUE(fit.ok()) << fit.error().ToString();
  ASSERT_EQ(fit->calibration.constants.size(), 1u);
  const CalibrationConstant& constant = fit->calibration.constants[0];
  EXPECT_EQ(constant.name.ToString(), "a100-sxm4-80gb/matrix_efficiency");
  EXPECT_NEAR(constant.value, 0.7, 0.002);
  EXPECT_EQ(constant.preset, 0.8);
  EXPECT_EQ(constant.points.size(), 5u);
  EXPECT_LT(fit->calibrated.mean_absolute_percentage_error, 0.2);
  ASSERT_EQ(fit->calibration.residuals.size(), 2u);
  EXPECT_LT(fit->calibration.residuals[0].mean_absolute_percentage_error, 0.2);
  // One error band: the five runs on the A100 under Megatron.
  ASSERT_EQ(fit->calibration.bands.size(), 1u);
  const ErrorBand& band = fit->calibration.bands[0];
  EXPECT_EQ(band.gpu, "a100-sxm4-80gb");
  EXPECT_EQ(band.framework, "megatron");
  EXPECT_EQ(band.points, 5);
  EXPECT_LT(band.mean_absolute_percentage_error, 0.2);
}

TEST_F(CalibrateTest, EachCategoryIsPredictedByAFitOnTheOther) {
  Expected<CalibrationPoints> points = CalibrationPoints::Read({WritePoints()}, 2);
  ASSERT_TRUE(points.ok()) << points.error().ToString();
  const FitOptions options{.threads = 2};
  Expected<FitResult> fit = FitCalibration(*points, options);
  ASSERT_TRUE(fit.ok());
  Expected<std::vector<HeldOutCategory>> table = LeaveOneCategoryOut(*points, options, *fit);
  ASSERT_TRUE(table.ok()) << table.error().ToString();
  ASSERT_EQ(table->size(), 2u);
  for (const HeldOutCategory& row : *table) {
    EXPECT_GT(row.uncalibrated_mape, 5) << row.category;
    EXPECT_LT(row.held_out_mape, 0.3) << row.category;
    ASSERT_EQ(row.constants.size(), 1u);
    EXPECT_THAT(row.constants[0], testing::StartsWith("a100-sxm4-80gb/matrix_efficiency=0.7"));
  }
}

TEST_F(CalibrateTest, AConstantNeedsTwoPoints) {
  Expected<CalibrationPoints> points = CalibrationPoints::Read({WritePoints()}, 1);
  ASSERT_TRUE(points.ok());
  FitOptions options{.threads = 1};
  options.constants.push_back(
      {.gpu = "v100-sxm2-32gb", .field = CalibratedField::kMatrixEfficiency});
  options.exclude_categories = {"layer_microbenchmark"};
  options.constants.push_back({.gpu = "a100-sxm4-80gb", .field = CalibratedField::kLaunchOverhead});
  Expected<FitResult> fit = FitCalibration(*points, options);
  ASSERT_TRUE(fit.ok());
  EXPECT_THAT(fit->skipped, testing::ElementsAre(
                                "v100-sxm2-32gb/matrix_efficiency: 0 points (a constant needs two "
                                "or more)"));
  ASSERT_EQ(fit->calibration.constants.size(), 1u);
  EXPECT_EQ(fit->calibration.constants[0].points.size(), 3u);  // the layer points sat out
}

// Constants measured elsewhere (an op-cost table's curves, dtsim calibrate --profile) are
// applied in every simulation and written with the fitted ones, not fitted: the points score
// them. Their GPU drops out of the default constants, as a GPU with measured curves does, and
// naming one to fit as well is an error.
TEST_F(CalibrateTest, FixedConstantsAreAppliedNotFitted) {
  Expected<CalibrationPoints> points = CalibrationPoints::Read({WritePoints()}, 2);
  ASSERT_TRUE(points.ok()) << points.error().ToString();
  FitOptions options{.threads = 2};
  options.fixed = A100At(0.7).constants;
  options.fixed[0].profile = "40 bf16 GEMMs of a100.json (isolated)";
  Expected<FitResult> fit = FitCalibration(*points, options);  // defaults: none left to fit
  ASSERT_TRUE(fit.ok()) << fit.error().ToString();
  EXPECT_EQ(fit->simulations, 0);
  ASSERT_EQ(fit->calibration.constants.size(), 1u);
  EXPECT_EQ(fit->calibration.constants[0].value, 0.7);
  EXPECT_EQ(fit->calibration.constants[0].profile, "40 bf16 GEMMs of a100.json (isolated)");
  EXPECT_LT(fit->calibrated.mean_absolute_percentage_error, 0.01);  // the truth, applied

  options.fit_defaults = false;  // what --profile without --fit does: the same
  fit = FitCalibration(*points, options);
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit->calibration.constants.size(), 1u);

  options.constants.push_back(options.fixed[0].name);
  options.constants_path = "--fit";
  fit = FitCalibration(*points, options);
  ASSERT_FALSE(fit.ok());
  EXPECT_THAT(fit.error().ToString(),
              testing::AllOf(testing::HasSubstr("--fit"),
                             testing::HasSubstr("a100-sxm4-80gb/matrix_efficiency"),
                             testing::HasSubstr("fitted from an op-cost table")));
}

TEST_F(CalibrateTest, AMemoryPointsFileIsNotForTime) {
  std::ofstream(Path("memory.json"))
      << R"({"format": "dtsim.memory_points", "version": "1.0", "points": []})";
  Expected<CalibrationPoints> points = CalibrationPoints::Read({Path("memory.json")}, 1);
  ASSERT_FALSE(points.ok());
  EXPECT_THAT(points.error().ToString(), testing::HasSubstr("a memory points file"));
}

// The same file twice gave every point double weight in the fit (and in its MAPE).
TEST_F(CalibrateTest, APointGivenTwiceIsRefusedBeforeTheFit) {
  const std::string file = WritePoints();
  Expected<CalibrationPoints> points = CalibrationPoints::Read({file, file}, 1);
  ASSERT_FALSE(points.ok());
  EXPECT_EQ(points.error().ToString(),
            file + ": points[0]: the point \"w1\" is also " + file +
                " points[0]: a run given twice would count twice (give each file once; ids "
                "must differ), got \"w1\"");
}

}  // namespace
}  // namespace dtsim::strategies
