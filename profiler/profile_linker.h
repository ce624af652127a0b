// Links the records of a Profile (docs/profiler.md, "Linking"): each GPU op to the API call
// that launched it (correlation id), API calls to the framework op that made them (external
// correlation ids), NVTX start/end markers into ranges per thread, and each GPU op to the
// innermost NVTX range open on its launching thread when the launch began. Records arrive in
// several buffers in no global order, so linking runs once, after the session, over
// everything (Kineto's two passes). What cannot be linked is counted, never dropped silently.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "profiler/profile.h"

namespace dtsim::profiler {

inline constexpr uint32_t kNoIndex = UINT32_MAX;

// An NVTX range rebuilt from its start and end markers.
struct MarkerRange {
  std::string name;
  std::string domain;
  uint32_t process = 0;
  uint64_t thread = 0;
  TimeNs start;
  TimeNs end;
  bool closed = true;          // false: no end marker; it ends at the session's end
  uint32_t parent = kNoIndex;  // the enclosing range on the same thread
};

struct LinkStats {
  int64_t gpu_ops = 0;
  int64_t gpu_ops_without_launch = 0;    // correlation id of no API record
  int64_t gpu_ops_in_ranges = 0;         // attributed to an NVTX range
  int64_t external_ids_without_api = 0;  // external correlations of no API record
  int64_t marker_ends_without_start = 0;
  int64_t ranges_left_open = 0;
  int64_t waits_without_event_record = 0;  // event syncs and stream waits we cannot resolve
};

// Where a stream wait or event sync's event was recorded.
struct EventOrigin {
  uint32_t stream = 0;
  uint32_t correlation = 0;  // of the cudaEventRecord call
};

struct LinkedProfile {
  std::vector<MarkerRange> ranges;  // per thread in start order, threads in first-seen order
  // Per API call (index into Profile::api_calls): its external id (CUSTOM0 first, else any
  // kind), and the innermost NVTX range open when it started.
  std::vector<std::optional<uint64_t>> api_external_id;
  std::vector<uint32_t> api_range;
  // correlation id -> API call index (runtime and driver calls share one id space).
  std::unordered_map<uint32_t, uint32_t> api_by_correlation;
  // Per sync record (index into Profile::syncs): where its event was recorded, if resolved.
  std::vector<std::optional<EventOrigin>> sync_event_origin;
  LinkStats stats;

  // The API call that launched a GPU op with `correlation`, or kNoIndex.
  uint32_t Launch(uint32_t correlation) const {
    const auto it = api_by_correlation.find(correlation);
    return it == api_by_correlation.end() ? kNoIndex : it->second;
  }
};

LinkedProfile LinkProfile(const Profile& profile);

}  // namespace dtsim::profiler
