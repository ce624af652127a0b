#include "tools/cli/replay_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/base/json_reader.h"
#include "tests/testing/temp_dir.h"
#include "tests/traces/chakra_test_traces.h"
#include "tests/traces/synthetic_job.h"
#include "tools/cli/simulate_command.h"
#include "traces/chakra_writer.h"
#include "traces/kineto_reader.h"

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

// Regression (issue 26): rank 0 of a real 2-rank NCCL job (6 broadcasts, 15 all-reduces over
// process group "0" = ranks [0, 1]) aborted on an internal check: a broadcast's root was not a
// member of the one-rank group the replay simulates. It replays, its steps to the nanosecond,
// and keeps its process group: every collective is priced over the group's 2 ranks.
TEST_F(ReplayCommandTest, TheTwoRankNcclTraceReplaysWithItsProcessGroup) {
  const std::string nccl = DTSIM_SHARED_DIR "/traces/kineto/nccl_parser_config__nccl_data.json.gz";
  const Expected<traces::Trace> trace = traces::ReadKinetoTrace(nccl);
  ASSERT_TRUE(trace.ok()) << trace.error().ToString();
  ASSERT_EQ(trace->collectives.size(), 21u);
  int broadcasts = 0;
  for (const traces::CollectiveInfo& collective : trace->collectives) {
    EXPECT_EQ(collective.group_size, 2);
    EXPECT_EQ(collective.process_group, "0");
    EXPECT_EQ(collective.group_ranks, (std::vector<int32_t>{0, 1}));
    broadcasts += collective.kind == graph::CommKind::kBroadcast ? 1 : 0;
  }
  EXPECT_EQ(broadcasts, 6);
  const CommandOutcome outcome = Replay({nccl, "-o", Path("replay.json")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("rank 0 of 2 (nccl)"));
  EXPECT_THAT(output_.str(), HasSubstr("21 collectives"));
  EXPECT_THAT(output_.str(), HasSubstr("mean absolute error over 3 steps: 0.00%"));
  // Re-priced by the network model, the broadcasts run over the process group's two GPUs.
  const CommandOutcome priced = Replay({nccl, "--network", "dgx-a100"});
  ASSERT_EQ(priced.kind, CommandOutcome::Kind::kOk) << priced.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("collectives priced on dgx-a100"));
}

TEST_F(ReplayCommandTest, ReplaysAChakraTraceAndWritesItsStatistics) {
  const CommandOutcome outcome =
      Replay({DTSIM_SHARED_DIR "/traces/chakra/chakra.0.et", "-o", Path("replay.json")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("3664 nodes (3.0 MB): 3643 COMP_NODE, 21 COMM_COLL_NODE"));
  EXPECT_THAT(output_.str(), HasSubstr("14 (no comm_type), 5 ALL_REDUCE, 2 BROADCAST"));
  EXPECT_THAT(output_.str(), HasSubstr("3664 tasks (2448 host, 1216 GPU, 7 collectives"));
  const Json result = *ReadJsonFile(Path("replay.json"));
  EXPECT_EQ(result["trace"]["form"], "protobuf");
  EXPECT_EQ(result["trace"]["nodes_by_type"]["COMM_COLL_NODE"], 21);
  // strategies/replay_test derives this span from the stream schedule.
  EXPECT_NEAR(result["simulated_span_ms"].get<double>(), 297.046, 0.0005);
}

// A config that simulates one rank per class of identical ranks has no trace for the others:
// an export of it is refused, naming the setting to change, before anything is written.
TEST_F(ReplayCommandTest, AChakraExportNeedsEveryRank) {
  std::ostringstream simulate_output;
  const std::vector<std::string> args = {DTSIM_EXAMPLES_DIR "/gpt3_1.3b_16gpu.json", "--set",
                                         "simulation.ranks=symmetric", "--chakra", Path("gpt")};
  const CommandOutcome outcome = SimulateCommand(args, simulate_output);
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(),
              HasSubstr("simulation.ranks: --chakra exports every rank's trace"));
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("--set simulation.ranks=full"));
  EXPECT_FALSE(std::filesystem::exists(Path("gpt.0.et")));
}

// `dtsim simulate --chakra` exports every rank; `dtsim replay --all-ranks` reads them back.
TEST_F(ReplayCommandTest, ReplaysEveryRankOfAChakraExport) {
  std::ostringstream simulate_output;
  // Its GPUs' SMs not counted (`sms` 0): a replay never slows compute beside communication
  // (measured durations already hold it), so it reproduces this simulation exactly.
  const std::vector<std::string> simulate_args = {DTSIM_EXAMPLES_DIR "/gpt3_1.3b_16gpu.json",
                                                  "--chakra",
                                                  Path("gpt"),
                                                  "--set",
                                                  "cluster.gpu.sms=0",
                                                  "-o",
                                                  Path("simulated.json")};
  const CommandOutcome simulated = SimulateCommand(simulate_args, simulate_output);
  ASSERT_EQ(simulated.kind, CommandOutcome::Kind::kOk) << simulated.error->ToString();
  EXPECT_THAT(simulate_output.str(), HasSubstr("16 ET files"));
  const Expected<Json> groups = ReadJsonFile(Path("gpt.comm_groups.json"));
  ASSERT_TRUE(groups.ok()) << groups.error().ToString();
  const CommandOutcome outcome = Replay({Path("gpt.3.et"), "--all-ranks"});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("16 files"));
  EXPECT_THAT(output_.str(), HasSubstr("36544 tasks"));
  // Its collectives take no time as exported; --network prices them (and the pipeline's
  // sends) on the config's DGX A100s: the span is the simulated iteration again (667.4 ms
  // against 550.6 recorded), and the result says on what.
  ASSERT_EQ(Replay({Path("gpt.3.et"), "--all-ranks", "-o", Path("recorded.json")}).kind,
            CommandOutcome::Kind::kOk);
  ASSERT_EQ(Replay({Path("gpt.3.et"), "--all-ranks", "--network", "dgx-a100", "-o",
                    Path("priced.json"), "--timeline", Path("priced_timeline.json")})
                .kind,
            CommandOutcome::Kind::kOk);
  // Its timeline names how the analytical model ran each communication, as simulate's does.
  int sends = 0;
  const Json priced_timeline = *ReadJsonFile(Path("priced_timeline.json"));
  for (const Json& event : priced_timeline["traceEvents"]) {
    if (event.value("ph", "") != "X" || !event["args"].contains("op")) continue;
    const bool send = event["args"]["op"] == "send_recv";
    sends += send ? 1 : 0;
    EXPECT_EQ(event["args"]["algorithm"], send ? "direct on 2 channels" : "ring");
  }
  EXPECT_GT(sends, 0);
  EXPECT_THAT(output_.str(), HasSubstr("with the collectives and sends priced on dgx-a100"));
  const Json priced = *ReadJsonFile(Path("priced.json"));
  EXPECT_EQ(priced["network"]["cluster"], "dgx-a100");
  EXPECT_GT(priced["network"]["span_ms"].get<double>(),
            (*ReadJsonFile(Path("recorded.json")))["simulated_span_ms"].get<double>());
  const Json simulate_result = *ReadJsonFile(Path("simulated.json"));
  EXPECT_NEAR(priced["network"]["span_ms"].get<double>(),
              simulate_result["iteration_time_ns"].get<double>() / 1e6, 1e-6);
  // One rank alone cannot run: its collectives wait for ranks that are not there.
  EXPECT_THAT(Replay({Path("gpt.3.et")}).error->ToString(), HasSubstr("never post it"));
  EXPECT_THAT(Replay({Path("gpt.comm_groups.json"), "--all-ranks"}).error->ToString(),
              HasSubstr("--all-ranks applies to Chakra traces"));
}

// Another tool's four-rank job with TP and DP groups: with the comm group file each collective
// spans its pair, so all four replay; every collective takes its recorded 10 µs and the two
// run one after another: 20 µs.
TEST_F(ReplayCommandTest, ChakraRanksReplayWithTheirCommGroups) {
  for (int64_t rank = 0; rank < 4; ++rank) {
    const traces::ChakraTrace trace = traces::TwoGroupRank(rank);
    ASSERT_TRUE(traces::WriteChakraTrace(trace, Path(fmt::format("job.{}.et", rank))).ok());
  }
  std::ofstream(Path("groups.json")) << traces::kTwoGroupCommGroups;
  const CommandOutcome outcome = Replay({Path("job.0.et"), "--all-ranks", "--comm-groups",
                                         Path("groups.json"), "-o", Path("replay.json")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("4 files"));
  const Json result = *ReadJsonFile(Path("replay.json"));
  EXPECT_EQ(result["graph"]["collectives"], 4);
  EXPECT_DOUBLE_EQ(result["simulated_span_ms"].get<double>(), 0.020);
  // Without it the k-th collectives of all four ranks go together: 2 collectives.
  ASSERT_EQ(Replay({Path("job.0.et"), "--all-ranks", "-o", Path("world.json")}).kind,
            CommandOutcome::Kind::kOk);
  EXPECT_EQ((*ReadJsonFile(Path("world.json")))["graph"]["collectives"], 2);
  EXPECT_THAT(Replay({Path("job.0.et"), "--all-ranks", "--comm-groups", Path("none.json")})
                  .error->ToString(),
              HasSubstr("none.json"));
  EXPECT_THAT(Replay({kSampledRank0, "--comm-groups", Path("groups.json")}).error->ToString(),
              HasSubstr("--comm-groups applies to Chakra traces"));
}

// STAGE's eight ranks (tests/data/stage): its conventions said, its compute priced on the GPU,
// its pipeline replayed, and the result saying how.
TEST_F(ReplayCommandTest, StageTracesReplayWithTheirConventions) {
  const std::string stage = DTSIM_TEST_DATA_DIR "/stage/";
  const std::vector<std::string> job = {stage + "stage_gpt.0.et.gz", "--all-ranks", "--comm-groups",
                                        stage + "stage_gpt.comm_groups.json"};
  ASSERT_EQ(Replay(job).kind, CommandOutcome::Kind::kOk);
  EXPECT_THAT(output_.str(), HasSubstr("producer   STAGE (metadata schema "
                                       "symbolic_tensor_network): comm_size and tensor_size "
                                       "count elements, read as 2 B each (--element-bytes)"));
  EXPECT_THAT(output_.str(), HasSubstr("1088 compute nodes record no duration and take none "
                                       "here: --gpu PRESET prices them"));
  std::vector<std::string> priced = job;
  priced.insert(priced.end(), {"--gpu", "h100-sxm5-80gb", "--network", "dgx-h100",
                               "--element-bytes", "4", "-o", Path("stage.json")});
  const CommandOutcome outcome = Replay(priced);
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("1088 compute nodes without a duration priced on the "
                                       "h100-sxm5-80gb roofline"));
  EXPECT_THAT(output_.str(), HasSubstr("with the recorded durations and the compute priced on "
                                       "the GPU"));
  const Json result = *ReadJsonFile(Path("stage.json"));
  EXPECT_EQ(result["conventions"]["producer"], "STAGE");
  EXPECT_EQ(result["conventions"]["sizes"], "elements");
  EXPECT_EQ(result["conventions"]["element_bytes"], 4);
  EXPECT_EQ(result["graph"]["compute_priced"], 1088);
  EXPECT_EQ(result["compute_priced_on"], "h100-sxm5-80gb");
  EXPECT_GT(result["network"]["span_ms"].get<double>(), result["simulated_span_ms"].get<double>());
  EXPECT_THAT(Replay({kSampledRank0, "--element-bytes", "4"}).error->ToString(),
              HasSubstr("--element-bytes applies to Chakra traces"));
  std::vector<std::string> zero = job;
  zero.insert(zero.end(), {"--element-bytes", "0"});
  EXPECT_THAT(Replay(zero).error->ToString(),
              HasSubstr("bytes an element must be 1 to 16 (complex128), got 0"));
  std::vector<std::string> wide = job;
  wide.insert(wide.end(), {"--element-bytes", "17"});
  EXPECT_THAT(Replay(wide).error->ToString(),
              HasSubstr("bytes an element must be 1 to 16 (complex128), got 17"));
  // Given for a trace whose sizes count bytes, it would be ignored: an error, even at the
  // default's value.
  EXPECT_THAT(Replay({DTSIM_SHARED_DIR "/traces/chakra/chakra.0.et", "--element-bytes", "2"})
                  .error->ToString(),
              HasSubstr("bytes an element (2) apply to traces whose sizes count elements "
                        "(STAGE's); this one, written by another tool, counts bytes"));
  EXPECT_THAT(Replay({kSampledRank0, "--element-bytes", "2"}).error->ToString(),
              HasSubstr("--element-bytes applies to Chakra traces"));
}

TEST_F(ReplayCommandTest, WhatIfsPrintEveryStepAndBadOnesAreErrors) {
  const CommandOutcome outcome =
      Replay({kSampledRank0, "--speedup", "gemm=2", "--network", "dgx-a100", "--data-parallel",
              "256", "-o", Path("what_if.json")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("gemm kernels ×2 faster; collectives priced on dgx-a100 "
                                       "(analytical); world collectives over 256 ranks"));
  EXPECT_THAT(output_.str(), HasSubstr("what-if    change"));
  const Json result = *ReadJsonFile(Path("what_if.json"));
  EXPECT_EQ(result["what_if"]["communication_model"], "analytical");
  EXPECT_EQ(result["what_if"]["steps"].size(), 2u);
  EXPECT_THAT(Replay({kSampledRank0, "--speedup", "gemmm=2"}).error->ToString(),
              HasSubstr("--speedup: unknown kernel class"));
  EXPECT_THAT(Replay({kSampledRank0, "--data-parallel", "8"}).error->ToString(),
              HasSubstr("needs a cluster"));
  // 0 read as "not given" and replayed without the what-if.
  const CommandOutcome zero =
      Replay({kSampledRank0, "--network", "dgx-a100", "--data-parallel", "0"});
  EXPECT_EQ(zero.kind, CommandOutcome::Kind::kUsage);
  EXPECT_THAT(zero.error->ToString(), HasSubstr("--data-parallel: must be at least 1, got 0"));
  // --stats-only stopped before the what-if and the timeline, and exited 0 without them.
  EXPECT_EQ(Replay({kSampledRank0, "--stats-only", "--speedup", "gemm=2"}).error->ToString(),
            "--stats-only stops before the simulation, which --speedup needs: drop one of the "
            "two");
  EXPECT_THAT(
      Replay({kSampledRank0, "--stats-only", "--timeline", Path("t.json")}).error->ToString(),
      HasSubstr("which --timeline needs"));
  // The same class twice: one factor would be dropped.
  EXPECT_THAT(
      Replay({kSampledRank0, "--speedup", "gemm=2", "--speedup", "gemm=3"}).error->ToString(),
      HasSubstr("--speedup: a second speedup of the gemm class: give each class once, got "
                "gemm=3"));
  EXPECT_THAT(Replay({kSampledRank0, "--speedup", "=2"}).error->ToString(),
              HasSubstr("\"all\", got \"\""));
  EXPECT_THAT(Replay({kSampledRank0, "--gpu", "a100-sxm4-80gb"}).error->ToString(),
              HasSubstr("--gpu: prices compression kernels"));
  EXPECT_THAT(Replay({kSampledRank0, "--compression", "{\"method\": \"topk\", \"density\": 2}",
                      "--network", "dgx-a100", "--gpu", "a100-sxm4-80gb"})
                  .error->ToString(),
              HasSubstr("--compression.density"));
  EXPECT_THAT(
      Replay({DTSIM_SHARED_DIR "/traces/chakra/chakra.0.et", "--no-overlap"}).error->ToString(),
      HasSubstr("a Chakra trace takes --network only"));
}

TEST_F(ReplayCommandTest, WhatIfsComeFromAFileWithFlagsOverridingIt) {
  const std::string file = DTSIM_EXAMPLES_DIR "/what_ifs/h100_dp256.json";
  const CommandOutcome outcome = Replay({kSampledRank0, "--what-if", file, "--speedup", "gemm=2",
                                         "--data-parallel", "64", "--overlap"});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  // The flag's speedup replaces the file's for GEMMs; the file's attention one stays.
  EXPECT_THAT(output_.str(),
              HasSubstr("gemm kernels ×2 faster; attention kernels ×2 faster; collectives moved "
                        "off compute streams (overlap); collectives "
                        "priced on dgx-h100 (analytical); world collectives over 64 ranks"));

  std::ofstream(Path("bad.json")) << R"({"network": "dgx-h100", "overlap": "more"})";
  EXPECT_THAT(Replay({kSampledRank0, "--what-if", Path("bad.json")}).error->ToString(),
              HasSubstr("bad.json: overlap: unknown"));
  std::ofstream(Path("gpu_alone.json")) << R"({"gpu": "a100-sxm4-80gb"})";
  EXPECT_THAT(Replay({kSampledRank0, "--what-if", Path("gpu_alone.json")}).error->ToString(),
              HasSubstr("gpu: prices compression kernels"));
  EXPECT_THAT(Replay({kSampledRank0, "--what-if", Path("missing.json")}).error->ToString(),
              HasSubstr("missing.json"));
  EXPECT_THAT(Replay({kSampledRank0, "--overlap", "--no-overlap"}).error->ToString(),
              HasSubstr("choose one"));
}

TEST_F(ReplayCommandTest, BadInputIsAFailureNamingTheFile) {
  const CommandOutcome missing = Replay({Path("nope.json")});
  EXPECT_EQ(missing.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(missing.error->ToString(), HasSubstr("nope.json: cannot open"));
  EXPECT_EQ(Replay({}).kind, CommandOutcome::Kind::kUsage);
  // A PyTorch host execution trace alone (38 nodes, no durations) replayed to 0 ms: an error.
  const std::string host_et =
      DTSIM_SHARED_DIR "/traces/kineto/execution_trace__benchmark_simple_add_et.json.gz";
  const CommandOutcome host = Replay({host_et});
  ASSERT_EQ(host.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(host.error->ToString(),
              HasSubstr("simple_add_et.json.gz: a PyTorch host execution trace has no durations "
                        "(none of its 38 nodes has one): it cannot be replayed alone"));
  EXPECT_EQ(Replay({host_et, "--stats-only"}).kind, CommandOutcome::Kind::kOk);
  // With the Kineto trace of its run, in either order, it is linked and replays: every op's
  // exclusive time on its thread, 19,814,157 µs (the outermost annotation's), then the last
  // kernel's 3 µs after the op that launched it.
  const std::string kineto =
      DTSIM_SHARED_DIR "/traces/kineto/execution_trace__benchmark_simple_add_trace.json.gz";
  for (const auto& pair : {std::vector<std::string>{host_et, kineto}, {kineto, host_et}}) {
    const CommandOutcome linked = Replay(pair);
    ASSERT_EQ(linked.kind, CommandOutcome::Kind::kOk) << linked.error->ToString();
    EXPECT_THAT(output_.str(), HasSubstr("linked     36 of the host trace's 36 ops with Kineto "
                                         "ops (by External id)"));
    EXPECT_THAT(output_.str(), HasSubstr("simulated  19814.160 ms with the recorded durations"));
  }
}

// Where each step's time goes, and why a GPU what-if leaves the sampled trace's steps alone.
TEST_F(ReplayCommandTest, ItPrintsEachStepsCriticalPathAndWhyAWhatIfDidNotMoveIt) {
  ASSERT_EQ(Replay({kSampledRank0, "--speedup", "gemm=2"}).kind, CommandOutcome::Kind::kOk);
  EXPECT_THAT(output_.str(), HasSubstr("critical path (ms)"));
  EXPECT_THAT(output_.str(), HasSubstr("#551 what-if"));
  EXPECT_THAT(output_.str(),
              HasSubstr("ProfilerStep#551: its critical path is 99% host; the GPU work sped up "
                        "is 0.0% of it"));
}

// A directory of a job's traces, one per rank (tests/traces/synthetic_job.h: four ranks, rank 3
// the straggler, rank 1's clock 5 s ahead): replayed together, the clocks aligned, each rank's
// steps exact; its straggler what-if shortens every rank's step by 900 µs (5,921 → 5,021 µs).
TEST_F(ReplayCommandTest, ADirectoryOfRankTracesReplaysAsOneJob) {
  testing_support::SyntheticJob spec;
  spec.straggler = 3;
  spec.clock_offset_us = {0, 5'000'000, 0, 0};
  std::filesystem::create_directories(Path("job"));
  for (int rank = 3; rank >= 0; --rank) {  // written out of order: the ranks sort them
    std::ofstream(Path(fmt::format("job/trace_{}.json", 3 - rank)))
        << testing_support::SyntheticRankTrace(spec, rank);
  }
  const CommandOutcome outcome =
      Replay({Path("job"), "--speedup", "all=1.3@3", "-o", Path("job.json")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("job        4 traces, ranks 0, 1, 2, 3 of 4: 3 "
                                       "collectives shared"));
  EXPECT_THAT(output_.str(), HasSubstr("clocks     against r0's: r1 +5000.000 ms, r2 +0.000 ms"));
  EXPECT_THAT(output_.str(), HasSubstr("mean absolute error over 12 steps: 0.00%"));
  EXPECT_THAT(output_.str(), HasSubstr("ProfilerStep#3: the pace is set by r3 (its critical path "
                                       "stays on its own rank); r0's ran 3.906 ms (66% of its "
                                       "step) on peers"));
  EXPECT_THAT(output_.str(), HasSubstr("all kernels ×1.3 faster on rank 3"));
  EXPECT_THAT(output_.str(),
              HasSubstr("r2 ProfilerStep#3            5.921 ms       5.921 ms       5.021 ms   "
                        "-15.20%"));
  const Json result = *ReadJsonFile(Path("job.json"));
  EXPECT_EQ(result["version"], "1.5");
  EXPECT_EQ(result["job"]["shared_collectives"], 3);
  EXPECT_EQ(result["provenance"]["command"], "replay");
  EXPECT_EQ(result["provenance"]["inputs"].size(), 4u);  // the four rank traces
  EXPECT_EQ(result["job"]["traces"].size(), 4u);
  EXPECT_DOUBLE_EQ(result["job"]["traces"][1]["clock_offset_ms"].get<double>(), 5000.0);
  EXPECT_EQ(result["steps"][11]["rank"], 3);
  EXPECT_DOUBLE_EQ(result["steps"][0]["critical_path_ms"]["on_peers"].get<double>(), 3.906);
}

// A job of more than 8 ranks lists 8 ranks and, per step, the ranks with the longest and the
// shortest simulated step; clocks that agree are summed up.
TEST_F(ReplayCommandTest, ALargeJobPrintsASummary) {
  testing_support::SyntheticJob spec;
  spec.ranks = 12;
  spec.straggler = 11;
  spec.steps = 2;
  std::filesystem::create_directories(Path("job"));
  for (int rank = 0; rank < spec.ranks; ++rank) {
    std::ofstream(Path(fmt::format("job/rank{:02}.json", rank)))
        << testing_support::SyntheticRankTrace(spec, rank);
  }
  const CommandOutcome outcome = Replay({Path("job")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("12 traces, ranks 0, 1, 2, 3, 4, 5, 6, 7, 4 more of 12"));
  EXPECT_THAT(output_.str(), HasSubstr("clocks     the same as r0's"));
  EXPECT_THAT(output_.str(), HasSubstr("12 ranks: per step, the ranks with the longest and the "
                                       "shortest simulated step"));
  EXPECT_THAT(output_.str(), HasSubstr("mean absolute error over 24 steps: 0.00%"));
  EXPECT_THAT(output_.str(), HasSubstr("ProfilerStep#2: the pace is set by r11"));
}

TEST_F(ReplayCommandTest, TracesThatAreNotOneJobAreRefused) {
  testing_support::SyntheticJob spec;
  std::ofstream(Path("a.json")) << testing_support::SyntheticRankTrace(spec, 0);
  std::ofstream(Path("b.json")) << testing_support::SyntheticRankTrace(spec, 0);
  const CommandOutcome twice = Replay({Path("a.json"), Path("b.json")});
  ASSERT_EQ(twice.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(twice.error->ToString(), HasSubstr("are rank 0: a job takes one trace per rank"));
  spec.ranks = 8;
  std::ofstream(Path("c.json")) << testing_support::SyntheticRankTrace(spec, 1);
  const CommandOutcome worlds = Replay({Path("a.json"), Path("c.json")});
  ASSERT_EQ(worlds.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(worlds.error->ToString(), HasSubstr("in one of 8: they are not one job"));
  std::filesystem::create_directories(Path("empty"));
  const CommandOutcome empty = Replay({Path("empty")});
  ASSERT_EQ(empty.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(empty.error->ToString(), HasSubstr("the directory holds no trace"));
  const std::string chakra = Path("x.0.et");
  ASSERT_TRUE(traces::WriteChakraTrace(traces::TwoGroupRank(0), chakra).ok());
  const CommandOutcome two_chakra = Replay({chakra, chakra});
  ASSERT_EQ(two_chakra.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(two_chakra.error->ToString(), HasSubstr("a Chakra job is read from its rank files"));
}

}  // namespace
}  // namespace dtsim::cli
