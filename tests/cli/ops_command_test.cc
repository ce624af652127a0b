#include "tools/cli/ops_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "tests/testing/temp_dir.h"
#include "traces/op_cost_table.h"

namespace dtsim::cli {
namespace {

using testing::HasSubstr;

class OpsCommandTest : public testing_support::TempDirTest {
 protected:
  CommandOutcome Ops(std::vector<std::string> args) {
    output_.str("");
    return OpsCommand(args, output_);
  }
  std::ostringstream output_;
};

// The numbers are traces/op_profile_test's, which checks them against a Python count.
TEST_F(OpsCommandTest, PrintsTheTopSignaturesAndWritesAReadableTable) {
  const CommandOutcome outcome =
      Ops({DTSIM_SHARED_DIR "/traces/kineto/timeline_analysis__sampled_rank-0.json.gz", "-o",
           Path("profile.json"), "--gpu", "a100-sxm4-80gb", "--top", "40"});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("1194 GPU ops (collectives excluded), 1178 launched inside "
                                       "a framework op; 1062 op instances"));
  EXPECT_THAT(output_.str(), HasSubstr("16 GPU op launched outside any framework op"));
  EXPECT_THAT(output_.str(), HasSubstr("1251.5     1251.5     1251.0"));  // the 8192² gemm
  const Expected<traces::OpCostTable> table = traces::ReadOpCostTable(Path("profile.json"));
  ASSERT_TRUE(table.ok()) << table.error().ToString();
  EXPECT_EQ(table->gpu(), "a100-sxm4-80gb");
  EXPECT_FALSE(table->empty());
}

TEST_F(OpsCommandTest, BadInputIsAFailure) {
  EXPECT_THAT(Ops({Path("missing.json")}).error->ToString(), HasSubstr("cannot open"));
  EXPECT_EQ(Ops({}).kind, CommandOutcome::Kind::kUsage);
  // A trace recorded without shapes keys no op: -o wrote an empty table and exited 0.
  const CommandOutcome empty =
      Ops({DTSIM_SHARED_DIR "/traces/kineto/critical_path__alexnet__benchmark_result_"
                            "2869224_1695835535_trace.json.gz",
           "-o", Path("empty.json")});
  ASSERT_EQ(empty.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(empty.error->ToString(),
              HasSubstr("empty.json: no op could be keyed into a signature (69 op instances, none "
                        "keyed; see \"left out\" above): nothing written; record the trace with "
                        "record_shapes=True"));
  EXPECT_FALSE(std::filesystem::exists(Path("empty.json")));
  const CommandOutcome negative = Ops({Path("missing.json"), "--top", "-3"});
  EXPECT_EQ(negative.kind, CommandOutcome::Kind::kUsage);
  EXPECT_THAT(negative.error->ToString(), HasSubstr("--top: must be at least 0, got -3"));
  EXPECT_THAT(Ops({DTSIM_SHARED_DIR "/traces/chakra/chakra.0.et"}).error->ToString(),
              HasSubstr("chakra.0.et: a Chakra execution trace: op tables are built from"));
}

// --gpu names the table's GPU; one of another family than the trace's device would label an
// A100's times as an H100's.
TEST_F(OpsCommandTest, TheGpuNamedMustBeTheTracesFamily) {
  const std::string a100 = DTSIM_SHARED_DIR "/traces/kineto/triton_example__triton_example.json.gz";
  const CommandOutcome other = Ops({a100, "--gpu", "h100-sxm5-80gb"});
  ASSERT_EQ(other.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(other.error->ToString(),
              HasSubstr("--gpu: the trace ran on NVIDIA A100-PG509-200 (a100), not on the GPU "
                        "--gpu names (h100)"));
  EXPECT_EQ(Ops({a100, "--gpu", "a100-sxm4-80gb"}).kind, CommandOutcome::Kind::kOk);
}

}  // namespace
}  // namespace dtsim::cli
