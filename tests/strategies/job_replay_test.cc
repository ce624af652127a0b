// A whole job replayed together (docs/replay.md, "A whole job"): the synthetic data-parallel job
// of tests/traces/synthetic_job.h, whose steps and what-ifs are derived by hand below.
//
// Each step: three compute kernels of c µs (the straggler's 1,300, the others' 1,000), an
// all-reduce of 64 MiB over the world whose transfer takes T = 2,000 µs, the host's sync and
// 15 µs of host time around it: 21 + 3 × max(c) + T = 5,921 µs on every rank.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "network/cluster.h"
#include "strategies/replay.h"
#include "tests/testing/temp_dir.h"
#include "tests/traces/synthetic_job.h"
#include "traces/kineto_reader.h"
#include "traces/replay_graph.h"

namespace dtsim::strategies {
namespace {

using testing::HasSubstr;
using testing_support::SyntheticJob;

class JobReplayTest : public testing_support::TempDirTest {
 protected:
  // Reads the traces of `spec`'s ranks `loaded` (all when empty).
  void Load(const SyntheticJob& spec, std::vector<int> loaded = {}) {
    if (loaded.empty()) {
      for (int rank = 0; rank < spec.ranks; ++rank) loaded.push_back(rank);
    }
    traces_.clear();
    for (int rank : loaded) {
      const std::string path = Path(fmt::format("rank{}.json", rank));
      std::ofstream(path) << testing_support::SyntheticRankTrace(spec, rank);
      Expected<traces::Trace> trace = traces::ReadKinetoTrace(path);
      ASSERT_TRUE(trace.ok()) << trace.error().ToString();
      traces_.push_back(std::move(trace).value());
    }
    job_.clear();
    for (const traces::Trace& trace : traces_) job_.push_back(&trace);
    Expected<traces::ReplayGraph> replay = traces::BuildReplayGraph(job_);
    ASSERT_TRUE(replay.ok()) << replay.error().ToString();
    replay_.emplace(std::move(replay).value());
    Expected<ReplayResult> result = SimulateReplay(*replay_);
    ASSERT_TRUE(result.ok()) << result.error().ToString();
    result_ = std::move(result).value();
  }

  Expected<WhatIfResult> WhatIf(const ReplayWhatIf& what_if) const {
    return SimulateWhatIf(job_, *replay_, result_, what_if);
  }

  // Every step of every rank of a what-if, which must all be equal: the job's step.
  static DurationNs JobStep(const WhatIfResult& result) {
    EXPECT_FALSE(result.steps.empty());
    for (const WhatIfStep& step : result.steps) EXPECT_EQ(step.what_if, result.steps[0].what_if);
    return result.steps.empty() ? DurationNs::Zero() : result.steps[0].what_if;
  }

  // The simulated duration of the what-if's first collective.
  static DurationNs FirstTransfer(const WhatIfResult& result) {
    return result.times.comm_end[0] - result.times.comm_start[0];
  }

  std::vector<traces::Trace> traces_;
  std::vector<const traces::Trace*> job_;
  std::optional<traces::ReplayGraph> replay_;
  ReplayResult result_;
};

// 2, 4 and 8 ranks, clocks offset by up to 5 s: each rank's steps replay to the nanosecond and
// every GPU op starts where it started, each step's all-reduce one collective of all ranks.
TEST_F(JobReplayTest, JobsOfTwoToEightRanksReplayExactly) {
  for (const int ranks : {2, 4, 8}) {
    SyntheticJob spec;
    spec.ranks = ranks;
    spec.straggler = ranks - 1;
    spec.clock_offset_us.assign(static_cast<size_t>(ranks), 0);
    spec.clock_offset_us[1] = 5'000'000;
    spec.clock_offset_us[static_cast<size_t>(ranks - 1)] = -250;
    Load(spec);
    EXPECT_EQ(replay_->stats.job_collectives, 3);
    EXPECT_EQ(replay_->stats.collectives, 3);
    ASSERT_EQ(result_.steps.size(), static_cast<size_t>(3 * ranks));
    for (const ReplayStepResult& step : result_.steps) {
      EXPECT_EQ(step.measured, Microseconds(5921));
      EXPECT_EQ(step.simulated, Microseconds(5921)) << ranks << " ranks, trace " << step.trace;
    }
    EXPECT_EQ(result_.max_start_drift, DurationNs::Zero()) << ranks << " ranks";
    EXPECT_EQ(replay_->ranks.size(), static_cast<size_t>(ranks));
  }
}

// Where the time goes: on the straggler (rank 3) the path is its own — 3,900 µs of GEMMs, the
// 2,000 µs transfer, 21 µs of host, API and sync. On every other rank the path crosses to the
// straggler at the all-reduce: the 3,906 µs before its arrival (its launch, 1 µs of gap and its
// kernels) ran on a peer.
TEST_F(JobReplayTest, APathThatWaitedForTheStragglerRanOnIt) {
  SyntheticJob spec;
  spec.straggler = 3;
  Load(spec);
  for (const ReplayStepResult& step : result_.steps) {
    EXPECT_EQ(step.path[PathPart::kGpu], Microseconds(3900));
    EXPECT_EQ(step.path[PathPart::kCommunication], Microseconds(2000));
    EXPECT_EQ(step.path.Total(), Microseconds(5921));
    const int32_t rank = replay_->ranks[step.trace];
    EXPECT_EQ(step.path.on_peers, rank == 3 ? DurationNs::Zero() : Microseconds(3906))
        << "rank " << rank;
  }
}

// Removing the straggler: rank 3's kernels 1.3× faster make them 1,000 µs like the others', and
// every rank's step 21 + 3,000 + 2,000 = 5,021 µs. Speeding up a rank that waited changes
// nothing: its kernels were not on the path.
TEST_F(JobReplayTest, SpeedingUpTheStragglerShortensEveryRanksStep) {
  SyntheticJob spec;
  spec.straggler = 3;
  Load(spec);
  ReplayWhatIf straggler;
  straggler.speedups = {{traces::KernelClass::kAll, 1.3, 3}};
  const Expected<WhatIfResult> fixed = WhatIf(straggler);
  ASSERT_TRUE(fixed.ok()) << fixed.error().ToString();
  EXPECT_EQ(JobStep(*fixed), Microseconds(5021));
  EXPECT_EQ(fixed->graph.stats.sped_up_ops, 9);  // 3 kernels × 3 steps, rank 3 only

  ReplayWhatIf other;
  other.speedups = {{traces::KernelClass::kAll, 2, 0}};
  const Expected<WhatIfResult> unchanged = WhatIf(other);
  ASSERT_TRUE(unchanged.ok()) << unchanged.error().ToString();
  EXPECT_EQ(JobStep(*unchanged), Microseconds(5921));

  ReplayWhatIf absent;
  absent.speedups = {{traces::KernelClass::kAll, 2, 9}};
  EXPECT_THAT(WhatIf(absent).error().ToString(),
              HasSubstr("no trace of rank 9 in the replay (ranks 0, 1, 2, 3)"));
}

// The exposed all-reduce on another network. Eight ranks, one per node on 25 Gb/s Ethernet: a
// ring all-reduce sends 2 × 7/8 × 64 MiB = 117.4 MB through each NIC, 37.6 ms at 3.125 GB/s,
// plus 14 hops of 25 µs; on one DGX A100's NVLink (300 GB/s × 0.775) under a millisecond. The
// job's step moves by exactly what the transfer moves — 5,921 − 2,000 + T' — and 25 GbE is the
// slower by the difference of the two transfers: the network is what changes, not the skew.
TEST_F(JobReplayTest, ANetworkWhatIfMovesTheStepByTheTransfer) {
  SyntheticJob spec;
  spec.ranks = 8;
  spec.straggler = 5;
  Load(spec);
  Expected<network::ClusterSpec> ethernet =
      network::ClusterFromJson(Json{{"preset", "ethernet-25g"}, {"gpus_per_node", 1}}, "");
  ASSERT_TRUE(ethernet.ok()) << ethernet.error().ToString();
  ReplayWhatIf slow;
  slow.cluster = *ethernet;
  const Expected<WhatIfResult> on_ethernet = WhatIf(slow);
  ASSERT_TRUE(on_ethernet.ok()) << on_ethernet.error().ToString();
  const DurationNs ethernet_transfer = FirstTransfer(*on_ethernet);
  const double ring_ms = 2.0 * 7 / 8 * (64 << 20) / 3.125e9 * 1e3 + 14 * 0.025;
  EXPECT_NEAR(ethernet_transfer.ToMicrosecondsDouble() / 1e3, ring_ms, 0.1 * ring_ms);
  EXPECT_EQ(JobStep(*on_ethernet), Microseconds(5921 - 2000) + ethernet_transfer);

  ReplayWhatIf fast;
  fast.cluster = *network::ClusterPreset("dgx-a100", 0);
  const Expected<WhatIfResult> on_nvlink = WhatIf(fast);
  ASSERT_TRUE(on_nvlink.ok()) << on_nvlink.error().ToString();
  const DurationNs nvlink_transfer = FirstTransfer(*on_nvlink);
  EXPECT_LT(nvlink_transfer, Milliseconds(1));
  EXPECT_EQ(JobStep(*on_nvlink), Microseconds(5921 - 2000) + nvlink_transfer);
  EXPECT_EQ(JobStep(*on_ethernet) - JobStep(*on_nvlink), ethernet_transfer - nvlink_transfer);
}

// Two of a four-rank job loaded, the straggler (rank 3) not among them: the shared all-reduce's
// transfer (2,900 µs: their shortest kernel) still holds their wait for the ranks the job does
// not load. Told where the trace ran, a network what-if keeps that wait (the transfer less the
// model's price there) and prices the transfer anew: on the same cluster the step does not move.
TEST_F(JobReplayTest, ARankTheJobDoesNotLoadStaysAMeasuredWait) {
  SyntheticJob spec;
  spec.straggler = 3;
  Load(spec, {0, 1});
  EXPECT_EQ(replay_->comm_durations[0], Microseconds(2900));
  ReplayWhatIf same;
  same.cluster = *network::ClusterPreset("dgx-a100", 0);
  same.traced_cluster = same.cluster;
  const Expected<WhatIfResult> result = WhatIf(same);
  ASSERT_TRUE(result.ok()) << result.error().ToString();
  EXPECT_EQ(result->graph.stats.peer_waits, 6);  // both ranks, three steps
  EXPECT_EQ(JobStep(*result), Microseconds(5921));
}

TEST_F(JobReplayTest, TheWorldCannotShrinkBelowTheRanksLoaded) {
  Load(SyntheticJob{});
  ReplayWhatIf smaller;
  smaller.cluster = *network::ClusterPreset("dgx-a100", 0);
  smaller.data_parallel = 2;
  EXPECT_THAT(WhatIf(smaller).error().ToString(), HasSubstr("the job loads 4 ranks"));
  smaller.data_parallel = 64;
  const Expected<WhatIfResult> larger = WhatIf(smaller);
  ASSERT_TRUE(larger.ok()) << larger.error().ToString();
  EXPECT_EQ(larger->graph.stats.rescaled_collectives, 12);  // 3 all-reduces seen by 4 ranks
}

}  // namespace
}  // namespace dtsim::strategies
