#include "traces/trace_link.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <unordered_map>
#include <vector>

#include "traces/chakra_attrs.h"

namespace dtsim::traces {
namespace {

using chakra::IntegerAttr;

bool IsHostOp(const HostEvent& event) {
  return event.kind == HostEventKind::kOp || event.kind == HostEventKind::kAnnotation;
}

uint64_t Micros(DurationNs duration) {
  return static_cast<uint64_t>(std::llround(static_cast<double>(duration.ns()) / 1e3));
}

uint64_t MicrosSinceEpoch(TimeNs time) { return time.ns() < 0 ? 0 : Micros(time - TimeNs::Zero()); }

// Per ET node, the Kineto host op of the same record function (kNone when unmatched).
std::vector<uint32_t> MatchHostOps(const ChakraTrace& et, const Trace& kineto,
                                   TraceLinkStats& stats) {
  const bool record_functions =
      std::any_of(kineto.host.begin(), kineto.host.end(),
                  [](const HostEvent& event) { return event.record_function >= 0; });
  stats.key = record_functions ? "Record function id" : "External id";
  std::unordered_map<int64_t, uint32_t> op_of_key;
  for (uint32_t i = 0; i < kineto.host.size(); ++i) {
    const HostEvent& event = kineto.host[i];
    const int64_t key = record_functions ? event.record_function : event.external_id;
    if (IsHostOp(event) && key >= 0) op_of_key.emplace(key, i);
  }
  std::vector<uint32_t> matched(et.nodes.size(), kNone);
  for (size_t n = 0; n < et.nodes.size(); ++n) {
    const ChakraNode& node = et.nodes[n];
    const std::optional<int64_t> rf_id = IntegerAttr(node, "rf_id");
    if (node.type == ChakraNodeType::kMetadata || !rf_id) continue;
    ++stats.host_ops;
    const auto op = op_of_key.find(*rf_id);
    if (op == op_of_key.end() || kineto.Name(kineto.host[op->second].name) != node.name) continue;
    matched[n] = op->second;
    ++stats.linked;
  }
  return matched;
}

// Per Kineto host event index of a matched op, the id of its ET node; per API call (by
// correlation id), the innermost matched op of its thread that contains its start.
std::unordered_map<int64_t, uint64_t> LaunchingNodes(
    const Trace& kineto, const std::unordered_map<uint32_t, uint64_t>& node_of_op) {
  struct Point {
    TimeNs time;
    int order;  // at one instant, an op's start before a call (the op contains it)
    uint32_t event;
  };
  std::unordered_map<uint32_t, std::vector<Point>> by_thread;
  for (const auto& [op, node] : node_of_op) {
    const HostEvent& event = kineto.host[op];
    by_thread[event.thread].push_back({event.start, 1, op});
  }
  for (uint32_t i = 0; i < kineto.host.size(); ++i) {
    const HostEvent& event = kineto.host[i];
    if (IsApiCall(event) && event.correlation >= 0) {
      by_thread[event.thread].push_back({event.start, 2, i});
    }
  }
  std::unordered_map<int64_t, uint64_t> node_of_call;
  for (auto& [thread, points] : by_thread) {
    std::sort(points.begin(), points.end(), [&](const Point& a, const Point& b) {
      if (a.time != b.time) return a.time < b.time;
      if (a.order != b.order) return a.order < b.order;
      // Of ops starting together, the longer (the parent) first.
      return kineto.host[a.event].duration > kineto.host[b.event].duration;
    });
    std::vector<uint32_t> open;  // the matched ops containing the sweep's time, innermost last
    for (const Point& point : points) {
      while (!open.empty() && kineto.host[open.back()].end() <= point.time) open.pop_back();
      if (point.order == 1) {
        open.push_back(point.event);
      } else if (!open.empty()) {
        node_of_call.emplace(kineto.host[point.event].correlation, node_of_op.at(open.back()));
      }
    }
  }
  return node_of_call;
}

}  // namespace

Expected<ChakraTrace> LinkExecutionTrace(const ChakraTrace& execution_trace, const Trace& kineto,
                                         TraceLinkStats& stats) {
  if (execution_trace.stats.form != "pytorch_execution_trace") {
    return Error(fmt::format("a PyTorch host execution trace is linked with a Kineto trace; "
                             "this is a Chakra trace in the {} form",
                             execution_trace.stats.form))
        .InFile(execution_trace.file);
  }
  if (const ChakraAttribute* pid = execution_trace.MetadataAttr("pid")) {
    const std::optional<int64_t> process = pid->AsInteger();
    if (process && std::none_of(kineto.threads.begin(), kineto.threads.end(),
                                [&](const HostThread& thread) { return thread.pid == *process; })) {
      return Error(fmt::format("the host execution trace is of process {}, and {} has no thread "
                               "of it: they are not of one run",
                               *process, kineto.file))
          .InFile(execution_trace.file);
    }
  }
  stats = {};
  const std::vector<uint32_t> matched = MatchHostOps(execution_trace, kineto, stats);
  // Ids are small integers and op names repeat: a few matches happen between unrelated runs.
  if (stats.linked * 2 < stats.host_ops || stats.linked == 0) {
    return Error(fmt::format("only {} of the host execution trace's {} ops have a Kineto op of the "
                             "same record function ({} and name) in {}: they are not of one run",
                             stats.linked, stats.host_ops, stats.key, kineto.file))
        .InFile(execution_trace.file);
  }
  ChakraTrace linked = execution_trace;
  std::unordered_map<uint64_t, size_t> index_of_id;
  for (size_t n = 0; n < linked.nodes.size(); ++n) index_of_id.emplace(linked.nodes[n].id, n);
  // Exclusive time: the op's own, less its matched children's.
  std::vector<DurationNs> exclusive(linked.nodes.size());
  for (size_t n = 0; n < linked.nodes.size(); ++n) {
    if (matched[n] != kNone) exclusive[n] = kineto.host[matched[n]].duration;
  }
  for (size_t n = 0; n < linked.nodes.size(); ++n) {
    const ChakraNode& node = linked.nodes[n];
    if (matched[n] == kNone || node.ctrl_deps.empty()) continue;
    const auto parent = index_of_id.find(node.ctrl_deps.front());
    if (parent != index_of_id.end() && matched[parent->second] != kNone) {
      exclusive[parent->second] -= kineto.host[matched[n]].duration;
    }
  }
  std::unordered_map<uint32_t, uint64_t> node_of_op;
  uint64_t next_id = 1;
  for (size_t n = 0; n < linked.nodes.size(); ++n) {
    ChakraNode& node = linked.nodes[n];
    next_id = std::max(next_id, node.id == UINT64_MAX ? UINT64_MAX : node.id + 1);
    if (matched[n] == kNone) continue;
    node.duration_micros = Micros(std::max(exclusive[n], DurationNs::Zero()));
    node.start_time_micros = MicrosSinceEpoch(kineto.host[matched[n]].start);
    node_of_op.emplace(matched[n], node.id);
  }
  if (next_id > UINT64_MAX - kineto.device.size()) {
    return Error("the host execution trace's node ids leave no room for the GPU ops' nodes")
        .InFile(execution_trace.file);
  }
  const std::unordered_map<int64_t, uint64_t> node_of_call = LaunchingNodes(kineto, node_of_op);
  std::vector<uint32_t> gpu_ops(kineto.device.size());
  for (uint32_t i = 0; i < gpu_ops.size(); ++i) gpu_ops[i] = i;
  std::stable_sort(gpu_ops.begin(), gpu_ops.end(), [&](uint32_t a, uint32_t b) {
    return kineto.device[a].start < kineto.device[b].start;
  });
  for (uint32_t i : gpu_ops) {
    const DeviceEvent& op = kineto.device[i];
    ChakraNode node;
    node.id = next_id++;
    node.name = std::string(kineto.Name(op.name));
    node.type = ChakraNodeType::kCompute;
    node.duration_micros = Micros(op.duration);
    node.start_time_micros = MicrosSinceEpoch(op.start);
    node.attrs = {ChakraAttribute::Bool("is_cpu_op", false),
                  ChakraAttribute::Integer("stream", AttributeType::kInt64, op.stream)};
    if (const auto launcher = node_of_call.find(op.correlation); launcher != node_of_call.end()) {
      node.data_deps = {launcher->second};
    } else {
      ++stats.gpu_ops_unlinked;
    }
    ++stats.gpu_ops;
    linked.nodes.push_back(std::move(node));
  }
  linked.CountNodes();
  return linked;
}

}  // namespace dtsim::traces
