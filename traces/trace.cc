#include "traces/trace.h"

#include <set>
#include <utility>

namespace dtsim::traces {

int64_t Trace::StreamCount() const {
  std::set<std::pair<int32_t, int64_t>> streams;
  for (const DeviceEvent& event : device) streams.emplace(event.device, event.stream);
  return static_cast<int64_t>(streams.size());
}

}  // namespace dtsim::traces
