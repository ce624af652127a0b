#include "traces/chrome_trace_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "sim/base/atomic_file.h"
#include "sim/base/buffered_text_writer.h"
#include "sim/base/strings.h"
#include "sim/base/time_format.h"

namespace dtsim::traces {

using graph::CommId;
using graph::TaskId;

namespace {

using Micros = ExactMicros;

// Appends through BufferedTextWriter (Append, Separator, Flush).
class TraceWriter : private BufferedTextWriter {
 public:
  TraceWriter(std::ostream& out, const graph::TaskGraph& graph, const graph::TaskTimes& times,
              const TimelineInfo& info)
      : BufferedTextWriter(out),
        graph_(graph),
        times_(times),
        info_(info),
        thread_of_stream_(graph.stream_count()) {}

  void Write() {
    const TimelineInfo& info = info_;
    Append(R"({{"otherData":{{"format":"{}","version":"{}","source":{},"communication_model":{}}},)"
           "\n\"traceEvents\":[",
           kTimelineFormat.name, kTimelineFormat.Version(), Quote(info.source),
           Quote(info.communication_model));
    WriteMetadata();
    for (uint32_t t = 0; t < graph_.task_count(); ++t) WriteTask(TaskId(t));
    for (uint32_t c = 0; c < graph_.comm_count(); ++c) {
      if (graph_.comm(CommId(c)).kind == graph::CommKind::kSendRecv) WriteFlow(CommId(c));
    }
    WriteMemory();
    Append("\n]}}\n");
    Flush();
  }

 private:
  // Whether a rank's events go in: it has streams and is among the selected ranks.
  bool Shown(int32_t rank) const { return shown_[static_cast<size_t>(rank)]; }

  // Whether [start, end) overlaps the window (every interval without one).
  bool InWindow(TimeNs start, TimeNs end) const {
    if (info_.window_end <= info_.window_start) return true;
    return end >= info_.window_start && start < info_.window_end;
  }

  void WriteMetadata() {
    const auto ranks = static_cast<size_t>(graph_.rank_count());
    std::vector<uint32_t> streams_per_rank(ranks, 0);
    for (uint32_t s = 0; s < graph_.stream_count(); ++s) {
      ++streams_per_rank[static_cast<size_t>(graph_.stream(graph::StreamId(s)).rank)];
    }
    shown_.assign(ranks, info_.ranks.empty());
    for (int32_t rank : info_.ranks) {
      if (rank >= 0 && static_cast<size_t>(rank) < ranks) shown_[static_cast<size_t>(rank)] = true;
    }
    for (int32_t rank = 0; rank < graph_.rank_count(); ++rank) {
      if (streams_per_rank[static_cast<size_t>(rank)] == 0)
        shown_[static_cast<size_t>(rank)] = false;
      if (!Shown(rank)) continue;
      Append(R"({}{{"name":"process_name","ph":"M","pid":{},"tid":0,"args":{{"name":"rank {}"}}}})",
             Separator(), rank, rank);
      Append(
          R"({}{{"name":"process_sort_index","ph":"M","pid":{},"tid":0,"args":{{"sort_index":{}}}}})",
          Separator(), rank, rank);
    }
    std::fill(streams_per_rank.begin(), streams_per_rank.end(), 0);
    for (uint32_t s = 0; s < graph_.stream_count(); ++s) {
      const graph::Stream& stream = graph_.stream(graph::StreamId(s));
      const uint32_t tid = ++streams_per_rank[static_cast<size_t>(stream.rank)];
      thread_of_stream_[s] = tid;
      if (!Shown(stream.rank)) continue;
      Append(R"({}{{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":{}}}}})",
             Separator(), stream.rank, tid, Quote(graph_.name(stream.name)));
      Append(
          R"({}{{"name":"thread_sort_index","ph":"M","pid":{},"tid":{},"args":{{"sort_index":{}}}}})",
          Separator(), stream.rank, tid, tid);
    }
  }

  std::string TaskName(TaskId id) const {
    const graph::Task& task = graph_.task(id);
    if (!graph_.name(task.name).empty()) return std::string(graph_.name(task.name));
    if (graph::IsCommunication(task.kind)) {
      return std::string(graph::CommKindName(graph_.comm(task.comm).kind));
    }
    return std::string(graph::TaskKindName(task.kind));
  }

  std::string CommArgs(const graph::Task& task) const {
    const graph::Communication& comm = graph_.comm(task.comm);
    // The group the collective is over (priced over); a graph simulating one rank per class
    // of identical ranks posts it on fewer, named apart (since 1.3).
    std::string args =
        fmt::format(R"(,"op":"{}","size_bytes":{},"group":[{}])", graph::CommKindName(comm.kind),
                    comm.size.count(), fmt::join(graph_.group(comm.priced_group), ","));
    if (comm.priced_group != comm.group) {
      args += fmt::format(R"(,"simulated_members":[{}])", fmt::join(graph_.group(comm.group), ","));
    }
    if (!graph_.name(comm.label).empty())
      args += ",\"collective\":" + Quote(graph_.name(comm.label));
    const std::string_view algorithm =
        info_.comm_methods.empty()
            ? graph_.name(comm.algorithm)
            : std::string_view(info_.method_labels[info_.comm_methods[task.comm.value()]]);
    if (!algorithm.empty()) args += ",\"algorithm\":" + Quote(algorithm);
    return args;
  }

  void WriteTask(TaskId id) {
    const graph::Task& task = graph_.task(id);
    const int32_t pid = graph_.stream(task.stream).rank;
    if (!Shown(pid) || !InWindow(times_.task_start[id.value()], times_.task_end[id.value()])) {
      return;
    }
    const uint32_t tid = thread_of_stream_[task.stream.value()];
    const std::string name = Quote(TaskName(id));
    const std::string category = Quote(graph_.category_name(task.category));
    const std::string_view external = graph_.external_id(id);
    const std::string id_arg = external.empty() ? std::to_string(id.value()) : Quote(external);
    TimeNs start = times_.task_start[id.value()];
    std::string extra;
    if (graph::IsCommunication(task.kind)) {
      const TimeNs comm_start = times_.comm_start[task.comm.value()];
      if (comm_start > start && InWindow(start, comm_start)) {
        Append(
            R"({}{{"name":{},"cat":"rendezvous_wait","ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"args":{{"task":{}}}}})",
            Separator(), Quote("wait: " + TaskName(id)), pid, tid, Micros{start.ns()},
            Micros{(comm_start - start).ns()}, id_arg);
      }
      start = comm_start;
      extra = CommArgs(task);
    }
    if (!InWindow(start, times_.task_end[id.value()])) return;  // only its wait was in it
    Append(
        R"({}{{"name":{},"cat":{},"ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"args":{{"task":{},"kind":"{}"{}}}}})",
        Separator(), name, category, pid, tid, Micros{start.ns()},
        Micros{(times_.task_end[id.value()] - start).ns()}, id_arg, graph::TaskKindName(task.kind),
        extra);
  }

  // Each rank's memory as a counter track ("memory", in GiB): its base from the start, then
  // the running sum of the changes at the ends of their tasks (changes at one time summed).
  void WriteMemory() {
    std::vector<std::vector<std::pair<TimeNs, int64_t>>> changes(
        static_cast<size_t>(graph_.rank_count()));
    for (const graph::MemoryChange& change : graph_.memory_changes()) {
      changes[static_cast<size_t>(graph_.rank_of(change.task))].emplace_back(
          times_.task_end[change.task.value()], change.bytes);
    }
    const bool windowed = info_.window_end > info_.window_start;
    for (int32_t rank = 0; rank < graph_.rank_count(); ++rank) {
      std::vector<std::pair<TimeNs, int64_t>>& list = changes[static_cast<size_t>(rank)];
      int64_t bytes = graph_.memory_base(rank);
      if ((list.empty() && bytes == 0) || !Shown(rank)) continue;
      std::stable_sort(list.begin(), list.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      // With a window: the level at its start, then the changes inside it.
      size_t i = 0;
      for (; windowed && i < list.size() && list[i].first < info_.window_start; ++i) {
        bytes += list[i].second;
      }
      WriteCounter(rank, windowed ? info_.window_start : TimeNs(0), bytes);
      for (; i < list.size(); ++i) {
        if (windowed && list[i].first >= info_.window_end) break;
        bytes += list[i].second;
        if (i + 1 < list.size() && list[i + 1].first == list[i].first) continue;
        WriteCounter(rank, list[i].first, bytes);
      }
    }
  }

  void WriteCounter(int32_t rank, TimeNs at, int64_t bytes) {
    Append(R"({}{{"name":"memory","ph":"C","pid":{},"tid":0,"ts":{},"args":{{"GiB":{:.4f}}}}})",
           Separator(), rank, Micros{at.ns()}, static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  }

  // A flow arrow from the send slice to the recv slice, both bound at the transfer's start.
  void WriteFlow(CommId comm) {
    const std::span<const TaskId> pair = graph_.participants(comm);
    for (TaskId id : pair) {
      if (!Shown(graph_.rank_of(id)) ||
          !InWindow(times_.task_start[id.value()], times_.task_end[id.value()])) {
        return;  // an arrow needs both ends
      }
    }
    const Micros ts{times_.comm_start[comm.value()].ns()};
    for (int i = 0; i < 2; ++i) {
      const graph::Task& task = graph_.task(pair[static_cast<size_t>(i)]);
      Append(
          R"({}{{"name":"send/recv","cat":"p2p","ph":"{}",{}"id":{},"pid":{},"tid":{},"ts":{}}})",
          Separator(), i == 0 ? "s" : "f", i == 0 ? "" : R"("bp":"e",)", comm.value(),
          graph_.stream(task.stream).rank, thread_of_stream_[task.stream.value()], ts);
    }
  }

  const graph::TaskGraph& graph_;
  const graph::TaskTimes& times_;
  const TimelineInfo& info_;
  std::vector<uint32_t> thread_of_stream_;
  std::vector<bool> shown_;  // per rank
};

}  // namespace

void WriteChromeTrace(std::ostream& out, const graph::TaskGraph& graph,
                      const graph::TaskTimes& times, const TimelineInfo& info) {
  TraceWriter(out, graph, times, info).Write();
}

Status CheckTimelineSelection(const graph::TaskGraph& graph, const graph::TaskTimes& times,
                              const TimelineInfo& info) {
  const int32_t ranks = std::max(graph.rank_count(), info.world_ranks);
  std::vector<bool> has_streams(static_cast<size_t>(ranks), false);
  for (uint32_t s = 0; s < graph.stream_count(); ++s) {
    has_streams[static_cast<size_t>(graph.stream(graph::StreamId(s)).rank)] = true;
  }
  bool any = info.ranks.empty();
  for (const int32_t rank : info.ranks) {
    if (rank < 0 || rank >= ranks) {
      return Error(fmt::format("no rank {} in this run: it has ranks 0 to {}", rank, ranks - 1),
                   "--timeline-ranks");
    }
    any = any || has_streams[static_cast<size_t>(rank)];
  }
  if (!any) {
    std::vector<int32_t> simulated;
    for (int32_t rank = 0; rank < ranks && simulated.size() < 8; ++rank) {
      if (has_streams[static_cast<size_t>(rank)]) simulated.push_back(rank);
    }
    return Error(fmt::format("none of these ranks ran a task in this simulation; those that did: "
                             "{}{} (a symmetric simulation runs one rank per class of identical "
                             "ranks: --set simulation.ranks=full runs every rank)",
                             fmt::join(simulated, ", "), simulated.size() == 8 ? ", ..." : ""),
                 "--timeline-ranks");
  }
  if (info.window_end > info.window_start) {
    TimeNs last;
    for (const TimeNs end : times.task_end) last = std::max(last, end);
    if (info.window_start >= last) {
      return Error(fmt::format("the window starts at or after the last task ends ({:.6g} s)",
                               static_cast<double>(last.ns()) / 1e9),
                   "--timeline-window");
    }
  }
  return Status::Ok();
}

Status WriteChromeTraceFile(const std::string& path, const graph::TaskGraph& graph,
                            const graph::TaskTimes& times, const TimelineInfo& info) {
  DTSIM_RETURN_IF_ERROR(CheckTimelineSelection(graph, times, info));
  DTSIM_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> writer, AtomicFileWriter::Open(path));
  WriteChromeTrace(writer->stream(), graph, times, info);
  return writer->Commit();
}

}  // namespace dtsim::traces
