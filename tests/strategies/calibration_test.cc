// Calibration files (strategies/calibration.h): read strictly, written and read back, applied
// to a GPU preset before a config's own fields, named by a config inline or as a file.
#include "strategies/calibration.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "tests/strategies/simulate_helpers.h"
#include "tests/testing/temp_dir.h"

namespace dtsim::strategies {
namespace {

using testing::HasSubstr;

Json CalibrationJson() {
  return Json::parse(R"({
    "format": "dtsim.calibration", "version": "1.0", "command": "dtsim calibrate x.json",
    "constants": [
      {"name": "a100-sxm4-80gb/matrix_efficiency", "value": 0.66, "preset": 0.8,
       "unit": "fraction of peak", "points": ["p1", "p2"]},
      {"name": "a100-sxm4-80gb/launch_overhead", "value": 2.5, "unit": "µs"}
    ],
    "residuals": [{"category": "c", "points": 2, "mape_percent": 1.5,
                   "mean_error_percent": -0.5}],
    "bands": [{"gpu": "a100-sxm4-80gb", "framework": "megatron", "points": 2,
               "mape_percent": 1.5, "mean_error_percent": -0.5}]
  })");
}

std::string ErrorOf(const Json& json) {
  Expected<Calibration> calibration = CalibrationFromJson(json, "calibration");
  return calibration.ok() ? "" : calibration.error().ToString();
}

TEST(CalibrationTest, ReadsWritesAndReadsBack) {
  Expected<Calibration> read = CalibrationFromJson(CalibrationJson(), "");
  ASSERT_TRUE(read.ok()) << read.error().ToString();
  ASSERT_EQ(read->constants.size(), 2u);
  EXPECT_EQ(read->constants[0].name.ToString(), "a100-sxm4-80gb/matrix_efficiency");
  EXPECT_EQ(read->constants[0].points, (std::vector<std::string>{"p1", "p2"}));
  EXPECT_EQ(read->command, "dtsim calibrate x.json");
  EXPECT_THAT(read->AppliedTo("a100-sxm4-80gb"),
              testing::ElementsAre("a100-sxm4-80gb/matrix_efficiency=0.66",
                                   "a100-sxm4-80gb/launch_overhead=2.5"));
  EXPECT_TRUE(read->AppliedTo("h100-sxm5-80gb").empty());
  Expected<Calibration> again = CalibrationFromJson(Json(CalibrationToJson(*read)), "");
  ASSERT_TRUE(again.ok()) << again.error().ToString();
  EXPECT_EQ(Json(CalibrationToJson(*again)), Json(CalibrationToJson(*read)));
  ASSERT_EQ(again->residuals.size(), 1u);
  EXPECT_EQ(again->residuals[0].mean_error, -0.5);
  ASSERT_TRUE(again->BandFor("a100-sxm4-80gb", "megatron").has_value());
  EXPECT_EQ(again->BandFor("a100-sxm4-80gb", "megatron")->points, 2);
  EXPECT_FALSE(again->BandFor("a100-sxm4-80gb", "deepspeed").has_value());
}

TEST(CalibrationTest, BadFilesNameTheValue) {
  Json json = CalibrationJson();
  json["constants"][0]["name"] = "a100-sxm4-80g/matrix_efficiency";
  EXPECT_THAT(ErrorOf(json), HasSubstr("unknown GPU preset (did you mean \"a100-sxm4-80gb\"?)"));
  EXPECT_THAT(ErrorOf(json), HasSubstr("calibration.constants[0].name"));
  json = CalibrationJson();
  json["constants"][0]["name"] = "a100-sxm4-80gb/matrix_eficiency";
  EXPECT_THAT(ErrorOf(json), HasSubstr("did you mean \"matrix_efficiency\""));
  json = CalibrationJson();
  json["constants"][0]["name"] = "matrix_efficiency";
  EXPECT_THAT(ErrorOf(json), HasSubstr("GPU-PRESET/FIELD"));
  json = CalibrationJson();
  json["constants"][0]["value"] = 1.2;
  EXPECT_THAT(ErrorOf(json), HasSubstr("must be in [0.05, 1]"));
  json = CalibrationJson();
  json["constants"][1]["unit"] = "ns";
  EXPECT_THAT(ErrorOf(json), HasSubstr("launch_overhead is in µs"));
  json = CalibrationJson();
  json["constants"][1]["name"] = "a100-sxm4-80gb/matrix_efficiency";
  json["constants"][1].erase("unit");
  json["constants"][1]["value"] = 0.7;
  EXPECT_THAT(ErrorOf(json), HasSubstr("given twice"));
  json = CalibrationJson();
  json["format"] = "dtsim.simulate_result";
  EXPECT_THAT(ErrorOf(json), HasSubstr("not a calibration"));
  json = CalibrationJson();
  json["constants"][0]["fitted"] = true;
  EXPECT_THAT(ErrorOf(json), HasSubstr("fitted"));
  json = CalibrationJson();
  json["bands"][0]["points"] = 1;
  EXPECT_THAT(ErrorOf(json), HasSubstr("calibration.bands[0].points"));
}

TEST(CalibrationTest, HostLaunchTimeIsAConstantInMicroseconds) {
  Json json = CalibrationJson();
  json["constants"][1] = {{"name", "a100-sxm4-80gb/host_launch_time"}, {"value", 12.5}};
  Expected<Calibration> read = CalibrationFromJson(json, "");
  ASSERT_TRUE(read.ok()) << read.error().ToString();
  EXPECT_EQ(FieldUnit(read->constants[1].name.field), "µs");
  models::GpuSpec gpu = *models::GpuPreset("a100-sxm4-80gb");
  EXPECT_EQ(FieldValue(gpu, read->constants[1].name.field), 8.9);  // the measured default
  for (const models::GpuCalibration& calibration : read->GpuCalibrations()) {
    models::ApplyGpuCalibration(calibration, gpu);
  }
  EXPECT_EQ(gpu.host_launch_time, DurationNs(12'500));
  json["constants"][1]["value"] = 150;
  EXPECT_THAT(ErrorOf(json), HasSubstr("must be in [0, 100] (µs)"));
}

Json ConfigJson() {
  return Json::parse(R"({
    "model": {"family": "transformer", "layers": 2, "hidden": 1024, "heads": 16,
              "vocab": 1024, "max_seq": 1024},
    "training": {"global_batch": 1},
    "cluster": {"preset": "dgx-a100", "gpu": "a100-sxm4-80gb"}
  })");
}

TEST(CalibrationTest, AppliesToItsPresetBeforeTheConfigsOwnFields) {
  Json json = ConfigJson();
  json["calibration"] = CalibrationJson();
  const ResolvedConfig calibrated = ConfigOf(json);
  EXPECT_EQ(calibrated.gpu.matrix_efficiency.max, 0.66);
  EXPECT_EQ(calibrated.gpu.launch_overhead, DurationNs(2'500));
  EXPECT_EQ(calibrated.calibration_source, "inline");
  EXPECT_EQ(calibrated.calibration.size(), 2u);
  ASSERT_TRUE(calibrated.error_band.has_value());  // the A100 under Megatron: the band applies
  EXPECT_EQ(calibrated.error_band->mean_absolute_percentage_error, 1.5);
  // The preset's ramp stays; a field the config gives wins over the calibration.
  const Expected<models::GpuSpec> preset = models::GpuPreset("a100-sxm4-80gb");
  EXPECT_EQ(calibrated.gpu.matrix_efficiency.ramp, preset->matrix_efficiency.ramp);
  json["cluster"]["gpu"] = {{"preset", "a100-sxm4-80gb"}, {"launch_overhead", "4 us"}};
  EXPECT_EQ(ConfigOf(json).gpu.launch_overhead, DurationNs(4'000));
  EXPECT_EQ(ConfigOf(json).gpu.matrix_efficiency.max, 0.66);
  // Another GPU's constants leave this one alone, and slower GEMMs make a slower step.
  json = ConfigJson();
  json["cluster"]["gpu"] = "h100-sxm5-80gb";
  json["calibration"] = CalibrationJson();
  EXPECT_TRUE(ConfigOf(json).calibration.empty());
  EXPECT_EQ(ConfigOf(json).gpu.matrix_efficiency.max,
            models::GpuPreset("h100-sxm5-80gb")->matrix_efficiency.max);
  Json slower = ConfigJson();
  slower["calibration"] = CalibrationJson();
  EXPECT_GT(SimulateJson(slower).iteration_time, SimulateJson(ConfigJson()).iteration_time);
}

class CalibrationFileTest : public testing_support::TempDirTest {};

TEST_F(CalibrationFileTest, AConfigNamesAFileRelativeToItself) {
  {
    std::ofstream out(Path("cal.json"));
    out << CalibrationJson().dump();
  }
  Json json = ConfigJson();
  json["calibration"] = "cal.json";
  Expected<ResolvedConfig> config = ConfigFromJson(json, Path("config.json"));
  ASSERT_TRUE(config.ok()) << config.error().ToString();
  EXPECT_EQ(config->gpu.matrix_efficiency.max, 0.66);
  EXPECT_EQ(config->calibration_source, Path("cal.json"));
  json["calibration"] = "missing.json";
  Expected<ResolvedConfig> missing = ConfigFromJson(json, Path("config.json"));
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.error().ToString(), HasSubstr("missing.json"));
  json["calibration"] = 3;
  EXPECT_THAT(ConfigError(json), HasSubstr("expected a calibration file or object"));
}

}  // namespace
}  // namespace dtsim::strategies
