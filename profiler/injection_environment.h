// The contract between `dtsim profile` (tools/cli/profile_command.cc), which starts a program,
// and the injection library inside it (profiler/cupti/injection.cc): the environment variables
// the one sets and the other reads (docs/profiler.md), and the session defaults both state.
#pragma once

#include <cstdint>

namespace dtsim::profiler::environment {

inline constexpr const char* kInjectionPath = "CUDA_INJECTION64_PATH";  // read by the driver
inline constexpr const char* kOutput = "DTSIM_PROFILE_OUTPUT";
inline constexpr const char* kParentPid = "DTSIM_PROFILE_PARENT_PID";
inline constexpr const char* kKinds = "DTSIM_PROFILE_KINDS";
inline constexpr const char* kMaxBufferMb = "DTSIM_PROFILE_MAX_BUFFER_MB";
inline constexpr const char* kProgram = "DTSIM_PROFILE_PROGRAM";
inline constexpr const char* kStatus = "DTSIM_PROFILE_STATUS";
// "1": record every runtime and driver API call, the query calls too (--all-api-calls).
inline constexpr const char* kAllApiCalls = "DTSIM_PROFILE_ALL_API_CALLS";
// "whole" (cuInit to exit) or "cuda_profiler_api" (between cudaProfilerStart and Stop).
inline constexpr const char* kCaptureRange = "DTSIM_PROFILE_CAPTURE_RANGE";
inline constexpr const char* kCaptureWhole = "whole";
inline constexpr const char* kCaptureProfilerApi = "cuda_profiler_api";

// The cap on host memory for CUPTI's record buffers, MiB: 64 of the 4 MiB buffers Kineto and
// CUPTI's guidance use; past it records are dropped and counted.
inline constexpr int32_t kDefaultMaxBufferMb = 256;

}  // namespace dtsim::profiler::environment
