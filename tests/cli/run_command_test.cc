#include "tools/cli/run_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "sim/base/atomic_file.h"
#include "sim/base/json_reader.h"
#include "tests/testing/temp_dir.h"

namespace dtsim::cli {
namespace {

namespace fs = std::filesystem;
using testing::HasSubstr;

const std::string kExample = DTSIM_EXAMPLES_DIR "/pipeline_2x2.json";

class RunCommandTest : public testing_support::TempDirTest {
 protected:
  CommandOutcome Run(std::vector<std::string> args) {
    output_.str("");
    return RunCommand(args, output_);
  }
  std::ostringstream output_;
};

TEST_F(RunCommandTest, WritesResultAndTimeline) {
  const CommandOutcome outcome =
      Run({kExample, "-o", Path("result.json"), "--timeline", Path("timeline.json")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  const Expected<Json> result = ReadJsonFile(Path("result.json"));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ((*result)["format"], "dtsim.run_result");
  EXPECT_EQ((*result)["makespan_ns"], 3'973'863);  // derived in tests/engine/example_graph_test.cc
  const Expected<Json> timeline = ReadJsonFile(Path("timeline.json"));
  ASSERT_TRUE(timeline.ok());
  EXPECT_EQ((*timeline)["otherData"]["format"], "dtsim.timeline");
  EXPECT_THAT(output_.str(), HasSubstr("makespan       3.974 ms"));
}

// Golden scenario: the result of the shipped example, less the wall-clock fields, is checked in.
// After an intended change, regenerate with DTSIM_UPDATE_GOLDEN=1 and say why in the commit.
TEST_F(RunCommandTest, ResultMatchesTheGoldenFile) {
  ASSERT_EQ(Run({kExample, "-o", Path("result.json"), "--quiet"}).kind, CommandOutcome::Kind::kOk);
  Json result = *ReadJsonFile(Path("result.json"));
  result["simulator"].erase("wall_seconds");
  result["simulator"].erase("events_per_second");
  result["input"]["graph"] = "tools/examples/pipeline_2x2.json";
  // The provenance holds this machine's paths and commit: checked here, not in the golden file.
  EXPECT_EQ(result["provenance"]["command"], "run");
  EXPECT_EQ(result["provenance"]["inputs"].size(), 1u);
  EXPECT_TRUE(result["provenance"]["config"].is_null());  // a task graph, not a config
  result.erase("provenance");
  const std::string golden_path = DTSIM_SOURCE_DIR "/tests/golden/pipeline_2x2.result.json";
  if (std::getenv("DTSIM_UPDATE_GOLDEN") != nullptr) {
    ASSERT_TRUE(WriteFileAtomically(golden_path, result.dump(2) + "\n").ok());
  }
  const Expected<Json> golden = ReadJsonFile(golden_path);
  ASSERT_TRUE(golden.ok()) << golden.error().ToString();
  EXPECT_EQ(result, *golden) << "diff against " << golden_path << ":\n"
                             << Json::diff(*golden, result).dump(2);
  EXPECT_TRUE(output_.str().empty());  // --quiet
}

// The example on one DGX A100 node (4 ranks fit on it): every collective and send first pays
// the preset's collective latency, 8.4 us; α_intra = 2 us, NVLink 300 GB/s at the preset's
// efficiency 0.775 = 2.325e11 B/s.
//   8 MiB send/recv: 8.4 us + 2 us + 8388608 / 2.325e11 s = 10400 + 36080.03 -> 46481 ns
//   64 MiB all-reduce over 2 ranks: ring 8.4 us + 2 · 2 us + 67108864 / 2.325e11 s = 12400 +
//   288640.27 -> 301041 ns (the tree's 2 · 2 us + 2 · 67108864 / 2.325e11 s is slower).
// Following tests/engine/example_graph_test.cc with these costs:
//   act0 300000-346481; stage 1 fwd0 -696481, bwd0 -1396481; act1 600000-646481;
//   stage 1 fwd1 1396481-1746481, bwd1 -2446481, grad1 -2492962;
//   stage 0 bwd0 1442962-2042962, bwd1 2492962-3092962, all-reduce -3394003, adam -3514003.
TEST_F(RunCommandTest, AnalyticalModelOnAPreset) {
  ASSERT_EQ(Run({kExample, "--cluster", "dgx-a100", "-o", Path("result.json")}).kind,
            CommandOutcome::Kind::kOk);
  const Json result = *ReadJsonFile(Path("result.json"));
  EXPECT_EQ(result["makespan_ns"], 3'514'003);
  EXPECT_EQ(result["input"]["communication_model"]["name"], "analytical");
  EXPECT_EQ(result["input"]["communication_model"]["cluster"], "dgx-a100");
  EXPECT_EQ(result["input"]["communication_model"]["nodes"], 1);
}

TEST_F(RunCommandTest, FlowModelSeesTheExamplesContention) {
  // Stage 1's last gradient sends (2 -> 0, 3 -> 1) start at 2446481 + 8.4 us + 2 us = 2456881
  // ns; its all-reduce (2 <-> 3, a ring of 2 steps streamed as one pipeline) after 8.4 us + 2 ·
  // 2 us, at 2458881 ns. Until then each send moves alone at 2.325e11 B/s (465000 B); then the
  // all-reduce shares GPU 2's and 3's out-ports and each flow gets 2.325e11 / 2 B/s, so the
  // 8 MiB gradient's other 7923608 B take 7923608 / 1.1625e11 s = 68160.07 -> 68161 ns, ending
  // at 2527042 (34080 ns later than alone). Stage 0's last backward starts at 2527043 instead
  // of 2492962 and everything after it shifts: 3514003 + 34080 = 3548083 ns.
  ASSERT_EQ(
      Run({kExample, "--cluster", "dgx-a100", "--network-model", "flow", "-o", Path("result.json")})
          .kind,
      CommandOutcome::Kind::kOk);
  const Json result = *ReadJsonFile(Path("result.json"));
  EXPECT_EQ(result["input"]["communication_model"]["name"], "flow");
  EXPECT_EQ(result["makespan_ns"], 3'548'083);
}

TEST_F(RunCommandTest, NetworkModelErrors) {
  EXPECT_EQ(Run({kExample, "--network-model", "analytic"}).error->ToString(),
            "--network-model: unknown network model (did you mean \"analytical\"?); registered: "
            "\"fixed\", \"analytical\", \"flow\", got \"analytic\"");
  EXPECT_EQ(Run({kExample, "--network-model", "analytical"}).error->ToString(),
            "--network-model: the analytical model needs a cluster: give --cluster PRESET|FILE, "
            "got \"analytical\"");
  const CommandOutcome bad = Run({kExample, "--cluster", "dgx-a10"});
  EXPECT_EQ(bad.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(bad.error->ToString(),
              HasSubstr("unknown cluster preset (did you mean \"dgx-a100\"?)"));
  // One model's options beside another model were ignored silently.
  const CommandOutcome fixed_on_cluster =
      Run({kExample, "--network-model", "fixed", "--cluster", "dgx-a100"});
  EXPECT_EQ(fixed_on_cluster.kind, CommandOutcome::Kind::kUsage);
  EXPECT_THAT(fixed_on_cluster.error->ToString(),
              HasSubstr("--cluster: the fixed model prices every communication by"));
  const CommandOutcome latency_on_cluster =
      Run({kExample, "--cluster", "dgx-a100", "--comm-latency", "3 us"});
  EXPECT_EQ(latency_on_cluster.kind, CommandOutcome::Kind::kUsage);
  EXPECT_EQ(latency_on_cluster.error->ToString(),
            "--comm-latency: sets the fixed model's cost, and the analytical model prices "
            "communication on the cluster: drop it, or --cluster, got \"3 us\"");
}

TEST_F(RunCommandTest, HelpPrintsOptions) {
  ASSERT_EQ(Run({"--help"}).kind, CommandOutcome::Kind::kOk);
  EXPECT_THAT(output_.str(), HasSubstr("--timeline"));
  EXPECT_THAT(output_.str(), HasSubstr("--comm-bandwidth"));
}

TEST_F(RunCommandTest, UsageErrors) {
  EXPECT_EQ(Run({}).error->ToString(), "missing the GRAPH file");
  EXPECT_EQ(Run({kExample, "--bogus"}).kind, CommandOutcome::Kind::kUsage);
  const CommandOutcome bad_unit = Run({kExample, "--comm-bandwidth", "100 Gbs"});
  EXPECT_EQ(bad_unit.kind, CommandOutcome::Kind::kUsage);
  EXPECT_EQ(bad_unit.error->ToString(),
            "--comm-bandwidth: unknown bandwidth unit \"Gbs\" (did you mean \"Gbps\"?), "
            "got \"100 Gbs\"");
  EXPECT_EQ(Run({kExample, "--comm-bandwidth", "0 Gbps"}).error->ToString(),
            "--comm-bandwidth: bandwidth must be positive, got \"0 Gbps\"");
  EXPECT_EQ(Run({kExample, "--comm-latency", "-1 us"}).error->ToString(),
            "--comm-latency: duration must not be negative, got \"-1 us\"");
}

TEST_F(RunCommandTest, InputErrorsAreFailures) {
  const CommandOutcome missing = Run({Path("nope.json")});
  EXPECT_EQ(missing.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(missing.error->ToString(), HasSubstr("nope.json: cannot open"));
  const CommandOutcome broken = Run({DTSIM_TEST_DATA_DIR "/broken_graph.json"});
  EXPECT_EQ(broken.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(broken.error->ToString(), HasSubstr("line 4"));
}

TEST_F(RunCommandTest, FailedWriteLeavesNoPartialFile) {
  const CommandOutcome outcome = Run({kExample, "-o", Path("no/such/dir/result.json")});
  EXPECT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_FALSE(fs::exists(Path("no")));
  // An existing good file is not replaced by a failed run.
  ASSERT_TRUE(WriteFileAtomically(Path("result.json"), "previous").ok());
  Run({DTSIM_TEST_DATA_DIR "/broken_graph.json", "-o", Path("result.json")});
  EXPECT_EQ(*ReadFile(Path("result.json")), "previous");
}

// The binary itself: exit codes are main's job.
int ExitCode(const std::string& arguments) {
  const int status =
      std::system((std::string(DTSIM_BINARY) + " " + arguments + " >/dev/null 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(DtsimBinaryTest, ExitCodes) {
  EXPECT_EQ(ExitCode("--help"), 0);
  EXPECT_EQ(ExitCode("--version"), 0);
  EXPECT_EQ(ExitCode("run --quiet " + kExample), 0);
  EXPECT_EQ(ExitCode(""), 2);
  EXPECT_EQ(ExitCode("runn"), 2);
  EXPECT_EQ(ExitCode("run --comm-bandwidth '100 Gbs' " + kExample), 2);
  EXPECT_EQ(ExitCode("run /nonexistent.json"), 1);
}

}  // namespace
}  // namespace dtsim::cli
