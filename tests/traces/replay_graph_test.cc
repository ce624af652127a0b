// The replay graph's edges on a small hand-written trace whose every dependency is known, and
// the errors for traces that cannot be replayed.
#include "traces/replay_graph.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "tests/testing/temp_dir.h"
#include "tests/traces/trace_test_files.h"
#include "traces/kineto_reader.h"

namespace dtsim::traces {
namespace {

using graph::TaskId;

// One step on host thread 10 (times in µs):
//   1010 cudaLaunchKernel (corr 1, 5 us) -> gemm on stream 7, 1013-1053 (starts while the
//        call is still returning: the call splits at 1013)
//   1016 cudaEventRecord (corr 2), 1018 cudaStreamWaitEvent (corr 3): stream 20 waits for
//        the event recorded on stream 7 after the gemm
//   1020 cudaLaunchKernel (corr 4) -> NCCL all-reduce on stream 20, 1054-1074 (1 us after
//        the gemm ended: a GPU gap of 1 us)
//   1030 cudaStreamSynchronize(stream 20) (corr 5), returns at 1076, 2 us after the all-reduce
//   ProfilerStep#7 spans 1000-1100.
constexpr const char* kTwoStreamStep = R"json({"schemaVersion": 1,
  "distributedInfo": {"rank": 3, "world_size": 8, "backend": "nccl"},
  "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 10, "tid": 10,
   "ts": 1000, "dur": 100},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 10,
   "ts": 1010, "dur": 5, "args": {"correlation": 1}},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1013, "dur": 40,
   "args": {"correlation": 1, "stream": 7, "device": 0}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaEventRecord", "pid": 10, "tid": 10,
   "ts": 1016, "dur": 1, "args": {"correlation": 2}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamWaitEvent", "pid": 10, "tid": 10,
   "ts": 1018, "dur": 1, "args": {"correlation": 3}},
  {"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": 0, "tid": 20,
   "ts": 1018, "dur": 1, "args": {"correlation": 3, "stream": 20, "wait_on_stream": 7,
   "wait_on_cuda_event_record_corr_id": 2, "cuda_sync_kind": "Stream Wait Event"}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 10,
   "ts": 1020, "dur": 5, "args": {"correlation": 4}},
  {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)",
   "pid": 0, "tid": 20, "ts": 1054, "dur": 20,
   "args": {"correlation": 4, "stream": 20, "Collective name": "allreduce",
            "In msg nelems": 1024, "dtype": "Float", "Group size": 8}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 10, "tid": 10,
   "ts": 1030, "dur": 46, "args": {"correlation": 5}},
  {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 20, "ts": 1031,
   "dur": 44, "args": {"correlation": 5, "stream": 20, "cuda_sync_kind": "Stream Sync"}}
]})json";

class ReplayGraphTest : public testing_support::TempDirTest {
 protected:
  Trace Read(const std::string& text) {
    const std::string path = Path("trace.json");
    std::ofstream(path) << text;
    Expected<Trace> trace = ReadKinetoTrace(path);
    EXPECT_TRUE(trace.ok()) << trace.error().ToString();
    return std::move(trace).value();
  }

  // The task named `name` (the first one).
  static TaskId Named(const graph::TaskGraph& graph, std::string_view name) {
    for (uint32_t t = 0; t < graph.task_count(); ++t) {
      if (graph.name(graph.task(TaskId(t)).name) == name) return TaskId(t);
    }
    ADD_FAILURE() << "no task " << name;
    return TaskId(0);
  }

  static bool DependsOn(const graph::TaskGraph& graph, TaskId task, TaskId prerequisite) {
    const auto deps = graph.dependencies(task);
    return std::find(deps.begin(), deps.end(), prerequisite) != deps.end();
  }
};

TEST_F(ReplayGraphTest, RebuildsLaunchStreamWaitAndSyncEdges) {
  const Trace trace = Read(kTwoStreamStep);
  const Expected<ReplayGraph> replay = BuildReplayGraph(trace);
  ASSERT_TRUE(replay.ok()) << replay.error().ToString();
  const graph::TaskGraph& g = replay->graph;
  const ReplayStats& s = replay->stats;
  EXPECT_EQ(s.launch_edges, 2);
  EXPECT_EQ(s.stream_wait_edges, 1);
  EXPECT_EQ(s.sync_edges, 1);
  EXPECT_EQ(s.inferred_sync_edges + s.inferred_stream_edges, 0);
  EXPECT_EQ(s.collectives, 1);
  EXPECT_EQ(s.gpu_gaps, 1);  // the 1 us between the gemm's end and the all-reduce
  EXPECT_EQ(s.gpu_gap_time, Microseconds(1));

  // The gemm depends on the first 3 us of its launch call; the call's last 2 us follow.
  const TaskId gemm = Named(g, "gemm");
  const TaskId launch = Named(g, "cudaLaunchKernel");
  EXPECT_TRUE(DependsOn(g, gemm, launch));
  EXPECT_EQ(g.task(launch).duration, Microseconds(3));
  EXPECT_EQ(g.task(Named(g, "cudaLaunchKernel (returning)")).duration, Microseconds(2));

  // The gap before the all-reduce waits for the gemm (the event) and its launch.
  const TaskId gap = Named(g, "gpu gap");
  EXPECT_TRUE(DependsOn(g, gap, gemm));
  const TaskId all_reduce = Named(g, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)");
  EXPECT_EQ(g.task(all_reduce).kind, graph::TaskKind::kCollective);
  const graph::Communication& comm = g.comm(g.task(all_reduce).comm);
  EXPECT_EQ(comm.kind, graph::CommKind::kAllReduce);
  EXPECT_EQ(comm.size, Bytes(4096));
  EXPECT_EQ(g.group(comm.priced_group).size(), 8u);  // priced as the 8-rank group
  EXPECT_EQ(replay->comm_durations.at(g.task(all_reduce).comm.value()), Microseconds(20));

  // The sync: its remainder (2 us after the all-reduce ended) depends on the all-reduce.
  const TaskId wait = Named(g, "cudaStreamSynchronize (after the wait)");
  EXPECT_TRUE(DependsOn(g, wait, all_reduce));
  EXPECT_EQ(g.task(wait).duration, Microseconds(2));

  // The step's markers sit at 1000 and 1100 us, the first event at 1000 us.
  ASSERT_EQ(replay->steps.size(), 1u);
  const ReplayStep& step = replay->steps[0];
  EXPECT_EQ(step.number, 7);
  EXPECT_EQ(step.measured, Microseconds(100));
  EXPECT_EQ(replay->measured_start[step.begin.value()], DurationNs::Zero());
  EXPECT_EQ(replay->measured_start[step.end.value()], Microseconds(100));
  EXPECT_EQ(replay->measured_start[all_reduce.value()], Microseconds(54));
}

TEST_F(ReplayGraphTest, InfersAWaitTheTraceDidNotRecord) {
  // The same step without the Stream Wait Event record: the all-reduce starts 1 us after the
  // gemm on another stream ended, within the tolerance, so the edge is inferred.
  std::string text = kTwoStreamStep;
  const size_t begin =
      text.find(R"(  {"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event")");
  const size_t end = text.find(
      R"(  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 10,
   "ts": 1020)");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  text.erase(begin, end - begin);
  const Expected<ReplayGraph> replay = BuildReplayGraph(Read(text));
  ASSERT_TRUE(replay.ok()) << replay.error().ToString();
  EXPECT_EQ(replay->stats.stream_wait_edges, 0);
  EXPECT_EQ(replay->stats.inferred_stream_edges, 1);
}

TEST_F(ReplayGraphTest, ATraceWithoutGpuEventsIsAnError) {
  const Expected<Trace> trace = ReadKinetoTrace(SharedKineto(kCuptiProfilerTrace));
  ASSERT_TRUE(trace.ok());
  const Expected<ReplayGraph> replay = BuildReplayGraph(*trace);
  ASSERT_FALSE(replay.ok());
  EXPECT_THAT(replay.error().ToString(), testing::HasSubstr("no GPU events"));
}

// kTwoStreamStep with its gemm starting at `start_us` instead of 1013.
std::string GemmAt(const std::string& start_us) {
  std::string text = kTwoStreamStep;
  const std::string gemm = R"("ts": 1013, "dur": 40)";
  text.replace(text.find(gemm), gemm.size(), R"("ts": )" + start_us + R"(, "dur": 40)");
  return text;
}

// The step above with its gemm moved to the epoch clock (1.7e15 us, as baseTimeNanoseconds
// traces write): its events span 1,707,417,525 s, far past kMaxTraceSpan (a day). Replaying
// it would simulate 54 years of gap (the fuzzer's finding: the gap sums overflowed int64).
TEST_F(ReplayGraphTest, ATraceSpanningDecadesMixesClocksAndIsRefused) {
  const Trace trace = Read(GemmAt("1707417525000000"));
  const Expected<ReplayGraph> replay = BuildReplayGraph(trace);
  ASSERT_FALSE(replay.ok());
  const std::string message = replay.error().ToString();
  EXPECT_THAT(message, testing::HasSubstr("trace.json"));
  // From the step at 1000 us (1.000 ms) to the gemm's end, 1707417525000040 us.
  EXPECT_THAT(message, testing::HasSubstr("from the host event \"ProfilerStep#7\" at 1.000 ms"));
  EXPECT_THAT(message, testing::HasSubstr("GPU op \"gemm\" at 1707417525.000 s"));
  EXPECT_THAT(message, testing::HasSubstr("mix two clocks"));
}

// A day is the limit itself: the gemm ending exactly 24 h after the step began replays.
TEST_F(ReplayGraphTest, ATraceSpanningADayReplays) {
  // 1000 us + 86,400 s = 86,400,001,000 us, minus the 40 us the gemm takes.
  const Trace trace = Read(GemmAt("86400000960"));
  const Expected<ReplayGraph> replay = BuildReplayGraph(trace);
  EXPECT_TRUE(replay.ok()) << replay.error().ToString();
}

}  // namespace
}  // namespace dtsim::traces

namespace dtsim::traces {
namespace {

TEST(KernelClass, ClassifiesKernelNamesAndParsesSpeedups) {
  const auto in = [](KernelClass c, std::string_view name) {
    return InKernelClass(c, DeviceEventKind::kKernel, name);
  };
  EXPECT_TRUE(in(KernelClass::kGemm, "ampere_sgemm_128x64_nn"));
  EXPECT_TRUE(in(KernelClass::kGemm, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128"));
  EXPECT_TRUE(in(KernelClass::kGemm, "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm>(...)"));
  EXPECT_TRUE(in(KernelClass::kAttention, "flash_fwd_kernel<Flash_fwd_kernel_traits<128>>"));
  EXPECT_TRUE(in(KernelClass::kElementwise, "void at::native::vectorized_elementwise_kernel<4>"));
  EXPECT_FALSE(in(KernelClass::kGemm, "void at::native::vectorized_elementwise_kernel<4>"));
  EXPECT_FALSE(in(KernelClass::kAll, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
  EXPECT_TRUE(InKernelClass(KernelClass::kMemory, DeviceEventKind::kMemcpy, "Memcpy HtoD"));
  EXPECT_FALSE(InKernelClass(KernelClass::kAll, DeviceEventKind::kMemset, "Memset"));

  const Expected<KernelSpeedup> gemm = ParseKernelSpeedup("gemm=1.5");
  ASSERT_TRUE(gemm.ok());
  EXPECT_EQ(gemm->kernels, KernelClass::kGemm);
  EXPECT_EQ(gemm->factor, 1.5);
  EXPECT_THAT(ParseKernelSpeedup("gemmm=2").error().ToString(),
              testing::HasSubstr("unknown kernel class (did you mean \"gemm\"?)"));
  EXPECT_THAT(ParseKernelSpeedup("gemm=0").error().ToString(),
              testing::HasSubstr("a speedup factor is a positive number"));
  EXPECT_THAT(ParseKernelSpeedup("gemm").error().ToString(),
              testing::HasSubstr("a speedup is CLASS=FACTOR"));
  // One factor per class and rank in a list: a class on one rank beside every rank's is not a
  // repeat; the same class and rank twice is.
  std::vector<KernelSpeedup> speedups;
  for (const char* text : {"gemm=2", "gemm=3@1", "all=1.1"})
    speedups.push_back(*ParseKernelSpeedup(text));
  EXPECT_EQ(RepeatedSpeedup(speedups), std::nullopt);
  // The first repeat by position: "all" at 4 before "gemm@1" at 5; an earlier group's third
  // (gemm@1 at 6) is not earlier than its second.
  for (const char* text : {"conv=2", "all=3", "gemm=4@1", "gemm=5@1"}) {
    speedups.push_back(*ParseKernelSpeedup(text));
  }
  ASSERT_EQ(RepeatedSpeedup(speedups), 4u);
  EXPECT_EQ(RepeatedSpeedupError(speedups[5], "gemm=4@1").ToString(),
            "a second speedup of the gemm class on rank 1: give each class once, got gemm=4@1");
}

}  // namespace
}  // namespace dtsim::traces
