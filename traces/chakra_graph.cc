#include "traces/chakra_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <queue>
#include <unordered_map>

#include "sim/base/json_reader.h"
#include "sim/graph/builder.h"
#include "sim/graph/graph_json.h"
#include "traces/kineto_reader.h"

namespace dtsim::traces {
namespace {

using graph::CommId;
using graph::TaskId;
using graph::TaskKind;

// Attributes dtsim writes beside Chakra's own.
namespace attr {
constexpr std::string_view kStream = "dtsim.stream";
constexpr std::string_view kKind = "dtsim.kind";
constexpr std::string_view kCategory = "dtsim.category";
constexpr std::string_view kDurationNs = "dtsim.duration_ns";
constexpr std::string_view kComm = "dtsim.comm";
constexpr std::string_view kGroup = "dtsim.group";
constexpr std::string_view kPricedGroup = "dtsim.priced_group";
constexpr std::string_view kRoot = "dtsim.root";
constexpr std::string_view kAlgorithm = "dtsim.algorithm";
constexpr std::string_view kLabel = "dtsim.label";
constexpr std::string_view kExternalId = "dtsim.external_id";
// The last data_dep is the stream predecessor only (not a dependency of the task).
constexpr std::string_view kStreamDep = "dtsim.stream_dep";
// Dependencies on tasks of other ranks (by global node id): Chakra's data_deps are per file.
constexpr std::string_view kRemoteDeps = "dtsim.remote_deps";
constexpr std::string_view kFormat = "dtsim.format";
constexpr std::string_view kFormatVersion = "dtsim.format_version";
}  // namespace attr

constexpr std::string_view kHostCategory = "host";
constexpr std::string_view kKernelCategory = "kernel";
constexpr std::string_view kNcclCategory = "nccl";
constexpr std::string_view kMemoryCategory = "memcpy";
constexpr int64_t kNanosecondsPerMicrosecond = 1000;

std::string_view StringAttr(const ChakraNode& node, std::string_view name) {
  const ChakraAttribute* a = node.Attr(name);
  return a != nullptr ? a->AsString().value_or("") : "";
}

std::optional<int64_t> IntegerAttr(const ChakraNode& node, std::string_view name) {
  const ChakraAttribute* a = node.Attr(name);
  return a != nullptr ? a->AsInteger() : std::nullopt;
}

// ---- export ---------------------------------------------------------------------------

ChakraNodeType NodeTypeOf(TaskKind kind) {
  switch (kind) {
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

std::vector<int64_t> Ranks(std::span<const int32_t> group) { return {group.begin(), group.end()}; }

void AddCommunicationAttrs(const graph::TaskGraph& graph, const graph::Task& task,
                           std::vector<ChakraAttribute>& attrs) {
  const graph::Communication& comm = graph.comm(task.comm);
  const auto int32 = [](std::string name, int64_t value) {
    return ChakraAttribute::Integer(std::move(name), AttributeType::kInt32, value);
  };
  attrs.push_back(ChakraAttribute::Integer("comm_size", AttributeType::kInt64, comm.size.count()));
  attrs.push_back(
      ChakraAttribute::Integer(std::string(attr::kComm), AttributeType::kInt64, task.comm.value()));
  if (task.kind != TaskKind::kCollective) {
    const std::span<const int32_t> pair = graph.group(comm.group);
    attrs.push_back(int32("comm_src", pair[0]));
    attrs.push_back(int32("comm_dst", pair[1]));
    attrs.push_back(int32("comm_tag", task.comm.value()));  // unique per pair
    return;
  }
  attrs.push_back(ChakraAttribute::Integer("comm_type", AttributeType::kInt64,
                                           static_cast<int64_t>(ChakraOfCommKind(comm.kind))));
  attrs.push_back(ChakraAttribute::String("pg_name", std::to_string(comm.group.value())));
  attrs.push_back(
      ChakraAttribute::Int64List(std::string(attr::kGroup), Ranks(graph.group(comm.group))));
  if (comm.priced_group != comm.group) {
    attrs.push_back(ChakraAttribute::Int64List(std::string(attr::kPricedGroup),
                                               Ranks(graph.group(comm.priced_group))));
  }
  if (comm.root >= 0) attrs.push_back(int32(std::string(attr::kRoot), comm.root));
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
  node.type = NodeTypeOf(task.kind);
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

// ---- import ---------------------------------------------------------------------------

bool IsRooted(graph::CommKind kind) {
  return kind == graph::CommKind::kBroadcast || kind == graph::CommKind::kReduce;
}

struct NodeRef {
  size_t trace = 0;
  size_t node = 0;
};

class ChakraGraphBuilder {
 public:
  ChakraGraphBuilder(std::span<const ChakraTrace> traces, const ChakraCommGroups& comm_groups)
      : traces_(traces), comm_groups_(comm_groups) {}

  Expected<ChakraGraph> Build() && {
    DTSIM_RETURN_IF_ERROR(AssignRanks());
    written_by_dtsim_ = std::all_of(traces_.begin(), traces_.end(), [](const auto& t) {
      const ChakraAttribute* format = t.MetadataAttr(attr::kFormat);
      return format != nullptr && format->AsString() == kChakraExportFormat.name;
    });
    DTSIM_RETURN_IF_ERROR(IndexNodes());
    DTSIM_RETURN_IF_ERROR(OrderNodes());
    DTSIM_RETURN_IF_ERROR(written_by_dtsim_ ? CreateExportedCollectives() : MatchCollectives());
    for (const NodeRef& ref : order_) DTSIM_RETURN_IF_ERROR(AddTask(ref));
    AddDependencies();
    Expected<graph::TaskGraph> graph = std::move(builder_).Build();
    if (!graph.ok()) return std::move(graph).error();
    return ChakraGraph{.graph = std::move(graph).value(),
                       .comm_durations = std::move(comm_durations_),
                       .written_by_dtsim = written_by_dtsim_,
                       .stats = stats_};
  }

 private:
  Error NodeError(const NodeRef& ref, std::string message) const {
    const ChakraTrace& trace = traces_[ref.trace];
    return Error(std::move(message),
                 fmt::format("node {} (id {})", ref.node, trace.nodes[ref.node].id))
        .InFile(trace.file);
  }

  Status AssignRanks() {
    std::map<int32_t, size_t> seen;
    for (size_t t = 0; t < traces_.size(); ++t) {
      const ChakraAttribute* rank_attr = traces_[t].MetadataAttr("rank");
      const int64_t rank =
          rank_attr && rank_attr->AsInteger() ? *rank_attr->AsInteger() : static_cast<int64_t>(t);
      if (rank < 0 || rank > graph::kMaxRank) {
        return Error("rank out of range", "GlobalMetadata.rank", std::to_string(rank))
            .InFile(traces_[t].file);
      }
      if (const auto [it, inserted] = seen.emplace(static_cast<int32_t>(rank), t); !inserted) {
        return Error(fmt::format("rank {} is also the rank of {}", rank, traces_[it->second].file),
                     "GlobalMetadata.rank")
            .InFile(traces_[t].file);
      }
      ranks_.push_back(static_cast<int32_t>(rank));
    }
    for (const auto& [rank, trace] : seen) all_ranks_.push_back(rank);
    return Status::Ok();
  }

  Status IndexNodes() {
    ids_.resize(traces_.size());
    tasks_.resize(traces_.size());
    collective_of_.resize(traces_.size());
    for (size_t t = 0; t < traces_.size(); ++t) {
      const std::vector<ChakraNode>& nodes = traces_[t].nodes;
      ids_[t].reserve(nodes.size());
      tasks_[t].resize(nodes.size());
      collective_of_[t].resize(nodes.size());
      for (size_t n = 0; n < nodes.size(); ++n) {
        if (const auto [it, inserted] = ids_[t].emplace(nodes[n].id, n); !inserted) {
          return NodeError(
              {t, n}, fmt::format("node id {} is also the id of node {}", nodes[n].id, it->second));
        }
      }
      stats_.nodes += static_cast<int64_t>(nodes.size());
    }
    return Status::Ok();
  }

  // dtsim's files: all ranks' nodes merged by id (= the original task order). Others: each
  // rank in a topological order of its data_deps, ties broken by node id.
  Status OrderNodes() {
    if (written_by_dtsim_) {
      for (size_t t = 0; t < traces_.size(); ++t) {
        for (size_t n = 0; n < traces_[t].nodes.size(); ++n) order_.push_back({t, n});
      }
      std::stable_sort(order_.begin(), order_.end(),
                       [&](const NodeRef& a, const NodeRef& b) { return Node(a).id < Node(b).id; });
      return Status::Ok();
    }
    for (size_t t = 0; t < traces_.size(); ++t) DTSIM_RETURN_IF_ERROR(TopologicalOrder(t));
    return Status::Ok();
  }

  Status TopologicalOrder(size_t t) {
    const std::vector<ChakraNode>& nodes = traces_[t].nodes;
    std::vector<uint32_t> waiting(nodes.size(), 0);
    std::vector<std::vector<uint32_t>> successors(nodes.size());
    for (size_t n = 0; n < nodes.size(); ++n) {
      for (const uint64_t dep : nodes[n].data_deps) {
        const auto it = ids_[t].find(dep);
        if (it == ids_[t].end()) continue;  // dangling: counted and dropped in AddDependencies
        successors[it->second].push_back(static_cast<uint32_t>(n));
        ++waiting[n];
      }
    }
    using Entry = std::pair<uint64_t, uint32_t>;  // (id, node)
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> ready;
    for (size_t n = 0; n < nodes.size(); ++n) {
      if (waiting[n] == 0) ready.emplace(nodes[n].id, static_cast<uint32_t>(n));
    }
    size_t placed = 0;
    while (!ready.empty()) {
      const uint32_t n = ready.top().second;
      ready.pop();
      order_.push_back({t, n});
      ++placed;
      for (const uint32_t next : successors[n]) {
        if (--waiting[next] == 0) ready.emplace(nodes[next].id, next);
      }
    }
    if (placed == nodes.size()) return Status::Ok();
    std::vector<std::string> stuck;
    for (size_t n = 0; n < nodes.size() && stuck.size() < 5; ++n) {
      if (waiting[n] > 0) stuck.push_back(std::to_string(nodes[n].id));
    }
    return Error(fmt::format("the data_deps of {} nodes form a cycle (among them ids {})",
                             nodes.size() - placed, fmt::join(stuck, ", ")))
        .InFile(traces_[t].file);
  }

  const ChakraNode& Node(const NodeRef& ref) const { return traces_[ref.trace].nodes[ref.node]; }

  // The collective a node of another tool's trace performs: a GPU COMM_COLL_NODE with a
  // comm_type, or with an NCCL kernel name.
  std::optional<graph::CommKind> ForeignCollective(const ChakraNode& node) const {
    if (node.type != ChakraNodeType::kCommCollective || node.is_cpu_op()) return std::nullopt;
    if (const std::optional<int64_t> type = IntegerAttr(node, "comm_type");
        type && *type >= 0 && *type < kChakraCollectiveCount) {
      return CommKindOfChakra(static_cast<ChakraCollective>(*type));
    }
    const std::optional<graph::CommKind> kind = NcclKernelKind(node.name);
    if (kind && *kind != graph::CommKind::kSendRecv) return kind;
    return std::nullopt;
  }

  Bytes CommSize(const ChakraNode& node) const {
    return Bytes(std::max<int64_t>(0, IntegerAttr(node, "comm_size").value_or(0)));
  }

  // A foreign collective's communicator: the comm group its pg_name names, else (no comm
  // groups, no pg_name, or one the groups do not list, counted) every rank given.
  Expected<std::string> CommunicatorOf(const NodeRef& ref) {
    const std::string_view pg = StringAttr(Node(ref), "pg_name");
    if (comm_groups_.empty() || pg.empty()) return std::string();
    const auto group = comm_groups_.find(std::string(pg));
    if (group == comm_groups_.end()) {
      ++stats_.collectives_outside_groups;
      return std::string();
    }
    if (std::find(group->second.begin(), group->second.end(), ranks_[ref.trace]) ==
        group->second.end()) {
      return NodeError(ref, fmt::format("a collective of comm group \"{}\" ({}), which does not "
                                        "list this trace's rank {}",
                                        pg, fmt::join(group->second, ", "), ranks_[ref.trace]));
    }
    return std::string(pg);
  }

  // One communicator's collectives, the k-th of each member rank together (ASTRA-sim's order
  // matching).
  struct Communicator {
    std::vector<int32_t> members;  // the ranks given that belong to it, in group order
    std::vector<int32_t> logical;  // the whole group, when ranks of it are not given
    std::vector<CommId> comms;
    std::vector<graph::CommKind> kinds;
    std::map<size_t, size_t> posted;  // per trace
  };

  Communicator MakeCommunicator(const std::string& name) const {
    if (name.empty()) return {.members = all_ranks_};
    Communicator communicator;
    for (const int32_t rank : comm_groups_.at(name)) {
      if (std::binary_search(all_ranks_.begin(), all_ranks_.end(), rank)) {
        communicator.members.push_back(rank);
      }
    }
    if (communicator.members.size() < comm_groups_.at(name).size()) {
      communicator.logical = comm_groups_.at(name);
    }
    return communicator;
  }

  Status MatchCollectives() {
    std::map<std::string, Communicator> communicators;
    for (const NodeRef& ref : order_) {
      const ChakraNode& node = Node(ref);
      const std::optional<graph::CommKind> kind = ForeignCollective(node);
      if (!kind) continue;
      DTSIM_ASSIGN_OR_RETURN(const std::string name, CommunicatorOf(ref));
      auto it = communicators.find(name);
      if (it == communicators.end()) it = communicators.emplace(name, MakeCommunicator(name)).first;
      Communicator& c = it->second;
      const size_t k = c.posted[ref.trace]++;
      if (k == c.comms.size()) {
        // Chakra has no root field: a broadcast or reduce is rooted at the group's first rank.
        const CommId comm = builder_.AddCollective(*kind, CommSize(node), c.members, node.name, {},
                                                   IsRooted(*kind) ? c.members.front() : -1);
        if (!c.logical.empty()) builder_.PriceAs(comm, c.logical);
        c.comms.push_back(comm);
        c.kinds.push_back(*kind);
        comm_durations_.emplace_back(0);
        ++stats_.collectives;
      } else if (c.kinds[k] != *kind) {
        return NodeError(ref,
                         fmt::format("collective #{} is a {} here but a {} on another rank", k,
                                     graph::CommKindName(*kind), graph::CommKindName(c.kinds[k])));
      }
      DurationNs& measured = comm_durations_[c.comms[k].value()];
      measured = std::max(measured, Microseconds(static_cast<int64_t>(node.duration_micros)));
      collective_of_[ref.trace][ref.node] = c.comms[k];
    }
    for (const auto& [name, c] : communicators) {
      for (size_t t = 0; t < traces_.size(); ++t) {
        if (std::find(c.members.begin(), c.members.end(), ranks_[t]) == c.members.end()) continue;
        const size_t posted = c.posted.contains(t) ? c.posted.at(t) : 0;
        if (posted != c.comms.size()) {
          return Error(fmt::format("posts {} collectives{} where another rank posts {}: the "
                                   "ranks' traces do not belong together",
                                   posted,
                                   name.empty() ? "" : fmt::format(" of comm group \"{}\"", name),
                                   c.comms.size()))
              .InFile(traces_[t].file);
        }
      }
    }
    return Status::Ok();
  }

  Expected<std::vector<int32_t>> GroupAttr(const NodeRef& ref, std::string_view name) const {
    const ChakraAttribute* a = Node(ref).Attr(name);
    if (a == nullptr || a->type != AttributeType::kInt64List || a->integers.empty()) {
      return NodeError(ref, fmt::format("a collective without its {} attribute", name));
    }
    std::vector<int64_t> sorted = a->integers;
    std::sort(sorted.begin(), sorted.end());
    if (sorted.front() < 0 || sorted.back() > graph::kMaxRank ||
        std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
      return NodeError(ref,
                       fmt::format("{} must list distinct ranks in 0..{}", name, graph::kMaxRank));
    }
    return std::vector<int32_t>(a->integers.begin(), a->integers.end());
  }

  // dtsim's files name every collective's id, group and pricing: recreate them in id order.
  Status CreateExportedCollectives() {
    std::map<int64_t, NodeRef> first;
    for (const NodeRef& ref : order_) {
      if (Node(ref).type != ChakraNodeType::kCommCollective) continue;
      const std::optional<int64_t> comm = IntegerAttr(Node(ref), attr::kComm);
      if (!comm) return NodeError(ref, "a collective without its dtsim.comm attribute");
      first.emplace(*comm, ref);
    }
    for (const auto& [comm_id, ref] : first) {
      const ChakraNode& node = Node(ref);
      const std::optional<int64_t> type = IntegerAttr(node, "comm_type");
      if (!type || *type < 0 || *type >= kChakraCollectiveCount) {
        return NodeError(ref, "comm_type is missing or not a CollectiveCommType");
      }
      DTSIM_ASSIGN_OR_RETURN(const std::vector<int32_t> group, GroupAttr(ref, attr::kGroup));
      const graph::CommKind kind = CommKindOfChakra(static_cast<ChakraCollective>(*type));
      const int64_t root = IntegerAttr(node, attr::kRoot).value_or(-1);
      if (IsRooted(kind) && std::find(group.begin(), group.end(), root) == group.end()) {
        return NodeError(ref, fmt::format("a {} needs dtsim.root naming a member of its group",
                                          graph::CommKindName(kind)));
      }
      const CommId id =
          builder_.AddCollective(kind, CommSize(node), group, StringAttr(node, attr::kLabel),
                                 StringAttr(node, attr::kAlgorithm), static_cast<int32_t>(root));
      if (node.Attr(attr::kPricedGroup) != nullptr) {
        DTSIM_ASSIGN_OR_RETURN(const std::vector<int32_t> priced,
                               GroupAttr(ref, attr::kPricedGroup));
        for (const int32_t member : group) {
          if (std::find(priced.begin(), priced.end(), member) == priced.end()) {
            return NodeError(ref, "dtsim.priced_group must contain every member of dtsim.group");
          }
        }
        builder_.PriceAs(id, priced);
      }
      exported_comms_[comm_id] = id;
      ++stats_.collectives;
    }
    for (const NodeRef& ref : order_) {
      if (Node(ref).type != ChakraNodeType::kCommCollective) continue;
      collective_of_[ref.trace][ref.node] =
          exported_comms_.at(*IntegerAttr(Node(ref), attr::kComm));
    }
    return Status::Ok();
  }

  std::string StreamName(const ChakraNode& node) const {
    if (const std::string_view name = StringAttr(node, attr::kStream); !name.empty()) {
      return std::string(name);
    }
    const std::optional<int64_t> stream = IntegerAttr(node, "stream");
    const std::optional<int64_t> tid = IntegerAttr(node, "tid");
    if (node.is_cpu_op() || node.type == ChakraNodeType::kMetadata) {
      return tid ? fmt::format("cpu tid {}", *tid) : "cpu";
    }
    if (stream) return fmt::format("gpu stream {}", *stream);
    return tid ? fmt::format("gpu stream {}", *tid) : "gpu";
  }

  DurationNs NodeDuration(const ChakraNode& node) const {
    // Durations from a file are bounded like the Kineto reader's (~2.3 years), so that sums of
    // them stay far from int64 overflow.
    constexpr int64_t kMaxNs = int64_t{1} << 56;
    if (const std::optional<int64_t> ns = IntegerAttr(node, attr::kDurationNs)) {
      return DurationNs(std::clamp<int64_t>(*ns, 0, kMaxNs));
    }
    constexpr uint64_t kMaxMicros = kMaxNs / kNanosecondsPerMicrosecond;
    return Microseconds(static_cast<int64_t>(std::min(node.duration_micros, kMaxMicros)));
  }

  // The kind and category of a node of another tool's trace.
  std::pair<TaskKind, std::string_view> ForeignKind(const ChakraNode& node) const {
    if (node.is_cpu_op() || node.type == ChakraNodeType::kMetadata) {
      return {TaskKind::kDelay, kHostCategory};
    }
    switch (node.type) {
      case ChakraNodeType::kMemLoad:
      case ChakraNodeType::kMemStore:
        return {TaskKind::kMemcpy, kMemoryCategory};
      case ChakraNodeType::kCommSend:
        return {TaskKind::kSend, kNcclCategory};
      case ChakraNodeType::kCommRecv:
        return {TaskKind::kRecv, kNcclCategory};
      case ChakraNodeType::kCommCollective:
        return {ForeignCollective(node) ? TaskKind::kCollective : TaskKind::kCompute,
                kNcclCategory};
      default:
        return {TaskKind::kCompute, kKernelCategory};
    }
  }

  Status AddTask(const NodeRef& ref) {
    const ChakraNode& node = Node(ref);
    const int32_t rank = ranks_[ref.trace];
    const graph::StreamId stream = builder_.Stream(rank, StreamName(node));
    auto [kind, category] = ForeignKind(node);
    if (written_by_dtsim_) {
      const std::optional<TaskKind> named = graph::TaskKindFromName(StringAttr(node, attr::kKind));
      if (!named) return NodeError(ref, "dtsim.kind is missing or not a task kind");
      kind = *named;
      category = StringAttr(node, attr::kCategory);
      if (!builder_.HasRoomForCategory(category)) {
        return NodeError(ref, fmt::format("more than {} distinct dtsim.category values",
                                          graph::TaskGraphBuilder::kMaxCategories));
      }
    }
    TaskId task;
    if (kind == TaskKind::kCollective) {
      const CommId comm = collective_of_[ref.trace][ref.node];
      if (!comm.valid()) {
        return NodeError(ref, "dtsim.kind says collective but the node is no COMM_COLL_NODE");
      }
      task = builder_.AddCollectiveTask(stream, comm, node.name, category);
    } else if (kind == TaskKind::kSend || kind == TaskKind::kRecv) {
      DTSIM_ASSIGN_OR_RETURN(task, AddPointToPoint(ref, stream, kind, category));
    } else {
      task = builder_.AddTask(stream, kind, node.name, category, NodeDuration(node));
    }
    (kind == TaskKind::kDelay ? stats_.host_tasks : stats_.gpu_tasks) += 1;
    if (const std::string_view external = StringAttr(node, attr::kExternalId); !external.empty()) {
      builder_.SetExternalId(task, std::string(external));
    } else if (!written_by_dtsim_) {
      builder_.SetExternalId(task, fmt::format("{}:{}", rank, node.id));
    }
    tasks_[ref.trace][ref.node] = task;
    return Status::Ok();
  }

  Expected<TaskId> AddPointToPoint(const NodeRef& ref, graph::StreamId stream, TaskKind kind,
                                   std::string_view category) {
    const ChakraNode& node = Node(ref);
    const int32_t rank = ranks_[ref.trace];
    const std::optional<int64_t> peer =
        IntegerAttr(node, kind == TaskKind::kSend ? "comm_dst" : "comm_src");
    if (!peer || *peer < 0 || *peer > graph::kMaxRank || *peer == rank) {
      return NodeError(ref, fmt::format("a {} needs {} naming another rank",
                                        kind == TaskKind::kSend ? "send" : "recv",
                                        kind == TaskKind::kSend ? "comm_dst" : "comm_src"));
    }
    const int64_t tag = IntegerAttr(node, "comm_tag").value_or(0);
    ++stats_.point_to_point;
    if (kind == TaskKind::kSend) {
      return builder_.AddSend(stream, static_cast<int32_t>(*peer), CommSize(node), tag, node.name,
                              category);
    }
    return builder_.AddRecv(stream, static_cast<int32_t>(*peer), tag, node.name, category);
  }

  void AddDependencies() {
    for (const NodeRef& ref : order_) {
      const ChakraNode& node = Node(ref);
      const TaskId task = tasks_[ref.trace][ref.node];
      size_t count = node.data_deps.size();
      // dtsim's own stream-order edge repeats what the stream already says.
      if (node.Attr(attr::kStreamDep) != nullptr && count > 0) --count;
      for (size_t d = 0; d < count; ++d) {
        const auto it = ids_[ref.trace].find(node.data_deps[d]);
        if (it == ids_[ref.trace].end()) {
          ++stats_.dangling_dependencies;
          continue;
        }
        builder_.AddDependency(task, tasks_[ref.trace][it->second]);
        ++stats_.dependencies;
      }
      if (const ChakraAttribute* remote = node.Attr(attr::kRemoteDeps);
          written_by_dtsim_ && remote) {
        for (const int64_t id : remote->integers) AddRemoteDependency(task, id);
      }
    }
  }

  // dtsim's node ids are task indices, unique over all ranks.
  void AddRemoteDependency(TaskId task, int64_t id) {
    for (size_t t = 0; t < traces_.size(); ++t) {
      const auto it = ids_[t].find(static_cast<uint64_t>(id));
      if (it == ids_[t].end()) continue;
      builder_.AddDependency(task, tasks_[t][it->second]);
      ++stats_.dependencies;
      return;
    }
    ++stats_.dangling_dependencies;
  }

  std::span<const ChakraTrace> traces_;
  std::vector<int32_t> ranks_;                             // per trace
  std::vector<int32_t> all_ranks_;                         // sorted
  std::vector<std::unordered_map<uint64_t, size_t>> ids_;  // per trace: node id → index
  std::vector<NodeRef> order_;
  // Per trace, per node: its task, and the collective it posts (invalid when none).
  std::vector<std::vector<TaskId>> tasks_;
  std::vector<std::vector<CommId>> collective_of_;
  const ChakraCommGroups& comm_groups_;
  std::map<int64_t, CommId> exported_comms_;
  graph::TaskGraphBuilder builder_;
  std::vector<DurationNs> comm_durations_;
  bool written_by_dtsim_ = false;
  ChakraGraphStats stats_;
};

}  // namespace

Expected<ChakraGraph> BuildChakraGraph(std::span<const ChakraTrace> ranks,
                                       const ChakraCommGroups& comm_groups) {
  if (ranks.empty()) return Error("no Chakra traces to build a graph from");
  return ChakraGraphBuilder(ranks, comm_groups).Build();
}

Expected<ChakraCommGroups> ReadChakraCommGroups(const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(const Json json, ReadJsonFile(path));
  if (!json.is_object()) {
    return Error("a comm group file is an object of group names to rank lists", "",
                 JsonValueForError(json))
        .InFile(path);
  }
  ChakraCommGroups groups;
  for (const auto& [name, ranks] : json.items()) {
    const std::string key = JsonChildPath("", name);
    if (!ranks.is_array() || ranks.empty()) {
      return Error("must be a non-empty array of ranks", key, JsonValueForError(ranks))
          .InFile(path);
    }
    std::vector<int32_t>& group = groups[name];
    for (size_t i = 0; i < ranks.size(); ++i) {
      Expected<int64_t> rank = JsonToInt(ranks[i], JsonIndexPath(key, i), 0, graph::kMaxRank);
      if (!rank.ok()) return std::move(rank).error().InFile(path);
      if (std::find(group.begin(), group.end(), *rank) != group.end()) {
        return Error("lists a rank twice", JsonIndexPath(key, i), std::to_string(*rank))
            .InFile(path);
      }
      group.push_back(static_cast<int32_t>(*rank));
    }
  }
  return groups;
}

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
    traces[graph.rank_of(id)].nodes.push_back(NodeOfTask(graph, id, predecessor[t]));
  }
  for (ChakraTrace& trace : traces) trace.CountNodes();
  return traces;
}

}  // namespace dtsim::traces
