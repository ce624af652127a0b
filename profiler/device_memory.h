// The device memory a profiled process allocated through CUDA over time (MemoryRecord): what
// PyTorch's caching allocator reports as reserved, plus what libraries allocate themselves.
#pragma once

#include <cstdint>
#include <vector>

#include "profiler/profile.h"

namespace dtsim::profiler {

// One device's memory allocated through CUDA after a record, or at its peak.
struct DeviceMemoryPoint {
  uint32_t device = 0;
  TimeNs time;
  int64_t bytes = 0;
};

struct DeviceMemory {
  // Every record's running total, per device (ascending), in time order (a release before an
  // allocation at the same time); a release of memory allocated before the capture counts
  // from zero, never below.
  std::vector<DeviceMemoryPoint> timeline;
  // Per device, the largest total and when it was first reached.
  std::vector<DeviceMemoryPoint> peaks;
};

DeviceMemory DeviceMemoryOf(const std::vector<MemoryRecord>& records);

}  // namespace dtsim::profiler
