// The task graph: the IR every producer of work emits (strategies from a model and plan, trace
// readers from a real run) and the only thing the engine consumes (DESIGN §4).
//
// A TaskGraph is immutable and valid by construction: TaskGraphBuilder::Build() is the only way
// to make one, and it rejects unknown dependencies, cycles (through dependencies, the order of
// in-order streams and collective rendezvous), unmatched sends and receives, and collectives that
// only part of their group posts. Storage is compact (flat arrays, CSR adjacency, interned strings)
// so that graphs of 10^7 tasks fit in memory.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/huge_page_allocator.h"
#include "sim/graph/string_table.h"
#include "sim/graph/task.h"

namespace dtsim::graph {

class TaskGraph {
 public:
  TaskGraph(TaskGraph&&) = default;
  TaskGraph& operator=(TaskGraph&&) = default;
  TaskGraph(const TaskGraph&) = delete;
  TaskGraph& operator=(const TaskGraph&) = delete;

  size_t task_count() const { return tasks_.size(); }
  size_t stream_count() const { return streams_.size(); }
  size_t comm_count() const { return comms_.size(); }
  size_t dependency_count() const { return dependencies_.size(); }
  // Ranks are 0 .. rank_count() - 1; a rank may have no tasks. The accessors below are inline:
  // the engine calls them for every event.
  int32_t rank_count() const { return rank_count_; }

  const Task& task(TaskId id) const { return tasks_[id.value()]; }
  std::span<const Task> tasks() const { return tasks_; }
  int32_t rank_of(TaskId id) const { return streams_[task(id).stream.value()].rank; }
  // The tasks `id` waits for, and the tasks that wait for `id`; sorted, no duplicates.
  std::span<const TaskId> dependencies(TaskId id) const {
    const uint32_t begin = dependency_offsets_[id.value()];
    return {dependencies_.data() + begin, dependency_offsets_[id.value() + 1] - begin};
  }
  std::span<const TaskId> successors(TaskId id) const {
    const uint32_t begin = successor_offsets_[id.value()];
    return {successors_.data() + begin, successor_offsets_[id.value() + 1] - begin};
  }

  const Stream& stream(StreamId id) const { return streams_[id.value()]; }
  // A stream's tasks in the order they were added (task id order): an in-order stream's
  // execution order, a ready-first stream's priority.
  std::span<const TaskId> stream_tasks(StreamId id) const {
    const Stream& s = streams_[id.value()];
    return {stream_tasks_.data() + s.first_task, s.task_count};
  }

  const Communication& comm(CommId id) const { return comms_[id.value()]; }
  // The tasks taking part, in group order (for send/recv: the send, then the recv).
  std::span<const TaskId> participants(CommId id) const {
    const Communication& c = comms_[id.value()];
    return {participants_.data() + c.first_participant, c.participant_count};
  }
  std::span<const int32_t> group(GroupId id) const {
    const uint32_t begin = group_offsets_[id.value()];
    return {group_ranks_.data() + begin, group_offsets_[id.value() + 1] - begin};
  }
  size_t group_count() const { return group_offsets_.size() - 1; }

  std::string_view name(NameId id) const { return strings_.Get(id); }
  std::string_view category_name(uint16_t category) const {
    return strings_.Get(categories_[category]);
  }
  size_t category_count() const { return categories_.size(); }

  // What ranks hold in memory over the run, where the graph's maker said (generated
  // iterations; not kept in task-graph files): the bytes at the start, and the changes as
  // tasks end, in the order they were added.
  int64_t memory_base(int32_t rank) const {
    return rank >= 0 && static_cast<size_t>(rank) < memory_base_.size()
               ? memory_base_[static_cast<size_t>(rank)]
               : 0;
  }
  std::span<const MemoryChange> memory_changes() const { return memory_changes_; }

  // The id the task had in its source file (empty for generated graphs).
  std::string_view external_id(TaskId id) const;
  // "task \"fwd0\" (rank 0, stream \"compute\", gemm)" — for error and deadlock reports.
  std::string Describe(TaskId id) const;
  // "collective \"ar0\" (all_reduce of 1048576 B over ranks [0, 1])" or a send/recv pair.
  std::string DescribeComm(CommId id) const;

  // Bytes held by this graph (capacities of its arrays and the string table).
  size_t MemoryBytes() const;

 private:
  friend class TaskGraphBuilder;
  TaskGraph() = default;

  int32_t rank_count_ = 0;
  // Per-task and per-edge arrays in huge pages (sim/base/huge_page_allocator.h).
  LargeVector<Task> tasks_;
  LargeVector<uint32_t> dependency_offsets_;  // CSR: task_count + 1 entries
  LargeVector<TaskId> dependencies_;
  LargeVector<uint32_t> successor_offsets_;
  LargeVector<TaskId> successors_;
  std::vector<Stream> streams_;
  LargeVector<TaskId> stream_tasks_;
  LargeVector<Communication> comms_;
  LargeVector<TaskId> participants_;
  std::vector<uint32_t> group_offsets_{0};
  std::vector<int32_t> group_ranks_;
  std::vector<NameId> categories_;
  std::vector<std::string> external_ids_;  // empty, or one per task
  std::vector<int64_t> memory_base_;       // per rank; empty: none given
  std::vector<MemoryChange> memory_changes_;
  StringTable strings_;
};

}  // namespace dtsim::graph
