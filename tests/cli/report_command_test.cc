#include "tools/cli/report_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "sim/base/atomic_file.h"
#include "tests/testing/temp_dir.h"
#include "tools/cli/replay_command.h"
#include "tools/cli/simulate_command.h"

namespace dtsim::cli {
namespace {

using testing::HasSubstr;

class ReportCommandTest : public testing_support::TempDirTest {
 protected:
  CommandOutcome Report(std::vector<std::string> args) {
    output_.str("");
    return ReportCommand(args, output_);
  }
  // The small example cut to 4 layers, simulated into `path`.
  static void SimulateSmall(const std::string& path) {
    std::ostringstream ignored;
    const std::vector<std::string> simulate = {
        DTSIM_EXAMPLES_DIR "/gpt3_1.3b_16gpu.json", "--set", "model.layers=4", "-o", path, "-q"};
    ASSERT_EQ(SimulateCommand(simulate, ignored).kind, CommandOutcome::Kind::kOk);
  }
  std::ostringstream output_;
};

// One simulate result renders the per-run figures; the rest are listed as not drawn, with why.
// (The README's worked examples render every figure: tests/tools/worked_examples_test.py.)
TEST_F(ReportCommandTest, RendersOneResult) {
  ASSERT_NO_FATAL_FAILURE(SimulateSmall(Path("small.json")));
  const CommandOutcome outcome = Report({Path("small.json"), "-o", Path("report")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  for (const char* file : {"index.html", "throughput.png", "breakdown.png", "memory.png"}) {
    EXPECT_TRUE(std::filesystem::exists(Path("report/") + file)) << file;
  }
  EXPECT_FALSE(std::filesystem::exists(Path("report/scaling.png")));
  const Expected<std::string> page = ReadFile(Path("report/index.html"));
  ASSERT_TRUE(page.ok());
  EXPECT_THAT(
      *page,
      HasSubstr("Scaling curves: not drawn — no input file holds runs that differ in GPU count"));
}

// A report directory the script could not use is named by dtsim before the script runs (it
// was a Python traceback from os.makedirs), and nothing is created under /dev.
TEST_F(ReportCommandTest, AnUnusableReportDirectoryIsNamed) {
  ASSERT_NO_FATAL_FAILURE(SimulateSmall(Path("small.json")));
  ASSERT_TRUE(WriteFileAtomically(Path("notes.txt"), "x").ok());
  const auto error_for = [&](const std::string& dir) {
    const CommandOutcome outcome = Report({Path("small.json"), "-o", dir});
    EXPECT_EQ(outcome.kind, CommandOutcome::Kind::kFailure) << dir;
    return outcome.error ? outcome.error->ToString() : std::string();
  };
  EXPECT_EQ(error_for(Path("notes.txt")), Path("notes.txt") + ": exists and is not a directory");
  EXPECT_EQ(error_for(Path("notes.txt/report")),
            Path("notes.txt/report") + ": cannot create the directory: Not a directory");
  EXPECT_EQ(error_for("/dev/null"),
            "/dev/null: a report is a directory of files, not a device, a pipe or a /dev or "
            "/proc path");
  EXPECT_FALSE(std::filesystem::exists("/dev/dtsim-report"));
  error_for("/dev/dtsim-report");
  EXPECT_FALSE(std::filesystem::exists("/dev/dtsim-report"));
}

// A replay with a what-if, alone or beside a simulate result: its steps as a table (measured,
// replayed, what-if, change, why a step did not move) and each step's critical path as a figure.
TEST_F(ReportCommandTest, RendersAReplayAndItsWhatIf) {
  std::ostringstream ignored;
  const std::vector<std::string> replay = {
      DTSIM_SHARED_DIR "/traces/kineto/timeline_analysis__sampled_rank-0.json.gz", "--speedup",
      "gemm=2", "-o", Path("replay.json")};
  ASSERT_EQ(ReplayCommand(replay, ignored).kind, CommandOutcome::Kind::kOk);
  const CommandOutcome outcome = Report({Path("replay.json"), "-o", Path("report")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_TRUE(std::filesystem::exists(Path("report/replay0.png")));
  EXPECT_FALSE(std::filesystem::exists(Path("report/throughput.png")));  // no simulate run
  const Expected<std::string> page = ReadFile(Path("report/index.html"));
  ASSERT_TRUE(page.ok());
  EXPECT_THAT(*page, HasSubstr("<h2>Replays</h2>"));
  EXPECT_THAT(*page, HasSubstr("What-if: gemm kernels ×2 faster"));
  EXPECT_THAT(*page, HasSubstr("<td>#551</td><td>607.312</td><td>607.312</td><td>607.312</td>"
                               "<td>+0.00%</td><td>its critical path is 99% host"));
}

TEST_F(ReportCommandTest, BadInputIsNamed) {
  CommandOutcome outcome = Report({Path("absent.json"), "-o", Path("report")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("absent.json: cannot open"));
  ASSERT_TRUE(WriteFileAtomically(Path("broken.json"), "{\"format\": ").ok());
  outcome = Report({Path("broken.json"), "-o", Path("report")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("broken.json"));
  ASSERT_TRUE(WriteFileAtomically(Path("other.json"), R"({"format": "dtsim.run_result"})").ok());
  outcome = Report({Path("other.json"), "-o", Path("report")});
  EXPECT_THAT(outcome.error->ToString(),
              HasSubstr("other.json: format: not a dtsim result (expected \"format\" "
                        "\"dtsim.simulate_result\", \"dtsim.sweep\", \"dtsim.search\", "
                        "\"dtsim.replay_result\"), got "
                        "\"dtsim.run_result\""));
  // A result of a known format with missing fields: its family's reader names the file and the
  // field before the script runs.
  ASSERT_TRUE(WriteFileAtomically(Path("empty.json"),
                                  R"({"format": "dtsim.simulate_result", "version": "1.0"})")
                  .ok());
  outcome = Report({Path("empty.json"), "-o", Path("report")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_EQ(outcome.error->ToString(), Path("empty.json") + ": input: missing required field");
  // A sweep whose point's result lacks a stage time: the path goes down to the field.
  ASSERT_TRUE(WriteFileAtomically(Path("sweep.json"), R"({"format": "dtsim.sweep",
      "version": "1.0", "config": "c.json", "vary": [], "points": [{"values": {},
      "status": "failed", "error": "x"}, {"values": {}, "status": "maybe"}]})")
                  .ok());
  outcome = Report({Path("sweep.json"), "-o", Path("report")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_EQ(outcome.error->ToString(), Path("sweep.json") +
                                           ": points[1].status: expected \"ok\" or \"failed\", "
                                           "got \"maybe\"");
  EXPECT_FALSE(std::filesystem::exists(Path("report/index.html")));
  SimulateSmall(Path("run.json"));
  outcome = Report({Path("run.json"), dir_.string() + "/./run.json", "-o", Path("report")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("given twice: its runs would be drawn twice"));
  EXPECT_EQ(Report({Path("empty.json")}).kind, CommandOutcome::Kind::kUsage);
  EXPECT_EQ(Report({"-o", Path("report")}).kind, CommandOutcome::Kind::kUsage);
}

}  // namespace
}  // namespace dtsim::cli
