// The activity kinds `dtsim profile --kinds` can enable, by name, independent of CUPTI so the
// CLI validates them on any machine (docs/profiler.md). profiler/cupti/ maps each to its
// CUPTI_ACTIVITY_KIND_*.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "sim/base/status.h"

namespace dtsim::profiler {

enum class ActivityKind : uint8_t {
  kKernel,     // CONCURRENT_KERNEL (never KERNEL, which serializes kernels)
  kMemcpy,     // MEMCPY
  kMemset,     // MEMSET
  kRuntime,    // RUNTIME: CUDA runtime API calls
  kDriver,     // DRIVER: CUDA driver API calls (cuLaunchKernel from Triton, ...)
  kSync,       // SYNCHRONIZATION: stream, event and context syncs, stream waits
  kCudaEvent,  // CUDA_EVENT: cudaEventRecord (resolves what a stream wait waits on)
  kExternal,   // EXTERNAL_CORRELATION: framework op ids on API calls
  kNvtx,       // MARKER: NVTX ranges and marks
  kOverhead,   // OVERHEAD: profiling overhead intervals
  kMemory,     // MEMORY2: device memory allocated and released (cudaMalloc, cuMemCreate, ...)
};
inline constexpr size_t kActivityKindCount = 11;

// A set of kinds as a bit mask.
class ActivityKinds {
 public:
  // Every kind.
  static ActivityKinds All();
  // What `dtsim profile` enables unless told otherwise: every kind but sync, cuda_event and
  // memory. The first two each added ~10% to a GPT-2 small training step on an H100
  // (docs/profiler.md, "What is recorded"); without them the replay infers host syncs from the
  // sync API calls, as it does for torch.profiler's traces, which lack them too. Memory has not
  // run on a GPU yet.
  static ActivityKinds Default();
  bool Has(ActivityKind kind) const { return (bits_ >> static_cast<int>(kind)) & 1; }
  void Add(ActivityKind kind) { bits_ |= uint32_t{1} << static_cast<int>(kind); }
  void Add(ActivityKinds kinds) { bits_ |= kinds.bits_; }
  void Remove(ActivityKind kind) { bits_ &= ~(uint32_t{1} << static_cast<int>(kind)); }
  bool empty() const { return bits_ == 0; }
  // "kernel,memcpy,..." in enum order.
  std::string ToString() const;

 private:
  uint32_t bits_ = 0;
};

std::span<const std::string_view> ActivityKindNames();
std::string_view ActivityKindName(ActivityKind kind);

// "kernel,memcpy,runtime", "all" or "default", or a mix ("default,sync"). Unknown names are
// errors that list the known ones.
Expected<ActivityKinds> ParseActivityKinds(std::string_view text);

}  // namespace dtsim::profiler
