// Replay accuracy on the shared real traces: every ProfilerStep's simulated duration against
// the measured one (the issue's target: within 3%), and every GPU op's simulated start against
// its measured start. Plus a fuzz-style test: many corrupted copies of every shared trace must
// each give a clear error or a replay, never a crash or a hang.
#include "strategies/replay.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <string>

#include "models/cost_model.h"
#include "network/analytical_model.h"
#include "sim/graph/builder.h"
#include "strategies/compression.h"
#include "tests/testing/temp_dir.h"
#include "tests/traces/chakra_test_traces.h"
#include "tests/traces/trace_test_files.h"
#include "traces/chakra_graph.h"
#include "traces/chakra_reader.h"
#include "traces/kineto_reader.h"
#include "traces/replay_graph.h"

namespace dtsim::strategies {
namespace {

using traces::kReplayableTraces;
using traces::SharedKineto;

class SharedTraceReplay : public testing::TestWithParam<const char*> {};

TEST_P(SharedTraceReplay, ReproducesEveryStepAndEveryGpuOpStart) {
  const Expected<traces::Trace> trace = traces::ReadKinetoTrace(SharedKineto(GetParam()));
  ASSERT_TRUE(trace.ok()) << trace.error().ToString();
  const Expected<traces::ReplayGraph> replay = traces::BuildReplayGraph(*trace);
  ASSERT_TRUE(replay.ok()) << replay.error().ToString();
  const Expected<ReplayResult> result = SimulateReplay(*replay);
  ASSERT_TRUE(result.ok()) << result.error().ToString();
  EXPECT_EQ(result->steps.size(), trace->steps.size());
  for (const ReplayStepResult& step : result->steps) {
    EXPECT_LE(std::abs(step.Error()), 0.03) << "ProfilerStep#" << step.number;
    // The critical path covers the step exactly, part by part.
    EXPECT_EQ(step.path.Total(), step.simulated) << "ProfilerStep#" << step.number;
    std::printf(
        "  %s ProfilerStep#%lld: measured %.3f ms, simulated %.3f ms (%+.3f%%); path: GPU "
        "%.1f%%, host %.1f%%, fixed gaps %.1f%%\n",
        GetParam(), static_cast<long long>(step.number), step.measured.ns() / 1e6,
        step.simulated.ns() / 1e6, 100 * step.Error(),
        100.0 * step.path[PathPart::kGpu].ns() / std::max<int64_t>(1, step.simulated.ns()),
        100.0 * step.path[PathPart::kHost].ns() / std::max<int64_t>(1, step.simulated.ns()),
        100.0 * step.path[PathPart::kGap].ns() / std::max<int64_t>(1, step.simulated.ns()));
  }
  // Every edge the graph has is one the trace obeyed, and every wait it obeyed is an edge or a
  // kept gap: so each GPU op starts when it started on the GPU, to the microsecond the trace
  // resolves.
  EXPECT_EQ(result->gpu_ops, trace->stats.kernels + trace->stats.memcpys + trace->stats.memsets);
  EXPECT_LE(result->max_start_drift, Microseconds(1));
}

INSTANTIATE_TEST_SUITE_P(HtaTestData, SharedTraceReplay, testing::ValuesIn(kReplayableTraces),
                         [](const testing::TestParamInfo<const char*>& param_info) {
                           return traces::TraceTestName(param_info.param);
                         });

// Reads a corrupted copy through the whole path. Returns "ok" or the error.
std::string ReplayOutcome(const std::string& path) {
  const Expected<traces::Trace> trace = traces::ReadKinetoTrace(path);
  if (!trace.ok()) return trace.error().ToString();
  const Expected<traces::ReplayGraph> replay = traces::BuildReplayGraph(*trace);
  if (!replay.ok()) return replay.error().ToString();
  const Expected<ReplayResult> result = SimulateReplay(*replay);
  return result.ok() ? "ok" : result.error().ToString();
}

class CorruptedTraces : public testing_support::TempDirTest {};

TEST_F(CorruptedTraces, GiveAnErrorOrAReplayNeverACrash) {
  // Per trace: copies with random bytes overwritten in the JSON, copies cut at a random point,
  // and copies of the gzip file with random bytes flipped. Deterministic seed.
  constexpr int kCopiesPerTrace = 45;
  std::mt19937_64 rng(20261122);
  int outcomes_ok = 0;
  int outcomes_error = 0;
  for (const char* file : kReplayableTraces) {
    const std::string text = traces::GunzipFile(SharedKineto(file));
    const std::string gzip = traces::FileBytes(SharedKineto(file));
    ASSERT_FALSE(text.empty());
    for (int copy = 0; copy < kCopiesPerTrace; ++copy) {
      std::string corrupted;
      const int mode = copy % 3;
      if (mode == 0) {
        corrupted = text;
        const int flips = 1 + static_cast<int>(rng() % 8);
        for (int i = 0; i < flips; ++i) {
          corrupted[rng() % corrupted.size()] =
              static_cast<char>("0123456789{}[]\",:-.e "[rng() % 21]);
        }
      } else if (mode == 1) {
        corrupted = text.substr(0, rng() % text.size());
      } else {
        corrupted = gzip;
        for (int i = 0; i < 4; ++i)
          corrupted[rng() % corrupted.size()] ^= static_cast<char>(1 + rng() % 255);
      }
      const std::string path = Path("copy.json" + std::string(mode == 2 ? ".gz" : ""));
      std::ofstream(path, std::ios::binary | std::ios::trunc) << corrupted;
      const std::string outcome = ReplayOutcome(path);
      if (outcome == "ok") {
        ++outcomes_ok;
      } else {
        ++outcomes_error;
        EXPECT_NE(outcome.find("copy.json"), std::string::npos)
            << "the error does not name the file: " << outcome;
      }
    }
  }
  std::printf("  corrupted copies: %d replayed, %d rejected with an error\n", outcomes_ok,
              outcomes_error);
  EXPECT_GT(outcomes_error, 0);
}

// A GPU-bound step, written by hand so that every what-if's effect can be derived:
//   host: ProfilerStep#1 over [0, 310] µs; launches (1 µs each) of k1, k2, k3 on stream 7 and of
//         an all-reduce on stream 20; cudaDeviceSynchronize [4, 306] µs with its Context Sync.
//   GPU:  k1, k2 GEMMs [5, 105], [105, 205] and k3 elementwise [205, 305] on stream 7; the
//         all-reduce of 64 MiB over the 8-rank world [207, 287] on stream 20, 2 µs after k2
//         (read as a wait on k2), overlapping k3.
// The replay: the sync waits for k3 and the all-reduce, returns 1 µs after the later of them,
// and the host spends 4 µs more before the step ends: 305 + 1 + 4 = 310 µs.
class ReplayWhatIfTest : public testing_support::TempDirTest {
 protected:
  // Writes `text` as the trace file `name` and reads it.
  traces::Trace ReadTrace(const std::string& name, std::string_view text) {
    const std::string path = Path(name);
    std::ofstream(path) << text;
    Expected<traces::Trace> trace = traces::ReadKinetoTrace(path);
    EXPECT_TRUE(trace.ok()) << trace.error().ToString();
    return std::move(trace).value();
  }

  traces::Trace GpuBoundTrace() {
    return ReadTrace("gpu_bound.json",
                     R"json({"distributedInfo": {"rank": 0, "world_size": 8, "backend": "nccl"},
    "traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 310},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 0, "dur": 1, "args": {"correlation": 1}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"correlation": 2}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 2, "dur": 1, "args": {"correlation": 3}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 3, "dur": 1, "args": {"correlation": 4}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": 4, "dur": 302, "args": {"correlation": 5}},
    {"ph": "X", "cat": "cuda_sync", "name": "Context Sync", "pid": 0, "tid": 7, "ts": 305, "dur": 1, "args": {"correlation": 5, "device": 0}},
    {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0, "tid": 7, "ts": 5, "dur": 100, "args": {"correlation": 1, "stream": 7, "device": 0}},
    {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0, "tid": 7, "ts": 105, "dur": 100, "args": {"correlation": 2, "stream": 7, "device": 0}},
    {"ph": "X", "cat": "kernel", "name": "vectorized_elementwise_kernel", "pid": 0, "tid": 7, "ts": 205, "dur": 100, "args": {"correlation": 3, "stream": 7, "device": 0}},
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)", "pid": 0, "tid": 20, "ts": 207, "dur": 80,
     "args": {"correlation": 4, "stream": 20, "device": 0, "Collective name": "allreduce", "In msg nelems": 16777216, "dtype": "Float", "Group size": 8}}
    ]})json");
  }

  // The trace's default replay graph.
  static traces::ReplayGraph GraphOf(const traces::Trace& trace) {
    Expected<traces::ReplayGraph> replay = traces::BuildReplayGraph(trace);
    EXPECT_TRUE(replay.ok()) << replay.error().ToString();
    return std::move(replay).value();
  }

  // The what-if of a trace whose one step replays in `replayed` (310 µs for GpuBoundTrace).
  Expected<WhatIfResult> WhatIf(const traces::Trace& trace, const ReplayWhatIf& what_if,
                                DurationNs replayed = Microseconds(310)) {
    const Expected<traces::ReplayGraph> replay = traces::BuildReplayGraph(trace);
    EXPECT_TRUE(replay.ok()) << replay.error().ToString();
    const Expected<ReplayResult> baseline = SimulateReplay(*replay);
    EXPECT_TRUE(baseline.ok());
    EXPECT_EQ(baseline->steps.at(0).simulated, replayed);
    return SimulateWhatIf(trace, *replay, *baseline, what_if);
  }

  // The trace's replay, which must reproduce `measured` step by step with every GPU op at its
  // start, its graph's statistics, and the replay with the GEMM-class kernels twice as fast —
  // both with launch queues of `queue_depth`.
  struct GemmWhatIf {
    traces::ReplayStats stats;
    std::vector<DurationNs> what_if;  // per step
  };
  static std::optional<GemmWhatIf> GemmsTwiceAsFast(const traces::Trace& trace,
                                                    const std::vector<DurationNs>& measured,
                                                    int64_t queue_depth = 1000) {
    traces::ReplayOptions options{.launch_queue_depth = queue_depth};
    std::optional<ReplayResult> baseline = Replayed(trace, options);
    if (!baseline) return std::nullopt;
    EXPECT_EQ(baseline->max_start_drift, DurationNs::Zero());
    for (size_t i = 0; i < baseline->steps.size(); ++i) {
      EXPECT_EQ(baseline->steps[i].simulated, measured.at(i)) << "step " << i;
    }
    options.speedups = {{traces::KernelClass::kGemm, 2}};
    GemmWhatIf out;
    const std::optional<ReplayResult> faster = Replayed(trace, options, &out.stats);
    if (!faster) return std::nullopt;
    for (const ReplayStepResult& step : faster->steps) out.what_if.push_back(step.simulated);
    return out;
  }

  static std::optional<ReplayResult> Replayed(const traces::Trace& trace,
                                              const traces::ReplayOptions& options,
                                              traces::ReplayStats* stats = nullptr) {
    const Expected<traces::ReplayGraph> replay = traces::BuildReplayGraph(trace, options);
    EXPECT_TRUE(replay.ok()) << replay.error().ToString();
    if (!replay.ok()) return std::nullopt;
    if (stats != nullptr) *stats = replay->stats;
    Expected<ReplayResult> result = SimulateReplay(*replay);
    EXPECT_TRUE(result.ok()) << result.error().ToString();
    if (!result.ok()) return std::nullopt;
    return std::move(result).value();
  }

  // The analytical model's cost of the trace's all-reduce over `ranks` GPUs of DGX A100s.
  static DurationNs AllReduceCost(const network::ClusterSpec& cluster, int32_t ranks) {
    return CollectiveCost(cluster, ranks, graph::CommKind::kAllReduce, Bytes(64 << 20));
  }

  // The analytical model's cost of one collective priced on its own.
  static DurationNs CollectiveCost(const network::ClusterSpec& cluster, int32_t ranks,
                                   graph::CommKind kind, Bytes bytes) {
    graph::TaskGraphBuilder b;
    const std::vector<int32_t> one = {0};
    const graph::CommId ar = b.AddCollective(kind, bytes, one);
    std::vector<int32_t> group(static_cast<size_t>(ranks));
    std::iota(group.begin(), group.end(), 0);
    b.PriceAs(ar, group);
    b.AddCollectiveTask(b.Stream(0, "s"), ar, "ar", "");
    Expected<graph::TaskGraph> alone = std::move(b).Build();
    network::ClusterSpec sized = cluster;
    EXPECT_TRUE(network::FitCluster(sized, ranks).ok());
    network::AnalyticalModel model(sized);
    EXPECT_TRUE(model.Prepare(*alone).ok());
    return model.Cost(ar);
  }
};

TEST_F(ReplayWhatIfTest, FasterKernelsShortenAGpuBoundStepByWhatTheySave) {
  const traces::Trace trace = GpuBoundTrace();
  // GEMMs ×2: k1, k2 take 50 µs; k3 ends at 205, the all-reduce (after k2 + 2 µs) at 187:
  // 205 + 1 + 4 = 210 µs.
  const Expected<WhatIfResult> gemm =
      WhatIf(trace, {.speedups = {{traces::KernelClass::kGemm, 2}}});
  ASSERT_TRUE(gemm.ok()) << gemm.error().ToString();
  EXPECT_EQ(gemm->graph.stats.sped_up_ops, 2);
  EXPECT_EQ(gemm->steps.at(0).what_if, Microseconds(210));
  EXPECT_NEAR(gemm->steps.at(0).Change(), -100.0 / 310, 1e-12);
  // Every kernel ×4 (the all-reduce is communication and keeps its 80 µs): k2 ends at 55, the
  // all-reduce runs [57, 137] and is now the last: 137 + 1 + 4 = 142 µs.
  const Expected<WhatIfResult> all = WhatIf(trace, {.speedups = {{traces::KernelClass::kAll, 4}}});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->graph.stats.sped_up_ops, 3);
  EXPECT_EQ(all->steps.at(0).what_if, Microseconds(142));
}

// Where the step's time goes: its critical path from the end back. Replayed (310 µs): the
// host's last 4 µs [306, 310], the sync's measured rest [305, 306] after k3 — the later of
// what it waited for — k3, k2 and k1 [5, 305] on the GPU, the 4 µs gap kept before k1 [1, 5]
// and k1's launch [0, 1]: GPU 300, host 4, sync wait 1, fixed gap 4, CUDA API 1; of the GPU
// part 200 µs are GEMMs. GEMMs ×2 (210 µs): GPU 200 µs (100 of them GEMMs), the rest as before.
// The all-reduce, hidden behind k3, is on neither path.
TEST_F(ReplayWhatIfTest, TheCriticalPathSaysWhereTheStepsTimeGoes) {
  const traces::Trace trace = GpuBoundTrace();
  const Expected<WhatIfResult> gemm =
      WhatIf(trace, {.speedups = {{traces::KernelClass::kGemm, 2}}});
  ASSERT_TRUE(gemm.ok()) << gemm.error().ToString();
  const WhatIfStep& step = gemm->steps.at(0);
  const auto expect = [](const StepPath& path, std::array<int64_t, kPathParts> us,
                         int64_t sped_up) {
    for (size_t part = 0; part < kPathParts; ++part) {
      EXPECT_EQ(path.parts[part], Microseconds(us[part]))
          << PathPartName(static_cast<PathPart>(part));
    }
    EXPECT_EQ(path.sped_up, Microseconds(sped_up));
  };
  // gpu, communication, host, cuda_api, sync_wait, fixed_gap, peer_wait.
  expect(step.replayed_path, {300, 0, 4, 1, 1, 4, 0}, 200);
  expect(step.what_if_path, {200, 0, 4, 1, 1, 4, 0}, 100);
  EXPECT_EQ(step.replayed_path.Total(), step.replayed);
  EXPECT_EQ(step.what_if_path.Total(), step.what_if);
  // The step moved (−32%) and GEMMs are 65% of its path: nothing to explain.
  EXPECT_EQ(WhyUnmoved(step.replayed_path, step.Change()), "");
  // A path of host work: a GPU what-if cannot move it, and says so.
  StepPath host;
  host.parts[static_cast<size_t>(PathPart::kHost)] = Microseconds(870);
  host.parts[static_cast<size_t>(PathPart::kApi)] = Microseconds(100);
  host.parts[static_cast<size_t>(PathPart::kGpu)] = Microseconds(30);
  host.sped_up = Microseconds(20);
  EXPECT_EQ(WhyUnmoved(host, -0.004),
            "its critical path is 87% host, 10% cuda_api; the GPU work sped up is 2.0% of it, "
            "so the step can gain at most that");
}

// The GPU-bound step with its all-reduce's size gone (no args, no annotation: a trace before
// PyTorch 2.1 without record_shapes). It is not priced as a 0-byte collective: under
// --network dgx-a100 it keeps its measured 80 µs (hidden behind k3: the step stays 310 µs, where
// the sized one takes 753.5), and the replay counts it.
TEST_F(ReplayWhatIfTest, ACollectiveWithoutASizeKeepsItsMeasuredTime) {
  traces::Trace trace = GpuBoundTrace();
  ASSERT_EQ(trace.collectives.size(), 1u);
  trace.collectives[0].bytes = Bytes(0);
  trace.collectives[0].size_unknown = true;
  const Expected<network::ClusterSpec> dgx = network::ClusterPreset("dgx-a100", 0);
  ASSERT_TRUE(dgx.ok());
  const Expected<WhatIfResult> priced = WhatIf(trace, {.cluster = *dgx});
  ASSERT_TRUE(priced.ok()) << priced.error().ToString();
  EXPECT_EQ(priced->steps.at(0).what_if, Microseconds(310));
  EXPECT_EQ(priced->graph.stats.unsized_collectives, 1);
  EXPECT_EQ(priced->graph.stats.collectives, 0);
  EXPECT_EQ(priced->graph.stats.first_unsized,
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)");
}

// The GPU-bound step with its all-reduce made small (24 KiB): its measured 80 µs is mostly
// waiting for peers. Told that the trace ran on DGX A100s, a network what-if keeps the part the
// model does not price there (80 µs − its cost over the 8 GPUs) before the collective and
// prices the transfer on the new cluster: on the same cluster the collective takes its
// measured 80 µs again; over 64 GPUs of DGX H100s, the wait and the cost there. Without the
// traced cluster the wait is dropped (the collective takes the model's few µs).
TEST_F(ReplayWhatIfTest, ANetworkWhatIfKeepsTheWaitForPeersOfTheTracedRun) {
  traces::Trace trace = GpuBoundTrace();
  ASSERT_EQ(trace.collectives.size(), 1u);
  trace.collectives[0].bytes = Bytes(24 << 10);
  const Expected<network::ClusterSpec> a100 = network::ClusterPreset("dgx-a100", 0);
  const Expected<network::ClusterSpec> h100 = network::ClusterPreset("dgx-h100", 0);
  ASSERT_TRUE(a100.ok() && h100.ok());
  const DurationNs traced_cost =
      CollectiveCost(*a100, 8, graph::CommKind::kAllReduce, Bytes(24 << 10));
  ASSERT_LT(traced_cost, Microseconds(80));
  const DurationNs wait = Microseconds(80) - traced_cost;
  // The collective's time in a what-if: from its wait's start (or its own) to its end.
  const auto collective_time = [](const WhatIfResult& result) {
    const graph::TaskGraph& graph = result.graph.graph;
    for (uint32_t i = 0; i < graph.task_count(); ++i) {
      const graph::Task& task = graph.task(graph::TaskId(i));
      if (task.kind != graph::TaskKind::kCollective) continue;
      const graph::TaskId before(i - 1);
      const bool waited = graph.category_name(graph.task(before).category) == "peer_wait";
      return result.times.comm_end[task.comm.value()] -
             result.times.task_start[(waited ? before : graph::TaskId(i)).value()];
    }
    return DurationNs::Zero();
  };
  const Expected<WhatIfResult> same = WhatIf(trace, {.cluster = *a100, .traced_cluster = *a100});
  ASSERT_TRUE(same.ok()) << same.error().ToString();
  EXPECT_EQ(same->graph.stats.peer_waits, 1);
  EXPECT_EQ(same->graph.stats.peer_wait_time, wait);
  EXPECT_EQ(collective_time(*same), Microseconds(80));
  EXPECT_EQ(same->steps.at(0).what_if, Microseconds(310));
  const Expected<WhatIfResult> scaled =
      WhatIf(trace, {.cluster = *h100, .data_parallel = 64, .traced_cluster = *a100});
  ASSERT_TRUE(scaled.ok()) << scaled.error().ToString();
  EXPECT_EQ(collective_time(*scaled),
            wait + CollectiveCost(*h100, 64, graph::CommKind::kAllReduce, Bytes(24 << 10)));
  const Expected<WhatIfResult> dropped = WhatIf(trace, {.cluster = *a100});
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(dropped->graph.stats.peer_waits, 0);
  EXPECT_EQ(collective_time(*dropped), traced_cost);
  EXPECT_THAT(WhatIf(trace, {.traced_cluster = *a100}).error().ToString(),
              testing::HasSubstr("needs the cluster to price the transfers on"));
}

// Two host threads as PyTorch runs a training step: the main thread launches the forward
// (gemm K1) and waits in loss.backward() while the autograd engine's thread launches the
// backward (gemm K2), then resumes with the optimizer (elementwise K3) and syncs; step 2 the
// same (K4, K5, K6). Times in µs; every GEMM 2,000 µs, K3 and K6 100 µs:
//   autograd  call X [0, 1]; K2 launch [1800, 1805]; K5 launch [6000, 6005]
//   main      K1 launch [1500, 1505]; K3 launch [2900, 2905]; sync [2905, 5612];
//             K4 launch [5700, 5705]; K6 launch [7100, 7105]; sync [7105, 9812]
//   stream 7  K1 [1510, 3510], K2 [3510, 5510], K3 [5510, 5610], K4 [5710, 7710],
//             K5 [7710, 9710], K6 [9710, 9810]
// Each silence of a thread of at least 1 ms ends within 2 ms of the other's last call before
// it falls silent: four hand-offs (autograd after 1505 and 5705, main after 1805 and 6005),
// each a wait for that call and the measured rest (295 and 1,095 µs).
// GEMMs ×2 (1,000 µs): K1 [1510, 2510]; K2 launched at 1505 + 295 runs [2510, 3510]; K3
// launched at 1805 + 1,095 = 2,900 runs [3510, 3610]; the sync returns 2 µs after it: step 1
// 3,612 − 1,500 = 2,112 µs. Step 2: K4 launched at 3,612 + 88 = 3,700 runs after its 5 µs gap
// [3710, 4710]; K5 launched at 3,705 + 295 = 4,000 runs [4710, 5710]; K6 launched at 4,005 +
// 1,095 = 5,100 runs [5710, 5810]; step 2 ends at 5,812: 2,200 µs. Without the hand-offs the
// autograd thread would still launch K5 at 6,000 and step 2 would take 3,495 µs.
TEST_F(ReplayWhatIfTest, AThreadWokenByAnotherMovesWithIt) {
  const traces::Trace trace = ReadTrace("two_threads.json", R"json({"traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 1500, "dur": 4112},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 5612, "dur": 4200},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaGetDevice", "pid": 1, "tid": 2, "ts": 0, "dur": 1, "args": {"correlation": 100}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1500, "dur": 5, "args": {"correlation": 1}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 1800, "dur": 5, "args": {"correlation": 2}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 2900, "dur": 5, "args": {"correlation": 3}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": 2905, "dur": 2707, "args": {"correlation": 4}},
    {"ph": "X", "cat": "cuda_sync", "name": "Context Sync", "pid": 0, "tid": 7, "ts": 5611, "dur": 1, "args": {"correlation": 4, "device": 0}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 5700, "dur": 5, "args": {"correlation": 5}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 6000, "dur": 5, "args": {"correlation": 6}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 7100, "dur": 5, "args": {"correlation": 7}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": 7105, "dur": 2707, "args": {"correlation": 8}},
    {"ph": "X", "cat": "cuda_sync", "name": "Context Sync", "pid": 0, "tid": 7, "ts": 9811, "dur": 1, "args": {"correlation": 8, "device": 0}},
    {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0, "tid": 7, "ts": 1510, "dur": 2000, "args": {"correlation": 1, "stream": 7, "device": 0}},
    {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0, "tid": 7, "ts": 3510, "dur": 2000, "args": {"correlation": 2, "stream": 7, "device": 0}},
    {"ph": "X", "cat": "kernel", "name": "vectorized_elementwise_kernel", "pid": 0, "tid": 7, "ts": 5510, "dur": 100, "args": {"correlation": 3, "stream": 7, "device": 0}},
    {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0, "tid": 7, "ts": 5710, "dur": 2000, "args": {"correlation": 5, "stream": 7, "device": 0}},
    {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0, "tid": 7, "ts": 7710, "dur": 2000, "args": {"correlation": 6, "stream": 7, "device": 0}},
    {"ph": "X", "cat": "kernel", "name": "vectorized_elementwise_kernel", "pid": 0, "tid": 7, "ts": 9710, "dur": 100, "args": {"correlation": 7, "stream": 7, "device": 0}}
    ]})json");
  const std::optional<GemmWhatIf> r =
      GemmsTwiceAsFast(trace, {Microseconds(4112), Microseconds(4200)});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->stats.inferred_thread_edges, 4);
  EXPECT_EQ(r->what_if, (std::vector{Microseconds(2112), Microseconds(2200)}));
}

// A host thread that fills a launch queue of 2 (launch_queue_depth; a real one holds ~1,000):
// K1 and K2 (gemms, 1,000 µs each) are queued, the launch of K3 blocks until K1 has finished
// and freed a slot, the host works 500 µs and then
// launches K4; a sync ends the step. Times in µs:
//   host      K1 launch [0, 5]; K2 launch [5, 10]; K3 launch [10, 1013] (returns 3 µs after
//             K1 ends); K4 launch [1513, 1518]; sync [1518, 2212]
//   stream 7  K1 [10, 1010], K2 [1010, 2010], K3 [2010, 2110], K4 [2110, 2210]
// K3's call is a wait for K1 and the 3 µs after it (one queue-full edge). GEMMs ×2: K1 [10,
// 510], K2 [510, 1010]; K3's call returns at 513, K4's launch at 513 + 500 = 1,013-1,018; K3
// [1010, 1110], K4 [1110, 1210]; the sync returns at 1,212: the step takes 1,212 µs. Kept as
// measured, K3's call would return at 1,013 and the step take 1,620 µs.
TEST_F(ReplayWhatIfTest, ALaunchThatFoundTheQueueFullWaitsForTheOpThatFreedIt) {
  const traces::Trace trace = ReadTrace("queue_full.json", R"json({"traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 2212},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 0, "dur": 5, "args": {"correlation": 1}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 5, "dur": 5, "args": {"correlation": 2}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 1003, "args": {"correlation": 3}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1513, "dur": 5, "args": {"correlation": 4}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": 1518, "dur": 694, "args": {"correlation": 5}},
    {"ph": "X", "cat": "cuda_sync", "name": "Context Sync", "pid": 0, "tid": 7, "ts": 2211, "dur": 1, "args": {"correlation": 5, "device": 0}},
    {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0, "tid": 7, "ts": 10, "dur": 1000, "args": {"correlation": 1, "stream": 7, "device": 0}},
    {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0, "tid": 7, "ts": 1010, "dur": 1000, "args": {"correlation": 2, "stream": 7, "device": 0}},
    {"ph": "X", "cat": "kernel", "name": "vectorized_elementwise_kernel", "pid": 0, "tid": 7, "ts": 2010, "dur": 100, "args": {"correlation": 3, "stream": 7, "device": 0}},
    {"ph": "X", "cat": "kernel", "name": "vectorized_elementwise_kernel", "pid": 0, "tid": 7, "ts": 2110, "dur": 100, "args": {"correlation": 4, "stream": 7, "device": 0}}
    ]})json");
  const std::optional<GemmWhatIf> r = GemmsTwiceAsFast(trace, {Microseconds(2212)}, 2);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->stats.inferred_queue_edges, 1);
  EXPECT_EQ(r->what_if, std::vector{Microseconds(1212)});
}

TEST_F(ReplayWhatIfTest, SerializingStreamsAndRepricingCollectivesChangeWhatTheyShould) {
  const traces::Trace trace = GpuBoundTrace();
  // One stream per GPU: the all-reduce no longer overlaps k3 and runs [305, 385]: 390 µs.
  const Expected<WhatIfResult> serial = WhatIf(trace, {.serialize_gpu_streams = true});
  ASSERT_TRUE(serial.ok()) << serial.error().ToString();
  EXPECT_EQ(serial->steps.at(0).what_if, Microseconds(390));
  EXPECT_EQ(serial->graph.graph.stream_count(), 2u);  // the host thread and one GPU stream

  // Priced by the analytical model on a DGX A100 node, the all-reduce takes the model's cost C
  // of 64 MiB over 8 GPUs; it outlasts k3 when it ends after 305 µs: 207 + C + 1 + 4.
  const Expected<network::ClusterSpec> dgx = network::ClusterPreset("dgx-a100", 0);  // sized
  ASSERT_TRUE(dgx.ok());
  const DurationNs node = AllReduceCost(*dgx, 8);
  ASSERT_GT(node, Microseconds(98));
  const Expected<WhatIfResult> priced = WhatIf(trace, {.cluster = *dgx});
  ASSERT_TRUE(priced.ok()) << priced.error().ToString();
  EXPECT_EQ(priced->communication_model, "analytical");
  EXPECT_EQ(priced->steps.at(0).what_if, Microseconds(212) + node);

  // Data parallelism over 64 ranks: the world all-reduce spans 8 nodes.
  const Expected<WhatIfResult> scaled = WhatIf(trace, {.cluster = *dgx, .data_parallel = 64});
  ASSERT_TRUE(scaled.ok()) << scaled.error().ToString();
  EXPECT_EQ(scaled->graph.stats.rescaled_collectives, 1);
  EXPECT_EQ(scaled->steps.at(0).what_if, Microseconds(212) + AllReduceCost(*dgx, 64));
  EXPECT_THAT(SimulateWhatIf(trace, GraphOf(trace), {}, {.data_parallel = 64}).error().ToString(),
              testing::HasSubstr("needs a cluster"));
}

// The same work with the all-reduce issued on the compute stream between k2 and k3, as a
// framework without a communication stream does:
//   GPU:  k1 [5, 105], k2 [105, 205], the all-reduce [205, 285], k3 [285, 385], all on stream
//         7; the sync returns at 386 and the step ends at 390 µs.
// Adding overlap moves the all-reduce to a stream of its own, still after k2 (its input): it
// runs [205, 285] while k3 runs [205, 305]; the sync waits for both, so the step is the 310 µs
// of GpuBoundTrace again: 305 + 1 + 4.
TEST_F(ReplayWhatIfTest, AddingOverlapMovesACollectiveOffTheComputeStream) {
  const traces::Trace trace =
      ReadTrace("serial_all_reduce.json",
                R"json({"distributedInfo": {"rank": 0, "world_size": 8, "backend": "nccl"},
    "traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 390},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 0, "dur": 1, "args": {"correlation": 1}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"correlation": 2}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 2, "dur": 1, "args": {"correlation": 3}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 3, "dur": 1, "args": {"correlation": 4}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": 4, "dur": 382, "args": {"correlation": 5}},
    {"ph": "X", "cat": "cuda_sync", "name": "Context Sync", "pid": 0, "tid": 7, "ts": 385, "dur": 1, "args": {"correlation": 5, "device": 0}},
    {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0, "tid": 7, "ts": 5, "dur": 100, "args": {"correlation": 1, "stream": 7, "device": 0}},
    {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0, "tid": 7, "ts": 105, "dur": 100, "args": {"correlation": 2, "stream": 7, "device": 0}},
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)", "pid": 0, "tid": 7, "ts": 205, "dur": 80,
     "args": {"correlation": 3, "stream": 7, "device": 0, "Collective name": "allreduce", "In msg nelems": 16777216, "dtype": "Float", "Group size": 8}},
    {"ph": "X", "cat": "kernel", "name": "vectorized_elementwise_kernel", "pid": 0, "tid": 7, "ts": 285, "dur": 100, "args": {"correlation": 4, "stream": 7, "device": 0}}
    ]})json");
  const Expected<WhatIfResult> overlapped =
      WhatIf(trace, {.overlap_collectives = true}, Microseconds(390));
  ASSERT_TRUE(overlapped.ok()) << overlapped.error().ToString();
  EXPECT_EQ(overlapped->graph.stats.moved_collectives, 1);
  EXPECT_EQ(overlapped->graph.graph.stream_count(), 3u);  // host, stream 7, the moved lane
  EXPECT_EQ(overlapped->steps.at(0).what_if, Microseconds(310));
  // The all-reduce still starts after k2, its input, and k3 right after k2.
  const traces::ReplayGraph& graph = overlapped->graph;
  for (uint32_t t = 0; t < graph.graph.task_count(); ++t) {
    const graph::Task& task = graph.graph.task(graph::TaskId(t));
    if (graph.graph.name(task.name).starts_with("ncclDevKernel")) {
      EXPECT_EQ(overlapped->times.task_start[t] - TimeNs::Zero(), Microseconds(205));
    }
    if (graph.graph.name(task.name) == "vectorized_elementwise_kernel") {
      EXPECT_EQ(overlapped->times.task_start[t] - TimeNs::Zero(), Microseconds(205));
    }
  }

  // Where the collective already has its own stream there is nothing to move.
  const Expected<WhatIfResult> unchanged = WhatIf(GpuBoundTrace(), {.overlap_collectives = true});
  ASSERT_TRUE(unchanged.ok());
  EXPECT_EQ(unchanged->graph.stats.moved_collectives, 0);
  EXPECT_EQ(unchanged->steps.at(0).what_if, Microseconds(310));
  EXPECT_THAT(SimulateWhatIf(trace, GraphOf(trace), {},
                             {.serialize_gpu_streams = true, .overlap_collectives = true})
                  .error()
                  .ToString(),
              testing::HasSubstr("contradict"));
}

TEST(ReplayWhatIfFromJson, ReadsEverySettingAndRejectsBadOnes) {
  const Expected<ReplayWhatIf> what_if = ReplayWhatIfFromJson(
      Json::parse(R"({"speedups": ["gemm=1.5", "all=1.2"], "overlap": "collectives",
                      "network": {"preset": "dgx-h100", "nodes": 8}, "data_parallel": 64,
                      "compression": {"method": "topk", "density": 0.01},
                      "gpu": "h100-sxm5-80gb"})"),
      "");
  ASSERT_TRUE(what_if.ok()) << what_if.error().ToString();
  ASSERT_EQ(what_if->speedups.size(), 2u);
  EXPECT_EQ(what_if->speedups[0].kernels, traces::KernelClass::kGemm);
  EXPECT_EQ(what_if->speedups[1].factor, 1.2);
  EXPECT_TRUE(what_if->overlap_collectives);
  EXPECT_FALSE(what_if->serialize_gpu_streams);
  EXPECT_EQ(what_if->cluster->nodes, 8);
  EXPECT_EQ(what_if->data_parallel, 64);
  EXPECT_EQ(what_if->compression->method, "topk");
  EXPECT_EQ(what_if->gpu->name, "h100-sxm5-80gb");
  const Expected<ReplayWhatIf> preset =
      ReplayWhatIfFromJson(Json::parse(R"({"network": "dgx-a100", "overlap": "none",
                                           "traced_network": "dgx1-v100"})"),
                           "");
  ASSERT_TRUE(preset.ok()) << preset.error().ToString();
  EXPECT_TRUE(preset->serialize_gpu_streams);
  EXPECT_EQ(preset->cluster->name, "dgx-a100");
  EXPECT_EQ(preset->traced_cluster->name, "dgx1-v100");

  const auto error = [](const char* text) {
    const Expected<ReplayWhatIf> bad = ReplayWhatIfFromJson(Json::parse(text), "");
    return bad.ok() ? std::string("(accepted)") : bad.error().ToString();
  };
  EXPECT_THAT(error(R"({"speedup": ["gemm=2"]})"), testing::HasSubstr("speedups"));
  EXPECT_THAT(error(R"({"speedups": ["gemm=0"]})"), testing::HasSubstr("speedups[0]"));
  EXPECT_THAT(error(R"({"speedups": "gemm=2"})"), testing::HasSubstr("must be an array"));
  EXPECT_THAT(error(R"({"overlap": "more"})"), testing::HasSubstr("as_traced"));
  EXPECT_THAT(error(R"({"network": "dgx-z100"})"), testing::HasSubstr("network"));
  EXPECT_THAT(error(R"({"traced_network": 3})"), testing::HasSubstr("traced_network"));
  EXPECT_THAT(error(R"({"data_parallel": 0})"), testing::HasSubstr("data_parallel"));
  EXPECT_THAT(error(R"({"compression": "zip"})"), testing::HasSubstr("compression"));
  EXPECT_THAT(error(R"({"gpu": {"preset": "a100-sxm4-80gb", "memmory": "1 GiB"}})"),
              testing::HasSubstr("gpu.memmory"));
}

// Compressing the world all-reduce (64 MiB fp32 = 16 Mi elements over 8 ranks) replaces it by
// the method's steps, run one after another where the all-reduce ran: each collective at the
// analytical model's cost on its own, each kernel at the roofline's. The chain starts at 207 µs
// and outlasts k3, so the step is 207 + chain + 1 + 4 µs.
TEST_F(ReplayWhatIfTest, CompressionReplacesTheWorldAllReduceByTheMethodsSteps) {
  const traces::Trace trace = GpuBoundTrace();
  const Expected<network::ClusterSpec> dgx = network::ClusterPreset("dgx-a100", 0);
  const Expected<models::GpuSpec> a100 = models::GpuPreset("a100-sxm4-80gb");
  ASSERT_TRUE(dgx.ok() && a100.ok());
  for (const char* method : {"topk", "qsgd", "onebit_adam", "fp16"}) {
    SCOPED_TRACE(method);
    const Expected<CompressionConfig> config =
        CompressionFromJson(Json{{"method", method}}, "compression");
    ASSERT_TRUE(config.ok()) << config.error().ToString();
    const models::RooflineCostModel roofline(*a100);
    DurationNs chain;
    const GradientTensors bucket{.matrices = {}, .vector_elements = 16 << 20};
    for (const ReductionStep& step : MakeCompression(*config)->Reduce(bucket, 8, DType::kFp32)) {
      if (step.collective) chain += CollectiveCost(*dgx, 8, *step.collective, step.bytes);
      for (const models::Op& kernel : step.kernels) chain += roofline.Price(kernel)->duration;
    }
    ASSERT_GT(Microseconds(207) + chain, Microseconds(305));
    const Expected<WhatIfResult> compressed =
        WhatIf(trace, {.cluster = *dgx, .compression = *config, .gpu = *a100});
    ASSERT_TRUE(compressed.ok()) << compressed.error().ToString();
    EXPECT_EQ(compressed->graph.stats.rewritten_collectives, 1);
    EXPECT_EQ(compressed->steps.at(0).what_if, Microseconds(212) + chain);
  }
  EXPECT_THAT(SimulateWhatIf(trace, GraphOf(trace), {}, {.compression = CompressionConfig{}})
                  .error()
                  .ToString(),
              testing::HasSubstr("needs a cluster to price the collectives on and a GPU"));
}

// The shared Chakra trace replayed with its recorded durations. Every stream runs its tasks in
// order, so the schedule is the longest-path recurrence end = duration + max(end of the stream
// predecessor, end of every dependency), computed here over the graph without the engine; it
// must also lie between the critical path of the file's data_deps (the bound with unlimited
// parallelism) and the sum of all durations (everything one after another).
// The resource a node of another tool's trace runs on, by the rule of docs/formats/chakra.md.
std::string ResourceOf(const traces::ChakraNode& node) {
  const auto integer = [&](std::string_view name) -> std::optional<int64_t> {
    const traces::ChakraAttribute* a = node.Attr(name);
    return a != nullptr ? a->AsInteger() : std::nullopt;
  };
  if (node.is_cpu_op()) return integer("tid") ? fmt::format("cpu tid {}", *integer("tid")) : "cpu";
  if (integer("stream")) return fmt::format("gpu stream {}", *integer("stream"));
  if (integer("tid")) return fmt::format("gpu stream {}", *integer("tid"));
  return node.type == traces::ChakraNodeType::kCompute ? "gpu" : "gpu comm";
}

// chakra.0.et (one rank: 3,643 compute nodes, 21 collectives, no sends) scheduled the way
// ASTRA-sim issues nodes, by a list scheduler written here from the trace alone: each resource
// runs one node at a time; at every instant, once the nodes ending then have ended, each free
// resource takes the ready node of lowest id, all of them before any starts; a node takes its
// duration_micros (a collective of one rank too). The engine's ready-first streams must give
// the same span, which lies between the data_deps critical path and the sum of all work.
TEST(ChakraReplay, ReproducesTheReadyFirstScheduleOfTheSharedTrace) {
  const Expected<traces::ChakraTrace> trace =
      traces::ReadChakraTrace(traces::SharedChakra(traces::kChakraEt));
  ASSERT_TRUE(trace.ok()) << trace.error().ToString();
  const Expected<traces::ChakraGraph> chakra = traces::BuildChakraGraph(std::span(&*trace, 1));
  ASSERT_TRUE(chakra.ok()) << chakra.error().ToString();
  const Expected<MeasuredRun> run = SimulateMeasured(chakra->graph, chakra->comm_durations);
  ASSERT_TRUE(run.ok()) << run.error().ToString();

  const std::vector<traces::ChakraNode>& nodes = trace->nodes;
  std::map<uint64_t, size_t> index;
  for (size_t n = 0; n < nodes.size(); ++n) index[nodes[n].id] = n;
  std::vector<std::vector<size_t>> successors(nodes.size());
  std::vector<size_t> waiting(nodes.size(), 0);
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (const uint64_t dep : nodes[n].data_deps) {
      if (!index.contains(dep)) continue;
      successors[index[dep]].push_back(n);
      ++waiting[n];
    }
  }
  using Ready = std::set<std::pair<uint64_t, size_t>>;  // (id, node): lowest id first
  std::map<std::string, Ready> ready;
  std::map<std::string, bool> busy;
  std::multimap<int64_t, size_t> running;  // end time → node
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (waiting[n] == 0) ready[ResourceOf(nodes[n])].emplace(nodes[n].id, n);
  }
  int64_t now = 0;
  int64_t span = 0;
  size_t finished = 0;
  while (true) {
    std::vector<size_t> chosen;
    for (auto& [resource, queue] : ready) {
      if (busy[resource] || queue.empty()) continue;
      chosen.push_back(queue.begin()->second);
      queue.erase(queue.begin());
      busy[resource] = true;
    }
    for (const size_t n : chosen) {
      running.emplace(now + static_cast<int64_t>(nodes[n].duration_micros) * 1000, n);
    }
    if (running.empty()) break;
    now = running.begin()->first;
    while (!running.empty() && running.begin()->first == now) {
      const size_t n = running.begin()->second;
      running.erase(running.begin());
      ++finished;
      span = std::max(span, now);
      busy[ResourceOf(nodes[n])] = false;
      for (const size_t next : successors[n]) {
        if (--waiting[next] == 0) ready[ResourceOf(nodes[next])].emplace(nodes[next].id, next);
      }
    }
  }
  ASSERT_EQ(finished, nodes.size());
  EXPECT_EQ((run->summary.makespan - TimeNs::Zero()).ns(), span);

  // Critical path over data_deps alone, in a topological order (the graph's tasks of one rank
  // are in id order, which data_deps do not always follow: settle until nothing moves).
  std::map<uint64_t, int64_t> node_end;
  int64_t total = 0;
  for (const traces::ChakraNode& node : nodes) total += node.duration_micros * 1000;
  for (bool moved = true; moved;) {
    moved = false;
    for (const traces::ChakraNode& node : nodes) {
      int64_t start = 0;
      for (const uint64_t dep : node.data_deps) start = std::max(start, node_end[dep]);
      const int64_t end = start + static_cast<int64_t>(node.duration_micros) * 1000;
      if (node_end[node.id] != end) moved = true;
      node_end[node.id] = end;
    }
  }
  int64_t critical_path = 0;
  for (const auto& [id, end] : node_end) critical_path = std::max(critical_path, end);
  EXPECT_GE(span, critical_path);
  EXPECT_LE(span, total);
  std::printf("chakra.0.et: simulated %.3f ms; data_deps critical path %.3f ms; all work %.3f ms\n",
              span / 1e6, critical_path / 1e6, total / 1e6);
}

// ASTRA-sim's send-first ring (tests/traces/chakra_test_traces.h): 4 ranks, 6 steps of 1 MiB.
// Another tool's sends complete when their data has left, so it runs. With the recorded
// durations (none for sends) it takes no time; priced on a DGX A100 each step's four sends run
// at once, and each recv ends when its data is in: 6 × one send's price, the price taken from a
// graph of one 1 MiB send between two GPUs of the node.
TEST(ChakraReplay, ASendFirstRingRunsAsASTRASimRunsIt) {
  std::vector<traces::ChakraTrace> ranks;
  for (int64_t rank = 0; rank < 4; ++rank) {
    ranks.push_back(traces::SendFirstRingRank(rank, 4, 6, 1 << 20));
  }
  const Expected<traces::ChakraGraph> ring = traces::BuildChakraGraph(ranks);
  ASSERT_TRUE(ring.ok()) << ring.error().ToString();
  EXPECT_EQ(ring->stats.point_to_point, 48);
  const Expected<MeasuredRun> measured = SimulateMeasured(ring->graph, ring->comm_durations);
  ASSERT_TRUE(measured.ok()) << measured.error().ToString();
  EXPECT_EQ(measured->summary.makespan, TimeNs::Zero());

  const network::ClusterSpec dgx = *network::ClusterPreset("dgx-a100", 1);
  const Expected<MeasuredRun> priced = SimulateOnCluster(ring->graph, dgx);
  ASSERT_TRUE(priced.ok()) << priced.error().ToString();
  graph::TaskGraphBuilder one;
  one.AddSend(one.Stream(0, "gpu"), 1, Bytes(1 << 20), 0, "send", "",
              graph::TaskGraphBuilder::SendMode::kEager);
  one.AddRecv(one.Stream(1, "gpu"), 0, 0, "recv", "");
  const Expected<graph::TaskGraph> single = std::move(one).Build();
  ASSERT_TRUE(single.ok());
  const Expected<MeasuredRun> send = SimulateOnCluster(*single, dgx);
  ASSERT_TRUE(send.ok()) << send.error().ToString();
  EXPECT_GT(send->summary.makespan, TimeNs::Zero());
  EXPECT_EQ((priced->summary.makespan - TimeNs::Zero()).ns(),
            6 * (send->summary.makespan - TimeNs::Zero()).ns());
}

}  // namespace
}  // namespace dtsim::strategies
