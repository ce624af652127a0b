#include "traces/replay_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <unordered_map>
#include <utility>

#include "sim/base/quantity.h"
#include "sim/base/strings.h"
#include "sim/graph/builder.h"
#include "traces/replay_device_ops.h"
#include "traces/replay_index.h"

namespace dtsim::traces {
namespace {

using graph::TaskId;
using graph::TaskKind;
using replay_detail::DeviceOpTasks;
using replay_detail::JobContext;

constexpr std::string_view kHostCategory = "host";
constexpr std::string_view kApiCategory = "cuda_api";
constexpr std::string_view kWaitCategory = "host_wait";
constexpr std::string_view kMarkerCategory = "step_marker";
constexpr std::string_view kGapCategory = "gpu_gap";

// Copies that return to the host only once the copy is done: the synchronous API, and a copy
// to pageable host memory (the data must have landed when the call returns). A copy from
// pageable memory is staged and may return first, so it is not counted.
bool IsBlockingCopy(std::string_view api, std::string_view op_name) {
  const bool synchronous_api = api == "cudaMemcpy" || api == "cuMemcpy" ||
                               api == "cuMemcpyDtoH_v2" || api == "cuMemcpyHtoD_v2";
  return synchronous_api || op_name.find("-> Pageable") != std::string_view::npos;
}

// One top-level API call of a host thread, with the correlation ids of the calls nested in it.
struct ApiCall {
  uint32_t event = 0;
  std::vector<int64_t> correlations;
};

// What the builders of a job's traces write beside the graph.
struct ReplayParts {
  std::vector<ReplayStep> steps;
  std::vector<uint32_t> task_device_event;
  std::vector<DurationNs> measured_start;
};

// The tasks of one trace of a job, on its rank, its clock aligned with the job's.
class ReplayBuilder {
 public:
  // `origin`: the time, on this trace's clock, that simulated time 0 stands for.
  ReplayBuilder(const Trace& trace, uint32_t job_index, const ReplayOptions& options,
                JobContext& job, TimeNs origin, ReplayParts& replay)
      : trace_(trace),
        job_index_(job_index),
        rank_(job.ranks[job_index]),
        options_(options),
        index_(trace, options.overlap_collectives && !options.serialize_gpu_streams, stats_),
        origin_(origin),
        builder_(job.builder),
        device_ops_(trace, job_index, options, job, stats_),
        replay_(&replay) {}

  // Adds the trace's tasks to the job's graph and its steps, measured starts and device events
  // to `replay`; returns its statistics.
  ReplayStats Build() {
    device_task_.assign(trace_.device.size(), TaskId::Invalid());
    FindHandoffs();
    for (uint32_t thread = 0; thread < trace_.threads.size(); ++thread) BuildHostThread(thread);
    for (const auto& [task, event] : thread_edges_) {
      builder_.AddDependency(task, waker_task_.at(event));
    }
    if (options_.serialize_gpu_streams) {
      for (auto& [device, events] : index_.MergedDeviceStreams()) {
        BuildDeviceStream({device, kAllStreams}, events);
      }
    } else {
      for (auto& [stream, events] : index_.streams()) BuildDeviceStream(stream, events);
    }
    for (const auto& [task, event] : pending_edges_) {
      builder_.AddDependency(task, device_task_[event]);
    }
    replay_->task_device_event.resize(builder_.task_count(), kNone);
    for (uint32_t event = 0; event < device_task_.size(); ++event) {
      if (device_task_[event].valid()) {
        replay_->task_device_event[device_task_[event].value()] = event;
      }
    }
    return stats_;
  }

 private:
  using StreamKey = ReplayIndex::StreamKey;
  static constexpr int64_t kAllStreams = -1;  // the merged stream of serialize_gpu_streams

  // Records when a task started in the trace.
  TaskId Measured(TaskId task, TimeNs start) {
    std::vector<DurationNs>& measured = replay_->measured_start;
    if (measured.size() <= task.value()) measured.resize(task.value() + 1);
    measured[task.value()] = start - origin_;
    return task;
  }

  TaskId Host(graph::StreamId stream, std::string_view name, std::string_view category,
              TimeNs start, DurationNs duration) {
    ++stats_.host_tasks;
    return Measured(builder_.AddTask(stream, TaskKind::kDelay, name, category, duration), start);
  }

  // Host time from `from` to `to`, with a step marker at every boundary inside it.
  void HostGap(graph::StreamId stream, TimeNs from, TimeNs to,
               std::vector<std::pair<TimeNs, std::function<void(TaskId)>>>& cuts, size_t& next) {
    while (next < cuts.size() && cuts[next].first <= to) {
      const TimeNs cut = std::max(cuts[next].first, from);
      if (cut > from) Host(stream, "host", kHostCategory, from, cut - from);
      cuts[next].second(Host(stream, "step boundary", kMarkerCategory, cut, DurationNs::Zero()));
      from = cut;
      ++next;
    }
    if (to > from) Host(stream, "host", kHostCategory, from, to - from);
  }

  // The thread's top-level API calls in start order, each with the calls nested in it.
  std::vector<ApiCall> ThreadCalls(uint32_t thread) const {
    std::vector<ApiCall> calls;
    std::vector<uint32_t> api_events;
    for (uint32_t i = 0; i < trace_.host.size(); ++i) {
      if (trace_.host[i].thread == thread && IsApiCall(trace_.host[i])) api_events.push_back(i);
    }
    std::sort(api_events.begin(), api_events.end(), [&](uint32_t a, uint32_t b) {
      const HostEvent& x = trace_.host[a];
      const HostEvent& y = trace_.host[b];
      return x.start != y.start ? x.start < y.start : x.duration > y.duration;
    });
    for (uint32_t event : api_events) {
      const HostEvent& call = trace_.host[event];
      if (!calls.empty() && call.start < trace_.host[calls.back().event].end()) {
        calls.back().correlations.push_back(call.correlation);  // nested (driver in runtime)
      } else {
        calls.push_back({event, {call.correlation}});
      }
    }
    return calls;
  }

  // Cross-thread hand-offs (inferred, counted): PyTorch runs the backward pass on the autograd
  // engine's thread while the main thread waits in loss.backward(), and the main thread
  // resumes when it is done — waits no CUDA record shows. A thread that resumes after at least
  // kIdle of silence soon after another thread's last call before that one falls silent (for
  // kIdle too) — within kHandoff, or a quarter of its own silence — was waiting for it: its next
  // call depends on that call, and of the silence only the part after that call stays measured host
  // time. Otherwise every step would keep the other thread's measured pace (a what-if that speeds
  // the GPU would move only the first step).
  static constexpr DurationNs kIdle = Milliseconds(1);
  static constexpr DurationNs kHandoff = Milliseconds(2);

  void FindHandoffs() {
    calls_.resize(trace_.threads.size());
    for (uint32_t thread = 0; thread < trace_.threads.size(); ++thread) {
      calls_[thread] = ThreadCalls(thread);
    }
    for (uint32_t thread = 0; thread < calls_.size(); ++thread) {
      const std::vector<ApiCall>& calls = calls_[thread];
      for (size_t i = 1; i < calls.size(); ++i) {
        const TimeNs idle_from = trace_.host[calls[i - 1].event].end();
        const TimeNs resume = trace_.host[calls[i].event].start;
        if (resume - idle_from < kIdle) continue;
        if (const std::optional<uint32_t> by = WokenBy(thread, idle_from, resume)) {
          handoff_[calls[i].event] = *by;
          waker_task_.emplace(*by, TaskId::Invalid());
        }
      }
    }
  }

  // The call of another thread that woke `thread`, silent from `idle_from` to `resume`: the
  // latest to end inside the silence, at most max(kHandoff, a quarter of the silence) before
  // `resume` (the woken thread's own host work before its next call: 0.3-2.5 ms in the GPT-2
  // traces, growing with the model), after which its thread fell silent for kIdle.
  std::optional<uint32_t> WokenBy(uint32_t thread, TimeNs idle_from, TimeNs resume) const {
    std::optional<uint32_t> woken_by;
    TimeNs latest = idle_from;
    const DurationNs within = std::max(kHandoff, DurationNs((resume - idle_from).ns() / 4));
    for (uint32_t other = 0; other < calls_.size(); ++other) {
      if (other == thread) continue;
      const std::vector<ApiCall>& calls = calls_[other];
      const std::optional<size_t> last = LastCallEndingBy(calls, resume);
      if (!last) continue;
      const TimeNs end = trace_.host[calls[*last].event].end();
      const bool falls_silent =
          *last + 1 == calls.size() || trace_.host[calls[*last + 1].event].start - end >= kIdle;
      if (end > latest && resume - end <= within && falls_silent) {
        latest = end;
        woken_by = calls[*last].event;
      }
    }
    return woken_by;
  }

  // The last of `calls` (in start order, not overlapping) that ended by `time`.
  std::optional<size_t> LastCallEndingBy(const std::vector<ApiCall>& calls, TimeNs time) const {
    const auto after = std::partition_point(calls.begin(), calls.end(), [&](const ApiCall& call) {
      return trace_.host[call.event].end() <= time;
    });
    if (after == calls.begin()) return std::nullopt;
    return static_cast<size_t>(after - calls.begin() - 1);
  }

  void BuildHostThread(uint32_t thread) {
    const std::vector<ApiCall>& calls = calls_[thread];
    // Step boundaries on this thread, each with what to do with its marker.
    std::vector<std::pair<TimeNs, std::function<void(TaskId)>>> cuts;
    for (size_t s = 0; s < trace_.steps.size(); ++s) {
      const ProfilerStep& step = trace_.steps[s];
      if (step.thread != thread) continue;
      std::vector<ReplayStep>& steps = replay_->steps;
      steps.push_back(
          {job_index_, step.number, step.duration, TaskId::Invalid(), TaskId::Invalid()});
      const size_t index = steps.size() - 1;
      cuts.emplace_back(step.start,
                        [this, index](TaskId task) { replay_->steps[index].begin = task; });
      cuts.emplace_back(step.start + step.duration,
                        [this, index](TaskId task) { replay_->steps[index].end = task; });
    }
    std::stable_sort(cuts.begin(), cuts.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    if (calls.empty() && cuts.empty()) return;

    const HostThread& info = trace_.threads[thread];
    const graph::StreamId stream =
        builder_.Stream(rank_, fmt::format("cpu {} thread {}", info.pid, info.tid));
    TimeNs now = origin_;
    size_t next_cut = 0;
    for (const ApiCall& api : calls) {
      const HostEvent& call = trace_.host[api.event];
      now = AwaitHandoff(stream, api.event, now, cuts, next_cut);
      HostGap(stream, now, call.start, cuts, next_cut);
      // A boundary inside the call is put before it.
      while (next_cut < cuts.size() && cuts[next_cut].first < call.end()) {
        cuts[next_cut++].second(
            Host(stream, "step boundary", kMarkerCategory, call.start, DurationNs::Zero()));
      }
      Call(stream, call, api.correlations);
      if (const auto waker = waker_task_.find(api.event); waker != waker_task_.end()) {
        waker->second = TaskId(static_cast<uint32_t>(builder_.task_count() - 1));
      }
      now = std::max(now, call.end());
    }
    TimeNs last = now;
    if (!cuts.empty()) last = std::max(last, cuts.back().first);
    HostGap(stream, now, last, cuts, next_cut);
  }

  // Before a call another thread woke this one for (FindHandoffs): a wait for that call, then
  // the measured host time after it. A step boundary inside the wait keeps the gap as measured.
  // Returns where the measured host time before the call now starts.
  TimeNs AwaitHandoff(graph::StreamId stream, uint32_t event, TimeNs now,
                      const std::vector<std::pair<TimeNs, std::function<void(TaskId)>>>& cuts,
                      size_t next_cut) {
    const auto handoff = handoff_.find(event);
    if (handoff == handoff_.end()) return now;
    const TimeNs woken = trace_.host[handoff->second].end();
    if (woken <= now || (next_cut < cuts.size() && cuts[next_cut].first <= woken)) return now;
    const TaskId wait =
        Host(stream, "waiting for another thread", kWaitCategory, woken, DurationNs::Zero());
    thread_edges_.emplace_back(wait, handoff->second);
    ++stats_.inferred_thread_edges;
    return woken;
  }

  // One API call: the launch (the ops it launched depend on it) and, for a blocking call, the
  // wait for the awaited ops and the measured remainder after them.
  void Call(graph::StreamId stream, const HostEvent& call,
            const std::vector<int64_t>& correlations) {
    const std::string_view api = trace_.Name(call.name);
    const std::vector<uint32_t> launched = index_.Launched(correlations);
    std::vector<uint32_t> awaited = index_.AwaitedOps(call, api, stats_);
    for (uint32_t op : launched) {
      const DeviceEvent& copy = trace_.device[op];
      // The call must also have lasted until the copy ended: one that returned first did not
      // block on it.
      if (copy.kind == DeviceEventKind::kMemcpy && IsBlockingCopy(api, trace_.Name(copy.name)) &&
          call.end() + options_.match_tolerance >= copy.end()) {
        awaited.push_back(op);
        ++stats_.sync_edges;
      }
    }
    // The launch part: until the first launched op started, when that was before the call
    // returned (a kernel often starts while cudaLaunchKernel is still returning; a staged copy
    // long before cudaMemcpyAsync does); the rest of the call follows it.
    DurationNs launch = call.duration;
    if (!launched.empty()) {
      TimeNs first_start = TimeNs::Max();
      for (uint32_t op : launched) first_start = std::min(first_start, trace_.device[op].start);
      if (first_start < call.end()) {
        launch = std::clamp(first_start - call.start, DurationNs::Zero(), call.duration);
      }
    }
    if (awaited.empty() && launch == call.duration && BlockedLaunch(stream, call, api, launched)) {
      return;
    }
    if (awaited.empty()) {
      const TaskId task = Host(stream, api, kApiCategory, call.start, launch);
      for (uint32_t op : launched) launch_task_[op] = {task, call.start + launch};
      if (launch < call.duration) {
        Host(stream, fmt::format("{} (returning)", api), kApiCategory, call.start + launch,
             call.duration - launch);
      }
      return;
    }
    if (launched.empty()) {
      launch = DurationNs::Zero();  // a pure wait: it waits from the start
    } else {
      const TaskId task = Host(stream, api, kApiCategory, call.start, launch);
      for (uint32_t op : launched) launch_task_[op] = {task, call.start + launch};
    }
    TimeNs awaited_end = call.start + launch;
    for (uint32_t op : awaited) awaited_end = std::max(awaited_end, trace_.device[op].end());
    const DurationNs remainder =
        std::clamp(call.end() - awaited_end, DurationNs::Zero(), call.duration - launch);
    const TaskId wait = Host(stream, fmt::format("{} (after the wait)", api), kWaitCategory,
                             call.end() - remainder, remainder);
    for (uint32_t op : awaited) pending_edges_.emplace_back(wait, op);
  }

  // A launch that found the launch queue full (inferred, counted): with launch_queue_depth ops
  // of its stream still unfinished when it was called, the call waited until one completed
  // and freed a slot, and only then enqueued its ops — when it returned within kSlotFreed of
  // the end of an op launched before it (the last to end inside the call), that op. The call
  // becomes a wait for it and the measured rest, which launches.
  bool BlockedLaunch(graph::StreamId stream, const HostEvent& call, std::string_view api,
                     const std::vector<uint32_t>& launched) {
    constexpr DurationNs kSlotFreed = Microseconds(20);
    if (launched.empty() ||
        index_.QueuedAhead(launched.front(), call.start) < options_.launch_queue_depth) {
      return false;
    }
    const std::optional<uint32_t> freed = index_.LastEndedInside(call);
    if (!freed || call.end() - trace_.device[*freed].end() > kSlotFreed) return false;
    const TimeNs slot = trace_.device[*freed].end();
    const TaskId wait = Host(stream, fmt::format("{} (launch queue full)", api), kWaitCategory,
                             slot, DurationNs::Zero());
    pending_edges_.emplace_back(wait, *freed);
    const TaskId task = Host(stream, api, kApiCategory, slot, call.end() - slot);
    for (uint32_t op : launched) launch_task_[op] = {task, call.end()};
    ++stats_.inferred_queue_edges;
    return true;
  }

  // One CUDA stream (or, serialized, a device's merged streams) as one graph stream per lane.
  // Gaps are measured against the op that ran before in the trace, whatever its lane; a moved
  // collective still depends on the op before it in its stream (its producer).
  void BuildDeviceStream(const StreamKey& key, const std::vector<uint32_t>& events) {
    const std::string name = key.second == kAllStreams
                                 ? fmt::format("gpu {} all streams", key.first)
                                 : fmt::format("gpu {} stream {}", key.first, key.second);
    const bool moves = key.second != kAllStreams && index_.MovesCollectives(key);
    const graph::StreamId kept = builder_.Stream(rank_, name);
    const graph::StreamId moved =
        moves ? builder_.Stream(rank_, name + " (collectives moved off)") : kept;
    TaskId last_kept;
    std::optional<TimeNs> previous_end;
    for (uint32_t index : events) {
      const DeviceEvent& op = trace_.device[index];
      const bool lane_moved = moves && index_.LaneOf(index) == 1;
      const graph::StreamId stream = lane_moved ? moved : kept;
      std::vector<TaskId> prerequisites;
      std::vector<uint32_t> device_prerequisites;
      TimeNs ready = previous_end.value_or(origin_);
      if (const auto it = launch_task_.find(index); it != launch_task_.end()) {
        prerequisites.push_back(it->second.first);
        ready = std::max(ready, it->second.second);
        ++stats_.launch_edges;
      }
      if (lane_moved) {
        ++stats_.moved_collectives;
        if (last_kept.valid()) prerequisites.push_back(last_kept);
      }
      if (const std::vector<uint32_t>* waits = index_.StreamWaits(index)) {
        for (uint32_t prerequisite : *waits) {
          device_prerequisites.push_back(prerequisite);
          ready = std::max(ready, trace_.device[prerequisite].end());
        }
      }
      if (op.start - ready > options_.match_tolerance) {
        if (const std::optional<uint32_t> other =
                index_.UnrecordedWait(op, ready, options_.match_tolerance)) {
          device_prerequisites.push_back(*other);
          ready = std::max(ready, trace_.device[*other].end());
          ++stats_.inferred_stream_edges;
        }
      }
      TaskId first;
      if (op.start > ready) {
        first = Measured(
            builder_.AddTask(stream, TaskKind::kDelay, "gpu gap", kGapCategory, op.start - ready),
            ready);
        ++stats_.gpu_gaps;
        stats_.gpu_gap_time += op.start - ready;
      }
      TaskId chain_first;  // set when a what-if replaced the op by a chain of tasks
      const TaskId task = Measured(device_ops_.Add(stream, op, chain_first), op.start);
      if (!first.valid()) first = chain_first.valid() ? chain_first : task;
      for (TaskId prerequisite : prerequisites) builder_.AddDependency(first, prerequisite);
      for (uint32_t prerequisite : device_prerequisites)
        pending_edges_.emplace_back(first, prerequisite);
      device_task_[index] = task;
      if (!lane_moved) last_kept = task;
      previous_end = std::max(previous_end.value_or(op.end()), op.end());
    }
  }

  const Trace& trace_;
  uint32_t job_index_;
  int32_t rank_;
  const ReplayOptions& options_;
  ReplayStats stats_;  // before index_, which counts the Stream Wait Event edges into it
  ReplayIndex index_;
  TimeNs origin_;
  graph::TaskGraphBuilder& builder_;
  DeviceOpTasks device_ops_;
  ReplayParts* replay_;
  // Per launched op: the host task that launched it and when that task ended in the trace.
  std::unordered_map<uint32_t, std::pair<TaskId, TimeNs>> launch_task_;
  std::vector<std::pair<TaskId, uint32_t>> pending_edges_;  // (task, device event it awaits)
  std::vector<std::vector<ApiCall>> calls_;                 // per host thread
  std::unordered_map<uint32_t, uint32_t> handoff_;          // call event → the call that woke it
  std::unordered_map<uint32_t, TaskId> waker_task_;  // a call that woke a thread → its last task
  std::vector<std::pair<TaskId, uint32_t>> thread_edges_;  // (wait task, call event it awaits)
  std::vector<TaskId> device_task_;
};

// When a trace's host and device events begin and end, on its clock, with the events there.
struct TraceSpan {
  TimeNs first = TimeNs::Max();
  TimeNs last = TimeNs::Zero();
  // The events there: an index into Trace::host, or into Trace::device when `*_gpu`.
  size_t first_event = 0, last_event = 0;
  bool first_gpu = false, last_gpu = false;
};

std::string DescribeEvent(const Trace& trace, size_t index, bool gpu) {
  const graph::NameId name = gpu ? trace.device[index].name : trace.host[index].name;
  return fmt::format("{} {}", gpu ? "GPU op" : "host event", Quote(trace.Name(name)));
}

// One pass over the events, keeping indices: a trace's events mostly come in time order, so
// nearly every one extends the span, and naming each there would format a string per event.
TraceSpan SpanOf(const Trace& trace) {
  TraceSpan span;
  const auto visit = [&span](const auto& events, bool gpu) {
    for (size_t i = 0; i < events.size(); ++i) {
      if (events[i].start < span.first) {
        span.first = events[i].start;
        span.first_event = i;
        span.first_gpu = gpu;
      }
      if (events[i].end() > span.last) {
        span.last = events[i].end();
        span.last_event = i;
        span.last_gpu = gpu;
      }
    }
  };
  visit(trace.host, false);
  visit(trace.device, true);
  return span;
}

// Refuses a trace whose events span more than kMaxTraceSpan (replay_graph.h).
Status CheckSpan(const Trace& trace, const TraceSpan& span) {
  if (span.first == TimeNs::Max() || span.last - span.first <= kMaxTraceSpan) {
    return Status::Ok();
  }
  const DurationNs length = span.last - span.first;
  return Error(fmt::format(
                   "its events span {} ({:.0f} days), from the {} at {} to the end of the "
                   "{} at {}, on the trace's clock; a profile covers seconds to "
                   "minutes, and a replay at most {:.0f} hours: does the trace mix two clocks?",
                   FormatDuration(length), length.ToSecondsDouble() / 86400.0,
                   DescribeEvent(trace, span.first_event, span.first_gpu),
                   FormatDuration(span.first - TimeNs::Zero()),
                   DescribeEvent(trace, span.last_event, span.last_gpu),
                   FormatDuration(span.last - TimeNs::Zero()),
                   kMaxTraceSpan.ToSecondsDouble() / 3600))
      .InFile(trace.file);
}

// Each trace's rank in the graph: its distributedInfo rank when every trace of the job has a
// distinct one inside its world (then `global` is set), else its place in the job.
std::vector<int32_t> GraphRanks(std::span<const Trace* const> job, bool& global) {
  global = false;
  constexpr int32_t kMaxWorld = 1 << 20;  // beyond this a rank number is not trusted
  std::vector<int32_t> ranks;
  for (const Trace* trace : job) {
    if (trace->rank < 0 || trace->rank >= trace->world_size || trace->world_size > kMaxWorld) {
      break;
    }
    ranks.push_back(trace->rank);
  }
  std::vector<int32_t> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  if (ranks.size() == job.size() &&
      std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end()) {
    global = true;
    return ranks;
  }
  ranks.resize(job.size());
  std::iota(ranks.begin(), ranks.end(), 0);
  return ranks;
}

void AddStats(ReplayStats& sum, const ReplayStats& part) {
  sum.host_tasks += part.host_tasks;
  sum.gpu_tasks += part.gpu_tasks;
  sum.collectives += part.collectives;
  sum.launch_edges += part.launch_edges;
  sum.stream_wait_edges += part.stream_wait_edges;
  sum.sync_edges += part.sync_edges;
  sum.inferred_sync_edges += part.inferred_sync_edges;
  sum.inferred_stream_edges += part.inferred_stream_edges;
  sum.inferred_thread_edges += part.inferred_thread_edges;
  sum.inferred_queue_edges += part.inferred_queue_edges;
  sum.gpu_gaps += part.gpu_gaps;
  sum.gpu_gap_time += part.gpu_gap_time;
  if (sum.unsized_collectives == 0) sum.first_unsized = part.first_unsized;
  sum.unsized_collectives += part.unsized_collectives;
  sum.job_collectives += part.job_collectives;
  sum.peer_waits += part.peer_waits;
  sum.peer_wait_time += part.peer_wait_time;
  sum.sped_up_ops += part.sped_up_ops;
  sum.moved_collectives += part.moved_collectives;
  sum.rescaled_collectives += part.rescaled_collectives;
  sum.rewritten_collectives += part.rewritten_collectives;
}

}  // namespace

Expected<ReplayGraph> BuildReplayGraph(std::span<const Trace* const> job,
                                       const ReplayOptions& options) {
  if (job.empty()) return Error("no trace to replay");
  size_t gpu_ops = 0;
  for (const Trace* trace : job) gpu_ops += trace->device.size();
  if (gpu_ops == 0) {
    size_t host = 0;
    for (const Trace* trace : job) host += trace->host.size();
    return Error(fmt::format(
                     "no GPU events (kernels, copies or sets) to replay: the trace has {} host "
                     "events; was it recorded with ProfilerActivity.CUDA?",
                     host))
        .InFile(job.front()->file);
  }
  bool global_ranks = false;
  std::vector<int32_t> ranks = GraphRanks(job, global_ranks);
  JobContext context{std::move(ranks), global_ranks, MatchJobCollectives(job), {}, {}};
  // Simulated time 0 is the job's first event, on the first trace's clock.
  TimeNs origin = TimeNs::Max();
  for (size_t i = 0; i < job.size(); ++i) {
    const TraceSpan span = SpanOf(*job[i]);
    DTSIM_RETURN_IF_ERROR(CheckSpan(*job[i], span));
    if (span.first != TimeNs::Max()) {
      origin = std::min(origin, span.first - context.collectives.clock_offset[i]);
    }
  }
  ReplayParts parts;
  ReplayStats stats;
  std::vector<uint32_t> first_task;
  for (uint32_t i = 0; i < job.size(); ++i) {
    first_task.push_back(static_cast<uint32_t>(context.builder.task_count()));
    const TimeNs trace_origin = origin + context.collectives.clock_offset[i];
    AddStats(stats, ReplayBuilder(*job[i], i, options, context, trace_origin, parts).Build());
  }
  DTSIM_ASSIGN_OR_RETURN(graph::TaskGraph graph, std::move(context.builder).Build());
  ReplayGraph replay{std::move(graph)};
  replay.origin = origin;
  replay.ranks = std::move(context.ranks);
  replay.first_task = std::move(first_task);
  replay.job = std::move(context.collectives);
  replay.steps = std::move(parts.steps);
  replay.comm_durations = std::move(context.comms.durations);
  replay.comm_source = std::move(context.comms.sources);
  replay.task_device_event = std::move(parts.task_device_event);
  replay.task_device_event.resize(replay.graph.task_count(), kNone);
  replay.measured_start = std::move(parts.measured_start);
  replay.measured_start.resize(replay.graph.task_count());
  replay.stats = stats;
  return replay;
}

Expected<ReplayGraph> BuildReplayGraph(const Trace& trace, const ReplayOptions& options) {
  const Trace* job[] = {&trace};
  return BuildReplayGraph(job, options);
}

uint32_t ReplayGraph::TraceOf(graph::TaskId task) const {
  const auto after = std::upper_bound(first_task.begin(), first_task.end(), task.value());
  return after == first_task.begin() ? 0 : static_cast<uint32_t>(after - first_task.begin() - 1);
}

}  // namespace dtsim::traces
