// Chakra export: a task graph as one Chakra trace per rank (chakra_graph.h).
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

ChakraAttribute Int32Attr(std::string name, int64_t value) {
  return ChakraAttribute::Integer(std::move(name), AttributeType::kInt32, value);
}

std::vector<int64_t> Ranks(std::span<const int32_t> group) { return {group.begin(), group.end()}; }

void AddCommunicationAttrs(const graph::TaskGraph& graph, const graph::Task& task,
                           std::vector<ChakraAttribute>& attrs) {
  const graph::Communication& comm = graph.comm(task.comm);
  attrs.push_back(ChakraAttribute::Integer("comm_size", AttributeType::kInt64, comm.size.count()));
  attrs.push_back(
      ChakraAttribute::Integer(std::string(attr::kComm), AttributeType::kInt64, task.comm.value()));
  if (task.kind != TaskKind::kCollective) {
    const std::span<const int32_t> pair = graph.group(comm.group);
    attrs.push_back(Int32Attr("comm_src", pair[0]));
    attrs.push_back(Int32Attr("comm_dst", pair[1]));
    attrs.push_back(Int32Attr("comm_tag", task.comm.value()));  // unique per pair
    return;
  }
  if (comm.kind == graph::CommKind::kShift) {  // the receiving half (ShiftSendNode: the other)
    const int32_t rank = graph.stream(task.stream).rank;
    attrs.push_back(Int32Attr("comm_src", ShiftPeers(graph.group(comm.group), rank).first));
    attrs.push_back(Int32Attr("comm_dst", rank));
    attrs.push_back(Int32Attr("comm_tag", task.comm.value()));  // unique per pair
  } else {
    attrs.push_back(ChakraAttribute::Integer("comm_type", AttributeType::kInt64,
                                             static_cast<int64_t>(ChakraOfCommKind(comm.kind))));
  }
  attrs.push_back(ChakraAttribute::String("pg_name", ChakraGroupName(comm.group)));
  attrs.push_back(
      ChakraAttribute::Int64List(std::string(attr::kGroup), Ranks(graph.group(comm.group))));
  if (comm.priced_group != comm.group) {
    attrs.push_back(ChakraAttribute::Int64List(std::string(attr::kPricedGroup),
                                               Ranks(graph.group(comm.priced_group))));
  }
  if (comm.root >= 0) attrs.push_back(Int32Attr(std::string(attr::kRoot), comm.root));
  if (const std::string_view algorithm = graph.name(comm.algorithm); !algorithm.empty()) {
    attrs.push_back(ChakraAttribute::String(std::string(attr::kAlgorithm), std::string(algorithm)));
  }
  if (const std::string_view label = graph.name(comm.label); !label.empty()) {
    attrs.push_back(ChakraAttribute::String(std::string(attr::kLabel), std::string(label)));
  }
}

ChakraNode NodeOfTask(const graph::TaskGraph& graph, TaskId id, TaskId stream_predecessor) {
  const graph::Task& task = graph.task(id);
  const graph::Stream& stream = graph.stream(task.stream);
  ChakraNode node;
  node.id = id.value();
  node.name = graph.name(task.name);
  node.type = NodeTypeOf(graph, task);
  std::vector<int64_t> remote;
  for (const TaskId dep : graph.dependencies(id)) {
    if (graph.rank_of(dep) == stream.rank) {
      node.data_deps.push_back(dep.value());
    } else {
      remote.push_back(dep.value());
    }
  }
  const std::string_view stream_name = graph.name(stream.name);
  std::vector<ChakraAttribute>& attrs = node.attrs;
  if (!remote.empty()) {
    attrs.push_back(ChakraAttribute::Int64List(std::string(attr::kRemoteDeps), std::move(remote)));
  }
  attrs.push_back(ChakraAttribute::Bool("is_cpu_op", stream_name.starts_with("cpu")));
  attrs.push_back(ChakraAttribute::String(std::string(attr::kStream), std::string(stream_name)));
  attrs.push_back(
      ChakraAttribute::String(std::string(attr::kKind), std::string(TaskKindName(task.kind))));
  if (task.category != 0) {
    attrs.push_back(ChakraAttribute::String(std::string(attr::kCategory),
                                            std::string(graph.category_name(task.category))));
  }
  if (const std::string_view external = graph.external_id(id); !external.empty()) {
    attrs.push_back(ChakraAttribute::String(std::string(attr::kExternalId), std::string(external)));
  }
  if (graph::IsCommunication(task.kind)) {
    AddCommunicationAttrs(graph, task, attrs);
  } else {
    const int64_t ns = task.duration.ns();
    node.duration_micros =
        static_cast<uint64_t>((ns + kNanosecondsPerMicrosecond / 2) / kNanosecondsPerMicrosecond);
    attrs.push_back(
        ChakraAttribute::Integer(std::string(attr::kDurationNs), AttributeType::kInt64, ns));
  }
  const auto deps = graph.dependencies(id);
  if (stream_predecessor.valid() &&
      !std::binary_search(deps.begin(), deps.end(), stream_predecessor)) {
    node.data_deps.push_back(stream_predecessor.value());
    attrs.push_back(ChakraAttribute::Bool(std::string(attr::kStreamDep), true));
  }
  return node;
}

// The sending half of shift task `id` (`receive`, its receiving half): to the next member, with
// the same size, tag and dependencies, its id past every task's.
ChakraNode ShiftSendNode(const graph::TaskGraph& graph, TaskId id, const ChakraNode& receive) {
  const graph::Task& task = graph.task(id);
  const graph::Communication& comm = graph.comm(task.comm);
  const int32_t rank = graph.stream(task.stream).rank;
  ChakraNode send;
  send.id = graph.task_count() + id.value();
  send.name = receive.name;
  send.type = ChakraNodeType::kCommSend;
  send.data_deps = receive.data_deps;
  send.attrs = {
      ChakraAttribute::Bool("is_cpu_op", false),
      ChakraAttribute::Integer("comm_size", AttributeType::kInt64, comm.size.count()),
      Int32Attr("comm_src", rank),
      Int32Attr("comm_dst", ShiftPeers(graph.group(comm.group), rank).second),
      Int32Attr("comm_tag", task.comm.value()),
      ChakraAttribute::Integer(std::string(attr::kShiftSendOf), AttributeType::kInt64, id.value())};
  if (const ChakraAttribute* remote = receive.Attr(attr::kRemoteDeps))
    send.attrs.push_back(*remote);
  return send;
}

}  // namespace

std::string ChakraGroupName(graph::GroupId group) { return std::to_string(group.value() + 1); }

std::vector<ChakraTrace> ChakraTracesFromGraph(const graph::TaskGraph& graph) {
  std::vector<ChakraTrace> traces(static_cast<size_t>(graph.rank_count()));
  for (int32_t rank = 0; rank < graph.rank_count(); ++rank) {
    ChakraTrace& trace = traces[rank];
    trace.version = std::string(kChakraSchemaVersion);
    trace.metadata = {
        ChakraAttribute::String("producer", "dtsim"),
        ChakraAttribute::String(std::string(attr::kFormat), std::string(kChakraExportFormat.name)),
        ChakraAttribute::String(std::string(attr::kFormatVersion), kChakraExportFormat.Version()),
        ChakraAttribute::Integer("rank", AttributeType::kInt64, rank),
        ChakraAttribute::Integer("rank_count", AttributeType::kInt64, graph.rank_count())};
  }
  std::vector<TaskId> predecessor(graph.task_count());
  for (uint32_t s = 0; s < graph.stream_count(); ++s) {
    TaskId previous;
    for (const TaskId task : graph.stream_tasks(graph::StreamId(s))) {
      predecessor[task.value()] = previous;
      previous = task;
    }
  }
  for (uint32_t t = 0; t < graph.task_count(); ++t) {
    const TaskId id(t);
    std::vector<ChakraNode>& nodes = traces[graph.rank_of(id)].nodes;
    nodes.push_back(NodeOfTask(graph, id, predecessor[t]));
    if (IsShift(graph, graph.task(id))) nodes.push_back(ShiftSendNode(graph, id, nodes.back()));
  }
  for (ChakraTrace& trace : traces) trace.CountNodes();
  return traces;
}

}  // namespace dtsim::traces
