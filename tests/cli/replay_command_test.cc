#include "tools/cli/replay_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "sim/base/json_reader.h"
#include "tests/testing/temp_dir.h"

namespace dtsim::cli {
namespace {

using testing::HasSubstr;

const std::string kSampledRank0 =
    DTSIM_SHARED_DIR "/traces/kineto/timeline_analysis__sampled_rank-0.json.gz";

class ReplayCommandTest : public testing_support::TempDirTest {
 protected:
  CommandOutcome Replay(std::vector<std::string> args) {
    output_.str("");
    return ReplayCommand(args, output_);
  }
  std::ostringstream output_;
};

TEST_F(ReplayCommandTest, PrintsStatisticsAndStepsAndWritesResultAndTimeline) {
  const CommandOutcome outcome =
      Replay({kSampledRank0, "-o", Path("replay.json"), "--timeline", Path("timeline.json")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("kineto format, rank 0 of 128 (nccl)"));
  EXPECT_THAT(output_.str(), HasSubstr("1154 kernels, 40 copies, 10 sets on 5 streams"));
  EXPECT_THAT(output_.str(), HasSubstr("ProfilerStep#551"));
  EXPECT_THAT(output_.str(), HasSubstr("mean absolute error over 2 steps"));
  const Json result = *ReadJsonFile(Path("replay.json"));
  EXPECT_EQ(result["format"], "dtsim.replay_result");
  EXPECT_EQ(result["trace"]["kernels"], 1154);
  EXPECT_EQ(result["steps"].size(), 2u);
  EXPECT_EQ(result["steps"][0]["step"], 551);
  EXPECT_DOUBLE_EQ(result["steps"][0]["measured_ms"].get<double>(), 607.312);
  const Expected<Json> timeline = ReadJsonFile(Path("timeline.json"));
  ASSERT_TRUE(timeline.ok()) << timeline.error().ToString();
  EXPECT_GT((*timeline)["traceEvents"].size(), 4000u);
}

TEST_F(ReplayCommandTest, BadInputIsAFailureNamingTheFile) {
  const CommandOutcome missing = Replay({Path("nope.json")});
  EXPECT_EQ(missing.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(missing.error->ToString(), HasSubstr("nope.json: cannot open"));
  EXPECT_EQ(Replay({}).kind, CommandOutcome::Kind::kUsage);
}

}  // namespace
}  // namespace dtsim::cli
