#include "sim/graph/builder.h"

#include <fmt/format.h>

#include <algorithm>

#include "sim/base/check.h"

namespace dtsim::graph {

namespace {

// A collective group's ranks, sorted; checks that there are some, distinct and non-negative.
std::vector<int32_t> SortedGroup(std::span<const int32_t> ranks) {
  DTSIM_CHECK(!ranks.empty(), "empty collective group");
  std::vector<int32_t> sorted(ranks.begin(), ranks.end());
  std::sort(sorted.begin(), sorted.end());
  DTSIM_CHECK(sorted.front() >= 0, "negative rank in group");
  DTSIM_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(),
              "duplicate rank in group");
  return sorted;
}

}  // namespace

TaskGraphBuilder::TaskGraphBuilder() { graph_.categories_.push_back(NameId(0)); }

StreamId TaskGraphBuilder::Stream(int32_t rank, std::string_view name, StreamOrder order) {
  DTSIM_CHECK(rank >= 0, "negative rank");
  const NameId name_id = graph_.strings_.Intern(name);
  const auto [it, inserted] = stream_ids_.try_emplace(
      {rank, name_id}, StreamId(static_cast<uint32_t>(graph_.streams_.size())));
  if (inserted) {
    graph_.streams_.push_back({.rank = rank, .name = name_id, .order = order});
    last_task_.emplace_back();
    graph_.rank_count_ = std::max(graph_.rank_count_, rank + 1);
  }
  DTSIM_CHECK(graph_.streams_[it->second.value()].order == order,
              "a stream asked for with two orders");
  return it->second;
}

uint16_t TaskGraphBuilder::Category(std::string_view category) {
  const NameId id = graph_.strings_.Intern(category);
  const auto [it, inserted] =
      category_index_.try_emplace(id, static_cast<uint16_t>(graph_.categories_.size()));
  if (inserted) {
    DTSIM_CHECK(graph_.categories_.size() <= kMaxCategories, "more than 65534 task categories");
    graph_.categories_.push_back(id);
  }
  return it->second;
}

bool TaskGraphBuilder::HasRoomForCategory(std::string_view category) {
  // categories_[0] stands for "no category".
  if (category.empty() || graph_.categories_.size() <= kMaxCategories) return true;
  return category_index_.contains(graph_.strings_.Intern(category));
}

TaskId TaskGraphBuilder::Append(StreamId stream, TaskKind kind, std::string_view name,
                                std::string_view category, DurationNs duration) {
  return Append(stream, kind, graph_.strings_.Intern(name),
                category.empty() ? uint16_t{0} : Category(category), duration);
}

TaskId TaskGraphBuilder::Append(StreamId stream, TaskKind kind, NameId name, uint16_t category,
                                DurationNs duration) {
  DTSIM_CHECK(stream.value() < graph_.streams_.size(), "stream id from another builder");
  DTSIM_CHECK(duration >= DurationNs::Zero(), "negative task duration");
  DTSIM_CHECK(graph_.tasks_.size() < TaskId::kInvalidValue - 1, "too many tasks");
  const TaskId id(static_cast<uint32_t>(graph_.tasks_.size()));
  graph_.tasks_.push_back({.duration = duration,
                           .stream = stream,
                           .comm = CommId::Invalid(),
                           .name = name,
                           .category = category,
                           .kind = kind});
  ++graph_.streams_[stream.value()].task_count;
  last_task_[stream.value()] = id;
  if (!graph_.external_ids_.empty()) graph_.external_ids_.emplace_back();
  return id;
}

TaskId TaskGraphBuilder::LastTask(int32_t rank, std::string_view name) {
  const auto it = stream_ids_.find({rank, graph_.strings_.Intern(name)});
  return it == stream_ids_.end() ? TaskId::Invalid() : last_task_[it->second.value()];
}

TaskId TaskGraphBuilder::AddTask(StreamId stream, TaskKind kind, std::string_view name,
                                 std::string_view category, DurationNs duration) {
  DTSIM_CHECK(!IsCommunication(kind), "communication tasks have their own Add functions");
  return Append(stream, kind, name, category, duration);
}

TaskId TaskGraphBuilder::AddTask(StreamId stream, TaskKind kind, NameId name, uint16_t category,
                                 DurationNs duration) {
  DTSIM_CHECK(!IsCommunication(kind), "communication tasks have their own Add functions");
  DTSIM_CHECK(name.value() < graph_.strings_.size(), "name id from another builder");
  DTSIM_CHECK(category < graph_.categories_.size(), "category from another builder");
  return Append(stream, kind, name, category, duration);
}

GroupId TaskGraphBuilder::MakeGroup(std::span<const int32_t> ranks) {
  (void)SortedGroup(ranks);
  return Group(std::vector<int32_t>(ranks.begin(), ranks.end()));
}

CommId TaskGraphBuilder::AddCollective(CommKind kind, Bytes size_per_rank, GroupId members,
                                       GroupId priced) {
  DTSIM_CHECK(
      kind != CommKind::kSendRecv && kind != CommKind::kBroadcast && kind != CommKind::kReduce,
      "point-to-point and rooted collectives take AddSend/AddRecv or ranks");
  DTSIM_CHECK(size_per_rank.count() >= 0, "negative collective size");
  const size_t groups = graph_.group_offsets_.size() - 1;
  DTSIM_CHECK(members.value() < groups && priced.value() < groups, "group from another builder");
  if (checked_groups_ != std::pair{members, priced}) {
    const std::span<const int32_t> logical = graph_.group(priced);
    for (int32_t member : graph_.group(members)) {
      DTSIM_CHECK(std::find(logical.begin(), logical.end(), member) != logical.end(),
                  "a collective's logical group must contain its members");
    }
    checked_groups_ = std::pair{members, priced};
  }
  const CommId id(static_cast<uint32_t>(graph_.comms_.size()));
  graph_.comms_.push_back({.kind = kind,
                           .size = size_per_rank,
                           .group = members,
                           .priced_group = priced,
                           .root = -1,
                           .algorithm = NameId(0),
                           .label = NameId(0)});
  return id;
}

GroupId TaskGraphBuilder::Group(std::vector<int32_t> ranks) {
  const auto [it, inserted] = group_ids_.try_emplace(
      ranks, GroupId(static_cast<uint32_t>(graph_.group_offsets_.size() - 1)));
  if (inserted) {
    for (int32_t rank : ranks) graph_.rank_count_ = std::max(graph_.rank_count_, rank + 1);
    graph_.group_ranks_.insert(graph_.group_ranks_.end(), ranks.begin(), ranks.end());
    graph_.group_offsets_.push_back(static_cast<uint32_t>(graph_.group_ranks_.size()));
  }
  return it->second;
}

CommId TaskGraphBuilder::AddCollective(CommKind kind, Bytes size_per_rank,
                                       std::span<const int32_t> group, std::string_view label,
                                       std::string_view algorithm, int32_t root) {
  DTSIM_CHECK(kind != CommKind::kSendRecv, "use AddSend/AddRecv for point-to-point");
  DTSIM_CHECK(size_per_rank.count() >= 0, "negative collective size");
  const std::vector<int32_t> sorted = SortedGroup(group);
  const bool rooted = kind == CommKind::kBroadcast || kind == CommKind::kReduce;
  DTSIM_CHECK(!rooted || std::binary_search(sorted.begin(), sorted.end(), root),
              "broadcast/reduce root must be a group member");
  const CommId id(static_cast<uint32_t>(graph_.comms_.size()));
  const GroupId members = Group(std::vector<int32_t>(group.begin(), group.end()));
  graph_.comms_.push_back({.kind = kind,
                           .size = size_per_rank,
                           .group = members,
                           .priced_group = members,
                           .root = rooted ? root : -1,
                           .algorithm = graph_.strings_.Intern(algorithm),
                           .label = graph_.strings_.Intern(label)});
  return id;
}

void TaskGraphBuilder::PriceAs(CommId comm, std::span<const int32_t> logical_group) {
  DTSIM_CHECK(comm.value() < graph_.comms_.size(), "unknown collective id");
  std::vector<int32_t> logical(logical_group.begin(), logical_group.end());
  std::vector<int32_t> sorted = logical;
  std::sort(sorted.begin(), sorted.end());
  DTSIM_CHECK(!sorted.empty() && sorted.front() >= 0 &&
                  std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(),
              "a logical group needs distinct non-negative ranks");
  Communication& c = graph_.comms_[comm.value()];
  for (int32_t member : graph_.group(c.group)) {
    DTSIM_CHECK(std::binary_search(sorted.begin(), sorted.end(), member),
                "a collective's logical group must contain its members");
  }
  c.priced_group = Group(std::move(logical));
}

TaskId TaskGraphBuilder::AddCollectiveTask(StreamId stream, CommId comm, std::string_view name,
                                           std::string_view category) {
  DTSIM_CHECK(comm.value() < graph_.comms_.size(), "unknown collective id");
  const TaskId id = Append(stream, TaskKind::kCollective, name, category, DurationNs::Zero());
  graph_.tasks_[id.value()].comm = comm;
  collective_posts_.emplace_back(comm, id);
  return id;
}

TaskId TaskGraphBuilder::AddSend(StreamId stream, int32_t peer, Bytes size, int64_t tag,
                                 std::string_view name, std::string_view category, SendMode mode) {
  DTSIM_CHECK(peer >= 0 && size.count() >= 0, "bad send arguments");
  const TaskId id = Append(stream, TaskKind::kSend, name, category, DurationNs::Zero());
  sends_.push_back(
      {id, graph_.streams_[stream.value()].rank, peer, tag, size, mode == SendMode::kEager});
  return id;
}

TaskId TaskGraphBuilder::AddRecv(StreamId stream, int32_t peer, int64_t tag, std::string_view name,
                                 std::string_view category, std::optional<Bytes> expected_size) {
  DTSIM_CHECK(peer >= 0, "bad recv peer");
  const TaskId id = Append(stream, TaskKind::kRecv, name, category, DurationNs::Zero());
  recvs_.push_back({id, peer, graph_.streams_[stream.value()].rank, tag, expected_size});
  return id;
}

void TaskGraphBuilder::AddDependency(TaskId task, TaskId prerequisite) {
  DTSIM_CHECK(task.value() < graph_.tasks_.size() && prerequisite.value() < graph_.tasks_.size(),
              "dependency on a task id from another builder");
  edges_.emplace_back(task, prerequisite);
}

void TaskGraphBuilder::SetExternalId(TaskId task, std::string external_id) {
  if (graph_.external_ids_.empty()) graph_.external_ids_.resize(graph_.tasks_.size());
  graph_.external_ids_[task.value()] = std::move(external_id);
}

void TaskGraphBuilder::BuildStreams() {
  uint32_t offset = 0;
  for (graph::Stream& s : graph_.streams_) {
    s.first_task = offset;
    offset += s.task_count;
    s.task_count = 0;
  }
  graph_.stream_tasks_.resize(graph_.tasks_.size());
  for (uint32_t i = 0; i < graph_.tasks_.size(); ++i) {
    graph::Stream& s = graph_.streams_[graph_.tasks_[i].stream.value()];
    graph_.stream_tasks_[s.first_task + s.task_count++] = TaskId(i);
  }
}

// Both CSR arrays from the edge list: counting sort by task, then by prerequisite.
void TaskGraphBuilder::BuildAdjacency() {
  std::sort(edges_.begin(), edges_.end());
  edges_.erase(std::unique(edges_.begin(), edges_.end()), edges_.end());
  const size_t n = graph_.tasks_.size();
  graph_.dependency_offsets_.assign(n + 1, 0);
  graph_.successor_offsets_.assign(n + 1, 0);
  for (const auto& [task, prerequisite] : edges_) {
    ++graph_.dependency_offsets_[task.value() + 1];
    ++graph_.successor_offsets_[prerequisite.value() + 1];
  }
  for (size_t i = 0; i < n; ++i) {
    graph_.dependency_offsets_[i + 1] += graph_.dependency_offsets_[i];
    graph_.successor_offsets_[i + 1] += graph_.successor_offsets_[i];
  }
  graph_.dependencies_.resize(edges_.size());
  graph_.successors_.resize(edges_.size());
  std::vector<uint32_t> fill(graph_.successor_offsets_.begin(),
                             graph_.successor_offsets_.end() - 1);
  for (size_t e = 0; e < edges_.size(); ++e) {
    const auto [task, prerequisite] = edges_[e];
    graph_.dependencies_[e] = prerequisite;  // edges_ is sorted by task: CSR order already
    graph_.successors_[fill[prerequisite.value()]++] = task;
  }
  decltype(edges_)().swap(edges_);
}

Status TaskGraphBuilder::BuildCollectives() {
  // Bucket the posts by collective (a counting sort, stable: a collective's posts keep their
  // order), then check each against its group.
  std::vector<uint32_t> first(graph_.comms_.size() + 1, 0);
  for (const auto& [comm, task] : collective_posts_) ++first[comm.value() + 1];
  for (size_t c = 1; c < first.size(); ++c) first[c] += first[c - 1];
  std::vector<TaskId> posts(collective_posts_.size());
  {
    std::vector<uint32_t> fill(first.begin(), first.end() - 1);
    for (const auto& [comm, task] : collective_posts_) posts[fill[comm.value()]++] = task;
  }
  graph_.participants_.reserve(collective_posts_.size());
  // Per group, (rank, position in group) sorted by rank: O(log g) membership for groups of
  // 1000s; made once per group, which many collectives share.
  std::vector<std::vector<std::pair<int32_t, uint32_t>>> positions_of(graph_.group_count());
  std::vector<TaskId> by_position;
  for (uint32_t c = 0; c < graph_.comms_.size(); ++c) {
    Communication& comm = graph_.comms_[c];
    const std::span<const int32_t> group = graph_.group(comm.group);
    std::vector<std::pair<int32_t, uint32_t>>& positions = positions_of[comm.group.value()];
    if (positions.empty()) {
      positions.resize(group.size());
      for (uint32_t i = 0; i < group.size(); ++i) positions[i] = {group[i], i};
      std::sort(positions.begin(), positions.end());
    }
    by_position.assign(group.size(), TaskId::Invalid());
    for (uint32_t next = first[c]; next < first[c + 1]; ++next) {
      const TaskId task = posts[next];
      const int32_t rank = graph_.rank_of(task);
      const auto it = std::lower_bound(positions.begin(), positions.end(),
                                       std::pair<int32_t, uint32_t>(rank, 0));
      if (it == positions.end() || it->first != rank) {
        return Error(fmt::format("{} posts {}, but rank {} is not in its group",
                                 graph_.Describe(task), graph_.DescribeComm(CommId(c)), rank));
      }
      TaskId& slot = by_position[it->second];
      if (slot.valid()) {
        return Error(fmt::format("rank {} posts {} twice: {} and {}", rank,
                                 graph_.DescribeComm(CommId(c)), graph_.Describe(slot),
                                 graph_.Describe(task)));
      }
      slot = task;
    }
    std::vector<int32_t> missing;
    for (size_t i = 0; i < group.size(); ++i) {
      if (!by_position[i].valid()) missing.push_back(group[i]);
    }
    if (!missing.empty()) {
      return Error(fmt::format("{} is posted by only part of its group: rank{} {} never post{} it",
                               graph_.DescribeComm(CommId(c)), missing.size() > 1 ? "s" : "",
                               fmt::join(missing, ", "), missing.size() > 1 ? "" : "s"));
    }
    comm.first_participant = static_cast<uint32_t>(graph_.participants_.size());
    comm.participant_count = static_cast<uint32_t>(group.size());
    graph_.participants_.insert(graph_.participants_.end(), by_position.begin(), by_position.end());
  }
  return Status::Ok();
}

Error TaskGraphBuilder::Unmatched(const PointToPoint& lone, std::string_view partner,
                                  int32_t partner_rank) const {
  return Error(fmt::format(
      "{} has no matching {} {} (rank {} to rank {}, tag {}; pairs match "
      "in order)",
      graph_.Describe(lone.task), partner, partner_rank, lone.source, lone.destination, lone.tag));
}

Status TaskGraphBuilder::MatchPointToPoint() {
  const auto by_key = [](const PointToPoint& a, const PointToPoint& b) {
    return std::tie(a.source, a.destination, a.tag) < std::tie(b.source, b.destination, b.tag);
  };
  std::stable_sort(sends_.begin(), sends_.end(), by_key);
  std::stable_sort(recvs_.begin(), recvs_.end(), by_key);
  // Merge the two sorted lists: at each step the smaller key, if alone, has no partner.
  size_t s = 0;
  size_t r = 0;
  while (s < sends_.size() || r < recvs_.size()) {
    if (s == sends_.size() || (r < recvs_.size() && by_key(recvs_[r], sends_[s]))) {
      return Unmatched(recvs_[r], "send on rank", recvs_[r].source);
    }
    if (r == recvs_.size() || by_key(sends_[s], recvs_[r])) {
      return Unmatched(sends_[s], "recv on rank", sends_[s].destination);
    }
    const PointToPoint& send = sends_[s++];
    const PointToPoint& recv = recvs_[r++];
    if (recv.size.has_value() && *recv.size != *send.size) {
      return Error(fmt::format("{} expects {} B but its send {} carries {} B",
                               graph_.Describe(recv.task), recv.size->count(),
                               graph_.Describe(send.task), send.size->count()));
    }
    const CommId id(static_cast<uint32_t>(graph_.comms_.size()));
    const GroupId pair_group = Group({send.source, send.destination});
    graph_.comms_.push_back(
        {.kind = CommKind::kSendRecv,
         .size = *send.size,
         .group = pair_group,
         .priced_group = pair_group,
         .root = -1,
         .algorithm = NameId(0),
         .label = NameId(0),
         .first_participant = static_cast<uint32_t>(graph_.participants_.size()),
         .participant_count = 2,
         .eager = send.eager});
    graph_.participants_.push_back(send.task);
    graph_.participants_.push_back(recv.task);
    graph_.tasks_[send.task.value()].comm = id;
    graph_.tasks_[recv.task.value()].comm = id;
  }
  return Status::Ok();
}

void TaskGraphBuilder::SetMemoryBase(int32_t rank, int64_t bytes) {
  DTSIM_CHECK(rank >= 0, "memory base of a negative rank");
  const auto index = static_cast<size_t>(rank);
  if (graph_.memory_base_.size() <= index) graph_.memory_base_.resize(index + 1, 0);
  graph_.memory_base_[index] = bytes;
}

void TaskGraphBuilder::AddMemoryChange(TaskId task, int64_t bytes) {
  DTSIM_CHECK(task.value() < graph_.tasks_.size(), "memory change of an unknown task");
  graph_.memory_changes_.push_back({task, bytes});
}

Expected<TaskGraph> TaskGraphBuilder::Build() && {
  BuildStreams();
  BuildAdjacency();
  DTSIM_RETURN_IF_ERROR(BuildCollectives());
  DTSIM_RETURN_IF_ERROR(MatchPointToPoint());
  DTSIM_RETURN_IF_ERROR(CheckAcyclic(graph_));
  return std::move(graph_);
}

}  // namespace dtsim::graph
