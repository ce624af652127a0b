// Kineto traces of a synthetic data-parallel job, one per rank, written so that every replay
// and what-if of it can be derived by hand (tests/traces/job_collectives_test.cc,
// tests/strategies/job_replay_test.cc, tests/cli/replay_command_test.cc).
//
// Each step of rank r, in µs from the step's start S (the same instant on every rank):
//   host: ProfilerStep#n over [0, E + 15]; cudaLaunchKernel of compute kernel k over
//         [10k, 10k + 5]; the all-reduce's launch over [10K, 10K + 5]; cudaDeviceSynchronize
//         over [10K + 5, E + 10] with its Context Sync record at E.
//   GPU:  the K compute kernels back to back from 6 µs, c_r each (the straggler's c is longer),
//         then the all-reduce on the same stream from 6 + K·c_r to E = 6 + K·max(c) + T: the
//         last rank to arrive waits for no one, its kernel is the transfer T.
// So every step lasts E + 15 = 21 + K·max(c) + T µs on every rank, and the next starts there.
// A rank's clock may be offset (every timestamp shifted) and its trace may start late (its
// first steps missing, as when ranks start their profilers at different kernels).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dtsim::testing_support {

struct SyntheticJob {
  int ranks = 4;
  int steps = 3;
  int kernels = 3;           // K compute kernels a step
  int64_t kernel_us = 1000;  // c
  int straggler = -1;        // the rank whose kernels take straggler_kernel_us
  int64_t straggler_kernel_us = 1300;
  int64_t transfer_us = 2000;  // T
  int64_t all_reduce_bytes = 64 << 20;
  std::vector<int64_t> clock_offset_us;  // per rank; empty: none
  std::vector<int> first_step;           // per rank: the first step its trace has; empty: 1
  bool collective_args = true;           // Kineto's record_param_comms args on the NCCL kernel
  bool group_names = true;               // with the process group's name and ranks (PyTorch >= 2.1)
  int group_size = 0;                    // the group size the args record; 0: every rank

  int64_t KernelUs(int rank) const { return rank == straggler ? straggler_kernel_us : kernel_us; }
  int64_t SlowestKernelUs() const {
    return straggler >= 0 ? std::max(kernel_us, straggler_kernel_us) : kernel_us;
  }
  int64_t StepUs() const { return 21 + kernels * SlowestKernelUs() + transfer_us; }
};

// Rank `rank`'s trace as Kineto JSON.
inline std::string SyntheticRankTrace(const SyntheticJob& job, int rank) {
  const int64_t offset =
      job.clock_offset_us.empty() ? 0 : job.clock_offset_us[static_cast<size_t>(rank)];
  const int first = job.first_step.empty() ? 1 : job.first_step[static_cast<size_t>(rank)];
  const int64_t c = job.KernelUs(rank);
  const int64_t k = job.kernels;
  std::vector<std::string> events;
  int64_t correlation = 0;
  const auto event = [&](std::string_view cat, std::string_view name, int64_t tid, int64_t ts,
                         int64_t dur, const std::string& args) {
    events.push_back(fmt::format(
        R"({{"ph": "X", "cat": "{}", "name": "{}", "pid": {}, "tid": {}, "ts": {}, "dur": {}, "args": {{{}}}}})",
        cat, name, tid == 1 ? 100 + rank : 0, tid, ts + offset, dur, args));
  };
  for (int step = 1; step <= job.steps; ++step) {
    const int64_t s = 1'000'000 + (step - 1) * job.StepUs();
    const int64_t e = 6 + k * job.SlowestKernelUs() + job.transfer_us;
    if (step < first) continue;
    event("user_annotation", fmt::format("ProfilerStep#{}", step), 1, s, e + 15, "");
    for (int64_t i = 0; i < k; ++i) {
      ++correlation;
      event("cuda_runtime", "cudaLaunchKernel", 1, s + 10 * i, 5,
            fmt::format(R"("correlation": {})", correlation));
      event("kernel", "ampere_sgemm_128x64_nn", 7, s + 6 + i * c, c,
            fmt::format(R"("correlation": {}, "stream": 7, "device": {})", correlation, rank));
    }
    ++correlation;
    event("cuda_runtime", "cudaLaunchKernel", 1, s + 10 * k, 5,
          fmt::format(R"("correlation": {})", correlation));
    std::string args =
        fmt::format(R"("correlation": {}, "stream": 7, "device": {})", correlation, rank);
    if (job.collective_args) {
      std::string ranks;
      for (int r = 0; r < job.ranks; ++r) ranks += fmt::format("{}{}", r == 0 ? "" : ", ", r);
      args += fmt::format(
          R"(, "Collective name": "allreduce", "In msg nelems": {}, "Out msg nelems": {}, "dtype": "Float", "Group size": {})",
          job.all_reduce_bytes / 4, job.all_reduce_bytes / 4,
          job.group_size > 0 ? job.group_size : job.ranks);
      if (job.group_names) {
        args += fmt::format(R"(, "Process Group Name": "0", "Process Group Ranks": "[{}]")", ranks);
      }
    }
    event("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)", 7, s + 6 + k * c,
          e - (6 + k * c), args);
    ++correlation;
    event("cuda_runtime", "cudaDeviceSynchronize", 1, s + 10 * k + 5, e + 5 - 10 * k,
          fmt::format(R"("correlation": {})", correlation));
    event("cuda_sync", "Context Sync", 7, s + e, 1,
          fmt::format(R"("correlation": {}, "device": {})", correlation, rank));
  }
  std::string text = fmt::format(
      R"({{"distributedInfo": {{"rank": {}, "world_size": {}, "backend": "nccl"}}, "traceEvents": [)",
      rank, job.ranks);
  for (size_t i = 0; i < events.size(); ++i) text += (i == 0 ? "\n" : ",\n") + events[i];
  return text + "\n]}\n";
}

}  // namespace dtsim::testing_support
