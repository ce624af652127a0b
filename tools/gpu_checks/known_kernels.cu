// A CUDA program whose GPU work is known exactly, for checking `dtsim profile` on a GPU
// (tools/gpu_checks/profile_known_kernels.sh, docs/profiler.md). Per step, inside an NVTX
// range "ProfilerStep#N":
//   stream 1: a pinned HtoD copy, 10 `scale` kernels, an event record;
//   stream 2: waits for the event, 5 `add` kernels, a memset, a DtoH copy; the host syncs it.
// It prints what a faithful profile must contain as JSON on stdout.
// Options: --profiler-api  brackets steps 2..3 with cudaProfilerStart/Stop (what
//                          `dtsim profile --capture-range cuda-profiler-api` must keep);
//          --device-reset  ends with cudaDeviceReset (whose records the profiler must flush).
#include <cstdio>
#include <cstring>
#include <string>

#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

namespace {

constexpr int kSteps = 3;
constexpr int kScaleKernels = 10;
constexpr int kAddKernels = 5;
constexpr int kElements = 1 << 22;

__global__ void scale(float* x, float factor, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}

__global__ void add(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}

bool Succeeded(cudaError_t result, const char* call) {
  if (result == cudaSuccess) return true;
  std::fprintf(stderr, "%s failed: %s\n", call, cudaGetErrorString(result));
  return false;
}

// Returns 2 from main when a CUDA call fails.
#define CHECK(call, name)                   \
  do {                                      \
    if (!Succeeded((call), name)) return 2; \
  } while (false)

}  // namespace

int main(int argc, char** argv) {
  bool profiler_api = false;
  bool device_reset = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--profiler-api") == 0) {
      profiler_api = true;
    } else if (std::strcmp(argv[i], "--device-reset") == 0) {
      device_reset = true;
    } else {
      std::fprintf(stderr, "unknown option %s (--profiler-api, --device-reset)\n", argv[i]);
      return 1;
    }
  }
  constexpr int kFirstProfiled = 2;  // with --profiler-api: steps 2..kSteps
  float* host = nullptr;
  float* x = nullptr;
  float* y = nullptr;
  CHECK(cudaMallocHost(&host, kElements * sizeof(float)), "cudaMallocHost");
  CHECK(cudaMalloc(&x, kElements * sizeof(float)), "cudaMalloc");
  CHECK(cudaMalloc(&y, kElements * sizeof(float)), "cudaMalloc");
  for (int i = 0; i < kElements; ++i) host[i] = 1.0f;
  cudaStream_t first, second;
  CHECK(cudaStreamCreateWithFlags(&first, cudaStreamNonBlocking), "cudaStreamCreate");
  CHECK(cudaStreamCreateWithFlags(&second, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaEvent_t ready;
  CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate");
  const int threads = 256;
  const int blocks = (kElements + threads - 1) / threads;
  for (int step = 1; step <= kSteps; ++step) {
    if (profiler_api && step == kFirstProfiled) CHECK(cudaProfilerStart(), "cudaProfilerStart");
    const std::string name = "ProfilerStep#" + std::to_string(step);
    nvtxRangePushA(name.c_str());
    CHECK(cudaMemcpyAsync(x, host, kElements * sizeof(float), cudaMemcpyHostToDevice, first),
          "cudaMemcpyAsync");
    for (int k = 0; k < kScaleKernels; ++k)
      scale<<<blocks, threads, 0, first>>>(x, 1.01f, kElements);
    CHECK(cudaEventRecord(ready, first), "cudaEventRecord");
    CHECK(cudaStreamWaitEvent(second, ready, 0), "cudaStreamWaitEvent");
    CHECK(cudaMemsetAsync(y, 0, kElements * sizeof(float), second), "cudaMemsetAsync");
    for (int k = 0; k < kAddKernels; ++k) add<<<blocks, threads, 0, second>>>(x, y, kElements);
    CHECK(cudaMemcpyAsync(host, y, kElements * sizeof(float), cudaMemcpyDeviceToHost, second),
          "cudaMemcpyAsync");
    CHECK(cudaStreamSynchronize(second), "cudaStreamSynchronize");
    nvtxRangePop();
  }
  if (profiler_api) CHECK(cudaProfilerStop(), "cudaProfilerStop");
  CHECK(cudaGetLastError(), "kernel launch");
  if (device_reset) CHECK(cudaDeviceReset(), "cudaDeviceReset");
  const int steps = profiler_api ? kSteps - kFirstProfiled + 1 : kSteps;
  std::printf("{\"kernels\": %d, \"memcpys\": %d, \"memsets\": %d, \"steps\": %d}\n",
              steps * (kScaleKernels + kAddKernels), 2 * steps, steps, steps);
  return 0;
}
