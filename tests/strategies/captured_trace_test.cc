// Traces `dtsim profile` captured on an H100 (tools/gpu_checks/run_all.sh and the session of
// 2026-11-23; docs/profiler.md, "On a GPU"), kept as test data in tests/data/captured/:
//   h100_known_kernels_default_kinds  tools/gpu_checks/known_kernels.cu, default kinds
//   h100_known_kernels_all_kinds      the same program with --kinds all (sync, cuda_event)
//   h100_known_kernels_capture_range  --capture-range cuda-profiler-api, the program run with
//                                     --profiler-api: steps 2 and 3 only
//   h100_known_kernels_device_reset   the program run with --device-reset
//   h100_gpt2_small_step              gpt2_step.py --batch 2 --seq 256 --warmup 1 --steps 2
//                                     --emit-nvtx: GPT-2 small, one NVTX range per ATen op
// Each is read back by the Kineto reader with exactly the record counts the writer put in its
// metadata, nothing lost or unlinked, and replays every step and GPU op start exactly.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "strategies/replay.h"
#include "tests/traces/trace_test_files.h"
#include "traces/kineto_reader.h"
#include "traces/replay_graph.h"

namespace dtsim::strategies {
namespace {

std::string Captured(const std::string& name) {
  return std::string(DTSIM_TEST_DATA_DIR) + "/captured/h100_" + name + ".json.gz";
}

struct Replayed {
  traces::Trace trace;
  traces::ReplayGraph graph;
  ReplayResult result;
  nlohmann::json metadata;  // the trace's otherData, as the profiler wrote it
};

// The trace read, its replay graph and replay; nullopt (with the failure added) when any fails.
std::optional<Replayed> Replay(const std::string& name) {
  Expected<traces::Trace> trace = traces::ReadKinetoTrace(Captured(name));
  if (!trace.ok()) {
    ADD_FAILURE() << trace.error().ToString();
    return std::nullopt;
  }
  Expected<traces::ReplayGraph> graph = traces::BuildReplayGraph(*trace);
  if (!graph.ok()) {
    ADD_FAILURE() << graph.error().ToString();
    return std::nullopt;
  }
  Expected<ReplayResult> result = SimulateReplay(*graph);
  if (!result.ok()) {
    ADD_FAILURE() << result.error().ToString();
    return std::nullopt;
  }
  return Replayed{std::move(trace).value(), std::move(graph).value(), std::move(result).value(),
                  nlohmann::json::parse(traces::GunzipFile(Captured(name)))["otherData"]};
}

class CapturedTrace : public testing::TestWithParam<const char*> {};

TEST_P(CapturedTrace, ReadsBackWhatTheProfilerWroteAndReplaysExactly) {
  const std::optional<Replayed> replayed = Replay(GetParam());
  ASSERT_TRUE(replayed);
  const Replayed& r = *replayed;
  const nlohmann::json& records = r.metadata["records"];
  EXPECT_EQ(r.trace.stats.kernels, records["kernels"]);
  EXPECT_EQ(r.trace.stats.memcpys, records["memcpys"]);
  EXPECT_EQ(r.trace.stats.memsets, records["memsets"]);
  EXPECT_EQ(r.trace.stats.api_calls, records["api_calls"]);
  for (const auto& [counter, value] : r.metadata["lost"].items()) {
    if (value.is_number()) {
      EXPECT_EQ(value, 0) << counter;
    }
  }
  for (const auto& [counter, value] : r.metadata["unlinked"].items()) {
    EXPECT_EQ(value, 0) << counter;
  }
  EXPECT_EQ(r.trace.stats.gpu_ops_without_launch, 0);
  EXPECT_EQ(r.trace.stats.launches_without_gpu_op, 0);
  // The query API calls were left out, and the trace says so.
  EXPECT_THAT(r.metadata["api_calls_not_recorded"].get<std::vector<std::string>>(),
              testing::IsSupersetOf({"cudaGetDevice", "cuDevicePrimaryCtxGetState"}));
  ASSERT_EQ(r.result.steps.size(), r.trace.steps.size());
  for (const ReplayStepResult& step : r.result.steps) {
    EXPECT_EQ(step.simulated, step.measured) << "ProfilerStep#" << step.number;
  }
  EXPECT_EQ(r.result.gpu_ops,
            r.trace.stats.kernels + r.trace.stats.memcpys + r.trace.stats.memsets);
  EXPECT_LE(r.result.max_start_drift, Microseconds(1));
}

INSTANTIATE_TEST_SUITE_P(H100, CapturedTrace,
                         testing::Values("known_kernels_default_kinds", "known_kernels_all_kinds",
                                         "known_kernels_capture_range",
                                         "known_kernels_device_reset", "gpt2_small_step"));

// known_kernels.cu per step: 15 kernels, 2 copies, 1 set; stream 2 waits on an event stream 1
// recorded, and the host syncs stream 2: 3 steps.
TEST(CapturedKnownKernels, HoldExactlyWhatTheProgramRan) {
  for (const char* name : {"known_kernels_default_kinds", "known_kernels_all_kinds"}) {
    const std::optional<Replayed> r = Replay(name);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->trace.stats.kernels, 45) << name;
    EXPECT_EQ(r->trace.stats.memcpys, 6) << name;
    EXPECT_EQ(r->trace.stats.memsets, 3) << name;
    EXPECT_EQ(r->trace.steps.size(), 3u) << name;
  }
}

// cudaProfilerStart before step 2, cudaProfilerStop after step 3: one window of two steps.
TEST(CapturedKnownKernels, ACaptureRangeHoldsOnlyItsWindow) {
  const std::optional<Replayed> r = Replay("known_kernels_capture_range");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->metadata["capture_range"], "cuda_profiler_api");
  EXPECT_EQ(r->metadata["capture_windows"], 1);
  EXPECT_EQ(r->trace.stats.kernels, 30);
  EXPECT_EQ(r->trace.stats.memcpys, 4);
  EXPECT_EQ(r->trace.stats.memsets, 2);
  ASSERT_EQ(r->trace.steps.size(), 2u);
  EXPECT_EQ(r->trace.steps[0].number, 2);
}

// cudaDeviceReset at the end: the records were flushed before it destroyed the context.
TEST(CapturedKnownKernels, ADeviceResetIsFlushedFirst) {
  const std::optional<Replayed> r = Replay("known_kernels_device_reset");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->metadata["flush_before_device_reset"], true);
  EXPECT_EQ(r->metadata["device_reset_flushes"], 1);
  EXPECT_EQ(r->trace.stats.kernels, 45);
  EXPECT_EQ(r->trace.steps.size(), 3u);
}

TEST(CapturedKnownKernels, TheWaitsAreRecordedWithAllKindsAndInferredWithout) {
  // --kinds all: the sync and CUDA-event records give each step's stream wait and host sync.
  const std::optional<Replayed> all_kinds = Replay("known_kernels_all_kinds");
  const std::optional<Replayed> default_kinds = Replay("known_kernels_default_kinds");
  ASSERT_TRUE(all_kinds && default_kinds);
  const traces::ReplayStats& all = all_kinds->graph.stats;
  EXPECT_EQ(all.stream_wait_edges, 3);
  EXPECT_EQ(all.sync_edges, 3);
  EXPECT_EQ(all.inferred_stream_edges, 0);
  EXPECT_EQ(all.inferred_sync_edges, 0);
  // The default kinds leave both out (their cost, docs/profiler.md); the replay infers the
  // same three waits and three syncs from the API calls and the GPU timeline.
  const traces::ReplayStats& fallback = default_kinds->graph.stats;
  EXPECT_EQ(fallback.stream_wait_edges, 0);
  EXPECT_EQ(fallback.sync_edges, 0);
  EXPECT_EQ(fallback.inferred_stream_edges, 3);
  EXPECT_EQ(fallback.inferred_sync_edges, 3);
}

TEST(CapturedGpt2, EveryAtenOpIsAHostOpWithItsShapes) {
  const std::optional<Replayed> replayed = Replay("gpt2_small_step");
  ASSERT_TRUE(replayed);
  const Replayed& r = *replayed;
  EXPECT_EQ(r.metadata["activity_kinds"], "kernel,memcpy,memset,runtime,driver,external,nvtx,overhead");
  // emit_nvtx ranges become host ops: 13,697 over model set-up, the warm-up and two steps.
  EXPECT_EQ(r.trace.stats.host_ops, 13697);
  EXPECT_EQ(r.trace.steps.size(), 3u);  // ProfilerStep#0 (warm-up), #1, #2
  EXPECT_GT(r.metadata["gpu_ops_in_nvtx_ranges"].get<int64_t>(), 0);
}

}  // namespace
}  // namespace dtsim::strategies
