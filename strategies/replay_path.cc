#include "strategies/replay_path.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

namespace dtsim::strategies {
namespace {

using graph::TaskId;

constexpr std::array<std::string_view, kPathParts> kPartNames = {
    "gpu", "communication", "host", "cuda_api", "sync_wait", "fixed_gap", "peer_wait"};

// The part of a task by its category (traces/replay_graph.cc names them); communication tasks
// by their kind.
PathPart PartOfCategory(std::string_view category) {
  if (category == "kernel" || category == "memcpy" || category == "memset" ||
      category == "compression") {
    return PathPart::kGpu;
  }
  if (category == "nccl") return PathPart::kCommunication;
  if (category == "cuda_api") return PathPart::kApi;
  if (category == "host_wait") return PathPart::kWait;
  if (category == "gpu_gap") return PathPart::kGap;
  if (category == "peer_wait") return PathPart::kPeerWait;
  return PathPart::kHost;  // "host", step markers (zero-length)
}

class PathWalker {
 public:
  PathWalker(std::span<const traces::Trace* const> job, const traces::ReplayGraph& replay,
             const graph::TaskTimes& times, std::span<const traces::KernelSpeedup> classes)
      : job_(job), replay_(replay), graph_(replay.graph), times_(times), classes_(classes) {
    for (size_t c = 0; c < graph_.category_count(); ++c) {
      parts_.push_back(PartOfCategory(graph_.category_name(static_cast<uint16_t>(c))));
    }
    previous_.assign(graph_.task_count(), TaskId::Invalid());
    for (size_t s = 0; s < graph_.stream_count(); ++s) {
      const std::span<const TaskId> tasks =
          graph_.stream_tasks(graph::StreamId(static_cast<uint32_t>(s)));
      for (size_t i = 1; i < tasks.size(); ++i) previous_[tasks[i].value()] = tasks[i - 1];
    }
  }

  StepPath Walk(const traces::ReplayStep& step) const {
    StepPath path;
    if (!step.begin.valid() || !step.end.valid()) return path;
    const int32_t rank = graph_.rank_of(step.end);
    const TimeNs begin = Start(step.begin);
    TimeNs frontier = Start(step.end);  // the path is known from here to the step's end
    TaskId task = step.end;
    while (frontier > begin) {
      const graph::Task& t = graph_.task(task);
      if (IsCommunication(t.kind)) {
        // Its transfer is on the path; what the collective waited for is its last peer's way.
        const TimeNs comm_start = times_.comm_start[t.comm.value()];
        Add(path, PathPart::kCommunication, task, std::max(comm_start, begin),
            std::min(times_.comm_end[t.comm.value()], frontier), rank);
        frontier = std::min(frontier, std::max(comm_start, begin));
        task = LastArrival(task);
      } else {
        Add(path, Part(task), task, std::max(Start(task), begin), std::min(End(task), frontier),
            rank);
        frontier = std::min(frontier, std::max(Start(task), begin));
      }
      if (frontier <= begin) break;
      const std::optional<TaskId> before = Binding(task);
      const TimeNs reached = before ? std::max(End(*before), begin) : begin;
      // Nothing ended when the task started: the replay kept that wait as measured.
      if (reached < frontier) Add(path, PathPart::kGap, task, reached, frontier, rank);
      frontier = std::min(frontier, reached);
      if (!before) break;
      task = *before;
    }
    return path;
  }

 private:
  TimeNs Start(TaskId task) const { return times_.task_start[task.value()]; }
  TimeNs End(TaskId task) const { return times_.task_end[task.value()]; }
  PathPart Part(TaskId task) const { return parts_[graph_.task(task).category]; }

  // Adds [from, to) of `task` to the path of a step of `rank`.
  void Add(StepPath& path, PathPart part, TaskId task, TimeNs from, TimeNs to, int32_t rank) const {
    if (to <= from) return;
    const DurationNs length = to - from;
    path.parts[static_cast<size_t>(part)] += length;
    // A collective's transfer is the step's rank's too.
    if (graph_.rank_of(task) != rank && part != PathPart::kCommunication) path.on_peers += length;
    if (part == PathPart::kGpu && InClasses(task)) path.sped_up += length;
  }

  bool InClasses(TaskId task) const {
    if (classes_.empty()) return false;
    const uint32_t trace_index = replay_.TraceOf(task);
    if (trace_index >= job_.size()) return false;
    const traces::Trace& trace = *job_[trace_index];
    const uint32_t event = replay_.task_device_event[task.value()];
    if (event == traces::kNone || event >= trace.device.size()) return false;
    const traces::DeviceEvent& op = trace.device[event];
    const int32_t rank = graph_.rank_of(task);
    return std::any_of(classes_.begin(), classes_.end(), [&](const traces::KernelSpeedup& s) {
      return (s.rank < 0 || s.rank == rank) &&
             traces::InKernelClass(s.kernels, op.kind, trace.Name(op.name));
    });
  }

  // The participant of a collective that arrived last (whose arrival started it).
  TaskId LastArrival(TaskId task) const {
    const std::span<const TaskId> peers = graph_.participants(graph_.task(task).comm);
    return *std::max_element(peers.begin(), peers.end(),
                             [&](TaskId a, TaskId b) { return Start(a) < Start(b); });
  }

  // The prerequisite that ended last: what the task waited for.
  std::optional<TaskId> Binding(TaskId task) const {
    std::optional<TaskId> best;
    const auto consider = [&](TaskId candidate) {
      if (candidate.valid() && (!best || End(candidate) > End(*best))) best = candidate;
    };
    consider(previous_[task.value()]);
    for (const TaskId dependency : graph_.dependencies(task)) consider(dependency);
    return best;
  }

  std::span<const traces::Trace* const> job_;
  const traces::ReplayGraph& replay_;
  const graph::TaskGraph& graph_;
  const graph::TaskTimes& times_;
  std::span<const traces::KernelSpeedup> classes_;
  std::vector<PathPart> parts_;   // by category index
  std::vector<TaskId> previous_;  // by task: the one before it on its stream
};

}  // namespace

std::string_view PathPartName(PathPart part) { return kPartNames[static_cast<size_t>(part)]; }

DurationNs StepPath::Total() const {
  return std::accumulate(parts.begin(), parts.end(), DurationNs::Zero());
}

std::vector<StepPath> StepPaths(std::span<const traces::Trace* const> job,
                                const traces::ReplayGraph& replay, const graph::TaskTimes& times,
                                std::span<const traces::KernelSpeedup> classes) {
  std::vector<StepPath> paths;
  if (times.task_start.size() != replay.graph.task_count()) return paths;
  const PathWalker walker(job, replay, times, classes);
  for (const traces::ReplayStep& step : replay.steps) paths.push_back(walker.Walk(step));
  return paths;
}

std::string WhyUnmoved(const StepPath& replayed, double change) {
  // A step "did not move" under 1%; sped-up work under 5% of its path cannot move it much;
  // a second bounding part is named when it holds 10% of the path or more.
  constexpr double kUnmoved = 0.01;
  constexpr double kSmallShare = 0.05;
  constexpr double kNamedShare = 10;  // percent
  const double total = static_cast<double>(replayed.Total().ns());
  if (total <= 0) return {};
  const double sped_up = static_cast<double>(replayed.sped_up.ns()) / total;
  if (sped_up >= kSmallShare && std::abs(change) >= kUnmoved) return {};
  std::vector<size_t> order(kPathParts);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return replayed.parts[a] > replayed.parts[b]; });
  const auto share = [&](size_t part) {
    return 100 * static_cast<double>(replayed.parts[part].ns()) / total;
  };
  std::string bound = fmt::format("{:.0f}% {}", share(order[0]), kPartNames[order[0]]);
  if (share(order[1]) >= kNamedShare) {
    bound += fmt::format(", {:.0f}% {}", share(order[1]), kPartNames[order[1]]);
  }
  return fmt::format(
      "its critical path is {}; the GPU work sped up is {:.1f}% of it, so the step can gain at "
      "most that",
      bound, 100 * sped_up);
}

}  // namespace dtsim::strategies
