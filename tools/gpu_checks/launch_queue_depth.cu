// How many launches the CUDA launch queue of a stream holds before the launching call blocks
// (issue 33: a replay must model launches that wait for queue space, docs/replay.md). A spin
// kernel holds the GPU for ~0.3 s; behind it, up to 16,384 launches are made on the same
// stream, each call timed on the host: the first call that takes longer than 100 us found the
// queue full, so the launches before it are the queue's depth. Measured for empty kernels, for
// kernels with 2 KB of parameters (a queue entry may hold the parameters), and for
// cudaMemsetAsync. Prints one JSON object.
#include <chrono>
#include <cstdio>

#include <cuda_runtime.h>

namespace {

struct Params {
  int words[512];  // 2 KB of kernel parameters
};

__global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

__global__ void empty_kernel() {}

__global__ void params_kernel(Params p, int* out) {
  if (threadIdx.x == 0 && p.words[0] == -1) *out = p.words[511];
}

bool Check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(status));
  return false;
}

// Launches `launch` behind a spin kernel until one call blocks; returns how many were queued
// before it and how long the blocked call took (us), or -1 when none blocked.
template <typename Launch>
int QueuedBeforeBlocking(cudaStream_t stream, long long spin_cycles, Launch launch,
                         double* blocked_us) {
  spin<<<1, 1, 0, stream>>>(spin_cycles);
  int queued = -1;
  *blocked_us = 0;
  for (int i = 0; i < 16384; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    launch();
    const auto t1 = std::chrono::steady_clock::now();
    const double us = std::chrono::duration<double, std::micro>(t1 - t0).count();
    if (us > 100) {
      queued = i;
      *blocked_us = us;
      break;
    }
  }
  cudaStreamSynchronize(stream);
  return queued;
}

}  // namespace

int main() {
  if (!Check(cudaFree(nullptr), "cudaFree")) return 1;
  int clock_khz = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  const long long spin_cycles = static_cast<long long>(clock_khz) * 300;  // ~0.3 s
  cudaStream_t stream;
  if (!Check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream")) return 1;
  int* out = nullptr;
  if (!Check(cudaMalloc(&out, 1 << 20), "cudaMalloc")) return 1;
  Params params{};
  // Warm up every launch path once.
  empty_kernel<<<1, 1, 0, stream>>>();
  params_kernel<<<1, 1, 0, stream>>>(params, out);
  cudaMemsetAsync(out, 0, 4, stream);
  cudaStreamSynchronize(stream);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("{\"gpu\": \"%s\", \"runs\": [", prop.name);
  const char* kinds[] = {"empty_kernel", "params_kernel_2KB", "memset_async"};
  for (int k = 0; k < 3; ++k) {
    for (int trial = 0; trial < 3; ++trial) {
      double blocked_us = 0;
      int queued = 0;
      if (k == 0) {
        queued = QueuedBeforeBlocking(
            stream, spin_cycles, [&] { empty_kernel<<<1, 1, 0, stream>>>(); }, &blocked_us);
      } else if (k == 1) {
        queued = QueuedBeforeBlocking(
            stream, spin_cycles, [&] { params_kernel<<<1, 1, 0, stream>>>(params, out); },
            &blocked_us);
      } else {
        queued = QueuedBeforeBlocking(
            stream, spin_cycles, [&] { cudaMemsetAsync(out, 0, 4, stream); }, &blocked_us);
      }
      std::printf(
          "%s{\"kind\": \"%s\", \"trial\": %d, \"queued_before_blocking\": %d, "
          "\"blocked_call_us\": %.1f}",
          k + trial == 0 ? "" : ", ", kinds[k], trial, queued, blocked_us);
    }
  }
  std::printf("]}\n");
  return Check(cudaGetLastError(), "launches") ? 0 : 1;
}
