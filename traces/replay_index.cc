#include "traces/replay_index.h"

#include <algorithm>

namespace dtsim::traces {
namespace {

// API calls that block the host until GPU work finishes, told by a cuda_sync record.
bool IsBlockingSync(std::string_view api) {
  return api.find("StreamSynchronize") != std::string_view::npos ||
         api.find("EventSynchronize") != std::string_view::npos ||
         api.find("DeviceSynchronize") != std::string_view::npos ||
         api.find("CtxSynchronize") != std::string_view::npos;
}

}  // namespace

ReplayIndex::ReplayIndex(const Trace& trace, bool split_collectives, ReplayStats& stats)
    : trace_(trace) {
  IndexStreams(split_collectives);
  for (uint32_t i = 0; i < trace_.syncs.size(); ++i) {
    syncs_[trace_.syncs[i].correlation].push_back(i);
  }
  IndexStreamWaits(stats);
}

void ReplayIndex::IndexStreams(bool split_collectives) {
  for (uint32_t i = 0; i < trace_.device.size(); ++i) {
    const DeviceEvent& event = trace_.device[i];
    streams_[{event.device, event.stream}].push_back(i);
    if (event.correlation >= 0) launched_[event.correlation].push_back(i);
  }
  const auto collective = [&](uint32_t e) { return trace_.device[e].collective != kNone; };
  for (auto& [key, events] : streams_) {
    std::sort(events.begin(), events.end(), [&](uint32_t a, uint32_t b) {
      const DeviceEvent& x = trace_.device[a];
      const DeviceEvent& y = trace_.device[b];
      return x.start != y.start ? x.start < y.start : x.correlation < y.correlation;
    });
    // Launch order per lane, for "the last op launched before correlation k". The collectives
    // get a lane of their own when the stream also runs other work.
    const bool split = split_collectives && std::any_of(events.begin(), events.end(), collective) &&
                       !std::all_of(events.begin(), events.end(), collective);
    std::vector<std::vector<uint32_t>>& lanes = lanes_[key];
    lanes.resize(split ? 2 : 1);
    for (uint32_t event : events) {
      if (trace_.device[event].correlation >= 0) lanes[LaneOf(event)].push_back(event);
    }
    for (std::vector<uint32_t>& lane : lanes) {
      std::sort(lane.begin(), lane.end(), [&](uint32_t a, uint32_t b) {
        return trace_.device[a].correlation < trace_.device[b].correlation;
      });
    }
  }
  for (uint32_t i = 0; i < trace_.device.size(); ++i) {
    ends_by_device_[trace_.device[i].device].push_back(i);
  }
  position_.assign(trace_.device.size(), 0);
  for (const auto& [key, events] : streams_) {
    std::vector<TimeNs>& ends = stream_ends_[key];
    for (uint32_t event : events) {
      position_[event] = static_cast<uint32_t>(ends.size());
      // The latest end so far: kernels of one stream that overlap (programmatic dependent
      // launch) still give a sorted array, and QueuedAhead a count that never undercounts.
      const TimeNs end = trace_.device[event].end();
      ends.push_back(ends.empty() ? end : std::max(ends.back(), end));
    }
  }
  for (auto& [device, events] : ends_by_device_) {
    std::sort(events.begin(), events.end(), [&](uint32_t a, uint32_t b) {
      return trace_.device[a].end() < trace_.device[b].end();
    });
  }
}

// Stream Wait Event: the waiting stream's next op after the wait call depends on the op the
// event captured.
void ReplayIndex::IndexStreamWaits(ReplayStats& stats) {
  for (const SyncEvent& sync : trace_.syncs) {
    if (sync.kind != SyncKind::kStreamWaitEvent) continue;
    const std::vector<uint32_t> recorded =
        LastLaunchedBefore({sync.device, sync.wait_on_stream}, sync.record_correlation);
    if (recorded.empty()) continue;
    for (uint32_t waiter : FirstLaunchedAfter({sync.device, sync.stream}, sync.correlation)) {
      std::vector<uint32_t>& waits = stream_waits_[waiter];
      waits.insert(waits.end(), recorded.begin(), recorded.end());
      stats.stream_wait_edges += static_cast<int64_t>(recorded.size());
    }
  }
}

std::map<int32_t, std::vector<uint32_t>> ReplayIndex::MergedDeviceStreams() const {
  std::map<int32_t, std::vector<uint32_t>> merged;
  for (const auto& [key, events] : streams_) {
    merged[key.first].insert(merged[key.first].end(), events.begin(), events.end());
  }
  for (auto& [device, events] : merged) {
    std::sort(events.begin(), events.end(), [&](uint32_t a, uint32_t b) {
      const DeviceEvent& x = trace_.device[a];
      const DeviceEvent& y = trace_.device[b];
      return x.start != y.start ? x.start < y.start : x.correlation < y.correlation;
    });
  }
  return merged;
}

size_t ReplayIndex::LaneOf(uint32_t event) const {
  const DeviceEvent& op = trace_.device[event];
  return lanes_.at({op.device, op.stream}).size() > 1 && op.collective != kNone ? 1 : 0;
}

std::vector<uint32_t> ReplayIndex::Launched(const std::vector<int64_t>& correlations) const {
  std::vector<uint32_t> launched;
  for (int64_t correlation : correlations) {
    if (const auto it = launched_.find(correlation); it != launched_.end()) {
      launched.insert(launched.end(), it->second.begin(), it->second.end());
    }
  }
  return launched;
}

std::vector<uint32_t> ReplayIndex::LastLaunchedBefore(StreamKey stream, int64_t correlation) const {
  std::vector<uint32_t> last;
  const auto it = lanes_.find(stream);
  if (it == lanes_.end() || correlation < 0) return last;
  for (const std::vector<uint32_t>& lane : it->second) {
    const auto after = std::lower_bound(
        lane.begin(), lane.end(), correlation,
        [&](uint32_t event, int64_t value) { return trace_.device[event].correlation < value; });
    if (after != lane.begin()) last.push_back(*(after - 1));
  }
  return last;
}

std::vector<uint32_t> ReplayIndex::FirstLaunchedAfter(StreamKey stream, int64_t correlation) const {
  std::vector<uint32_t> first;
  const auto it = lanes_.find(stream);
  if (it == lanes_.end() || correlation < 0) return first;
  for (const std::vector<uint32_t>& lane : it->second) {
    const auto after = std::upper_bound(
        lane.begin(), lane.end(), correlation,
        [&](int64_t value, uint32_t event) { return value < trace_.device[event].correlation; });
    if (after != lane.end()) first.push_back(*after);
  }
  return first;
}

std::vector<uint32_t> ReplayIndex::AwaitedOps(const HostEvent& call, std::string_view api,
                                              ReplayStats& stats) const {
  std::vector<uint32_t> awaited;
  bool recorded = false;
  if (const auto it = syncs_.find(call.correlation); it != syncs_.end()) {
    for (uint32_t index : it->second) {
      const SyncEvent& sync = trace_.syncs[index];
      std::vector<uint32_t> ops;
      switch (sync.kind) {
        case SyncKind::kStreamSync:
          recorded = true;
          ops = LastLaunchedBefore({sync.device, sync.stream}, call.correlation);
          break;
        case SyncKind::kEventSync:
          if (!IsBlockingSync(api)) break;  // Kineto records cudaEventQuery as an Event Sync
          recorded = true;
          ops = LastLaunchedBefore({sync.device, sync.wait_on_stream}, sync.record_correlation);
          break;
        case SyncKind::kContextSync:
          recorded = true;
          for (const auto& [stream, lanes] : lanes_) {
            if (stream.first != sync.device) continue;
            for (uint32_t op : LastLaunchedBefore(stream, call.correlation)) ops.push_back(op);
          }
          break;
        case SyncKind::kStreamWaitEvent:
          break;  // GPU-side: IndexStreamWaits
      }
      awaited.insert(awaited.end(), ops.begin(), ops.end());
    }
  }
  if (recorded) {
    stats.sync_edges += static_cast<int64_t>(awaited.size());
    return awaited;
  }
  if (!IsBlockingSync(api)) return awaited;
  if (const std::optional<uint32_t> last = LastEndedInside(call)) {
    awaited.push_back(*last);
    ++stats.inferred_sync_edges;
  }
  return awaited;
}

std::optional<uint32_t> ReplayIndex::LastEndedInside(const HostEvent& call) const {
  std::optional<uint32_t> best;
  for (const auto& [device, events] : ends_by_device_) {
    const auto last = std::upper_bound(
        events.begin(), events.end(), call.end(),
        [&](TimeNs time, uint32_t event) { return time < trace_.device[event].end(); });
    for (auto it = last; it != events.begin();) {
      const DeviceEvent& op = trace_.device[*--it];
      if (op.end() <= call.start) break;
      if (op.correlation >= 0 && op.correlation < call.correlation) {
        if (!best || op.end() > trace_.device[*best].end()) best = *it;
        break;
      }
    }
  }
  return best;
}

// stream_ends_ holds each op's end or a later one, sorted in stream order.
int64_t ReplayIndex::QueuedAhead(uint32_t event, TimeNs at) const {
  const DeviceEvent& op = trace_.device[event];
  const std::vector<TimeNs>& ends = stream_ends_.at({op.device, op.stream});
  const auto ahead = ends.begin() + position_[event];
  return ahead - std::upper_bound(ends.begin(), ahead, at);
}

const std::vector<uint32_t>* ReplayIndex::StreamWaits(uint32_t event) const {
  const auto it = stream_waits_.find(event);
  return it == stream_waits_.end() ? nullptr : &it->second;
}

std::optional<uint32_t> ReplayIndex::UnrecordedWait(const DeviceEvent& op, TimeNs ready,
                                                    DurationNs tolerance) const {
  const std::vector<uint32_t>& ends = ends_by_device_.at(op.device);
  auto it = std::upper_bound(ends.begin(), ends.end(), op.start, [&](TimeNs time, uint32_t e) {
    return time < trace_.device[e].end();
  });
  while (it != ends.begin()) {
    const DeviceEvent& other = trace_.device[*--it];
    if (other.end() <= ready || op.start - other.end() > tolerance) break;
    if (other.stream != op.stream) return *it;
  }
  return std::nullopt;
}

}  // namespace dtsim::traces
