// CheckAcyclic: Kahn's algorithm over tasks plus one node per communication.
//
// A communication C is a rendezvous: no participant can finish before every participant has
// arrived, and a participant arrives once its dependencies and its stream predecessor (on an
// in-order stream) are done.
// So each participant's incoming edges (dependencies, stream order) are redirected into C, and
// C gets an edge to each participant. An eager send/recv (Communication::eager) starts with its
// send alone: only the send's edges go into C, and the recv keeps its own and also waits for C.
// A cycle in this graph is exactly a graph that cannot run to completion whatever the
// durations, including collectives posted in crossing orders.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sim/graph/builder.h"

namespace dtsim::graph {
namespace {

constexpr uint32_t kNone = TaskId::kInvalidValue;

class CycleFinder {
 public:
  explicit CycleFinder(const TaskGraph& graph)
      : graph_(graph),
        task_count_(static_cast<uint32_t>(graph.task_count())),
        next_in_stream_(graph.task_count(), kNone),
        in_degree_(graph.task_count() + graph.comm_count(), 0) {
    for (uint32_t s = 0; s < graph.stream_count(); ++s) {
      // Only an in-order stream orders its tasks ahead of time; the others order them by
      // when they become ready, which the run decides.
      if (graph.stream(StreamId(s)).order != StreamOrder::kInOrder) continue;
      const std::span<const TaskId> tasks = graph.stream_tasks(StreamId(s));
      for (size_t i = 1; i < tasks.size(); ++i)
        next_in_stream_[tasks[i - 1].value()] = tasks[i].value();
    }
  }

  Status Run() {
    CountInDegrees();
    std::vector<uint32_t> ready;
    for (uint32_t node = 0; node < in_degree_.size(); ++node) {
      if (in_degree_[node] == 0) ready.push_back(node);
    }
    size_t processed = 0;
    while (!ready.empty()) {
      const uint32_t node = ready.back();
      ready.pop_back();
      ++processed;
      ForEachSuccessor(node, [&](uint32_t next) {
        if (--in_degree_[next] == 0) ready.push_back(next);
      });
    }
    if (processed == in_degree_.size()) return Status::Ok();
    return ReportCycle();
  }

 private:
  // The node a task's incoming edges go to: its communication's node if it has one (but the
  // recv of an eager pair, which arrives on its own).
  uint32_t Target(TaskId task) const {
    const CommId comm = graph_.task(task).comm;
    return comm.valid() && !EagerRecv(task) ? task_count_ + comm.value() : task.value();
  }

  bool EagerRecv(TaskId task) const {
    const graph::Task& t = graph_.task(task);
    return t.kind == TaskKind::kRecv && t.comm.valid() && graph_.comm(t.comm).eager;
  }

  void CountInDegrees() {
    for (uint32_t node = 0; node < in_degree_.size(); ++node) {
      ForEachSuccessor(node, [&](uint32_t next) { ++in_degree_[next]; });
    }
  }

  template <typename Visit>
  void ForEachSuccessor(uint32_t node, Visit&& visit) const {
    if (node >= task_count_) {
      for (TaskId p : graph_.participants(CommId(node - task_count_))) visit(p.value());
      return;
    }
    for (TaskId s : graph_.successors(TaskId(node))) visit(Target(s));
    if (next_in_stream_[node] != kNone) visit(Target(TaskId(next_in_stream_[node])));
  }

  // A predecessor of `node` that never got processed (one exists for every unprocessed node,
  // or its in-degree would have reached zero), with the kind of edge joining them.
  std::pair<uint32_t, const char*> StuckPredecessor(uint32_t node,
                                                    const std::vector<uint32_t>& prev) const {
    auto stuck = [&](uint32_t n) { return in_degree_[n] > 0; };
    std::vector<TaskId> arrivals;  // the tasks whose arrival `node` waits for
    if (node >= task_count_) {
      const CommId comm(node - task_count_);
      const auto ps = graph_.participants(comm);
      arrivals.assign(ps.begin(), graph_.comm(comm).eager ? ps.begin() + 1 : ps.end());
    } else if (EagerRecv(TaskId(node))) {
      const uint32_t transfer = task_count_ + graph_.task(TaskId(node)).comm.value();
      if (stuck(transfer)) return {transfer, "transfer completes"};
      arrivals.push_back(TaskId(node));
    } else if (graph_.task(TaskId(node)).comm.valid()) {
      return {Target(TaskId(node)), "rendezvous completes"};
    } else {
      arrivals.push_back(TaskId(node));
    }
    for (TaskId arriving : arrivals) {
      for (TaskId dep : graph_.dependencies(arriving)) {
        if (stuck(dep.value())) return {dep.value(), "dependency"};
      }
      const uint32_t before = prev[arriving.value()];
      if (before != kNone && stuck(before)) return {before, "stream order"};
    }
    DTSIM_CHECK(false, "unprocessed node without an unprocessed predecessor");
    return {kNone, ""};
  }

  std::string DescribeNode(uint32_t node) const {
    return node >= task_count_ ? graph_.DescribeComm(CommId(node - task_count_))
                               : graph_.Describe(TaskId(node));
  }

  Status ReportCycle() const {
    std::vector<uint32_t> prev(task_count_, kNone);
    for (uint32_t t = 0; t < task_count_; ++t) {
      if (next_in_stream_[t] != kNone) prev[next_in_stream_[t]] = t;
    }
    uint32_t node = 0;
    while (in_degree_[node] == 0) ++node;
    // Walk backwards until a node repeats; the walk from its first visit is a cycle.
    std::vector<std::pair<uint32_t, const char*>> walk;  // (node, edge into the previous node)
    std::vector<uint32_t> visited_at(in_degree_.size(), kNone);
    const char* edge = "";
    while (visited_at[node] == kNone) {
      visited_at[node] = static_cast<uint32_t>(walk.size());
      walk.emplace_back(node, edge);
      std::tie(node, edge) = StuckPredecessor(node, prev);
    }
    walk.emplace_back(node, edge);
    // walk[i + 1] precedes walk[i]; print from the repeated node forwards.
    std::string text;
    bool through_comm = false;
    for (size_t i = walk.size() - 1; i + 1 > visited_at[node]; --i) {
      through_comm |= walk[i].first >= task_count_;
      text += i + 1 == walk.size() ? "\n    " + DescribeNode(walk[i].first)
                                   : fmt::format("\n    -> ({}) {}", walk[i + 1].second,
                                                 DescribeNode(walk[i].first));
      if (i == 0) break;
    }
    const char* what = through_comm
                           ? "deadlock: communications are posted in an order that can never "
                             "rendezvous; each must finish before the next:"
                           : "dependency cycle; each must finish before the next:";
    return Error(what + text);
  }

  const TaskGraph& graph_;
  const uint32_t task_count_;
  LargeVector<uint32_t> next_in_stream_;
  LargeVector<uint32_t> in_degree_;
};

}  // namespace

Status CheckAcyclic(const TaskGraph& graph) { return CycleFinder(graph).Run(); }

}  // namespace dtsim::graph
