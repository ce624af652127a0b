// `dtsim calibrate`: a fit over measured points printed and written, the file read back by
// `dtsim validate --calibration`, and bad command lines.
#include "tools/cli/calibrate_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "sim/base/atomic_file.h"
#include "sim/base/input_files.h"
#include "strategies/calibration.h"
#include "tests/testing/temp_dir.h"
#include "tools/cli/validate_command.h"

namespace dtsim::cli {
namespace {

using testing::HasSubstr;

class CalibrateCommandTest : public testing_support::TempDirTest {
 protected:
  CommandOutcome Run(std::vector<std::string> args) {
    output_.str("");
    const CommandOutcome outcome = CalibrateCommand(args, output_);
    ForgetInputFiles();
    return outcome;
  }
  // SC'21 Table 2's six runs (ZeRO-3 under DeepSpeed and PTD-P on 384–1,536 A100s), or the
  // shared points whose ids start with `prefix`.
  std::string Points(std::string_view prefix = "sc21-t2-") {
    Expected<Json> all = ReadJsonFile(DTSIM_SHARED_DIR "/validation/calibration-points.json");
    EXPECT_TRUE(all.ok());
    Json some = {{"points", Json::array()}};
    for (const Json& point : (*all)["points"]) {
      if (point.value("id", "").starts_with(prefix)) some["points"].push_back(point);
    }
    const std::string path = Path("points.json");
    EXPECT_TRUE(WriteFileAtomically(path, some.dump()).ok());
    ForgetInputFiles();
    return path;
  }
  std::ostringstream output_;
};

TEST_F(CalibrateCommandTest, FitsPrintsAndWritesACalibrationValidateApplies) {
  const std::string points = Points();
  const CommandOutcome outcome = Run({points, "-o", Path("cal.json"), "-j", "2"});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  const std::string text = output_.str();
  EXPECT_THAT(text, HasSubstr("6 points simulated, 0 not"));
  EXPECT_THAT(text, HasSubstr("a100-sxm4-80gb/matrix_efficiency"));
  EXPECT_THAT(text, HasSubstr("6 points (zero3_vs_ptdp 6)"));
  EXPECT_THAT(text, HasSubstr("uncalibrated"));
  Expected<strategies::Calibration> written = strategies::ReadCalibrationFile(Path("cal.json"));
  ASSERT_TRUE(written.ok()) << written.error().ToString();
  ASSERT_EQ(written->constants.size(), 1u);
  EXPECT_LT(written->constants[0].value, 0.8);  // dtsim is optimistic on all six uncalibrated
  EXPECT_THAT(written->command, HasSubstr("dtsim calibrate"));
  // Error bands per GPU and framework: the PTD-P rows under Megatron, the ZeRO-3 rows under
  // DeepSpeed 0.3.13.
  ASSERT_TRUE(written->BandFor("a100-sxm4-80gb", "megatron").has_value());
  ASSERT_TRUE(written->BandFor("a100-sxm4-80gb", "deepspeed").has_value());
  EXPECT_EQ(written->BandFor("a100-sxm4-80gb", "deepspeed")->points, 3);
  EXPECT_GT(written->BandFor("a100-sxm4-80gb", "deepspeed")->mean_absolute_percentage_error,
            written->BandFor("a100-sxm4-80gb", "megatron")->mean_absolute_percentage_error);
  ForgetInputFiles();
  std::ostringstream validated;
  const CommandOutcome validate = ValidateCommand(
      std::vector<std::string>{points, "--calibration", Path("cal.json")}, validated);
  ASSERT_EQ(validate.kind, CommandOutcome::Kind::kOk) << validate.error->ToString();
  EXPECT_THAT(validated.str(), HasSubstr("calibration " + Path("cal.json") +
                                         ": a100-sxm4-80gb/matrix_efficiency 0."));
}

// --profile: the H100's curves fitted to its shipped op-cost table (which the preset's curves
// were fitted to: the constants are the preset's values), written with where they came from;
// the points, DGX Cloud's GPT-3 175B runs on H100s, only score them.
TEST_F(CalibrateCommandTest, FitsAPresetsCurvesFromAnOpCostTable) {
  const std::string points = Points("dgxc-gpt3-175b-bf16-");
  const std::string table = DTSIM_EXAMPLES_DIR "/profiles/h100-sxm5-80gb.json";
  const CommandOutcome outcome =
      Run({points, "--profile", table, "-o", Path("cal.json"), "-j", "2"});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  const std::string text = output_.str();
  EXPECT_THAT(text, HasSubstr("from 1 op-cost table: 8 constants"));
  EXPECT_THAT(text, HasSubstr("fit: 0 constants"));
  EXPECT_THAT(text, HasSubstr("80 bf16 GEMMs of " + table + " (isolated)"));
  Expected<strategies::Calibration> written = strategies::ReadCalibrationFile(Path("cal.json"));
  ASSERT_TRUE(written.ok()) << written.error().ToString();
  ASSERT_EQ(written->constants.size(), 8u);
  EXPECT_EQ(written->constants[0].name.ToString(), "h100-sxm5-80gb/matrix_efficiency");
  EXPECT_NEAR(written->constants[0].value, 0.7818, 0.0005);
  EXPECT_THAT(written->constants[0].profile, HasSubstr("80 bf16 GEMMs"));
  EXPECT_TRUE(written->constants[0].points.empty());
  ASSERT_TRUE(written->BandFor("h100-sxm5-80gb", "megatron").has_value());
  // The table is an input: the output may not replace it.
  const CommandOutcome clobber =
      Run({points, "--profile", Path("cal.json"), "-o", Path("cal.json")});
  ASSERT_EQ(clobber.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(clobber.error->ToString(), HasSubstr("input"));
}

TEST_F(CalibrateCommandTest, BadCommandLinesSayWhy) {
  const std::string points = Points();
  CommandOutcome outcome = Run({points, "--fit", "a100/matrix_efficiency"});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("--fit"));
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("unknown GPU preset"));
  outcome = Run({points, "--fit", "a100-sxm4-80gb/matrix_efficiency", "--fit",
                 "a100-sxm4-80gb/matrix_efficiency"});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("named twice"));
  // SC'21's points all ran on A100s: a named H100 constant has none to be fitted to. It was
  // skipped, and -o wrote a calibration without it.
  outcome = Run({points, "--fit", "h100-sxm5-80gb/matrix_efficiency", "-o", Path("none.json")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(),
              HasSubstr("--fit: 0 points on h100-sxm5-80gb: a constant needs two or more to be "
                        "fitted, got \"h100-sxm5-80gb/matrix_efficiency\""));
  EXPECT_FALSE(std::filesystem::exists(Path("none.json")));
  outcome = Run({points, "-o", points});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("input"));
  outcome = Run({points, "--max-iterations", "0"});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kUsage);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("--max-iterations: must be at least 1, got 0"));
  outcome = Run({"--help"});
  EXPECT_EQ(outcome.kind, CommandOutcome::Kind::kOk);
  EXPECT_THAT(output_.str(), HasSubstr("Usage: dtsim calibrate"));
}

}  // namespace
}  // namespace dtsim::cli
