#include "sim/graph/task_graph.h"

#include <fmt/format.h>

#include "sim/base/strings.h"

namespace dtsim::graph {

std::string_view TaskGraph::external_id(TaskId id) const {
  return external_ids_.empty() ? std::string_view() : external_ids_[id.value()];
}

std::string TaskGraph::Describe(TaskId id) const {
  const Task& t = task(id);
  const Stream& s = stream(t.stream);
  const std::string_view external = external_id(id);
  const std::string label = external.empty() ? fmt::format("#{}", id.value()) : Quote(external);
  std::string out = fmt::format("task {} (rank {}, stream {}", label, s.rank, Quote(name(s.name)));
  if (!name(t.name).empty()) out += ", " + std::string(name(t.name));
  return out + ")";
}

std::string TaskGraph::DescribeComm(CommId id) const {
  const Communication& c = comm(id);
  const std::span<const int32_t> ranks = group(c.group);
  if (c.kind == CommKind::kSendRecv) {
    return fmt::format("send/recv of {} B from rank {} to rank {}", c.size.count(), ranks[0],
                       ranks[1]);
  }
  const std::string label =
      name(c.label).empty() ? fmt::format("#{}", id.value()) : Quote(name(c.label));
  return fmt::format("collective {} ({} of {} B over ranks [{}])", label, CommKindName(c.kind),
                     c.size.count(), fmt::join(ranks, ", "));
}

size_t TaskGraph::MemoryBytes() const {
  size_t bytes = sizeof(*this) + VectorBytes(tasks_) + VectorBytes(dependency_offsets_) +
                 VectorBytes(dependencies_) + VectorBytes(successor_offsets_) +
                 VectorBytes(successors_) + VectorBytes(streams_) + VectorBytes(stream_tasks_) +
                 VectorBytes(comms_) + VectorBytes(participants_) + VectorBytes(group_offsets_) +
                 VectorBytes(group_ranks_) + VectorBytes(categories_) + VectorBytes(external_ids_) +
                 VectorBytes(memory_base_) + VectorBytes(memory_changes_) + strings_.MemoryBytes();
  for (const std::string& id : external_ids_) bytes += id.capacity() > 15 ? id.capacity() : 0;
  return bytes;
}

}  // namespace dtsim::graph
