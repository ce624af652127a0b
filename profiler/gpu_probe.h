// Whether this machine can run a CUDA program at all, and if not, why — asked of the driver
// library directly (dlopen of libcuda.so.1, cuInit, cuDeviceGetCount), so `dtsim profile` can
// name the cause before it starts a program that would only fail later (docs/profiler.md).
// Needs neither the CUDA toolkit nor CUPTI.
#pragma once

#include <cstdint>
#include <string>

#include "sim/base/status.h"

namespace dtsim::profiler {

struct CudaDriverInfo {
  int32_t devices = 0;
  int32_t driver_version = 0;  // cuDriverGetVersion: 13000 for CUDA 13.0
};

// Errors: "no NVIDIA driver: libcuda.so.1 cannot be loaded (...)", "cuInit failed:
// CUDA_ERROR_NO_DEVICE (100): ...", "no CUDA-capable GPU". `library` is the driver library to
// load (tests point it elsewhere).
Expected<CudaDriverInfo> ProbeCudaDriver(const std::string& library = "libcuda.so.1");

}  // namespace dtsim::profiler
