#include "profiler/device_memory.h"

#include <algorithm>
#include <tuple>

namespace dtsim::profiler {

DeviceMemory DeviceMemoryOf(const std::vector<MemoryRecord>& records) {
  std::vector<MemoryRecord> sorted = records;
  std::stable_sort(sorted.begin(), sorted.end(), [](const MemoryRecord& a, const MemoryRecord& b) {
    return std::tuple(a.device, a.time, a.bytes >= 0) < std::tuple(b.device, b.time, b.bytes >= 0);
  });
  DeviceMemory memory;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const MemoryRecord& record = sorted[i];
    const bool first = i == 0 || sorted[i - 1].device != record.device;
    const int64_t before = first ? 0 : memory.timeline.back().bytes;
    const int64_t now = std::max<int64_t>(0, before + record.bytes);
    memory.timeline.push_back({record.device, record.time, now});
    if (first) memory.peaks.push_back({record.device, record.time, now});
    if (now > memory.peaks.back().bytes) memory.peaks.back() = {record.device, record.time, now};
  }
  return memory;
}

}  // namespace dtsim::profiler
