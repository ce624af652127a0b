// `dtsim validate`: several measurements files, the report by category, the points it cannot
// simulate, and the configs it simulated written for `dtsim simulate`.
#include "tools/cli/validate_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "sim/base/atomic_file.h"
#include "sim/base/input_files.h"
#include "strategies/config.h"
#include "tests/testing/temp_dir.h"

namespace dtsim::cli {
namespace {

using testing::HasSubstr;

class ValidateCommandTest : public testing_support::TempDirTest {
 protected:
  CommandOutcome Run(std::vector<std::string> args) {
    output_.str("");
    const CommandOutcome outcome = ValidateCommand(args, output_);
    ForgetInputFiles();
    return outcome;
  }
  // The shared calibration file's points whose id starts with `prefix`, as a file of its own.
  std::string Points(const std::string& prefix, const std::string& name) {
    Expected<Json> all = ReadJsonFile(DTSIM_SHARED_DIR "/validation/calibration-points.json");
    EXPECT_TRUE(all.ok());
    Json some = {{"points", Json::array()}};
    for (const Json& point : (*all)["points"]) {
      if (point.value("id", "").starts_with(prefix)) some["points"].push_back(point);
    }
    const std::string path = Path(name);
    EXPECT_TRUE(WriteFileAtomically(path, some.dump()).ok());
    ForgetInputFiles();
    return path;
  }
  std::ostringstream output_;
};

TEST_F(ValidateCommandTest, ReportsByCategoryAndWritesTheConfigsItSimulated) {
  const std::string korthikanti = Points("korth-t5-22B", "korthikanti.json");
  const std::string tutel = Points("tutel-swinv2", "tutel.json");
  // The directory is created (with its parents).
  const CommandOutcome outcome =
      Run({korthikanti, tutel, "--write-configs", Path("out/configs"), "-o", Path("report.json")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("activation_recompute_sp — 2 points, MAPE"));
  EXPECT_THAT(output_.str(), HasSubstr("korth-t5-22B-sel_sp"));
  EXPECT_THAT(output_.str(),
              HasSubstr("not simulated (1):\n    tutel-swinv2-moe (moe_all_to_all)"));
  // The config of each simulated run reads back as a simulation config.
  Expected<strategies::ResolvedConfig> config =
      strategies::LoadConfig(Path("out/configs/korth-t5-22B-full.json"), {});
  ASSERT_TRUE(config.ok()) << config.error().ToString();
  EXPECT_EQ(config->plan.tensor, 8);
  EXPECT_EQ(config->training.recompute, models::Recompute::kFull);
  EXPECT_FALSE(std::filesystem::exists(Path("out/configs/tutel-swinv2-moe.json")));
  Expected<Json> report = ReadJsonFile(Path("report.json"));
  ASSERT_TRUE(report.ok());
  EXPECT_EQ((*report)["points"].size(), 2u);
  EXPECT_EQ((*report)["not_simulated"].size(), 1u);
}

TEST_F(ValidateCommandTest, BadInputsNameTheFile) {
  ASSERT_TRUE(WriteFileAtomically(Path("rows.json"), R"({"rows": []})").ok());
  CommandOutcome outcome = Run({Path("rows.json")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("rows.json: points: missing required field"));
  const std::string korthikanti = Points("korth-t5-22B-full", "one.json");
  // A file given for the directory fails before any point is simulated (it failed after).
  outcome = Run({korthikanti, "--write-configs", Path("rows.json"), "-o", Path("report.json")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_EQ(outcome.error->ToString(), Path("rows.json") + ": exists and is not a directory");
  EXPECT_FALSE(std::filesystem::exists(Path("report.json")));
  outcome = Run({korthikanti, "--write-configs", "/dev/null"});
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("--write-configs is a directory of files"));
}

// One point in two points files (or a file given twice) counted twice in the MAPE, and with
// --write-configs DIR one config replaced the other; -o at DIR/ID.json was replaced by the
// report. All are refused before any simulation.
TEST_F(ValidateCommandTest, APointGivenTwiceOrAConfigOverTheReportIsRefused) {
  const std::string first = Points("korth-t5-22B-full", "one.json");
  const std::string again = Points("korth-t5-22B-full", "again.json");
  CommandOutcome outcome = Run({first, again, "--write-configs", Path("configs")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_EQ(outcome.error->ToString(),
            again + ": points[0]: the point \"korth-t5-22B-full\" is also " + first +
                " points[0]: a run given twice would count twice (give each file once; ids "
                "must differ), got \"korth-t5-22B-full\"");
  EXPECT_EQ(output_.str(), "");
  EXPECT_FALSE(std::filesystem::exists(Path("configs/korth-t5-22B-full.json")));
  EXPECT_EQ(Run({first, first}).kind, CommandOutcome::Kind::kFailure);
  outcome = Run({first, "--write-configs", Path("configs"), "-o",
                 Path("configs/../configs/korth-t5-22B-full.json")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(),
              HasSubstr(": --write-configs writes " + first +
                        " points[0] (\"korth-t5-22B-full\")'s config here, where -o writes the "
                        "report: give -o another path"));
}

TEST_F(ValidateCommandTest, MemoryPointsGetAMemoryTable) {
  // A memory points file beside a measurements file: the performance table and, after it, the
  // peak memory table with its summary; the JSON report carries the memory rows.
  const std::string korthikanti = Points("korth-t5-22B-full", "one.json");
  const Json memory = Json::parse(R"({"format": "dtsim.memory_points", "version": 1, "points": [
    {"id": "gpt2-run", "source": "a log", "kind": "reserved", "peak": "20 GiB",
     "config": {"model": "gpt2-355m",
                "training": {"global_batch": 8, "micro_batch": 8, "seq_len": 1024,
                             "framework": "pytorch", "flash_attention": true},
                "cluster": {"preset": "dgx-a100", "gpu": "h200-sxm-141gb", "nodes": 1,
                            "gpus_per_node": 1},
                "parallelism": {"data": 1}}}]})");
  ASSERT_TRUE(WriteFileAtomically(Path("memory.json"), memory.dump()).ok());
  const CommandOutcome outcome = Run({korthikanti, Path("memory.json"), "-o", Path("report.json")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("mean absolute percentage error over 1 points"));
  EXPECT_THAT(output_.str(), HasSubstr("peak memory per GPU"));
  EXPECT_THAT(output_.str(), HasSubstr("gpt2-run"));
  EXPECT_THAT(output_.str(), HasSubstr("memory: 1 points from 1 sources; MAPE"));
  EXPECT_THAT(output_.str(), HasSubstr("0 wrong fit/OOM verdicts"));
  Expected<Json> report = ReadJsonFile(Path("report.json"));
  ASSERT_TRUE(report.ok());
  EXPECT_EQ((*report)["memory"]["rows"][0]["kind"], "reserved");
}

}  // namespace
}  // namespace dtsim::cli
