#include "sim/graph/graph_json.h"

#include <fmt/format.h>

#include <limits>
#include <map>
#include <optional>
#include <unordered_map>

#include "sim/base/strings.h"
#include "sim/graph/builder.h"

namespace dtsim::graph {
namespace {

constexpr int64_t kMaxInt = std::numeric_limits<int64_t>::max();

// A task or collective id: a string, or a non-negative integer standing for its decimal form.
Expected<std::string> ReadId(JsonObjectReader& reader) {
  const Json* id = reader.Find("id");
  const std::string path = JsonChildPath(reader.path(), "id");
  if (id == nullptr) return Error("missing required field", path);
  if (id->is_string() && !id->get<std::string>().empty()) return id->get<std::string>();
  if (id->is_number_unsigned() || (id->is_number_integer() && id->get<int64_t>() >= 0)) {
    return id->dump();
  }
  return Error("expected a non-empty string or a non-negative integer", path,
               JsonValueForError(*id));
}

Expected<int32_t> ReadRank(const Json& value, const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(const int64_t rank, JsonToInt(value, path, 0, kMaxRank));
  return static_cast<int32_t>(rank);
}

// "duration": "2 us" or "duration_ns": 2000.
Expected<DurationNs> ReadDuration(JsonObjectReader& reader) {
  DTSIM_ASSIGN_OR_RETURN(const int which, reader.OneOf("duration", "duration_ns"));
  if (which == 0) return reader.Duration("duration");
  const std::string path = JsonChildPath(reader.path(), "duration_ns");
  const Json& value = *reader.Find("duration_ns");
  if (value.is_number() && value.get<double>() < 0) {
    return Error("duration must not be negative", path, JsonValueForError(value));
  }
  DTSIM_ASSIGN_OR_RETURN(const int64_t ns, JsonToInt(value, path, 0, kMaxInt));
  return DurationNs(ns);
}

// "size": "4 MiB" or "size_bytes": 4194304.
Expected<Bytes> ReadSize(JsonObjectReader& reader) {
  DTSIM_ASSIGN_OR_RETURN(const int which, reader.OneOf("size", "size_bytes"));
  if (which == 0) return reader.Size("size");
  const std::string path = JsonChildPath(reader.path(), "size_bytes");
  DTSIM_ASSIGN_OR_RETURN(const int64_t count,
                         JsonToInt(*reader.Find("size_bytes"), path, 0, kMaxInt));
  return Bytes(count);
}

class GraphLoader {
 public:
  Expected<TaskGraph> Load(const Json& document) {
    DTSIM_ASSIGN_OR_RETURN(JsonObjectReader root, JsonObjectReader::Make(document, ""));
    DTSIM_RETURN_IF_ERROR(CheckFormat(root, kTaskGraphFormat));
    root.Allow("metadata");
    const Json* collectives = root.Find("collectives");
    const Json* streams = root.Find("streams");
    const Json* tasks = root.Find("tasks");
    DTSIM_RETURN_IF_ERROR(root.Finish());  // first, so a misspelt "tasks" gets a suggestion
    if (collectives != nullptr) DTSIM_RETURN_IF_ERROR(LoadCollectives(*collectives));
    if (streams != nullptr) DTSIM_RETURN_IF_ERROR(LoadStreams(*streams));
    if (tasks == nullptr) return Error("missing required field", "tasks");
    if (!tasks->is_array()) return Error("expected an array", "tasks", JsonValueForError(*tasks));
    for (size_t i = 0; i < tasks->size(); ++i) {
      DTSIM_RETURN_IF_ERROR(LoadTask((*tasks)[i], JsonIndexPath("tasks", i)));
    }
    for (size_t i = 0; i < tasks->size(); ++i) {
      DTSIM_RETURN_IF_ERROR(LoadDependencies((*tasks)[i], JsonIndexPath("tasks", i), i));
    }
    return std::move(builder_).Build();
  }

 private:
  Status LoadCollectives(const Json& list) {
    if (!list.is_array()) return Error("expected an array", "collectives", JsonValueForError(list));
    for (size_t i = 0; i < list.size(); ++i) {
      DTSIM_RETURN_IF_ERROR(LoadCollective(list[i], JsonIndexPath("collectives", i)));
    }
    return Status::Ok();
  }

  // "streams": [{"rank": 0, "name": "gpu", "order": "ready_first"}]: streams whose order is
  // not the default in-order one.
  Status LoadStreams(const Json& list) {
    if (!list.is_array()) return Error("expected an array", "streams", JsonValueForError(list));
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string path = JsonIndexPath("streams", i);
      DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(list[i], path));
      const Json* rank_value = reader.Find("rank");
      if (rank_value == nullptr) {
        return Error("missing required field", JsonChildPath(path, "rank"));
      }
      DTSIM_ASSIGN_OR_RETURN(const int32_t rank,
                             ReadRank(*rank_value, JsonChildPath(path, "rank")));
      DTSIM_ASSIGN_OR_RETURN(const std::string name, reader.String("name"));
      DTSIM_ASSIGN_OR_RETURN(const std::string order_name, reader.String("order"));
      const std::optional<StreamOrder> order = StreamOrderFromName(order_name);
      if (!order.has_value()) {
        return Error("unknown stream order" + DidYouMean(order_name, StreamOrderNames()) +
                         "; expected one of " + JoinQuoted(StreamOrderNames()),
                     JsonChildPath(path, "order"), Quote(order_name));
      }
      DTSIM_RETURN_IF_ERROR(reader.Finish());
      if (!stream_orders_.emplace(std::make_pair(rank, name), *order).second) {
        return Error(fmt::format("stream \"{}\" of rank {} is declared twice", name, rank),
                     JsonChildPath(path, "name"), Quote(name));
      }
    }
    return Status::Ok();
  }

  StreamOrder OrderOf(int32_t rank, const std::string& name) const {
    const auto it = stream_orders_.find({rank, name});
    return it == stream_orders_.end() ? StreamOrder::kInOrder : it->second;
  }

  Expected<std::vector<int32_t>> ReadGroup(JsonObjectReader& reader,
                                           std::string_view key = "group") {
    const std::string path = JsonChildPath(reader.path(), key);
    const Json* group = reader.Find(key);
    if (group == nullptr) return Error("missing required field", path);
    if (!group->is_array() || group->empty()) {
      return Error("expected a non-empty array of ranks", path, JsonValueForError(*group));
    }
    std::vector<int32_t> ranks;
    for (size_t i = 0; i < group->size(); ++i) {
      DTSIM_ASSIGN_OR_RETURN(const int32_t rank, ReadRank((*group)[i], JsonIndexPath(path, i)));
      if (std::find(ranks.begin(), ranks.end(), rank) != ranks.end()) {
        return Error("rank appears twice in the group", JsonIndexPath(path, i),
                     std::to_string(rank));
      }
      ranks.push_back(rank);
    }
    return ranks;
  }

  Status LoadCollective(const Json& value, const std::string& path) {
    DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, path));
    DTSIM_ASSIGN_OR_RETURN(const std::string id, ReadId(reader));
    DTSIM_ASSIGN_OR_RETURN(const std::string op_name, reader.String("op"));
    const std::optional<CommKind> op = CollectiveKindFromName(op_name);
    if (!op.has_value()) {
      return Error("unknown collective op" + DidYouMean(op_name, CollectiveKindNames()) +
                       "; expected one of " + JoinQuoted(CollectiveKindNames()),
                   JsonChildPath(path, "op"), Quote(op_name));
    }
    DTSIM_ASSIGN_OR_RETURN(const Bytes size, ReadSize(reader));
    DTSIM_ASSIGN_OR_RETURN(const std::vector<int32_t> group, ReadGroup(reader));
    DTSIM_ASSIGN_OR_RETURN(const std::string algorithm, reader.StringOr("algorithm", ""));
    std::vector<int32_t> priced_as;
    if (reader.Has("priced_as")) {
      DTSIM_ASSIGN_OR_RETURN(priced_as, ReadGroup(reader, "priced_as"));
      for (int32_t member : group) {
        if (std::find(priced_as.begin(), priced_as.end(), member) == priced_as.end()) {
          return Error("priced_as must contain every member of the group",
                       JsonChildPath(path, "priced_as"), std::to_string(member));
        }
      }
    }
    reader.Allow("priced_as");
    int32_t root = -1;
    if (*op == CommKind::kBroadcast || *op == CommKind::kReduce) {
      const Json* root_value = reader.Find("root");
      if (root_value == nullptr) {
        return Error(fmt::format("missing required field (a {} needs a root rank)", op_name),
                     JsonChildPath(path, "root"));
      }
      DTSIM_ASSIGN_OR_RETURN(root, ReadRank(*root_value, JsonChildPath(path, "root")));
      if (std::find(group.begin(), group.end(), root) == group.end()) {
        return Error("root is not a member of the group", JsonChildPath(path, "root"),
                     std::to_string(root));
      }
    }
    DTSIM_RETURN_IF_ERROR(reader.Finish());
    const CommId comm = builder_.AddCollective(*op, size, group, id, algorithm, root);
    if (!priced_as.empty()) builder_.PriceAs(comm, priced_as);
    if (!collective_ids_.emplace(id, comm).second) {
      return Error("duplicate collective id", JsonChildPath(path, "id"), Quote(id));
    }
    return Status::Ok();
  }

  Expected<TaskKind> ReadKind(JsonObjectReader& reader) {
    DTSIM_ASSIGN_OR_RETURN(const std::string name, reader.StringOr("kind", "compute"));
    const std::optional<TaskKind> kind = TaskKindFromName(name);
    if (!kind.has_value()) {
      return Error("unknown task kind" + DidYouMean(name, TaskKindNames()) + "; expected one of " +
                       JoinQuoted(TaskKindNames()),
                   JsonChildPath(reader.path(), "kind"), Quote(name));
    }
    return *kind;
  }

  Status LoadTask(const Json& value, const std::string& path) {
    DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, path));
    DTSIM_ASSIGN_OR_RETURN(const std::string id, ReadId(reader));
    const Json* rank_value = reader.Find("rank");
    if (rank_value == nullptr) return Error("missing required field", JsonChildPath(path, "rank"));
    DTSIM_ASSIGN_OR_RETURN(const int32_t rank, ReadRank(*rank_value, JsonChildPath(path, "rank")));
    DTSIM_ASSIGN_OR_RETURN(const std::string stream_name, reader.StringOr("stream", "compute"));
    DTSIM_ASSIGN_OR_RETURN(const TaskKind kind, ReadKind(reader));
    DTSIM_ASSIGN_OR_RETURN(const std::string name, reader.StringOr("name", ""));
    DTSIM_ASSIGN_OR_RETURN(const std::string category, reader.StringOr("category", ""));
    if (!builder_.HasRoomForCategory(category)) {
      return Error(fmt::format("more than {} distinct task categories",
                               graph::TaskGraphBuilder::kMaxCategories),
                   JsonChildPath(path, "category"), Quote(category));
    }
    reader.Allow("deps");  // resolved in the second pass, once every id is known
    const StreamId stream = builder_.Stream(rank, stream_name, OrderOf(rank, stream_name));
    DTSIM_ASSIGN_OR_RETURN(const TaskId task,
                           AddByKind(reader, kind, stream, rank, name, category));
    DTSIM_RETURN_IF_ERROR(reader.Finish());
    builder_.SetExternalId(task, id);
    if (!task_ids_.emplace(id, task).second) {
      return Error("duplicate task id", JsonChildPath(path, "id"), Quote(id));
    }
    return Status::Ok();
  }

  Expected<TaskId> AddByKind(JsonObjectReader& reader, TaskKind kind, StreamId stream, int32_t rank,
                             const std::string& name, const std::string& category) {
    const std::string& path = reader.path();
    if (!IsCommunication(kind)) {
      DTSIM_ASSIGN_OR_RETURN(const DurationNs duration, ReadDuration(reader));
      return builder_.AddTask(stream, kind, name, category, duration);
    }
    for (const char* key : {"duration", "duration_ns"}) {
      if (reader.Has(key)) {
        return Error(fmt::format("a {} task takes the time the network model gives it; remove "
                                 "the fixed duration",
                                 TaskKindName(kind)),
                     JsonChildPath(path, key));
      }
    }
    if (kind == TaskKind::kCollective) {
      DTSIM_ASSIGN_OR_RETURN(const std::string collective, reader.String("collective"));
      const auto it = collective_ids_.find(collective);
      if (it == collective_ids_.end()) {
        return Error("no collective with this id in \"collectives\"",
                     JsonChildPath(path, "collective"), Quote(collective));
      }
      return builder_.AddCollectiveTask(stream, it->second, name, category);
    }
    const Json* peer_value = reader.Find("peer");
    if (peer_value == nullptr) return Error("missing required field", JsonChildPath(path, "peer"));
    DTSIM_ASSIGN_OR_RETURN(const int32_t peer, ReadRank(*peer_value, JsonChildPath(path, "peer")));
    if (peer == rank) {
      return Error("a task cannot send to or receive from its own rank",
                   JsonChildPath(path, "peer"), std::to_string(peer));
    }
    DTSIM_ASSIGN_OR_RETURN(const int64_t tag, reader.IntOr("tag", 0));
    if (kind == TaskKind::kSend) {
      DTSIM_ASSIGN_OR_RETURN(const Bytes size, ReadSize(reader));
      bool eager = false;
      DTSIM_RETURN_IF_ERROR(reader.ReadOptional("eager", eager));
      return builder_.AddSend(
          stream, peer, size, tag, name, category,
          eager ? TaskGraphBuilder::SendMode::kEager : TaskGraphBuilder::SendMode::kRendezvous);
    }
    if (reader.Has("eager")) {
      return Error("only a send can be eager; a recv ends when its data is in either way",
                   JsonChildPath(path, "eager"));
    }
    std::optional<Bytes> expected;
    if (reader.Has("size") || reader.Has("size_bytes")) {
      DTSIM_ASSIGN_OR_RETURN(expected, ReadSize(reader));
    }
    reader.Allow("size");
    reader.Allow("size_bytes");
    return builder_.AddRecv(stream, peer, tag, name, category, expected);
  }

  Status LoadDependencies(const Json& value, const std::string& path, size_t index) {
    const auto it = value.find("deps");
    if (it == value.end()) return Status::Ok();
    const std::string deps_path = JsonChildPath(path, "deps");
    if (!it->is_array())
      return Error("expected an array of task ids", deps_path, JsonValueForError(*it));
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& dep = (*it)[i];
      const std::string dep_path = JsonIndexPath(deps_path, i);
      if (!dep.is_string() && !dep.is_number_integer()) {
        return Error("expected a task id", dep_path, JsonValueForError(dep));
      }
      const std::string key = dep.is_string() ? dep.get<std::string>() : dep.dump();
      const auto found = task_ids_.find(key);
      if (found == task_ids_.end()) {
        return Error("dependency on an unknown task id", dep_path, Quote(key));
      }
      builder_.AddDependency(TaskId(static_cast<uint32_t>(index)), found->second);
    }
    return Status::Ok();
  }

  TaskGraphBuilder builder_;
  std::map<std::pair<int32_t, std::string>, StreamOrder> stream_orders_;
  std::unordered_map<std::string, TaskId> task_ids_;
  std::unordered_map<std::string, CommId> collective_ids_;
};

std::string TaskLabel(const TaskGraph& graph, TaskId id) {
  const std::string_view external = graph.external_id(id);
  return external.empty() ? fmt::format("t{}", id.value()) : std::string(external);
}

std::string CollectiveLabel(const TaskGraph& graph, CommId id) {
  const std::string_view label = graph.name(graph.comm(id).label);
  return label.empty() ? fmt::format("c{}", id.value()) : std::string(label);
}

Json TaskToJson(const TaskGraph& graph, TaskId id) {
  const Task& task = graph.task(id);
  const Stream& stream = graph.stream(task.stream);
  Json out = {{"id", TaskLabel(graph, id)},
              {"rank", stream.rank},
              {"stream", graph.name(stream.name)},
              {"kind", TaskKindName(task.kind)}};
  if (!graph.name(task.name).empty()) out["name"] = graph.name(task.name);
  if (task.category != 0) out["category"] = graph.category_name(task.category);
  if (!IsCommunication(task.kind)) out["duration_ns"] = task.duration.ns();
  if (task.kind == TaskKind::kCollective) out["collective"] = CollectiveLabel(graph, task.comm);
  if (task.kind == TaskKind::kSend || task.kind == TaskKind::kRecv) {
    const Communication& comm = graph.comm(task.comm);
    const std::span<const int32_t> pair = graph.group(comm.group);
    out["peer"] = task.kind == TaskKind::kSend ? pair[1] : pair[0];
    out["tag"] = task.comm.value();  // unique per pair, so reading it back pairs the same tasks
    out["size_bytes"] = comm.size.count();
    if (task.kind == TaskKind::kSend && comm.eager) out["eager"] = true;
  }
  const std::span<const TaskId> deps = graph.dependencies(id);
  if (!deps.empty()) {
    Json list = Json::array();
    for (TaskId dep : deps) list.push_back(TaskLabel(graph, dep));
    out["deps"] = std::move(list);
  }
  return out;
}

}  // namespace

Expected<TaskGraph> TaskGraphFromJson(const Json& document, const std::string& file) {
  Expected<TaskGraph> graph = GraphLoader().Load(document);
  if (!graph.ok()) return std::move(graph).error().InFile(file);
  return graph;
}

Expected<TaskGraph> LoadTaskGraph(const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(const Json document, ReadJsonFile(path));
  return TaskGraphFromJson(document, path);
}

Json TaskGraphToJson(const TaskGraph& graph) {
  Json collectives = Json::array();
  for (uint32_t c = 0; c < graph.comm_count(); ++c) {
    const Communication& comm = graph.comm(CommId(c));
    if (comm.kind == CommKind::kSendRecv) continue;  // written as send and recv tasks
    Json entry = {{"id", CollectiveLabel(graph, CommId(c))},
                  {"op", CommKindName(comm.kind)},
                  {"size_bytes", comm.size.count()},
                  {"group", graph.group(comm.group)}};
    if (comm.priced_group != comm.group) entry["priced_as"] = graph.group(comm.priced_group);
    if (!graph.name(comm.algorithm).empty()) entry["algorithm"] = graph.name(comm.algorithm);
    if (comm.root >= 0) entry["root"] = comm.root;
    collectives.push_back(std::move(entry));
  }
  Json tasks = Json::array();
  for (uint32_t t = 0; t < graph.task_count(); ++t) tasks.push_back(TaskToJson(graph, TaskId(t)));
  Json out = {{"format", kTaskGraphFormat.name},
              {"version", kTaskGraphFormat.Version()},
              {"collectives", std::move(collectives)},
              {"tasks", std::move(tasks)}};
  Json streams = Json::array();
  for (uint32_t s = 0; s < graph.stream_count(); ++s) {
    const Stream& stream = graph.stream(StreamId(s));
    if (stream.order == StreamOrder::kInOrder) continue;
    streams.push_back({{"rank", stream.rank},
                       {"name", graph.name(stream.name)},
                       {"order", StreamOrderName(stream.order)}});
  }
  if (!streams.empty()) out["streams"] = std::move(streams);
  return out;
}

}  // namespace dtsim::graph
