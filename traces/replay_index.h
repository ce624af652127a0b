// What a profiler trace says about who waited for what, indexed for the replay graph's builder
// (replay_graph.cc): each CUDA stream's ops in start order and, per lane, in launch order; the
// ops each API call launched; the ops a blocking call awaited (from its cuda_sync records, else
// inferred); the ops a Stream Wait Event makes an op wait for; and the unrecorded cross-stream
// wait a GPU gap suggests. It reads the trace only; the builder turns the answers into tasks.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/base/time.h"
#include "traces/replay_graph.h"
#include "traces/trace.h"

namespace dtsim::traces {

class ReplayIndex {
 public:
  using StreamKey = std::pair<int32_t, int64_t>;  // (device, stream)

  // `split_collectives`: the overlap what-if moves the collectives of a stream that also runs
  // other work to a lane of their own (ReplayOptions::overlap_collectives). Counts the Stream
  // Wait Event edges into `stats`.
  ReplayIndex(const Trace& trace, bool split_collectives, ReplayStats& stats);

  // Per CUDA stream, its ops in start order (launch order at equal starts).
  const std::map<StreamKey, std::vector<uint32_t>>& streams() const { return streams_; }
  // Per device, the ops of all its streams in start order (launch order at equal starts).
  std::map<int32_t, std::vector<uint32_t>> MergedDeviceStreams() const;
  // Whether the overlap what-if moves `stream`'s collectives to a lane of their own.
  bool MovesCollectives(const StreamKey& stream) const { return lanes_.at(stream).size() > 1; }
  // 0 for the ops that stay in their stream, 1 for a collective the overlap what-if moved.
  size_t LaneOf(uint32_t event) const;

  // The GPU ops launched by the API calls of these correlation ids.
  std::vector<uint32_t> Launched(const std::vector<int64_t>& correlations) const;
  // The GPU ops a host API call waits for: from its sync records, else (a blocking call the
  // trace has no record for) the op launched before it that ended last inside it. Counts the
  // edges into `stats`.
  std::vector<uint32_t> AwaitedOps(const HostEvent& call, std::string_view api,
                                   ReplayStats& stats) const;
  // The ops device op `event` waits for through Stream Wait Events (none: nullptr).
  const std::vector<uint32_t>* StreamWaits(uint32_t event) const;
  // An op on another stream of the device that ended within `tolerance` before `op` started,
  // after `ready`: the wait the trace did not record.
  std::optional<uint32_t> UnrecordedWait(const DeviceEvent& op, TimeNs ready,
                                         DurationNs tolerance) const;
  // The op launched before `call` that ended last while it ran (none: nullopt).
  std::optional<uint32_t> LastEndedInside(const HostEvent& call) const;
  // How many ops of device op `event`'s stream, ahead of it, had not finished at `at`.
  int64_t QueuedAhead(uint32_t event, TimeNs at) const;

 private:
  void IndexStreams(bool split_collectives);
  void IndexStreamWaits(ReplayStats& stats);
  // Per lane, the last op launched on `stream` before launch `correlation` (FIFO order within
  // the lane implies the others).
  std::vector<uint32_t> LastLaunchedBefore(StreamKey stream, int64_t correlation) const;
  // Per lane, the first op launched on `stream` after launch `correlation`.
  std::vector<uint32_t> FirstLaunchedAfter(StreamKey stream, int64_t correlation) const;

  const Trace& trace_;
  std::map<StreamKey, std::vector<uint32_t>> streams_;  // in start order
  std::vector<uint32_t> position_;                      // per device op: its place in streams_
  // Per stream, in stream order, the latest end of its ops up to each one (sorted).
  std::map<StreamKey, std::vector<TimeNs>> stream_ends_;
  // Per stream, its ops in launch order: one lane, or with the overlap what-if two (the ops
  // that stay, and the collectives moved off it).
  std::map<StreamKey, std::vector<std::vector<uint32_t>>> lanes_;
  std::map<int32_t, std::vector<uint32_t>> ends_by_device_;  // in end order
  std::unordered_map<int64_t, std::vector<uint32_t>> launched_;
  std::unordered_map<int64_t, std::vector<uint32_t>> syncs_;
  std::unordered_map<uint32_t, std::vector<uint32_t>> stream_waits_;
};

}  // namespace dtsim::traces
