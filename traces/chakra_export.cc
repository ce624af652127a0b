// Chakra export: a task graph as one Chakra trace per rank (chakra_graph.h), node by node.
#include "traces/chakra_export.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "traces/chakra_attrs.h"
#include "traces/chakra_graph.h"

namespace dtsim::traces {
namespace {

using graph::TaskId;
using graph::TaskKind;
namespace attr = chakra::attr;
using chakra::kNanosecondsPerMicrosecond;

bool IsShift(const graph::TaskGraph& graph, const graph::Task& task) {
  return task.kind == TaskKind::kCollective &&
         graph.comm(task.comm).kind == graph::CommKind::kShift;
}

// The members a shift's member `rank` receives from and sends to: the previous and the next
// in the group's order (the first receiving from the last).
std::pair<int32_t, int32_t> ShiftPeers(std::span<const int32_t> group, int32_t rank) {
  const auto at = static_cast<size_t>(std::find(group.begin(), group.end(), rank) - group.begin());
  return {group[(at + group.size() - 1) % group.size()], group[(at + 1) % group.size()]};
}

ChakraNodeType NodeTypeOf(const graph::TaskGraph& graph, const graph::Task& task) {
  if (IsShift(graph, task)) return ChakraNodeType::kCommRecv;
  switch (task.kind) {
    case TaskKind::kCollective:
      return ChakraNodeType::kCommCollective;
    case TaskKind::kSend:
      return ChakraNodeType::kCommSend;
    case TaskKind::kRecv:
      return ChakraNodeType::kCommRecv;
    default:
      return ChakraNodeType::kCompute;
  }
}

// Sets a node's attributes in place, reusing the names and values a previous node left in the
// same slots: an export fills one ChakraNode millions of times, and building fresh attributes
// cost a dozen allocations a node. Finish() drops the slots this node did not use.
class AttrFiller {
 public:
  explicit AttrFiller(std::vector<ChakraAttribute>& attrs) : attrs_(attrs) {}

  void Integer(std::string_view name, AttributeType type, int64_t value) {
    Next(name, type).integers.assign(1, value);
  }
  void Int32(std::string_view name, int64_t value) { Integer(name, AttributeType::kInt32, value); }
  void Int64(std::string_view name, int64_t value) { Integer(name, AttributeType::kInt64, value); }
  void Bool(std::string_view name, bool value) {
    Integer(name, AttributeType::kBool, value ? 1 : 0);
  }
  void String(std::string_view name, std::string_view value) {
    ChakraAttribute& attr = Next(name, AttributeType::kString);
    attr.texts.resize(1);
    attr.texts[0].assign(value);
  }
  template <typename Int>
  void Int64List(std::string_view name, std::span<const Int> values) {
    Next(name, AttributeType::kInt64List).integers.assign(values.begin(), values.end());
  }
  // A copy of an attribute already made (a shift's remote dependencies on its sending node).
  void Copy(const ChakraAttribute& from) { Next(from.name, from.type) = from; }
  void Finish() { attrs_.resize(used_); }

 private:
  ChakraAttribute& Next(std::string_view name, AttributeType type) {
    if (used_ == attrs_.size()) attrs_.emplace_back();
    ChakraAttribute& attr = attrs_[used_++];
    attr.name.assign(name);
    attr.doc_string.clear();
    attr.type = type;
    attr.integers.clear();
    attr.reals.clear();
    attr.texts.clear();
    return attr;
  }

  std::vector<ChakraAttribute>& attrs_;
  size_t used_ = 0;
};

void AddCommunicationAttrs(const graph::TaskGraph& graph, const graph::Task& task,
                           AttrFiller& attrs) {
  const graph::Communication& comm = graph.comm(task.comm);
  attrs.Int64("comm_size", comm.size.count());
  attrs.Int64(attr::kComm, task.comm.value());
  if (task.kind != TaskKind::kCollective) {
    const std::span<const int32_t> pair = graph.group(comm.group);
    attrs.Int32("comm_src", pair[0]);
    attrs.Int32("comm_dst", pair[1]);
    attrs.Int32("comm_tag", task.comm.value());  // unique per pair
    return;
  }
  if (comm.kind == graph::CommKind::kShift) {  // the receiving half (ShiftSendNode: the other)
    const int32_t rank = graph.stream(task.stream).rank;
    attrs.Int32("comm_src", ShiftPeers(graph.group(comm.group), rank).first);
    attrs.Int32("comm_dst", rank);
    attrs.Int32("comm_tag", task.comm.value());  // unique per pair
  } else {
    attrs.Int64("comm_type", static_cast<int64_t>(ChakraOfCommKind(comm.kind)));
  }
  attrs.String("pg_name", ChakraGroupName(comm.group));
  attrs.Int64List(attr::kGroup, graph.group(comm.group));
  if (comm.priced_group != comm.group) {
    attrs.Int64List(attr::kPricedGroup, graph.group(comm.priced_group));
  }
  if (comm.root >= 0) attrs.Int32(attr::kRoot, comm.root);
  if (const std::string_view algorithm = graph.name(comm.algorithm); !algorithm.empty()) {
    attrs.String(attr::kAlgorithm, algorithm);
  }
  if (const std::string_view label = graph.name(comm.label); !label.empty()) {
    attrs.String(attr::kLabel, label);
  }
}

// Makes `node` task `id`'s node (`remote`: scratch for its dependencies on other ranks).
void FillNodeOfTask(const graph::TaskGraph& graph, TaskId id, TaskId stream_predecessor,
                    ChakraNode& node, std::vector<int64_t>& remote) {
  const graph::Task& task = graph.task(id);
  const graph::Stream& stream = graph.stream(task.stream);
  node.id = id.value();
  node.name.assign(graph.name(task.name));
  node.type = NodeTypeOf(graph, task);
  node.duration_micros = 0;
  node.data_deps.clear();
  remote.clear();
  for (const TaskId dep : graph.dependencies(id)) {
    if (graph.rank_of(dep) == stream.rank) {
      node.data_deps.push_back(dep.value());
    } else {
      remote.push_back(dep.value());
    }
  }
  const std::string_view stream_name = graph.name(stream.name);
  AttrFiller attrs(node.attrs);
  if (!remote.empty()) attrs.Int64List(attr::kRemoteDeps, std::span<const int64_t>(remote));
  attrs.Bool("is_cpu_op", stream_name.starts_with("cpu"));
  attrs.String(attr::kStream, stream_name);
  attrs.String(attr::kKind, TaskKindName(task.kind));
  if (task.category != 0) attrs.String(attr::kCategory, graph.category_name(task.category));
  if (const std::string_view external = graph.external_id(id); !external.empty()) {
    attrs.String(attr::kExternalId, external);
  }
  if (graph::IsCommunication(task.kind)) {
    AddCommunicationAttrs(graph, task, attrs);
  } else {
    const int64_t ns = task.duration.ns();
    node.duration_micros =
        static_cast<uint64_t>((ns + kNanosecondsPerMicrosecond / 2) / kNanosecondsPerMicrosecond);
    attrs.Int64(attr::kDurationNs, ns);
  }
  const auto deps = graph.dependencies(id);
  if (stream_predecessor.valid() &&
      !std::binary_search(deps.begin(), deps.end(), stream_predecessor)) {
    node.data_deps.push_back(stream_predecessor.value());
    attrs.Bool(attr::kStreamDep, true);
  }
  attrs.Finish();
}

// Makes `send` the sending half of shift task `id` (`receive`, its receiving half's node): to
// the next member, with the same size, tag and dependencies, its id past every task's.
void FillShiftSendNode(const graph::TaskGraph& graph, TaskId id, const ChakraNode& receive,
                       ChakraNode& send) {
  const graph::Task& task = graph.task(id);
  const graph::Communication& comm = graph.comm(task.comm);
  const int32_t rank = graph.stream(task.stream).rank;
  send.id = graph.task_count() + id.value();
  send.name = receive.name;
  send.type = ChakraNodeType::kCommSend;
  send.duration_micros = 0;
  send.data_deps = receive.data_deps;
  AttrFiller attrs(send.attrs);
  attrs.Bool("is_cpu_op", false);
  attrs.Int64("comm_size", comm.size.count());
  attrs.Int32("comm_src", rank);
  attrs.Int32("comm_dst", ShiftPeers(graph.group(comm.group), rank).second);
  attrs.Int32("comm_tag", task.comm.value());
  attrs.Int64(attr::kShiftSendOf, id.value());
  if (const ChakraAttribute* remote = receive.Attr(attr::kRemoteDeps)) attrs.Copy(*remote);
  attrs.Finish();
}

// The tasks of one rank's streams in task order, each with the task before it on its stream.
struct RankTask {
  TaskId task;
  TaskId stream_predecessor;
};

std::vector<RankTask> RankTasks(const graph::TaskGraph& graph,
                                std::span<const graph::StreamId> streams) {
  std::vector<RankTask> tasks;
  for (const graph::StreamId stream : streams) {
    TaskId previous;
    for (const TaskId task : graph.stream_tasks(stream)) {
      tasks.push_back({task, previous});
      previous = task;
    }
  }
  std::sort(tasks.begin(), tasks.end(),
            [](const RankTask& a, const RankTask& b) { return a.task < b.task; });
  return tasks;
}

}  // namespace

std::string ChakraGroupName(graph::GroupId group) { return std::to_string(group.value() + 1); }

ChakraExporter::ChakraExporter(const graph::TaskGraph& graph)
    : graph_(graph), streams_of_rank_(static_cast<size_t>(graph.rank_count())) {
  for (uint32_t s = 0; s < graph.stream_count(); ++s) {
    const graph::StreamId stream(s);
    streams_of_rank_[static_cast<size_t>(graph.stream(stream).rank)].push_back(stream);
  }
}

ChakraMetadata ChakraExporter::Metadata(int32_t rank) const {
  return {
      std::string(kChakraSchemaVersion),
      {ChakraAttribute::String("producer", "dtsim"),
       ChakraAttribute::String(std::string(attr::kFormat), std::string(kChakraExportFormat.name)),
       ChakraAttribute::String(std::string(attr::kFormatVersion), kChakraExportFormat.Version()),
       ChakraAttribute::Integer("rank", AttributeType::kInt64, rank),
       ChakraAttribute::Integer("rank_count", AttributeType::kInt64, graph_.rank_count())}};
}

void ChakraExporter::ForEachNode(int32_t rank,
                                 const std::function<void(const ChakraNode&)>& visit) const {
  ChakraNode node;
  ChakraNode send;
  std::vector<int64_t> remote;
  for (const RankTask& t : RankTasks(graph_, streams_of_rank_[static_cast<size_t>(rank)])) {
    FillNodeOfTask(graph_, t.task, t.stream_predecessor, node, remote);
    visit(node);
    if (IsShift(graph_, graph_.task(t.task))) {
      FillShiftSendNode(graph_, t.task, node, send);
      visit(send);
    }
  }
}

std::vector<ChakraTrace> ChakraTracesFromGraph(const graph::TaskGraph& graph) {
  const ChakraExporter exporter(graph);
  std::vector<ChakraTrace> traces(static_cast<size_t>(graph.rank_count()));
  for (int32_t rank = 0; rank < graph.rank_count(); ++rank) {
    ChakraTrace& trace = traces[static_cast<size_t>(rank)];
    ChakraMetadata metadata = exporter.Metadata(rank);
    trace.version = std::move(metadata.version);
    trace.metadata = std::move(metadata.attrs);
    exporter.ForEachNode(rank, [&](const ChakraNode& node) { trace.nodes.push_back(node); });
    trace.CountNodes();
  }
  return traces;
}

}  // namespace dtsim::traces
