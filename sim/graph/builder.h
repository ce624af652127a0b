// Builds a TaskGraph. Arguments that only a bug could make wrong (a negative duration, an id
// from another builder) are checked with DTSIM_CHECK; problems that only appear once the whole
// graph is known are returned by Build() as an Error naming the tasks involved:
//   - a send or recv with no partner (pairs match in order per (source, destination, tag)),
//     or a recv whose expected size differs from its send's;
//   - a collective some group member never posts, posts twice, or a non-member posts;
//   - a cycle through dependencies, the order of in-order streams and collective rendezvous
//     (the last is a deadlock of mismatched collective order: rank 0 posts A then B, rank 1 B
//     then A). A graph with ready-first streams can still deadlock at run time, depending on
//     which task takes the stream first; the engine reports that.
#pragma once

#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/base/status.h"
#include "sim/graph/task_graph.h"

namespace dtsim::graph {

class TaskGraphBuilder {
 public:
  TaskGraphBuilder();

  // The stream `name` of `rank`, created on first use with `order`. Preconditions: rank >= 0,
  // and a stream is always asked for with the order it was created with.
  StreamId Stream(int32_t rank, std::string_view name, StreamOrder order = StreamOrder::kInOrder);

  // A compute, memcpy or delay task with a fixed duration, appended to `stream`.
  TaskId AddTask(StreamId stream, TaskKind kind, std::string_view name, std::string_view category,
                 DurationNs duration);

  // A collective over `group` (distinct ranks, in the order the algorithm sees them). `root`
  // is required for broadcast and reduce and must be a member. Each member then posts it once
  // with AddCollectiveTask.
  CommId AddCollective(CommKind kind, Bytes size_per_rank, std::span<const int32_t> group,
                       std::string_view label = {}, std::string_view algorithm = {},
                       int32_t root = -1);
  TaskId AddCollectiveTask(StreamId stream, CommId comm, std::string_view name,
                           std::string_view category);
  // Prices `comm` as a collective over `logical_group` (a superset of its group, in the order
  // the algorithm sees them) while only its group's members post it: how a graph that
  // simulates one rank per class of identical ranks keeps the collectives' real cost.
  void PriceAs(CommId comm, std::span<const int32_t> logical_group);

  // For builders that post many collectives over the same groups: a group of distinct
  // non-negative ranks (in the order the algorithm sees them), made once, and a collective over
  // `members` priced over `priced` (a superset, or the same group) — AddCollective and PriceAs
  // without re-checking and re-finding the groups each time. Not for broadcast or reduce.
  GroupId MakeGroup(std::span<const int32_t> ranks);
  CommId AddCollective(CommKind kind, Bytes size_per_rank, GroupId members, GroupId priced);
  // A task name or category interned once, for AddTask calls that reuse it.
  NameId Name(std::string_view name) { return graph_.strings_.Intern(name); }
  uint16_t Category(std::string_view category);
  TaskId AddTask(StreamId stream, TaskKind kind, NameId name, uint16_t category,
                 DurationNs duration);

  // Point-to-point: a send from the stream's rank to `peer`, and a recv from `peer`. The k-th
  // send and the k-th recv with the same (source, destination, tag) form a pair. A recv may
  // state the size it expects; it must then equal its send's. A pair is a rendezvous unless its
  // send is eager (Communication::eager).
  enum class SendMode : uint8_t { kRendezvous, kEager };
  TaskId AddSend(StreamId stream, int32_t peer, Bytes size, int64_t tag, std::string_view name,
                 std::string_view category, SendMode mode = SendMode::kRendezvous);
  TaskId AddRecv(StreamId stream, int32_t peer, int64_t tag, std::string_view name,
                 std::string_view category, std::optional<Bytes> expected_size = std::nullopt);

  // `task` may not start before `prerequisite` is done. Duplicates are merged.
  void AddDependency(TaskId task, TaskId prerequisite);
  // Memory a timeline draws (TaskGraph::memory_base, memory_changes): `rank` holds `bytes`
  // at the start; the rank of `task` holds `bytes` more (fewer, when negative) once it ends.
  void SetMemoryBase(int32_t rank, int64_t bytes);
  void AddMemoryChange(TaskId task, int64_t bytes);
  // The id the task has in the user's file, used in messages and outputs.
  void SetExternalId(TaskId task, std::string external_id);

  size_t task_count() const { return graph_.tasks_.size(); }
  // The task appended last to `rank`'s stream `name` so far; invalid when the stream does not
  // exist or has no task yet.
  TaskId LastTask(int32_t rank, std::string_view name);

  // A graph has at most kMaxCategories distinct task categories (a task stores one in 16 bits,
  // 0 meaning none).
  // Readers ask before adding a task whose category comes from a file, to report an input
  // error instead of tripping the builder's check.
  static constexpr size_t kMaxCategories = 65534;
  bool HasRoomForCategory(std::string_view category);

  Expected<TaskGraph> Build() &&;

 private:
  struct PointToPoint {
    TaskId task;
    int32_t source = 0;
    int32_t destination = 0;
    int64_t tag = 0;
    std::optional<Bytes> size;  // always set for sends
    bool eager = false;         // sends only
  };

  TaskId Append(StreamId stream, TaskKind kind, std::string_view name, std::string_view category,
                DurationNs duration);
  TaskId Append(StreamId stream, TaskKind kind, NameId name, uint16_t category,
                DurationNs duration);
  GroupId Group(std::vector<int32_t> ranks);
  // The groups last checked by AddCollective over group ids: members inside priced.
  std::optional<std::pair<GroupId, GroupId>> checked_groups_;
  void BuildStreams();
  void BuildAdjacency();
  Status BuildCollectives();
  Status MatchPointToPoint();
  Error Unmatched(const PointToPoint& lone, std::string_view partner, int32_t partner_rank) const;

  TaskGraph graph_;
  std::map<std::pair<int32_t, NameId>, StreamId> stream_ids_;
  std::vector<TaskId> last_task_;                 // per stream
  LargeVector<std::pair<TaskId, TaskId>> edges_;  // (task, prerequisite)
  LargeVector<std::pair<CommId, TaskId>> collective_posts_;
  std::vector<PointToPoint> sends_;
  std::vector<PointToPoint> recvs_;
  std::map<NameId, uint16_t> category_index_;
  std::map<std::vector<int32_t>, GroupId> group_ids_;
};

// Checks that every task can run: no cycle through dependencies, the order of in-order streams
// and collective rendezvous. The error shows one cycle, edge by edge. Exposed for tests; Build()
// calls it.
Status CheckAcyclic(const TaskGraph& graph);

}  // namespace dtsim::graph
