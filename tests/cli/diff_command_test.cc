#include "tools/cli/diff_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "sim/base/atomic_file.h"
#include "sim/base/input_files.h"
#include "sim/base/json_reader.h"
#include "tests/testing/temp_dir.h"
#include "tools/cli/run_command.h"
#include "tools/cli/simulate_command.h"
#include "tools/cli/sweep_command.h"

namespace dtsim::cli {
namespace {

using testing::HasSubstr;
using testing::Not;

const std::string kSmall = DTSIM_EXAMPLES_DIR "/gpt3_1.3b_16gpu.json";

std::vector<std::string> Args(std::vector<std::string> args) { return args; }

class DiffCommandTest : public testing_support::TempDirTest {
 protected:
  // Simulates the small example with `sets` into `name` (each command reads its own inputs).
  std::string SimulateTo(const std::string& name, const std::vector<std::string>& sets) {
    ForgetInputFiles();
    std::vector<std::string> args = {kSmall, "-o", Path(name), "--quiet"};
    for (const std::string& set : sets) args.insert(args.end(), {"--set", set});
    std::ostringstream ignored;
    const CommandOutcome outcome = SimulateCommand(args, ignored);
    EXPECT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
    return Path(name);
  }
  CommandOutcome Diff(std::vector<std::string> args) {
    output_.str("");
    ForgetInputFiles();
    return DiffCommand(args, output_);
  }
  std::ostringstream output_;
};

// Issue 35: two runs at 200 and 100 Gb/s NICs "differed in no input". The provenance names the
// NIC bandwidth (as resolved from the preset and as set), and the figures say where time moved:
// the data-parallel all-reduce crosses the two nodes' NICs, on stage 1's critical path.
TEST_F(DiffCommandTest, TwoRunsAtDifferentNicBandwidthsDifferInThatInput) {
  const std::string a = SimulateTo("a.json", {});
  const std::string b = SimulateTo("b.json", {"cluster.inter_node.nic_bandwidth=100 Gbps"});
  const CommandOutcome outcome = Diff({a, b});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  const std::string text = output_.str();
  EXPECT_THAT(text, HasSubstr("dtsim.simulate_result"));
  EXPECT_THAT(text, HasSubstr("resolved.cluster.inter_node.nic_bandwidth"));
  EXPECT_THAT(text, HasSubstr("\"200 Gbps\" -> \"100 Gbps\""));
  EXPECT_THAT(text, HasSubstr("overrides[0]"));
  EXPECT_THAT(text, HasSubstr("config.cluster.inter_node.nic_bandwidth"));
  // The config file is the same: its hash is not among the differences.
  EXPECT_THAT(text, Not(HasSubstr("gpt3_1.3b_16gpu.json.sha256")));
  EXPECT_THAT(text, HasSubstr("iteration"));
  EXPECT_THAT(text, HasSubstr("where the time moved"));
  const Json ra = *ReadJsonFile(a);
  const Json rb = *ReadJsonFile(b);
  EXPECT_GT(rb["iteration_time_ns"].get<int64_t>(), ra["iteration_time_ns"].get<int64_t>());
}

// The same run with twice the tokens to train: the budget differs, and the time to train
// doubles (failure-free: iterations × the same iteration).
TEST_F(DiffCommandTest, TimeToTrainMovesWithItsBudget) {
  const std::string a = SimulateTo("a.json", {"time_to_train.tokens=1e10"});
  const std::string b = SimulateTo("b.json", {"time_to_train.tokens=2e10"});
  const CommandOutcome outcome = Diff({a, b});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  const std::string text = output_.str();
  EXPECT_THAT(text, HasSubstr("config.time_to_train.tokens"));
  EXPECT_THAT(text, HasSubstr("time to train"));
  EXPECT_THAT(text, HasSubstr("+100.0%"));
}

TEST_F(DiffCommandTest, AResultAgainstItselfDiffersInNothing) {
  const std::string a = SimulateTo("a.json", {});
  ASSERT_EQ(Diff({a, a}).kind, CommandOutcome::Kind::kOk);
  EXPECT_THAT(output_.str(), HasSubstr("none: the results come from the same inputs"));
  EXPECT_THAT(output_.str(), HasSubstr("0.0%"));
}

// Any other family: every number that changed, largest relative change first.
TEST_F(DiffCommandTest, SweepsAndRunsAreComparedNumberByNumber) {
  std::ostringstream ignored;
  for (const char* bandwidth : {"200 Gbps", "50 Gbps"}) {
    ForgetInputFiles();
    const std::string prefix = Path(bandwidth[0] == '2' ? "s1" : "s2");
    const CommandOutcome sweep =
        SweepCommand(Args({kSmall, "--vary", "training.micro_batch=2,4", "--set",
                           std::string("cluster.inter_node.nic_bandwidth=") + bandwidth, "-o",
                           prefix, "--quiet"}),
                     ignored);
    ASSERT_EQ(sweep.kind, CommandOutcome::Kind::kOk) << sweep.error->ToString();
  }
  // Every changed number (--limit 0): the iteration time moves less than the collectives and
  // NCCL's buffers (fewer channels a slower NIC), which fill the first 20.
  ASSERT_EQ(Diff({Path("s1.json"), Path("s2.json"), "--limit", "0"}).kind,
            CommandOutcome::Kind::kOk);
  EXPECT_THAT(output_.str(), HasSubstr("dtsim.sweep"));
  EXPECT_THAT(output_.str(), HasSubstr("overrides[0]"));
  EXPECT_THAT(output_.str(), HasSubstr("points[0].result.iteration_time_ns"));
  EXPECT_THAT(output_.str(), Not(HasSubstr("compared by position")));
  // Sweeps over different keys said "none: the results come from the same inputs" and paired
  // their points by position.
  ForgetInputFiles();
  ASSERT_EQ(SweepCommand(Args({kSmall, "--vary", "parallelism.pipeline.size=1,2", "-o", Path("s3"),
                               "--quiet"}),
                         ignored)
                .kind,
            CommandOutcome::Kind::kOk);
  ASSERT_EQ(Diff({Path("s1.json"), Path("s3.json")}).kind, CommandOutcome::Kind::kOk);
  EXPECT_THAT(output_.str(), HasSubstr("vary[0].key"));
  EXPECT_THAT(output_.str(), Not(HasSubstr("none: the results come from the same inputs")));
  EXPECT_THAT(output_.str(), HasSubstr("(the sweeps' axes differ in what they list"));

  const std::string graph = DTSIM_EXAMPLES_DIR "/pipeline_2x2.json";
  for (const char* latency : {"5 us", "50 us"}) {
    ForgetInputFiles();
    const std::string out = Path(latency[1] == ' ' ? "r1.json" : "r2.json");
    ASSERT_EQ(RunCommand(Args({graph, "--comm-latency", latency, "-o", out}), ignored).kind,
              CommandOutcome::Kind::kOk);
  }
  ASSERT_EQ(Diff({Path("r1.json"), Path("r2.json"), "--limit", "0"}).kind,
            CommandOutcome::Kind::kOk);
  EXPECT_THAT(output_.str(),
              HasSubstr("input.communication_model.latency_ns                 5000 -> 50000"));
  EXPECT_THAT(output_.str(), HasSubstr("makespan_ns"));
  // The simulator's speed is the host's, not the run's.
  EXPECT_THAT(output_.str(), Not(HasSubstr("events_per_second")));
}

TEST_F(DiffCommandTest, BadInputsAreErrorsNamingTheFile) {
  const std::string a = SimulateTo("a.json", {});
  const std::string plain = Path("plain.json");
  ASSERT_TRUE(WriteFileAtomically(plain, "{\"a\": 1}").ok());
  const CommandOutcome not_result = Diff({a, plain});
  ASSERT_EQ(not_result.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(not_result.error->ToString(), HasSubstr(plain + ": format: not a dtsim result"));
  std::ostringstream ignored;
  ForgetInputFiles();
  ASSERT_EQ(
      SweepCommand(Args({kSmall, "--vary", "training.micro_batch=2,4", "-o", Path("s"), "--quiet"}),
                   ignored)
          .kind,
      CommandOutcome::Kind::kOk);
  const CommandOutcome families = Diff({a, Path("s.json")});
  ASSERT_EQ(families.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(families.error->ToString(), HasSubstr("different families"));
  EXPECT_EQ(Diff({a}).kind, CommandOutcome::Kind::kUsage);
  // --limit 0 shows every number; a negative limit was taken as 0 silently.
  const CommandOutcome negative = Diff({a, a, "--limit", "-1"});
  EXPECT_EQ(negative.kind, CommandOutcome::Kind::kUsage);
  EXPECT_THAT(negative.error->ToString(), HasSubstr("--limit: must be at least 0, got -1"));
  EXPECT_EQ(Diff({a, Path("missing.json")}).kind, CommandOutcome::Kind::kFailure);
}

// Fuzzing found a result whose provenance lists an input file with a number for its path:
// `diff` threw nlohmann's type_error and stopped with "internal error". Such an entry names no
// file; it is left out of the inputs compared (tests/fuzz/regressions/result_file/
// diff_provenance_input_path_a_number.json).
TEST_F(DiffCommandTest, AnInputWithoutAPathStringIsLeftOut) {
  const std::string a = SimulateTo("a.json", {});
  Expected<Json> edited = ReadJsonFile(a);
  ASSERT_TRUE(edited.ok());
  (*edited)["provenance"]["inputs"] = Json::parse(R"([{"path": 159.2}, {"sha256": "x"}])");
  const std::string b = Path("b.json");
  ASSERT_TRUE(WriteFileAtomically(b, edited->dump()).ok());
  const CommandOutcome outcome = Diff({a, b});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("inputs that differ"));
}

}  // namespace
}  // namespace dtsim::cli
