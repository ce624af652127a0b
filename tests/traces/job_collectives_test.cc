// Matching a job's collectives across its ranks' traces (traces/job_collectives.h): on the
// synthetic job of tests/traces/synthetic_job.h, whose every collective and clock is known, and
// on the two sampled ranks of one 128-rank job in ../shared/traces.
#include "traces/job_collectives.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "tests/testing/temp_dir.h"
#include "tests/traces/synthetic_job.h"
#include "traces/kineto_reader.h"

namespace dtsim::traces {
namespace {

using testing_support::SyntheticJob;

class JobCollectivesTest : public testing_support::TempDirTest {
 protected:
  // The job's traces, read from the files SyntheticRankTrace writes.
  std::vector<Trace> ReadJob(const SyntheticJob& job) {
    std::vector<Trace> traces;
    for (int rank = 0; rank < job.ranks; ++rank) {
      traces.push_back(ReadText(fmt::format("rank{}.json", rank),
                                testing_support::SyntheticRankTrace(job, rank)));
    }
    return traces;
  }

  Trace ReadText(const std::string& name, const std::string& text) {
    std::ofstream(Path(name)) << text;
    Expected<Trace> trace = ReadKinetoTrace(Path(name));
    EXPECT_TRUE(trace.ok()) << trace.error().ToString();
    return std::move(trace).value();
  }

  static std::vector<const Trace*> Pointers(const std::vector<Trace>& traces) {
    std::vector<const Trace*> job;
    for (const Trace& trace : traces) job.push_back(&trace);
    return job;
  }
};

// Four ranks, rank 3 the straggler (1,300 µs kernels against 1,000), T = 2,000 µs, three steps,
// clocks offset by 0, +5 s, −300 µs and +7 µs: each step's all-reduce is one collective of the
// four, its transfer the straggler's kernel (2,000 µs: it arrived last), which arrived at
// 6 + 3 × 1,300 = 3,906 µs into the step; the offsets are recovered to the microsecond.
TEST_F(JobCollectivesTest, MatchesEveryStepsAllReduceAndRecoversTheClocks) {
  SyntheticJob spec;
  spec.straggler = 3;
  spec.clock_offset_us = {0, 5'000'000, -300, 7};
  const std::vector<Trace> traces = ReadJob(spec);
  const JobCollectives job = MatchJobCollectives(Pointers(traces));
  ASSERT_EQ(job.collectives.size(), 3u);
  for (size_t step = 0; step < 3; ++step) {
    const JobCollective& collective = job.collectives[step];
    EXPECT_EQ(collective.members.size(), 4u);
    EXPECT_EQ(collective.transfer, Microseconds(2000));
    // Step n starts at 1 s + (n − 1) × 5,921 µs on rank 0's clock.
    const TimeNs step_start =
        TimeNs::Zero() + Microseconds(1'000'000 + static_cast<int64_t>(step) * spec.StepUs());
    EXPECT_EQ(collective.last_arrival - step_start, Microseconds(3906));
  }
  EXPECT_EQ(job.clock_offset, (std::vector<DurationNs>{DurationNs::Zero(), Seconds(5),
                                                       Microseconds(-300), Microseconds(7)}));
  EXPECT_EQ(job.aligned, (std::vector<bool>{true, true, true, true}));
  EXPECT_EQ(job.unmatched, (std::vector<int64_t>{0, 0, 0, 0}));
  for (size_t rank = 0; rank < 4; ++rank) {
    EXPECT_THAT(job.of_rank[rank], testing::ElementsAre(0u, 1u, 2u)) << "rank " << rank;
  }
}

// Traces that start at different steps (profilers started at different kernels): rank 1 from
// step 2, rank 3 (the straggler) from step 3. Step 1's all-reduce is shared by ranks 0 and 2
// only, and its transfer — their shortest kernel — still holds their wait for the straggler the
// job does not load: 3 × (1,300 − 1,000) + 2,000 = 2,900 µs.
TEST_F(JobCollectivesTest, TracesThatStartLateShareTheCollectivesTheyHave) {
  SyntheticJob spec;
  spec.straggler = 3;
  spec.first_step = {1, 2, 1, 3};
  spec.clock_offset_us = {0, 123, 0, -40};
  const std::vector<Trace> traces = ReadJob(spec);
  const JobCollectives job = MatchJobCollectives(Pointers(traces));
  ASSERT_EQ(job.collectives.size(), 3u);
  std::vector<size_t> members;
  for (const JobCollective& collective : job.collectives) {
    members.push_back(collective.members.size());
  }
  EXPECT_EQ(members, (std::vector<size_t>{2, 3, 4}));
  EXPECT_EQ(job.collectives[0].transfer, Microseconds(2900));
  EXPECT_EQ(job.collectives[2].transfer, Microseconds(2000));
  EXPECT_EQ(job.clock_offset[1], Microseconds(123));
  EXPECT_EQ(job.clock_offset[3], Microseconds(-40));
  EXPECT_EQ(job.unmatched, (std::vector<int64_t>{0, 0, 0, 0}));
}

// Traces that record a group's size but not its ranks (before PyTorch 2.1) cannot tell two
// tensor-parallel pairs apart — their collectives end together. A collective of a 2-rank group
// takes the first two ranks that share it, 0 and 1; ranks 2 and 3 keep theirs.
TEST_F(JobCollectivesTest, AGroupTakesNoMoreMembersThanItsSize) {
  SyntheticJob spec;
  spec.group_names = false;
  spec.group_size = 2;
  const std::vector<Trace> traces = ReadJob(spec);
  const JobCollectives job = MatchJobCollectives(Pointers(traces));
  ASSERT_EQ(job.collectives.size(), 3u);
  for (const JobCollective& collective : job.collectives) {
    ASSERT_EQ(collective.members.size(), 2u);
    EXPECT_EQ(collective.members[0].first, 0u);
    EXPECT_EQ(collective.members[1].first, 1u);
  }
  EXPECT_EQ(job.unmatched, (std::vector<int64_t>{0, 0, 3, 3}));
}

// Collectives of different process groups, or of different sizes in traces that record them,
// are not one collective, however close their ends.
TEST_F(JobCollectivesTest, DifferentGroupsOrSizesDoNotMatch) {
  SyntheticJob spec;
  spec.ranks = 2;
  std::vector<Trace> traces;
  traces.push_back(ReadText("rank0.json", testing_support::SyntheticRankTrace(spec, 0)));
  std::string other_group = testing_support::SyntheticRankTrace(spec, 1);
  for (size_t at = other_group.find(R"("Process Group Name": "0")"); at != std::string::npos;
       at = other_group.find(R"("Process Group Name": "0")", at + 1)) {
    other_group.replace(at, 25, R"("Process Group Name": "7")");
  }
  traces.push_back(ReadText("rank1.json", other_group));
  EXPECT_TRUE(MatchJobCollectives(Pointers(traces)).collectives.empty());

  SyntheticJob larger = spec;
  larger.all_reduce_bytes *= 2;
  traces.pop_back();
  traces.push_back(ReadText("rank1b.json", testing_support::SyntheticRankTrace(larger, 1)));
  const JobCollectives job = MatchJobCollectives(Pointers(traces));
  EXPECT_TRUE(job.collectives.empty());
  EXPECT_EQ(job.unmatched, (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(job.aligned, (std::vector<bool>{true, false}));
}

// The two sampled ranks of one 128-rank job (HTA's test data): each trace kept 10 of the job's
// NCCL kernels (all SendRecv kernels: all-to-alls and all-reduces of an old PyTorch, their kinds
// inferred from annotations), different ones. Five of rank 0's end within 0.34 ms of five of
// rank 1's (the same collective seen from both GPUs of one host); the other five of each have no
// partner. One host, one clock: the offset found is 8 µs.
TEST_F(JobCollectivesTest, TheTwoSampledRanksOfOneJobShareFiveCollectives) {
  const std::string dir = DTSIM_SHARED_DIR "/traces/kineto/";
  std::vector<Trace> traces;
  for (const char* name :
       {"timeline_analysis__sampled_rank-0.json.gz", "trace_filter__sampled_rank-1.json.gz"}) {
    Expected<Trace> trace = ReadKinetoTrace(dir + name);
    ASSERT_TRUE(trace.ok()) << trace.error().ToString();
    traces.push_back(std::move(trace).value());
  }
  const JobCollectives job = MatchJobCollectives(Pointers(traces));
  EXPECT_EQ(job.collectives.size(), 5u);
  EXPECT_EQ(job.unmatched, (std::vector<int64_t>{5, 5}));
  EXPECT_EQ(job.clock_offset[1], Microseconds(8));
  for (const JobCollective& collective : job.collectives) EXPECT_EQ(collective.members.size(), 2u);
}

TEST_F(JobCollectivesTest, OneTraceIsAJobOfOneWithNothingShared) {
  const std::vector<Trace> traces = ReadJob(SyntheticJob{});
  const std::vector<const Trace*> one = {&traces[0]};
  const JobCollectives job = MatchJobCollectives(one);
  EXPECT_TRUE(job.collectives.empty());
  EXPECT_EQ(job.unmatched, (std::vector<int64_t>{3}));
  EXPECT_EQ(job.aligned, (std::vector<bool>{true}));
}

}  // namespace
}  // namespace dtsim::traces
