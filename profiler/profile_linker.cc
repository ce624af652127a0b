#include "profiler/profile_linker.h"

#include <algorithm>
#include <map>
#include <utility>

namespace dtsim::profiler {
namespace {

// PyTorch pushes one external id per ATen op as CUSTOM0 (Kineto's "Default" kind); other kinds
// (record_function scopes, our own programs) are used only when an API call has no CUSTOM0 id.
constexpr uint32_t kPerOpExternalKind = 3;  // CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0

using ThreadKey = std::pair<uint32_t, uint64_t>;  // (process, thread)

// NVTX ranges per thread: a start opens a range, the end with its id closes it. Ranges are
// stored per thread in start order with their parent (the range open around their start).
void BuildRanges(const Profile& profile, LinkedProfile& linked) {
  std::vector<uint32_t> order(profile.markers.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return profile.markers[a].time < profile.markers[b].time;
  });
  std::map<uint64_t, uint32_t> open;  // marker id -> range index
  for (const uint32_t index : order) {
    const MarkerRecord& marker = profile.markers[index];
    if (marker.phase == MarkerPhase::kStart) {
      open[marker.id] = static_cast<uint32_t>(linked.ranges.size());
      linked.ranges.push_back({.name = marker.name,
                               .domain = marker.domain,
                               .process = marker.process,
                               .thread = marker.thread,
                               .start = marker.time,
                               .end = marker.time,
                               .closed = false,
                               .parent = kNoIndex});
    } else if (marker.phase == MarkerPhase::kEnd) {
      const auto it = open.find(marker.id);
      if (it == open.end()) {
        ++linked.stats.marker_ends_without_start;
        continue;
      }
      linked.ranges[it->second].end = marker.time;
      linked.ranges[it->second].closed = true;
      open.erase(it);
    }
  }
  for (const auto& [id, range] : open) {
    linked.ranges[range].end = std::max(linked.ranges[range].end, profile.session_end);
    ++linked.stats.ranges_left_open;
  }
  // Parents: per thread, a stack of the ranges open at each start (ranges are in start order).
  std::map<ThreadKey, std::vector<uint32_t>> stacks;
  for (uint32_t r = 0; r < linked.ranges.size(); ++r) {
    MarkerRange& range = linked.ranges[r];
    std::vector<uint32_t>& stack = stacks[{range.process, range.thread}];
    while (!stack.empty() && linked.ranges[stack.back()].end <= range.start) stack.pop_back();
    range.parent = stack.empty() ? kNoIndex : stack.back();
    stack.push_back(r);
  }
}

// The innermost range of (process, thread) open at `time`, or kNoIndex.
class RangeIndex {
 public:
  explicit RangeIndex(const std::vector<MarkerRange>& ranges) : ranges_(ranges) {
    for (uint32_t r = 0; r < ranges.size(); ++r) {
      by_thread_[{ranges[r].process, ranges[r].thread}].push_back(r);
    }
  }

  uint32_t Innermost(uint32_t process, uint64_t thread, TimeNs time) const {
    const auto it = by_thread_.find({process, thread});
    if (it == by_thread_.end()) return kNoIndex;
    const std::vector<uint32_t>& ranges = it->second;
    // The last range that started at or before `time`; walk out through its parents until one
    // contains `time`.
    auto after = std::upper_bound(ranges.begin(), ranges.end(), time,
                                  [&](TimeNs t, uint32_t r) { return t < ranges_[r].start; });
    if (after == ranges.begin()) return kNoIndex;
    uint32_t range = *(after - 1);
    while (range != kNoIndex && ranges_[range].end < time) range = ranges_[range].parent;
    return range;
  }

 private:
  const std::vector<MarkerRange>& ranges_;
  std::map<ThreadKey, std::vector<uint32_t>> by_thread_;
};

void LinkApiCalls(const Profile& profile, LinkedProfile& linked) {
  const size_t count = profile.api_calls.size();
  linked.api_external_id.assign(count, std::nullopt);
  linked.api_range.assign(count, kNoIndex);
  for (uint32_t a = 0; a < count; ++a) {
    const ApiRecord& call = profile.api_calls[a];
    const auto [it, inserted] = linked.api_by_correlation.emplace(call.correlation, a);
    // A runtime call and the driver call it makes may share a correlation id: the runtime
    // call is the launch the user wrote.
    if (!inserted && call.domain == ApiDomain::kRuntime) it->second = a;
  }
  for (const ExternalCorrelationRecord& external : profile.external_correlations) {
    const auto it = linked.api_by_correlation.find(external.correlation);
    if (it == linked.api_by_correlation.end()) {
      ++linked.stats.external_ids_without_api;
      continue;
    }
    std::optional<uint64_t>& id = linked.api_external_id[it->second];
    if (!id || external.kind == kPerOpExternalKind) id = external.external_id;
  }
  const RangeIndex ranges(linked.ranges);
  for (uint32_t a = 0; a < count; ++a) {
    const ApiRecord& call = profile.api_calls[a];
    linked.api_range[a] = ranges.Innermost(call.process, call.thread, call.start);
  }
}

// Event syncs and stream waits name an event; the cudaEventRecord of that event (same context)
// with the largest correlation id before the sync's says which stream and launch it captured.
void LinkEventWaits(const Profile& profile, LinkedProfile& linked) {
  std::map<std::pair<uint32_t, uint32_t>, std::vector<const CudaEventRecord*>> records;
  for (const CudaEventRecord& record : profile.cuda_events) {
    records[{record.context, record.cuda_event}].push_back(&record);
  }
  for (auto& [key, list] : records) {
    std::sort(list.begin(), list.end(), [](const CudaEventRecord* a, const CudaEventRecord* b) {
      return a->correlation < b->correlation;
    });
  }
  linked.sync_event_origin.assign(profile.syncs.size(), std::nullopt);
  for (size_t s = 0; s < profile.syncs.size(); ++s) {
    const SyncRecord& sync = profile.syncs[s];
    if (sync.type != SyncType::kEventSynchronize && sync.type != SyncType::kStreamWaitEvent) {
      continue;
    }
    const auto it = records.find({sync.context, sync.cuda_event});
    const CudaEventRecord* origin = nullptr;
    if (it != records.end()) {
      for (const CudaEventRecord* record : it->second) {
        if (record->correlation < sync.correlation) origin = record;
      }
    }
    if (origin == nullptr) {
      ++linked.stats.waits_without_event_record;
      continue;
    }
    linked.sync_event_origin[s] = EventOrigin{origin->stream, origin->correlation};
  }
}

template <typename Record>
void CountGpuOps(const std::vector<Record>& ops, LinkedProfile& linked) {
  for (const Record& op : ops) {
    ++linked.stats.gpu_ops;
    const uint32_t launch = linked.Launch(LaunchCorrelation(op));
    if (launch == kNoIndex) {
      ++linked.stats.gpu_ops_without_launch;
    } else if (linked.api_range[launch] != kNoIndex) {
      ++linked.stats.gpu_ops_in_ranges;
    }
  }
}

}  // namespace

LinkedProfile LinkProfile(const Profile& profile) {
  LinkedProfile linked;
  BuildRanges(profile, linked);
  LinkApiCalls(profile, linked);
  LinkEventWaits(profile, linked);
  CountGpuOps(profile.kernels, linked);
  CountGpuOps(profile.memcpys, linked);
  CountGpuOps(profile.memsets, linked);
  return linked;
}

}  // namespace dtsim::profiler
