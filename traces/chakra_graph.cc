#include "traces/chakra_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <unordered_map>

#include "sim/base/json_reader.h"
#include "sim/graph/builder.h"
#include "sim/graph/graph_json.h"
#include "traces/chakra_attrs.h"
#include "traces/kineto_reader.h"

namespace dtsim::traces {
namespace {

using graph::CommId;
using graph::TaskId;
using graph::TaskKind;
namespace attr = chakra::attr;
using chakra::IntegerAttr;
using chakra::kNanosecondsPerMicrosecond;
using chakra::StringAttr;

// The categories of other tools' nodes.
constexpr std::string_view kHostCategory = "host";
constexpr std::string_view kKernelCategory = "kernel";
constexpr std::string_view kNcclCategory = "nccl";
constexpr std::string_view kMemoryCategory = "memcpy";

std::string ProducerName(const ChakraConventions& conventions) {
  return conventions.producer.empty() ? "another tool" : conventions.producer;
}

bool IsRooted(graph::CommKind kind) {
  return kind == graph::CommKind::kBroadcast || kind == graph::CommKind::kReduce;
}

struct NodeRef {
  size_t trace = 0;
  size_t node = 0;
};

// The nodes of the ranks' traces, indexed: each trace's rank, its node ids, and the order the
// graph's tasks are made in — dtsim's files all ranks' nodes merged by id (the original task
// order); others each rank in a topological order of its data_deps, ties broken by node id.
class ChakraNodes {
 public:
  static Expected<ChakraNodes> Index(std::span<const ChakraTrace> traces) {
    ChakraNodes nodes(traces);
    DTSIM_RETURN_IF_ERROR(nodes.AssignRanks());
    nodes.written_by_dtsim_ = std::all_of(traces.begin(), traces.end(), [](const auto& t) {
      const ChakraAttribute* format = t.MetadataAttr(attr::kFormat);
      return format != nullptr && format->AsString() == kChakraExportFormat.name;
    });
    DTSIM_RETURN_IF_ERROR(nodes.IndexNodes());
    DTSIM_RETURN_IF_ERROR(nodes.OrderNodes());
    return nodes;
  }

  std::span<const ChakraTrace> traces() const { return traces_; }
  const ChakraNode& Node(const NodeRef& ref) const { return traces_[ref.trace].nodes[ref.node]; }
  int32_t rank(size_t trace) const { return ranks_[trace]; }
  const std::vector<int32_t>& all_ranks() const { return all_ranks_; }  // sorted
  const std::vector<NodeRef>& order() const { return order_; }
  // The order tasks are made in, which is a ready-first stream's priority: dtsim's files as
  // order(); others each rank's nodes by id (ASTRA-sim issues ready nodes by id).
  const std::vector<NodeRef>& creation_order() const { return written_by_dtsim_ ? order_ : by_id_; }
  bool written_by_dtsim() const { return written_by_dtsim_; }
  // The index of the node with id `id` in trace `trace`.
  std::optional<size_t> Find(size_t trace, uint64_t id) const {
    const auto it = ids_[trace].find(id);
    return it == ids_[trace].end() ? std::nullopt : std::optional<size_t>(it->second);
  }

  Error NodeError(const NodeRef& ref, std::string message) const {
    const ChakraTrace& trace = traces_[ref.trace];
    return Error(std::move(message),
                 fmt::format("node {} (id {})", ref.node, trace.nodes[ref.node].id))
        .InFile(trace.file);
  }

 private:
  explicit ChakraNodes(std::span<const ChakraTrace> traces) : traces_(traces) {}

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
    for (size_t t = 0; t < traces_.size(); ++t) {
      const std::vector<ChakraNode>& nodes = traces_[t].nodes;
      ids_[t].reserve(nodes.size());
      for (size_t n = 0; n < nodes.size(); ++n) {
        if (const auto [it, inserted] = ids_[t].emplace(nodes[n].id, n); !inserted) {
          return NodeError(
              {t, n}, fmt::format("node id {} is also the id of node {}", nodes[n].id, it->second));
        }
      }
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
    for (size_t t = 0; t < traces_.size(); ++t) {
      DTSIM_RETURN_IF_ERROR(TopologicalOrder(t));
      const size_t first = by_id_.size();
      for (size_t n = 0; n < traces_[t].nodes.size(); ++n) by_id_.push_back({t, n});
      std::sort(by_id_.begin() + static_cast<std::ptrdiff_t>(first), by_id_.end(),
                [&](const NodeRef& a, const NodeRef& b) { return Node(a).id < Node(b).id; });
    }
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

  std::span<const ChakraTrace> traces_;
  std::vector<int32_t> ranks_;                             // per trace
  std::vector<int32_t> all_ranks_;                         // sorted
  std::vector<std::unordered_map<uint64_t, size_t>> ids_;  // per trace: node id → index
  std::vector<NodeRef> order_;
  std::vector<NodeRef> by_id_;  // other tools' traces: each rank's nodes by id
  bool written_by_dtsim_ = false;
};

// The collective a node of another tool's trace performs: a GPU COMM_COLL_NODE with a
// comm_type, or with an NCCL kernel name.
std::optional<graph::CommKind> ForeignCollective(const ChakraNode& node) {
  if (node.type != ChakraNodeType::kCommCollective || node.is_cpu_op()) return std::nullopt;
  if (const std::optional<int64_t> type = IntegerAttr(node, "comm_type");
      type && *type >= 0 && *type < kChakraCollectiveCount) {
    return CommKindOfChakra(static_cast<ChakraCollective>(*type));
  }
  const std::optional<graph::CommKind> kind = NcclKernelKind(node.name);
  if (kind && *kind != graph::CommKind::kSendRecv) return kind;
  return std::nullopt;
}

// comm_size in bytes, `unit` bytes to what it counts (an element, in STAGE's traces);
// saturating.
Bytes CommSize(const ChakraNode& node, int64_t unit = 1) {
  const int64_t size = std::max<int64_t>(0, IntegerAttr(node, "comm_size").value_or(0));
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  return Bytes(size > kMax / unit ? kMax : size * unit);
}

// The graph's collectives and the node that posts each: dtsim's files name every collective's
// id, group and pricing; other tools' are matched across the ranks of a communicator by order.
class ChakraCollectives {
 public:
  ChakraCollectives(const ChakraNodes& nodes, const ChakraCommGroups& comm_groups,
                    int64_t size_unit, graph::TaskGraphBuilder& builder, ChakraGraphStats& stats)
      : nodes_(nodes),
        comm_groups_(comm_groups),
        size_unit_(size_unit),
        builder_(&builder),
        stats_(&stats) {
    for (const ChakraTrace& trace : nodes.traces()) collective_of_.emplace_back(trace.nodes.size());
  }

  Status Create() {
    return nodes_.written_by_dtsim() ? CreateExportedCollectives() : MatchCollectives();
  }
  // The collective node `ref` posts (invalid when none).
  CommId Of(const NodeRef& ref) const { return collective_of_[ref.trace][ref.node]; }
  // Per CommId: the longest duration its nodes recorded.
  std::vector<DurationNs> TakeDurations() && { return std::move(comm_durations_); }

 private:
  // A foreign collective's communicator: the comm group its pg_name names, else (no comm
  // groups, no pg_name, or one the groups do not list, counted) every rank given.
  Expected<std::string> CommunicatorOf(const NodeRef& ref) {
    const std::string_view pg = StringAttr(nodes_.Node(ref), "pg_name");
    if (comm_groups_.empty() || pg.empty()) return std::string();
    const auto group = comm_groups_.find(std::string(pg));
    if (group == comm_groups_.end()) {
      ++stats_->collectives_outside_groups;
      return std::string();
    }
    if (std::find(group->second.begin(), group->second.end(), nodes_.rank(ref.trace)) ==
        group->second.end()) {
      return nodes_.NodeError(
          ref, fmt::format("a collective of comm group \"{}\" ({}), which does not "
                           "list this trace's rank {}",
                           pg, fmt::join(group->second, ", "), nodes_.rank(ref.trace)));
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
    if (name.empty()) return {.members = nodes_.all_ranks()};
    Communicator communicator;
    for (const int32_t rank : comm_groups_.at(name)) {
      if (std::binary_search(nodes_.all_ranks().begin(), nodes_.all_ranks().end(), rank)) {
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
    for (const NodeRef& ref : nodes_.order()) {
      const ChakraNode& node = nodes_.Node(ref);
      const std::optional<graph::CommKind> kind = ForeignCollective(node);
      if (!kind) continue;
      DTSIM_ASSIGN_OR_RETURN(const std::string name, CommunicatorOf(ref));
      auto it = communicators.find(name);
      if (it == communicators.end()) it = communicators.emplace(name, MakeCommunicator(name)).first;
      Communicator& c = it->second;
      const size_t k = c.posted[ref.trace]++;
      if (k == c.comms.size()) {
        // Chakra has no root field: a broadcast or reduce is rooted at the group's first rank.
        const CommId comm =
            builder_->AddCollective(*kind, CommSize(node, size_unit_), c.members, node.name, {},
                                    IsRooted(*kind) ? c.members.front() : -1);
        if (!c.logical.empty()) builder_->PriceAs(comm, c.logical);
        c.comms.push_back(comm);
        c.kinds.push_back(*kind);
        comm_durations_.emplace_back(0);
        ++stats_->collectives;
      } else if (c.kinds[k] != *kind) {
        return nodes_.NodeError(
            ref, fmt::format("collective #{} is a {} here but a {} on another rank", k,
                             graph::CommKindName(*kind), graph::CommKindName(c.kinds[k])));
      }
      DurationNs& measured = comm_durations_[c.comms[k].value()];
      measured = std::max(measured, Microseconds(static_cast<int64_t>(node.duration_micros)));
      collective_of_[ref.trace][ref.node] = c.comms[k];
    }
    for (const auto& [name, c] : communicators) {
      for (size_t t = 0; t < nodes_.traces().size(); ++t) {
        if (std::find(c.members.begin(), c.members.end(), nodes_.rank(t)) == c.members.end())
          continue;
        const size_t posted = c.posted.contains(t) ? c.posted.at(t) : 0;
        if (posted != c.comms.size()) {
          return Error(fmt::format("posts {} collectives{} where another rank posts {}: the "
                                   "ranks' traces do not belong together",
                                   posted,
                                   name.empty() ? "" : fmt::format(" of comm group \"{}\"", name),
                                   c.comms.size()))
              .InFile(nodes_.traces()[t].file);
        }
      }
    }
    return Status::Ok();
  }

  Expected<std::vector<int32_t>> GroupAttr(const NodeRef& ref, std::string_view name) const {
    const ChakraAttribute* a = nodes_.Node(ref).Attr(name);
    if (a == nullptr || a->type != AttributeType::kInt64List || a->integers.empty()) {
      return nodes_.NodeError(ref, fmt::format("a collective without its {} attribute", name));
    }
    std::vector<int64_t> sorted = a->integers;
    std::sort(sorted.begin(), sorted.end());
    if (sorted.front() < 0 || sorted.back() > graph::kMaxRank ||
        std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
      return nodes_.NodeError(
          ref, fmt::format("{} must list distinct ranks in 0..{}", name, graph::kMaxRank));
    }
    return std::vector<int32_t>(a->integers.begin(), a->integers.end());
  }

  // In dtsim's files: a collective's node, or a shift's receiving half (a COMM_RECV_NODE whose
  // dtsim.kind says collective; chakra_attrs.h).
  static bool PostsExportedCollective(const ChakraNode& node) {
    return node.type == ChakraNodeType::kCommCollective ||
           (node.type == ChakraNodeType::kCommRecv &&
            StringAttr(node, attr::kKind) == graph::TaskKindName(TaskKind::kCollective));
  }

  // dtsim's files name every collective's id, group and pricing: recreate them in id order.
  Status CreateExportedCollectives() {
    std::map<int64_t, NodeRef> first;
    std::map<int64_t, CommId> exported;
    for (const NodeRef& ref : nodes_.order()) {
      if (!PostsExportedCollective(nodes_.Node(ref))) continue;
      const std::optional<int64_t> comm = IntegerAttr(nodes_.Node(ref), attr::kComm);
      if (!comm) return nodes_.NodeError(ref, "a collective without its dtsim.comm attribute");
      first.emplace(*comm, ref);
    }
    for (const auto& [comm_id, ref] : first) {
      const ChakraNode& node = nodes_.Node(ref);
      DTSIM_ASSIGN_OR_RETURN(const graph::CommKind kind, ExportedKind(ref));
      DTSIM_ASSIGN_OR_RETURN(const std::vector<int32_t> group, GroupAttr(ref, attr::kGroup));
      if (kind == graph::CommKind::kShift && group.size() < 2) {
        return nodes_.NodeError(ref, "a shift needs a dtsim.group of at least 2 ranks");
      }
      const int64_t root = IntegerAttr(node, attr::kRoot).value_or(-1);
      if (IsRooted(kind) && std::find(group.begin(), group.end(), root) == group.end()) {
        return nodes_.NodeError(ref,
                                fmt::format("a {} needs dtsim.root naming a member of its group",
                                            graph::CommKindName(kind)));
      }
      const CommId id =
          builder_->AddCollective(kind, CommSize(node), group, StringAttr(node, attr::kLabel),
                                  StringAttr(node, attr::kAlgorithm), static_cast<int32_t>(root));
      if (node.Attr(attr::kPricedGroup) != nullptr) {
        DTSIM_ASSIGN_OR_RETURN(const std::vector<int32_t> priced,
                               GroupAttr(ref, attr::kPricedGroup));
        for (const int32_t member : group) {
          if (std::find(priced.begin(), priced.end(), member) == priced.end()) {
            return nodes_.NodeError(ref,
                                    "dtsim.priced_group must contain every member of dtsim.group");
          }
        }
        builder_->PriceAs(id, priced);
      }
      exported[comm_id] = id;
      ++stats_->collectives;
    }
    for (const NodeRef& ref : nodes_.order()) {
      if (!PostsExportedCollective(nodes_.Node(ref))) continue;
      collective_of_[ref.trace][ref.node] =
          exported.at(*IntegerAttr(nodes_.Node(ref), attr::kComm));
    }
    return Status::Ok();
  }

  // A collective node's comm_type, or a shift for the receiving half of one.
  Expected<graph::CommKind> ExportedKind(const NodeRef& ref) const {
    const ChakraNode& node = nodes_.Node(ref);
    if (node.type == ChakraNodeType::kCommRecv) return graph::CommKind::kShift;
    const std::optional<int64_t> type = IntegerAttr(node, "comm_type");
    if (!type || *type < 0 || *type >= kChakraCollectiveCount) {
      return nodes_.NodeError(ref, "comm_type is missing or not a CollectiveCommType");
    }
    return CommKindOfChakra(static_cast<ChakraCollective>(*type));
  }

  const ChakraNodes& nodes_;
  const ChakraCommGroups& comm_groups_;
  int64_t size_unit_;  // bytes to a unit of another tool's comm_size
  graph::TaskGraphBuilder* builder_;
  ChakraGraphStats* stats_;
  std::vector<std::vector<CommId>> collective_of_;  // per trace, per node
  std::vector<DurationNs> comm_durations_;
};

// The task graph of indexed Chakra nodes: a task per node on its stream, the collectives and
// point-to-point pairs, then the data_deps (dtsim's remote ones too) as dependencies.
class ChakraGraphBuilder {
 public:
  ChakraGraphBuilder(const ChakraNodes& nodes, const ChakraImportOptions& options,
                     ChakraConventions conventions)
      : nodes_(nodes),
        options_(options),
        conventions_(std::move(conventions)),
        size_unit_(conventions_.sizes_in_elements
                       ? options.element_bytes.value_or(kDefaultChakraElementBytes)
                       : 1),
        collectives_(nodes, options.comm_groups, size_unit_, builder_, stats_) {
    for (const ChakraTrace& trace : nodes.traces()) {
      tasks_.emplace_back(trace.nodes.size());
      stats_.nodes += static_cast<int64_t>(trace.nodes.size());
    }
  }

  Expected<ChakraGraph> Build() && {
    DTSIM_RETURN_IF_ERROR(collectives_.Create());
    for (const NodeRef& ref : nodes_.creation_order()) DTSIM_RETURN_IF_ERROR(AddTask(ref));
    AddDependencies();
    Expected<graph::TaskGraph> graph = std::move(builder_).Build();
    if (!graph.ok()) return std::move(graph).error();
    return ChakraGraph{.graph = std::move(graph).value(),
                       .comm_durations = std::move(collectives_).TakeDurations(),
                       .written_by_dtsim = nodes_.written_by_dtsim(),
                       .conventions = conventions_,
                       .element_bytes = conventions_.sizes_in_elements ? size_unit_ : 0,
                       .stats = stats_};
  }

 private:
  // The stream a node runs on. dtsim's files name theirs, in order, as simulated. Another
  // tool's node runs as ASTRA-sim runs it, on a ready-first resource: host ops on their
  // thread's, GPU ops on their CUDA stream's, and, in traces that name neither (STAGE's,
  // ASTRA-sim's examples), computation on "gpu" and communication on "gpu comm" — ASTRA-sim's
  // separate compute and communication resources (workload/HardwareResource.cc). Receives
  // hold no resource in ASTRA-sim: they go on an unbounded stream beside their own, whose name
  // (" recv" appended) no ready-first stream has. Another tool's `dtsim.stream` attribute is
  // ignored, so no file can ask for one stream in two orders.
  graph::StreamId StreamOf(const ChakraNode& node, int32_t rank) {
    if (nodes_.written_by_dtsim()) {
      const std::string_view name = StringAttr(node, attr::kStream);
      return builder_.Stream(rank, name.empty() ? ForeignStreamName(node) : std::string(name));
    }
    if (node.type == ChakraNodeType::kCommRecv) {
      return builder_.Stream(rank, ForeignStreamName(node) + " recv",
                             graph::StreamOrder::kUnbounded);
    }
    return builder_.Stream(rank, ForeignStreamName(node), graph::StreamOrder::kReadyFirst);
  }

  static std::string ForeignStreamName(const ChakraNode& node) {
    const std::optional<int64_t> stream = IntegerAttr(node, "stream");
    const std::optional<int64_t> tid = IntegerAttr(node, "tid");
    if (node.is_cpu_op() || node.type == ChakraNodeType::kMetadata) {
      return tid ? fmt::format("cpu tid {}", *tid) : "cpu";
    }
    if (stream || tid) return fmt::format("gpu stream {}", stream ? *stream : *tid);
    return node.type == ChakraNodeType::kCompute ? "gpu" : "gpu comm";
  }

  DurationNs NodeDuration(const ChakraNode& node) {
    // Durations from a file are bounded like the Kineto reader's (~2.3 years), so that sums of
    // them stay far from int64 overflow.
    constexpr int64_t kMaxNs = int64_t{1} << 56;
    if (const std::optional<int64_t> ns = IntegerAttr(node, attr::kDurationNs)) {
      return DurationNs(std::clamp<int64_t>(*ns, 0, kMaxNs));
    }
    // Another tool's compute node without a duration (STAGE's, ASTRA-sim's roofline inputs):
    // priced from its work when the caller can.
    if (node.duration_micros == 0 && node.type == ChakraNodeType::kCompute &&
        !nodes_.written_by_dtsim()) {
      if (const std::optional<ChakraComputeWork> work =
              ChakraNodeWork(node, conventions_, size_unit_)) {
        if (!options_.price_compute) {
          ++stats_.compute_unpriced;
          return DurationNs(0);
        }
        ++stats_.compute_priced;
        return std::clamp(options_.price_compute(*work), DurationNs(0), DurationNs(kMaxNs));
      }
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
    const ChakraNode& node = nodes_.Node(ref);
    // A shift's sending half: its receiving half stands for the whole shift.
    if (nodes_.written_by_dtsim() && node.Attr(attr::kShiftSendOf) != nullptr) return Status::Ok();
    const int32_t rank = nodes_.rank(ref.trace);
    const graph::StreamId stream = StreamOf(node, rank);
    auto [kind, category] = ForeignKind(node);
    if (nodes_.written_by_dtsim()) {
      const std::optional<TaskKind> named = graph::TaskKindFromName(StringAttr(node, attr::kKind));
      if (!named) return nodes_.NodeError(ref, "dtsim.kind is missing or not a task kind");
      kind = *named;
      category = StringAttr(node, attr::kCategory);
      if (!builder_.HasRoomForCategory(category)) {
        return nodes_.NodeError(ref, fmt::format("more than {} distinct dtsim.category values",
                                                 graph::TaskGraphBuilder::kMaxCategories));
      }
    }
    TaskId task;
    if (kind == TaskKind::kCollective) {
      const CommId comm = collectives_.Of(ref);
      if (!comm.valid()) {
        return nodes_.NodeError(ref,
                                "dtsim.kind says collective but the node is no COMM_COLL_NODE "
                                "(nor a shift's COMM_RECV_NODE)");
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
    } else if (!nodes_.written_by_dtsim()) {
      builder_.SetExternalId(task, fmt::format("{}:{}", rank, node.id));
    }
    tasks_[ref.trace][ref.node] = task;
    return Status::Ok();
  }

  Expected<TaskId> AddPointToPoint(const NodeRef& ref, graph::StreamId stream, TaskKind kind,
                                   std::string_view category) {
    const ChakraNode& node = nodes_.Node(ref);
    const int32_t rank = nodes_.rank(ref.trace);
    const std::optional<int64_t> peer =
        IntegerAttr(node, kind == TaskKind::kSend ? "comm_dst" : "comm_src");
    if (!peer || *peer < 0 || *peer > graph::kMaxRank || *peer == rank) {
      return nodes_.NodeError(ref, fmt::format("a {} needs {} naming another rank",
                                               kind == TaskKind::kSend ? "send" : "recv",
                                               kind == TaskKind::kSend ? "comm_dst" : "comm_src"));
    }
    const int64_t tag = IntegerAttr(node, "comm_tag").value_or(0);
    ++stats_.point_to_point;
    if (kind == TaskKind::kSend) {
      // Another tool's sends complete as ASTRA-sim completes them, when their data has left
      // (non-blocking); dtsim's own are the rendezvous it simulated.
      return builder_.AddSend(
          stream, static_cast<int32_t>(*peer), CommSize(node, size_unit_), tag, node.name, category,
          nodes_.written_by_dtsim() ? graph::TaskGraphBuilder::SendMode::kRendezvous
                                    : graph::TaskGraphBuilder::SendMode::kEager);
    }
    return builder_.AddRecv(stream, static_cast<int32_t>(*peer), tag, node.name, category);
  }

  void AddDependencies() {
    for (const NodeRef& ref : nodes_.order()) {
      const ChakraNode& node = nodes_.Node(ref);
      const TaskId task = tasks_[ref.trace][ref.node];
      if (!task.valid()) continue;  // a shift's sending half (AddTask)
      size_t count = node.data_deps.size();
      // dtsim's own stream-order edge repeats what the stream already says.
      if (node.Attr(attr::kStreamDep) != nullptr && count > 0) --count;
      for (size_t d = 0; d < count; ++d) {
        const std::optional<size_t> dep = nodes_.Find(ref.trace, node.data_deps[d]);
        if (!dep || !tasks_[ref.trace][*dep].valid()) {
          ++stats_.dangling_dependencies;
          continue;
        }
        builder_.AddDependency(task, tasks_[ref.trace][*dep]);
        ++stats_.dependencies;
      }
      if (const ChakraAttribute* remote = node.Attr(attr::kRemoteDeps);
          nodes_.written_by_dtsim() && remote) {
        for (const int64_t id : remote->integers) AddRemoteDependency(task, id);
      }
    }
  }

  // dtsim's node ids are task indices, unique over all ranks.
  void AddRemoteDependency(TaskId task, int64_t id) {
    for (size_t t = 0; t < nodes_.traces().size(); ++t) {
      const std::optional<size_t> dep = nodes_.Find(t, static_cast<uint64_t>(id));
      if (!dep || !tasks_[t][*dep].valid()) continue;
      builder_.AddDependency(task, tasks_[t][*dep]);
      ++stats_.dependencies;
      return;
    }
    ++stats_.dangling_dependencies;
  }

  const ChakraNodes& nodes_;
  const ChakraImportOptions& options_;
  ChakraConventions conventions_;
  int64_t size_unit_;  // bytes to a unit of comm_size (1 for dtsim's files)
  graph::TaskGraphBuilder builder_;
  ChakraGraphStats stats_;
  ChakraCollectives collectives_;           // after builder_ and stats_, which it adds to
  std::vector<std::vector<TaskId>> tasks_;  // per trace, per node
};

}  // namespace

Expected<ChakraGraph> BuildChakraGraph(std::span<const ChakraTrace> ranks,
                                       const ChakraImportOptions& options) {
  if (ranks.empty()) return Error("no Chakra traces to build a graph from");
  if (options.element_bytes &&
      (*options.element_bytes < 1 || *options.element_bytes > kMaxChakraElementBytes)) {
    return Error(fmt::format("bytes an element must be 1 to {} (complex128), got {}",
                             kMaxChakraElementBytes, *options.element_bytes));
  }
  DTSIM_ASSIGN_OR_RETURN(const ChakraNodes nodes, ChakraNodes::Index(ranks));
  ChakraConventions conventions = DetectChakraConventions(ranks.front());
  for (const ChakraTrace& trace : ranks.subspan(1)) {
    if (DetectChakraConventions(trace).producer != conventions.producer) {
      return Error(fmt::format("written by {} where {} was written by {}: the ranks' traces do "
                               "not belong together",
                               ProducerName(DetectChakraConventions(trace)), ranks.front().file,
                               ProducerName(conventions)))
          .InFile(trace.file);
    }
  }
  if (options.element_bytes && !conventions.sizes_in_elements) {
    return Error(fmt::format("bytes an element ({}) apply to traces whose sizes count elements "
                             "(STAGE's); this one, written by {}, counts bytes",
                             *options.element_bytes,
                             nodes.written_by_dtsim() ? "dtsim" : ProducerName(conventions)))
        .InFile(ranks.front().file);
  }
  return ChakraGraphBuilder(nodes, options, std::move(conventions)).Build();
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

}  // namespace dtsim::traces
