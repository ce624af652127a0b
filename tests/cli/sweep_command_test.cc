#include "tools/cli/sweep_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "sim/base/json_reader.h"
#include "tests/testing/temp_dir.h"

namespace dtsim::cli {
namespace {

using testing::HasSubstr;

const std::string kBert = DTSIM_EXAMPLES_DIR "/bert_large_64gpu_ethernet.json";

class SweepCommandTest : public testing_support::TempDirTest {
 protected:
  CommandOutcome Sweep(std::vector<std::string> args) {
    output_.str("");
    return SweepCommand(args, output_);
  }
  std::ostringstream output_;
};

// BERT-Large data parallel on 64 V100s over Ethernet, with and without 1-bit Adam (DeepSpeed's
// 23,000 of 152,000 steps as the full-precision warm-up): compression pays off on slow links
// and not on fast ones, where its warm-up and compression kernels cost more than it saves.
TEST_F(SweepCommandTest, OneBitAdamPaysOffOnSlowNetworksOnly) {
  const CommandOutcome outcome = Sweep(
      {kBert, "--vary",
       R"(compression=none,{"method": "onebit_adam", "steps": 152000, "warmup_steps": 23000})",
       "--vary", "cluster.inter_node.nic_bandwidth=10 Gbps,40 Gbps,200 Gbps", "-o", Path("bert")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("6 points"));
  const Expected<Json> json = ReadJsonFile(Path("bert.json"));
  ASSERT_TRUE(json.ok());
  EXPECT_EQ((*json)["format"], "dtsim.sweep");
  const Json& points = (*json)["points"];
  ASSERT_EQ(points.size(), 6u);
  // The first --vary changes slowest.
  EXPECT_EQ(points[0]["values"]["compression"], "none");
  EXPECT_EQ(points[1]["values"]["cluster.inter_node.nic_bandwidth"], "40 Gbps");
  EXPECT_EQ(points[3]["values"]["compression"]["method"], "onebit_adam");
  const auto time = [&points](size_t i) {
    return points[i]["result"]["compression"]["average_iteration_time_ns"].get<double>();
  };
  EXPECT_GT(time(0) / time(3), 2.0);  // 10 Gb/s
  EXPECT_GT(time(1) / time(4), 1.1);  // 40 Gb/s
  EXPECT_LT(time(2) / time(5), 1.0);  // 200 Gb/s: the warm-up and the kernels cost more
  std::ifstream csv(Path("bert.csv"));
  std::string header;
  std::getline(csv, header);
  // Issue 35: one CSV convention — a bandwidth axis in bytes per second, as numbers; memory in
  // bytes; times in seconds (docs/formats/sweep-result.md, "CSV").
  EXPECT_EQ(header.substr(0, 91),
            "compression,cluster.inter_node.nic_bandwidth_bytes_per_s,status,iteration_time_s,"
            "average_it");
  EXPECT_THAT(header, HasSubstr(",mfu,memory_bytes,compute_s,"));
  EXPECT_THAT(header, HasSubstr(",idle_s,time_to_train_s,error"));
  std::string first;
  std::getline(csv, first);
  EXPECT_THAT(first, HasSubstr(",1250000000,ok,"));  // 10 Gbps
}

// With a time_to_train section the table has the run's wall clock: BERT-Large's 10^10 tokens at
// 4,096 and 8,192 sequences of 128 tokens (docs/time_to_train.md).
TEST_F(SweepCommandTest, TheTableShowsTheTimeToTrain) {
  const CommandOutcome outcome = Sweep({kBert, "--vary", "training.global_batch=4096,8192", "--set",
                                        "time_to_train.tokens=1e10", "-o", Path("run")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("time to train"));
  EXPECT_THAT(output_.str(), HasSubstr("the run's wall clock"));
  // Without one, no such column.
  ASSERT_EQ(Sweep({kBert, "--vary", "training.global_batch=4096,8192"}).kind,
            CommandOutcome::Kind::kOk);
  EXPECT_THAT(output_.str(), testing::Not(HasSubstr("time to train")));
}

TEST_F(SweepCommandTest, BadInputIsNamed) {
  CommandOutcome outcome = Sweep({kBert, "--vary", "training.globl_batch=1,2"});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_EQ(outcome.error->ToString(),
            "training.globl_batch: unknown key (did you mean \"global_batch\"?)");
  outcome = Sweep({kBert, "--vary", "parallelism.data=3,5"});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("every point failed; the first: "));
  EXPECT_THAT(outcome.error->ToString(),
              HasSubstr("bert_large_64gpu_ethernet.json: training.global_batch"));
  // A failing point among good ones is reported in its row.
  outcome = Sweep({kBert, "--vary", "parallelism.data=64,3"});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk);
  EXPECT_THAT(output_.str(), HasSubstr("  3                failed: "));
  EXPECT_EQ(Sweep({kBert}).kind, CommandOutcome::Kind::kUsage);
  EXPECT_EQ(Sweep({kBert, "--vary", "training.global_batch"}).kind, CommandOutcome::Kind::kUsage);
  EXPECT_EQ(Sweep({kBert, "--vary", "training.global_batch=1,,2"}).kind,
            CommandOutcome::Kind::kUsage);
  outcome = Sweep({kBert, "--vary", "training.micro_batch=1", "--vary", "training.micro_batch=2"});
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("key varied twice"));
  // A billion points would lay out their results until the kernel killed the process; the
  // size is an error before anything runs. 100 000 points pass the check.
  const auto values = [](int count) {  // "1,2,...,count"
    std::string list = "1";
    for (int v = 2; v <= count; ++v) {
      list += ',';
      list += std::to_string(v);
    }
    return list;
  };
  const std::string thousand = values(1000);
  outcome = Sweep({kBert, "--vary", "training.global_batch=" + thousand, "--vary",
                   "training.seq_len=" + thousand, "--vary", "model.layers=" + thousand});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_EQ(outcome.error->ToString(),
            "vary: the sweep has 1000 × 1000 × 1000 points, more than the 100000 one sweep runs "
            "(each is simulated and keeps its full result): vary fewer values, or split it into "
            "several sweeps");
  outcome = Sweep({kBert, "--vary", "training.global_batch=" + thousand, "--vary",
                   "training.seq_len=" + values(101)});
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("1000 × 101 points, more than the 100000"));
  // 1000 × 100 is within the limit: the sweep goes on to read its config (absent here, so it
  // stops there rather than run 100 000 simulations).
  outcome = Sweep({Path("absent.json"), "--vary", "training.global_batch=" + thousand, "--vary",
                   "training.seq_len=" + values(100)});
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("absent.json: cannot open"));
}

}  // namespace
}  // namespace dtsim::cli
