// Issue 26: no command writes an output over one of its inputs. Each command is run with an
// output naming its own input, through another spelling of the path; each refuses before any
// work, and the input is left as it was.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <sstream>

#include "sim/base/atomic_file.h"
#include "tests/testing/temp_dir.h"
#include "tools/cli/ops_command.h"
#include "tools/cli/replay_command.h"
#include "tools/cli/report_command.h"
#include "tools/cli/run_command.h"
#include "tools/cli/search_command.h"
#include "tools/cli/simulate_command.h"
#include "tools/cli/sweep_command.h"
#include "tools/cli/validate_command.h"

namespace dtsim::cli {
namespace {

using testing::HasSubstr;
using Command = std::function<CommandOutcome(std::span<const std::string>, std::ostream&)>;

class OutputsOverInputsTest : public testing_support::TempDirTest {
 protected:
  // Copies `source` into the test's folder as `name`; returns the copy's path.
  std::string Copy(const std::string& source, const std::string& name) {
    const std::string path = Path(name);
    EXPECT_TRUE(WriteFileAtomically(path, *ReadFile(source)).ok());
    ForgetInputFiles();  // the copy's source was read, not the copy
    return path;
  }
  // Another spelling of `path`: through the folder's parent.
  std::string Respelled(const std::string& path) const {
    return dir_.string() + "/../" + dir_.filename().string() + "/" +
           std::filesystem::path(path).filename().string();
  }
  void ExpectRefused(const Command& command, std::vector<std::string> args,
                     const std::string& input) {
    const std::string before = *ReadFile(input);
    std::ostringstream out;
    const CommandOutcome outcome = command(args, out);
    ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure) << args.front();
    EXPECT_THAT(outcome.error->ToString(),
                HasSubstr("refusing to write an output over an input of this command"));
    EXPECT_EQ(*ReadFile(input), before);
    ForgetInputFiles();
  }
};

TEST_F(OutputsOverInputsTest, EveryCommandRefusesToReplaceItsInput) {
  const std::string config = Copy(DTSIM_EXAMPLES_DIR "/gpt3_1.3b_16gpu.json", "config.json");
  const std::string graph = Copy(DTSIM_EXAMPLES_DIR "/pipeline_2x2.json", "graph.json");
  const std::string trace = Copy(DTSIM_SHARED_DIR
                                 "/traces/kineto/critical_path__cuda_event_sync__event_sync_trace"
                                 ".json.gz",
                                 "trace.json");
  ExpectRefused(RunCommand, {graph, "-o", Respelled(graph)}, graph);
  ExpectRefused(RunCommand, {graph, "--timeline", graph}, graph);
  ExpectRefused(ReplayCommand, {trace, "-o", Respelled(trace)}, trace);
  ExpectRefused(ReplayCommand, {trace, "--timeline", trace}, trace);
  ExpectRefused(OpsCommand, {trace, "-o", trace}, trace);
  // search and sweep write PREFIX.json and PREFIX.csv: a prefix of "config" names the config.
  const std::string prefix = Path("config");
  ExpectRefused(SearchCommand, {config, "-o", prefix, "--quiet"}, config);
  ExpectRefused(SweepCommand,
                {config, "--vary", "parallelism.pipeline.schedule=gpipe", "-o", prefix, "--quiet"},
                config);
  const std::string points =
      Copy(DTSIM_SHARED_DIR "/validation/published-points.json", "points.json");
  ExpectRefused(ValidateCommand, {points, "-o", Respelled(points)}, points);
}

// Two outputs of one command that are one file: the second write replaced the first and the
// command exited 0. A device shared by two outputs is written in place and stays allowed.
TEST_F(OutputsOverInputsTest, TwoOutputsAreNeverOneFile) {
  const std::string config = DTSIM_EXAMPLES_DIR "/gpt3_1.3b_16gpu.json";
  const auto run = [](const Command& command, std::vector<std::string> args) {
    std::ostringstream out;
    ForgetInputFiles();
    return command(args, out);
  };
  const std::string result = Path("r.json");
  CommandOutcome outcome =
      run(SimulateCommand, {config, "-o", result, "--timeline", Respelled(result), "-q"});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(),
              HasSubstr("named for two of the command's outputs (\"" + result + "\" and"));
  EXPECT_FALSE(std::filesystem::exists(result));
  outcome = run(SimulateCommand, {config, "-o", result, "--op-list", result, "-q"});
  EXPECT_THAT(outcome.error->ToString(),
              HasSubstr(result + ": named for two of the command's outputs: one would replace"));
  const std::string graph = DTSIM_EXAMPLES_DIR "/pipeline_2x2.json";
  outcome = run(RunCommand, {graph, "-o", result, "--timeline", result, "-q"});
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("named for two of the command's outputs"));
  outcome = run(SimulateCommand, {config, "-o", "/dev/null", "--timeline", "/dev/null", "-q"});
  EXPECT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();

  // simulate --chakra PREFIX: a directory (its files would be hidden ".0.et" in it) and an
  // output that is one of PREFIX's files.
  const std::vector<std::string> full = {"--set", "simulation.ranks=full", "-q"};
  std::vector<std::string> args = {config, "--chakra", dir_.string() + "/"};
  args.insert(args.end(), full.begin(), full.end());
  EXPECT_THAT(run(SimulateCommand, args).error->ToString(),
              HasSubstr("is a directory: --chakra takes a prefix of file names"));
  args = {config, "--chakra", Path("et"), "--timeline", Path("et.12.et")};
  args.insert(args.end(), full.begin(), full.end());
  EXPECT_THAT(run(SimulateCommand, args).error->ToString(),
              HasSubstr("et.12.et: is one of the files of --chakra"));
  args = {config, "--chakra", Path("et"), "-o", Respelled(Path("et.comm_groups.json"))};
  args.insert(args.end(), full.begin(), full.end());
  EXPECT_THAT(run(SimulateCommand, args).error->ToString(),
              HasSubstr("et.comm_groups.json: is one of the files of --chakra"));
  EXPECT_FALSE(std::filesystem::exists(Path("et.0.et")));
}

TEST_F(OutputsOverInputsTest, TheReportRefusesADirectoryWhoseFilesAreInputs) {
  // A result named index.html in the report's directory would be replaced by the page.
  ASSERT_TRUE(WriteFileAtomically(Path("index.html"), R"({"format": "dtsim.sweep"})").ok());
  std::ostringstream out;
  const std::vector<std::string> args = {Path("index.html"), "-o", dir_.string()};
  const CommandOutcome outcome = ReportCommand(args, out);
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("it would replace the input"));
  // And an output directory that is an input file.
  const std::vector<std::string> file_as_dir = {Path("index.html"), "-o", Path("index.html")};
  EXPECT_THAT(ReportCommand(file_as_dir, out).error->ToString(),
              HasSubstr("refusing to write an output over an input of this command"));
}

}  // namespace
}  // namespace dtsim::cli
