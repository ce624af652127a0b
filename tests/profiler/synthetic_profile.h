// A hand-made Profile of one short training step, as the CUPTI adapter would produce it, so
// that linking and writing are tested without a GPU (tests/profiler/kineto_writer_test.cc).
//
// Host thread 100 of process 4242, times in µs after t0:
//   NVTX "ProfilerStep#1" [0, 100]; emit_nvtx "aten::mm, ..." [1, 10] around launch 1.
//   1 cudaLaunchKernel [2, 5]       -> gemm kernel on stream 7 [4, 30]
//   2 cudaMemcpyAsync [11, 13]      -> 1 MiB HtoD copy on stream 7 [30, 40] (driver corr 1002)
//   3 cudaEventRecord [14, 15]      -> event 5 records stream 7 (after the copy)
//   4 cudaStreamWaitEvent [16, 17]  -> stream 9 waits for event 5
//   5 cudaLaunchKernel [18, 20]     -> reduce kernel on stream 9 [40, 60]
//   6 cudaMemsetAsync [21, 22]      -> 4 KiB memset on stream 9 [60, 61]
//   7 cudaStreamSynchronize [23, 62] with its Stream Sync record on stream 9
// and what cannot be linked: a kernel of correlation 99 (no API record) on stream 7 [70, 71],
// an external id for correlation 1234 (no API record), an NVTX end marker without a start.
#pragma once

#include "profiler/profile.h"

namespace dtsim::profiler {

inline constexpr TimeNs kSyntheticT0 = TimeNs(1'700'000'000'000'000'000);

inline TimeNs SyntheticAt(double micros) {
  return kSyntheticT0 + DurationNs(static_cast<int64_t>(micros * 1000));
}

inline Profile SyntheticProfile() {
  Profile p;
  p.program = "python train.py";
  p.process = 4242;
  p.cupti_version = 130001;
  p.api_calls_not_recorded = {"cudaGetDevice", "cuDevicePrimaryCtxGetState"};
  p.capture_windows = 1;
  p.flush_before_device_reset = true;
  p.session_start = SyntheticAt(0);
  p.session_end = SyntheticAt(100);
  p.context_devices[1] = 0;
  p.devices.push_back({.id = 0,
                       .name = "NVIDIA H100 80GB HBM3",
                       .compute_major = 9,
                       .compute_minor = 0,
                       .global_memory = 85'520'809'984,
                       .multiprocessors = 132,
                       .max_threads_per_block = 1024,
                       .max_threads_per_multiprocessor = 2048,
                       .max_registers_per_block = 65536,
                       .max_shared_memory_per_block = 49152,
                       .warp_size = 32});
  const auto api = [&](uint32_t correlation, const char* name, double start, double end) {
    p.api_calls.push_back({.domain = ApiDomain::kRuntime,
                           .cbid = 211,
                           .name = name,
                           .process = 4242,
                           .thread = 100,
                           .start = SyntheticAt(start),
                           .end = SyntheticAt(end),
                           .correlation = correlation});
  };
  const auto kernel = [&](uint32_t correlation, const char* name, uint32_t stream, double start,
                          double end) {
    p.kernels.push_back({.name = name,
                         .start = SyntheticAt(start),
                         .end = SyntheticAt(end),
                         .device = 0,
                         .context = 1,
                         .stream = stream,
                         .correlation = correlation,
                         .grid = {128, 1, 1},
                         .block = {256, 1, 1},
                         .registers_per_thread = 32,
                         .static_shared_memory = 1024,
                         .dynamic_shared_memory = 0});
  };
  p.markers = {
      {MarkerPhase::kStart, 1, SyntheticAt(0), "ProfilerStep#1", "", 4242, 100},
      {MarkerPhase::kStart, 2, SyntheticAt(1),
       "aten::mm, seq = 0, op_id = 1, sizes = [[64, 32], [32, 16]], input_op_ids = []", "", 4242,
       100},
      {MarkerPhase::kEnd, 2, SyntheticAt(10), "", "", 4242, 100},
      {MarkerPhase::kEnd, 1, SyntheticAt(100), "", "", 4242, 100},
      {MarkerPhase::kEnd, 77, SyntheticAt(50), "", "", 4242, 100},
  };
  api(1, "cudaLaunchKernel", 2, 5);
  kernel(1, "_Z4gemmPfS_S_", 7, 4, 30);
  api(2, "cudaMemcpyAsync", 11, 13);
  p.memcpys.push_back({.start = SyntheticAt(30),
                       .end = SyntheticAt(40),
                       .device = 0,
                       .context = 1,
                       .stream = 7,
                       .correlation = 1002,
                       .runtime_correlation = 2,
                       .bytes = 1 << 20,
                       .kind = CopyKind::kHtoD,
                       .source = MemoryKind::kPinned,
                       .destination = MemoryKind::kDevice});
  api(3, "cudaEventRecord", 14, 15);
  p.cuda_events.push_back(
      {.correlation = 3, .context = 1, .stream = 7, .cuda_event = 5, .device = 0});
  api(4, "cudaStreamWaitEvent", 16, 17);
  p.syncs.push_back({.type = SyncType::kStreamWaitEvent,
                     .start = SyntheticAt(16),
                     .end = SyntheticAt(17),
                     .correlation = 4,
                     .context = 1,
                     .stream = 9,
                     .cuda_event = 5});
  api(5, "cudaLaunchKernel", 18, 20);
  kernel(5, "_Z6reducePf", 9, 40, 60);
  api(6, "cudaMemsetAsync", 21, 22);
  p.memsets.push_back({.start = SyntheticAt(60),
                       .end = SyntheticAt(61),
                       .device = 0,
                       .context = 1,
                       .stream = 9,
                       .correlation = 6,
                       .bytes = 4096});
  api(7, "cudaStreamSynchronize", 23, 62);
  p.syncs.push_back({.type = SyncType::kStreamSynchronize,
                     .start = SyntheticAt(61),
                     .end = SyntheticAt(62),
                     .correlation = 7,
                     .context = 1,
                     .stream = 9});
  kernel(99, "_Z5stray", 7, 70, 71);
  p.external_correlations = {{.kind = 4, .external_id = 9, .correlation = 1},
                             {.kind = 3, .external_id = 513, .correlation = 1},
                             {.kind = 3, .external_id = 514, .correlation = 1234}};
  return p;
}

}  // namespace dtsim::profiler
