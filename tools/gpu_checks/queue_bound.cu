// A program whose host runs ahead of the GPU until the launch queue is full, for checking the
// replay's queue-full edges on a GPU (docs/replay.md, "Launch queue full"). Each of 6 steps,
// inside an NVTX range "ProfilerStep#N", launches 3,000 kernels that each spin for --us
// microseconds on one stream, then synchronizes the device. The launches beyond the queue's
// depth (1,021 on an H200, launch_queue_depth.cu) block until a kernel ends, so the host
// follows the GPU. Prints each step's wall time as JSON: run it with --us 40 and --us 20 and a
// replay of the first with --speedup all=2 should give the second's steps.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

namespace {

constexpr int kSteps = 6;
constexpr int kKernels = 3000;

__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  double us = 40;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--us") == 0) us = std::atof(argv[i + 1]);
  }
  if (cudaFree(nullptr) != cudaSuccess) return 1;
  int clock_khz = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  const auto cycles = static_cast<long long>(us * clock_khz / 1000.0);
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  spin_kernel<<<1, 1, 0, stream>>>(cycles);  // warm-up launch
  cudaDeviceSynchronize();
  std::printf("{\"spin_us\": %.1f, \"kernels_per_step\": %d, \"step_ms\": [", us, kKernels);
  for (int step = 0; step < kSteps; ++step) {
    char name[32];
    std::snprintf(name, sizeof name, "ProfilerStep#%d", step);
    const auto t0 = std::chrono::steady_clock::now();
    nvtxRangePushA(name);
    for (int k = 0; k < kKernels; ++k) spin_kernel<<<1, 1, 0, stream>>>(cycles);
    cudaDeviceSynchronize();
    nvtxRangePop();
    const auto t1 = std::chrono::steady_clock::now();
    std::printf("%s%.3f", step == 0 ? "" : ", ",
                std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::printf("]}\n");
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
