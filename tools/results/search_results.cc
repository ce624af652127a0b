#include "tools/results/search_results.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <type_traits>

#include "sim/base/atomic_file.h"
#include "sim/base/buffered_text_writer.h"
#include "sim/base/strings.h"
#include "strategies/embedding_sharding.h"
#include "tools/results/provenance.h"
#include "tools/results/result_file.h"

namespace dtsim::results {
namespace {

using strategies::EvaluatedPlan;
using strategies::PlanFigures;
using strategies::PlanStatus;

// A column: how a plan's cell is written, and read back into a plan.
struct Column {
  std::string_view name;
  std::function<Json(const EvaluatedPlan&)> write;
  std::function<Status(const Json&, EvaluatedPlan&)> read;
  bool added_later = false;  // absent from older files (1.0, 1.1): the plan keeps its default
  bool figure = false;       // a simulated plan's figure: null exactly when not simulated
};

template <typename T>
Status Get(const Json& cell, T& out) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // Range-checked: get<int>() of a number out of the type's range is undefined behaviour.
    constexpr auto kMax = static_cast<int64_t>(
        std::min<uint64_t>(std::numeric_limits<T>::max(), std::numeric_limits<int64_t>::max()));
    const Expected<int64_t> value =
        JsonToInt(cell, "", static_cast<int64_t>(std::numeric_limits<T>::min()), kMax);
    if (!value.ok()) return Error("unexpected value", "", JsonValueForError(cell));
    out = static_cast<T>(*value);
  } else {
    try {
      out = cell.get<T>();
    } catch (const Json::exception&) {
      return Error("unexpected value", "", JsonValueForError(cell));
    }
  }
  return Status::Ok();
}

template <typename Enum>
Status GetName(const Json& cell, std::span<const std::string_view> names, Enum& out) {
  std::string name;
  DTSIM_RETURN_IF_ERROR(Get(cell, name));
  const auto found = std::find(names.begin(), names.end(), name);
  if (found == names.end()) return Error("unknown name", "", Quote(name));
  out = static_cast<Enum>(found - names.begin());
  return Status::Ok();
}

// An integer field of the plan choice.
template <typename Field>
Column PlanInt(std::string_view name, Field field) {
  return {name, [field](const EvaluatedPlan& p) { return Json(field(p)); },
          [field](const Json& cell, EvaluatedPlan& p) { return Get(cell, field(p)); }};
}

// A duration of the figures, absent (null) when the plan was not simulated.
template <typename Field>
Column FigureNs(std::string_view name, Field field) {
  Column column = {
      name,
      [field](const EvaluatedPlan& p) { return p.figures ? Json(field(*p.figures).ns()) : Json(); },
      [field](const Json& cell, EvaluatedPlan& p) -> Status {
        if (cell.is_null()) return Status::Ok();
        if (!p.figures) p.figures.emplace();
        int64_t ns = 0;
        DTSIM_RETURN_IF_ERROR(Get(cell, ns));
        field(*p.figures) = DurationNs(ns);
        return Status::Ok();
      }};
  column.figure = true;
  return column;
}

// A column added after 1.0 (its cell is optional on reading).
Column Later(Column column) {
  column.added_later = true;
  return column;
}

Column FigureNumber(std::string_view name, double PlanFigures::*field) {
  Column column = {
      name,
      [field](const EvaluatedPlan& p) { return p.figures ? Json((*p.figures).*field) : Json(); },
      [field](const Json& cell, EvaluatedPlan& p) -> Status {
        if (cell.is_null()) return Status::Ok();
        if (!p.figures) p.figures.emplace();
        return Get(cell, (*p.figures).*field);
      }};
  column.figure = true;
  return column;
}

// Optional flow-model times: null unless re-simulated.
Column FlowNs(std::string_view name, std::optional<DurationNs> PlanFigures::*field) {
  return {name,
          [field](const EvaluatedPlan& p) {
            return p.figures && ((*p.figures).*field) ? Json(((*p.figures).*field)->ns()) : Json();
          },
          [field](const Json& cell, EvaluatedPlan& p) -> Status {
            if (cell.is_null()) return Status::Ok();
            if (!p.figures) p.figures.emplace();
            int64_t ns = 0;
            DTSIM_RETURN_IF_ERROR(Get(cell, ns));
            (*p.figures).*field = DurationNs(ns);
            return Status::Ok();
          }};
}

// An optional span of seconds of the figures, written in whole ns: null unless the config has a
// time_to_train section (and, for the flow model's, unless re-simulated).
Column SecondsAsNs(std::string_view name, std::optional<double> PlanFigures::*field) {
  return {name,
          [field](const EvaluatedPlan& p) {
            if (!p.figures || !((*p.figures).*field)) return Json();
            return Json(std::llround(*((*p.figures).*field) * 1e9));
          },
          [field](const Json& cell, EvaluatedPlan& p) -> Status {
            if (cell.is_null()) return Status::Ok();
            if (!p.figures) p.figures.emplace();
            int64_t ns = 0;
            DTSIM_RETURN_IF_ERROR(Get(cell, ns));
            if (ns < 0) return Error("unexpected value", "", JsonValueForError(cell));
            (*p.figures).*field = static_cast<double>(ns) / 1e9;
            return Status::Ok();
          }};
}

const std::vector<Column>& Columns() {
  static const std::vector<Column> kColumns = {
      {"index", [](const EvaluatedPlan& p) { return Json(p.index); },
       [](const Json& c, EvaluatedPlan& p) { return Get(c, p.index); }},
      {"status", [](const EvaluatedPlan& p) { return Json(strategies::PlanStatusName(p.status)); },
       [](const Json& c, EvaluatedPlan& p) {
         static constexpr std::array<std::string_view, 5> kNames = {
             "simulated", "bounded", "out_of_memory", "invalid", "failed"};
         return GetName(c, kNames, p.status);
       }},
      {"reason", [](const EvaluatedPlan& p) { return Json(p.reason); },
       [](const Json& c, EvaluatedPlan& p) { return Get(c, p.reason); }},
      PlanInt(
          "data", [](auto& p) -> auto& { return p.choice.plan.data; }),
      PlanInt(
          "tensor", [](auto& p) -> auto& { return p.choice.plan.tensor; }),
      {"tensor_mode",
       [](const EvaluatedPlan& p) {
         return Json(models::TensorLayoutNames()[static_cast<size_t>(p.choice.plan.tensor_layout)]);
       },
       [](const Json& c, EvaluatedPlan& p) {
         return GetName(c, models::TensorLayoutNames(), p.choice.plan.tensor_layout);
       }},
      PlanInt(
          "tensor_depth", [](auto& p) -> auto& { return p.choice.plan.tensor_depth; }),
      PlanInt(
          "sequence_parallel", [](auto& p) -> auto& { return p.choice.plan.sequence_parallel; }),
      PlanInt(
          "pipeline", [](auto& p) -> auto& { return p.choice.plan.pipeline; }),
      {"schedule",
       [](const EvaluatedPlan& p) {
         return Json(models::PipelineScheduleName(p.choice.plan.schedule));
       },
       [](const Json& c, EvaluatedPlan& p) {
         return GetName(c, models::PipelineScheduleNames(), p.choice.plan.schedule);
       }},
      PlanInt(
          "virtual_stages", [](auto& p) -> auto& { return p.choice.plan.virtual_stages; }),
      PlanInt(
          "expert", [](auto& p) -> auto& { return p.choice.plan.expert; }),
      Later(PlanInt(
          "context", [](auto& p) -> auto& { return p.choice.plan.context; })),
      Later({"context_comm",
             [](const EvaluatedPlan& p) {
               return Json(
                   models::ContextCommNames()[static_cast<size_t>(p.choice.plan.context_comm)]);
             },
             [](const Json& c, EvaluatedPlan& p) {
               return GetName(c, models::ContextCommNames(), p.choice.plan.context_comm);
             }}),
      PlanInt(
          "zero_stage", [](auto& p) -> auto& { return p.choice.plan.zero_stage; }),
      PlanInt(
          "micro_batch", [](auto& p) -> auto& { return p.choice.micro_batch; }),
      {"recompute",
       [](const EvaluatedPlan& p) { return Json(models::RecomputeName(p.choice.recompute)); },
       [](const Json& c, EvaluatedPlan& p) {
         return GetName(c, models::RecomputeNames(), p.choice.recompute);
       }},
      PlanInt(
          "compression", [](auto& p) -> auto& { return p.choice.compression; }),
      Later({"fp8_recipe",
             [](const EvaluatedPlan& p) {
               return Json(models::Fp8RecipeNames()[static_cast<size_t>(p.choice.fp8)]);
             },
             [](const Json& c, EvaluatedPlan& p) {
               return GetName(c, models::Fp8RecipeNames(), p.choice.fp8);
             }}),
      // Since 1.5: the layers whose activations are offloaded (training.activation_offload_layers).
      Later(PlanInt(
          "activation_offload_layers",
          [](auto& p) -> auto& { return p.choice.activation_offload; })),
      // Since 1.6: the plan's global batch in sequences (search.global_batches), and a DLRM's
      // table placement (an index into search.embedding_sharding; 0: the config's own).
      Later(PlanInt(
          "global_batch", [](auto& p) -> auto& { return p.choice.global_batch; })),
      Later(PlanInt(
          "embedding_sharding", [](auto& p) -> auto& { return p.choice.embedding_sharding; })),
      // Since 1.7: the plan's rank order (search.orders; parallelism.order); read as the
      // config's when absent.
      Later({"order",
             [](const EvaluatedPlan& p) { return Json(strategies::PlanOrderName(p.choice.plan)); },
             [](const Json& c, EvaluatedPlan& p) -> Status {
               std::string text;
               DTSIM_RETURN_IF_ERROR(Get(c, text));
               DTSIM_ASSIGN_OR_RETURN(p.choice.plan.order, strategies::ParsePlanOrder(text, ""));
               return Status::Ok();
             }}),
      PlanInt(
          "memory_bytes", [](auto& p) -> auto& { return p.memory_bytes; }),
      // Since 1.4: the caching allocator's reserve memory_bytes counts, or null where dtsim does
      // not model it (and memory_bytes leaves it out).
      Later({"allocator_reserve_bytes",
             [](const EvaluatedPlan& p) {
               return p.allocator_reserve ? Json(*p.allocator_reserve) : Json();
             },
             [](const Json& c, EvaluatedPlan& p) -> Status {
               if (c.is_null()) return Status::Ok();
               int64_t bytes = 0;
               DTSIM_RETURN_IF_ERROR(Get(c, bytes));
               if (bytes < 0) return Error("unexpected value", "", JsonValueForError(c));
               p.allocator_reserve = bytes;
               return Status::Ok();
             }}),
      {"lower_bound_ns", [](const EvaluatedPlan& p) { return Json(p.lower_bound.ns()); },
       [](const Json& c, EvaluatedPlan& p) -> Status {
         int64_t ns = 0;
         DTSIM_RETURN_IF_ERROR(Get(c, ns));
         p.lower_bound = DurationNs(ns);
         return Status::Ok();
       }},
      FigureNs(
          "iteration_time_ns", [](auto& f) -> auto& { return f.iteration_time; }),
      FigureNs(
          "average_iteration_time_ns", [](auto& f) -> auto& { return f.average_iteration_time; }),
      FlowNs("flow_iteration_time_ns", &PlanFigures::flow_iteration_time),
      FlowNs("flow_average_iteration_time_ns", &PlanFigures::flow_average_iteration_time),
      FigureNumber("samples_per_second", &PlanFigures::samples_per_second),
      FigureNumber("tokens_per_second", &PlanFigures::tokens_per_second),
      FigureNumber("mfu", &PlanFigures::mfu),
      // Since 1.6, with a time_to_train section (else null): the run's iterations and wall clock,
      // by which the plans are ranked, and the wall clock at the flow model's iteration time.
      Later({"train_iterations",
             [](const EvaluatedPlan& p) {
               return p.figures && p.figures->train_iterations ? Json(*p.figures->train_iterations)
                                                               : Json();
             },
             [](const Json& c, EvaluatedPlan& p) -> Status {
               if (c.is_null()) return Status::Ok();
               if (!p.figures) p.figures.emplace();
               int64_t iterations = 0;
               DTSIM_RETURN_IF_ERROR(Get(c, iterations));
               if (iterations < 1) return Error("unexpected value", "", JsonValueForError(c));
               p.figures->train_iterations = iterations;
               return Status::Ok();
             }}),
      Later(SecondsAsNs("time_to_train_ns", &PlanFigures::time_to_train_s)),
      Later(SecondsAsNs("flow_time_to_train_ns", &PlanFigures::flow_time_to_train_s)),
      FigureNs(
          "compute_ns", [](auto& f) -> auto& { return f.breakdown.compute; }),
      FigureNs(
          "recompute_ns", [](auto& f) -> auto& { return f.breakdown.recompute; }),
      FigureNs(
          "tp_exposed_ns", [](auto& f) -> auto& { return f.breakdown.tensor; }),
      FigureNs(
          "pp_wait_ns", [](auto& f) -> auto& { return f.breakdown.pipeline; }),
      FigureNs(
          "ep_exposed_ns", [](auto& f) -> auto& { return f.breakdown.expert; }),
      Later(FigureNs(
          "cp_exposed_ns", [](auto& f) -> auto& { return f.breakdown.context; })),
      FigureNs(
          "dp_exposed_ns", [](auto& f) -> auto& { return f.breakdown.data_exposed; }),
      FigureNs(
          "optimizer_ns", [](auto& f) -> auto& { return f.breakdown.optimizer; }),
      FigureNs(
          "idle_ns", [](auto& f) -> auto& { return f.breakdown.idle; }),
      {"detail", [](const EvaluatedPlan& p) { return Json(p.detail); },
       [](const Json& c, EvaluatedPlan& p) { return Get(c, p.detail); }},
      // Since 1.3: the plan this one simulated exactly as (strategies::RankPlans), or null.
      Later({"same_as",
             [](const EvaluatedPlan& p) { return p.same_as ? Json(*p.same_as) : Json(); },
             [](const Json& c, EvaluatedPlan& p) -> Status {
               if (c.is_null()) return Status::Ok();
               size_t index = 0;
               DTSIM_RETURN_IF_ERROR(Get(c, index));
               p.same_as = index;
               return Status::Ok();
             }}),
  };
  return kColumns;
}

// Each plan's row position in the ranking (1 = best), 0 when not ranked.
std::vector<size_t> Ranks(const strategies::SearchResult& result) {
  std::vector<size_t> ranks(result.plans.size(), 0);
  for (size_t r = 0; r < result.ranking.size(); ++r) ranks[result.ranking[r]] = r + 1;
  return ranks;
}

std::string CsvCell(const Json& cell) {
  if (cell.is_null()) return "";
  if (cell.is_boolean()) return cell.get<bool>() ? "true" : "false";
  if (!cell.is_string()) return DumpJson(cell);
  return CsvField(cell.get<std::string>());
}

Status WriteCsv(const std::string& path, const SearchFile& file) {
  DTSIM_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> writer, AtomicFileWriter::Open(path));
  BufferedTextWriter out(writer->stream());
  // The JSON's nanosecond columns in seconds, as every CSV dtsim writes (docs/formats/
  // search-result.md, "CSV"): "iteration_time_ns" becomes "iteration_time_s".
  const auto in_seconds = [](std::string_view name) { return name.ends_with("_ns"); };
  out.Append("rank,plan");
  for (const Column& column : Columns()) {
    const std::string_view name = column.name;
    out.Append(",{}{}", in_seconds(name) ? name.substr(0, name.size() - 3) : name,
               in_seconds(name) ? "_s" : "");
  }
  out.Append("\n");
  const std::vector<size_t> ranks = Ranks(file.result);
  for (size_t i = 0; i < file.result.plans.size(); ++i) {
    const EvaluatedPlan& plan = file.result.plans[i];
    out.Append("{},{}", ranks[i] > 0 ? std::to_string(ranks[i]) : "",
               CsvCell(Json(strategies::PlanLabel(plan.choice, file.space))));
    for (const Column& column : Columns()) {
      const Json cell = column.write(plan);
      if (in_seconds(column.name) && cell.is_number()) {
        out.Append(",{}", cell.get<double>() / 1e9);
      } else {
        out.Append(",{}", CsvCell(cell));
      }
    }
    out.Append("\n");
  }
  out.Flush();
  return writer->Commit();
}

// The document without its plans: what identifies the search, the counts and the ranking.
OrderedJson Head(const SearchFile& file) {
  const strategies::SearchResult& result = file.result;
  OrderedJson counts = OrderedJson::object();
  for (PlanStatus status : {PlanStatus::kSimulated, PlanStatus::kBounded, PlanStatus::kOutOfMemory,
                            PlanStatus::kInvalid, PlanStatus::kFailed}) {
    counts[std::string(strategies::PlanStatusName(status))] = result.Count(status);
  }
  OrderedJson pruned = OrderedJson::object();
  for (const auto& [reason, count] : result.PrunedByReason()) pruned[reason] = count;
  OrderedJson ranking = OrderedJson::array();
  for (size_t i : result.ranking) ranking.push_back(result.plans[i].index);
  OrderedJson columns = OrderedJson::array();
  for (const Column& column : Columns()) columns.push_back(column.name);
  OrderedJson head = FormatHeader(kSearchResultFormat);
  head.update(OrderedJson{{"settings", file.settings},
                          {"shard", file.shard},
                          {"shards", file.shards},
                          {"enumerated", result.enumerated},
                          {"evaluated", result.plans.size()},
                          {"counts", std::move(counts)},
                          {"pruned_by_reason", std::move(pruned)},
                          {"seconds", result.seconds},
                          {"ranking", std::move(ranking)},
                          {"columns", std::move(columns)},
                          {"provenance", ProvenanceJson()}});
  return head;
}

Json Row(const EvaluatedPlan& plan) {
  Json row = Json::array();
  for (const Column& column : Columns()) row.push_back(column.write(plan));
  return row;
}

Status WriteJson(const std::string& path, const SearchFile& file) {
  const strategies::SearchResult& result = file.result;
  // The plans are streamed row by row after the head (a search may hold 10⁵ of them).
  std::string text = DumpJson(Head(file), 2);
  text.pop_back();  // the closing brace
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  DTSIM_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> writer, AtomicFileWriter::Open(path));
  BufferedTextWriter out(writer->stream());
  out.Append("{},\n  \"plans\": [", text);
  for (size_t i = 0; i < result.plans.size(); ++i) {
    out.Append("{}\n    {}", i == 0 ? "" : ",", DumpJson(Row(result.plans[i])));
  }
  out.Append("\n  ]\n}}\n");
  out.Flush();
  return writer->Commit();
}

// The settings `dtsim search` prints and `dtsim report` shows beside each ranked plan: what was
// searched, on which model, GPU and cluster, for how many GPUs, and the config it started from.
Status CheckShownSettings(const Json& settings) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(settings, "settings"));
  for (const char* key : {"config", "model", "gpu", "cluster"}) {
    DTSIM_RETURN_IF_ERROR(reader.String(key));
  }
  constexpr int64_t kMost = std::numeric_limits<int64_t>::max();
  int64_t gpus = 0;
  DTSIM_RETURN_IF_ERROR(reader.ReadOptional("gpus", 1, std::numeric_limits<int>::max(), gpus));
  if (gpus == 0) return Error("missing required field", "settings.gpus");
  int64_t capacity = 0;
  DTSIM_RETURN_IF_ERROR(reader.ReadOptional("gpu_memory_bytes", 0, kMost, capacity));
  if (reader.Has("ranks")) {
    DTSIM_ASSIGN_OR_RETURN(const std::string ranks, reader.String("ranks"));
    if (ranks != "symmetric" && ranks != "full") {
      return Error("expected \"symmetric\" or \"full\"", "settings.ranks", Quote(ranks));
    }
  }
  if (!reader.Has("simulation_config")) return Status::Ok();
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader config, ChildObject(reader, "simulation_config"));
  if (config.Has("training")) DTSIM_RETURN_IF_ERROR(ChildObject(config, "training"));
  return Status::Ok();
}

// `ranking`: distinct enumeration indices of this file's simulated plans, best first (what
// `dtsim report` draws; the readers rank the plans again themselves).
Status CheckRanking(const Json& json, const std::vector<EvaluatedPlan>& plans) {
  const auto found = json.find("ranking");
  if (found == json.end()) return Error("missing required field", "ranking");
  if (!found->is_array()) return Error("expected an array", "ranking", JsonValueForError(*found));
  std::map<size_t, const EvaluatedPlan*> by_index;
  for (const EvaluatedPlan& plan : plans) by_index.emplace(plan.index, &plan);
  std::vector<bool> ranked(plans.size(), false);
  for (size_t r = 0; r < found->size(); ++r) {
    const Json& cell = (*found)[r];
    const std::string where = JsonIndexPath("ranking", r);
    Expected<int64_t> index = JsonToInt(cell, where, 0, std::numeric_limits<int64_t>::max());
    if (!index.ok()) return std::move(index).error();
    const auto plan = by_index.find(static_cast<size_t>(*index));
    if (plan == by_index.end() || plan->second->status != PlanStatus::kSimulated) {
      return Error("not the index of a simulated plan in \"plans\"", where,
                   JsonValueForError(cell));
    }
    const size_t row = static_cast<size_t>(plan->second - plans.data());
    if (ranked[row]) return Error("ranked twice", where, JsonValueForError(cell));
    ranked[row] = true;
  }
  return Status::Ok();
}

}  // namespace

OrderedJson SearchFileJson(const SearchFile& file) {
  OrderedJson document = Head(file);
  OrderedJson& plans = document["plans"] = OrderedJson::array();
  for (const EvaluatedPlan& plan : file.result.plans) plans.emplace_back(Row(plan));
  return document;
}

Status WriteSearchFiles(const std::string& prefix, const SearchFile& file) {
  DTSIM_RETURN_IF_ERROR(WriteJson(prefix + ".json", file));
  return WriteCsv(prefix + ".csv", file);
}

Expected<SearchFile> ReadSearchFile(const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(const Json json, ReadJsonFile(path));
  return SearchFileFromJson(json, path);
}

namespace {

// The searched config's rank order (settings.simulation_config's parallelism.order; Megatron's
// by default), for the plans of a file written before the order had a column (1.7).
Expected<std::array<strategies::PlanDimension, 3>> ConfigOrder(const Json& settings,
                                                               const std::string& path) {
  const Json config = settings.value("simulation_config", Json::object());
  const Json parallelism =
      config.is_object() ? config.value("parallelism", Json::object()) : Json();
  if (!parallelism.is_object() || !parallelism.contains("order")) {
    return strategies::ParallelPlan{}.order;
  }
  const Json& order = parallelism["order"];
  const std::string where = "settings.simulation_config.parallelism.order";
  if (!order.is_string()) {
    return Error("expected a string", where, JsonValueForError(order)).InFile(path);
  }
  Expected<std::array<strategies::PlanDimension, 3>> parsed =
      strategies::ParsePlanOrder(order.get<std::string>(), where);
  if (!parsed.ok()) return std::move(parsed).error().InFile(path);
  return parsed;
}

}  // namespace

Expected<SearchFile> SearchFileFromJson(const Json& json, const std::string& path) {
  const auto fail = [&path](std::string message, std::string location, std::string value = "") {
    return Error(std::move(message), std::move(location), std::move(value)).InFile(path);
  };
  if (Status checked = CheckFormat(json, kSearchResultFormat); !checked.ok()) {
    return std::move(checked).error().InFile(path);
  }
  SearchFile file;
  // Counts are read range-checked: nlohmann's get<int>() of 3.8e120 is undefined behaviour.
  const auto count = [&](const char* key, int64_t min, int64_t max) -> Expected<int64_t> {
    if (!json.contains(key)) return fail("missing field", key);
    Expected<int64_t> value = JsonToInt(json[key], key, min, max);
    if (!value.ok()) return std::move(value).error().InFile(path);
    return value;
  };
  constexpr int64_t kMostShards = std::numeric_limits<int32_t>::max();
  DTSIM_ASSIGN_OR_RETURN(const int64_t shard, count("shard", 0, kMostShards));
  DTSIM_ASSIGN_OR_RETURN(const int64_t shards, count("shards", 1, kMostShards));
  DTSIM_ASSIGN_OR_RETURN(const int64_t enumerated,
                         count("enumerated", 0, std::numeric_limits<int64_t>::max()));
  file.shard = static_cast<int>(shard);
  file.shards = static_cast<int>(shards);
  file.result.enumerated = static_cast<size_t>(enumerated);
  try {
    file.settings = json.at("settings");
    file.result.seconds = json.at("seconds").get<double>();
    const Json& space = json.at("settings").at("space");
    for (const Json& method : space.at("compression")) {
      file.space.compression.push_back({.method = method.get<std::string>()});
    }
    // Since 1.6 (the plan labels name the batch and a DLRM's placement when there are several).
    file.space.global_batches.clear();
    for (const Json& batch : space.value("global_batches", Json::array())) {
      file.space.global_batches.push_back(batch.get<int64_t>());
    }
    const Json& placements =
        space.value("search", Json::object()).value("embedding_sharding", Json::array());
    for (size_t i = 0; i < placements.size(); ++i) {
      const std::string where = JsonIndexPath("settings.space.search.embedding_sharding", i);
      Expected<std::vector<strategies::EmbeddingSharding>> placement =
          strategies::EmbeddingShardingFromJson(placements[i], where);
      if (!placement.ok()) return std::move(placement).error().InFile(path);
      file.space.embedding_shardings.push_back(*std::move(placement));
    }
    // Since 1.7 (the labels name the order when several were searched).
    const Json& orders = space.value("search", Json::object()).value("orders", Json::array());
    for (size_t i = 0; i < orders.size(); ++i) {
      Expected<std::array<strategies::PlanDimension, 3>> order = strategies::ParsePlanOrder(
          orders[i].get<std::string>(), JsonIndexPath("settings.space.search.orders", i));
      if (!order.ok()) return std::move(order).error().InFile(path);
      file.space.orders.push_back(*order);
    }
  } catch (const Json::exception& e) {
    return fail(fmt::format("malformed search result head: {}", e.what()), "");
  }
  const Json& columns = json.value("columns", Json::array());
  const Json& plans = json.value("plans", Json::array());
  if (!columns.is_array() || !plans.is_array()) {
    return fail("expected \"columns\" and \"plans\" arrays", "columns");
  }
  std::map<std::string, size_t> at;
  for (size_t i = 0; i < columns.size(); ++i) {
    if (!columns[i].is_string()) {
      return fail("expected a column name", JsonIndexPath("columns", i),
                  JsonValueForError(columns[i]));
    }
    at[columns[i].get<std::string>()] = i;
  }
  for (const Column& column : Columns()) {
    if (!at.contains(std::string(column.name)) && !column.added_later) {
      return fail("missing column", "columns", Quote(column.name));
    }
  }
  for (size_t row = 0; row < plans.size(); ++row) {
    const Json& cells = plans[row];
    const std::string location = JsonIndexPath("plans", row);
    if (!cells.is_array() || cells.size() != columns.size()) {
      return fail(fmt::format("expected {} cells", columns.size()), location,
                  JsonValueForError(cells));
    }
    EvaluatedPlan plan;
    for (const Column& column : Columns()) {
      const auto found = at.find(std::string(column.name));
      if (found == at.end()) continue;  // a column added since the file's version
      const size_t index = found->second;
      if (Status read = column.read(cells[index], plan); !read.ok()) {
        return fail(fmt::format("{}: {}", column.name, read.error().message()),
                    JsonIndexPath(location, index), read.error().value());
      }
      // "status" is read before any figure (Columns() order): a simulated plan has them all.
      if (column.figure && plan.status == PlanStatus::kSimulated && cells[index].is_null()) {
        return fail(fmt::format("{}: missing on a simulated plan", column.name),
                    JsonIndexPath(location, index), "null");
      }
    }
    if (plan.choice.compression < 0 ||
        static_cast<size_t>(plan.choice.compression) >= file.space.compression.size()) {
      return fail("compression index out of range", location,
                  std::to_string(plan.choice.compression));
    }
    if (plan.status == PlanStatus::kSimulated && !plan.figures) {
      return fail("a simulated plan without figures", location);
    }
    file.result.plans.push_back(std::move(plan));
  }
  if (!at.contains("order")) {
    DTSIM_ASSIGN_OR_RETURN(const auto order, ConfigOrder(file.settings, path));
    for (EvaluatedPlan& plan : file.result.plans) plan.choice.plan.order = order;
  }
  int64_t rerank = 0;
  if (file.settings.is_object() && file.settings.contains("rerank")) {
    Expected<int64_t> read =
        JsonToInt(file.settings["rerank"], "settings.rerank", 0, std::numeric_limits<int>::max());
    if (!read.ok()) return std::move(read).error().InFile(path);
    rerank = *read;
  }
  if (Status shown = CheckShownSettings(file.settings); !shown.ok()) {
    return std::move(shown).error().InFile(path);
  }
  if (Status ranking = CheckRanking(json, file.result.plans); !ranking.ok()) {
    return std::move(ranking).error().InFile(path);
  }
  RankPlans(file.result, static_cast<int>(rerank));
  return file;
}

Expected<SearchFile> MergeSearchFiles(std::vector<SearchFile> shards, int rerank) {
  if (shards.empty()) return Error("nothing to merge", "--merge");
  std::sort(shards.begin(), shards.end(),
            [](const SearchFile& a, const SearchFile& b) { return a.shard < b.shard; });
  SearchFile merged = std::move(shards.front());
  const int count = merged.shards;
  if (static_cast<int>(shards.size()) != count) {
    return Error(fmt::format("the search was split into {} shards, {} given", count, shards.size()),
                 "--merge", std::to_string(shards.size()));
  }
  for (size_t i = 1; i < shards.size(); ++i) {
    SearchFile& shard = shards[i];
    if (shard.settings != merged.settings || shard.shards != count) {
      return Error("shard is from a different search (its settings differ)", "--merge",
                   fmt::format("shard {}/{}", shard.shard, shard.shards));
    }
    if (shard.shard != static_cast<int>(i) + 1) {
      return Error(fmt::format("shard {}/{} is missing or repeated", i + 1, count), "--merge",
                   fmt::format("shard {}/{}", shard.shard, shard.shards));
    }
    for (EvaluatedPlan& plan : shard.result.plans) merged.result.plans.push_back(std::move(plan));
    merged.result.seconds = std::max(merged.result.seconds, shard.result.seconds);
  }
  if (merged.shard != 1) {
    return Error(fmt::format("shard 1/{} is missing", count), "--merge",
                 fmt::format("shard {}/{}", merged.shard, count));
  }
  std::sort(merged.result.plans.begin(), merged.result.plans.end(),
            [](const EvaluatedPlan& a, const EvaluatedPlan& b) { return a.index < b.index; });
  merged.shard = 1;
  merged.shards = 1;
  RankPlans(merged.result, rerank);
  // Each shard re-simulated its own best with the flow model; the whole search only the best
  // overall (among those, as every one of them is among its shard's best).
  std::vector<size_t>& ranking = merged.result.ranking;
  for (size_t k = static_cast<size_t>(std::max(rerank, 0)); k < ranking.size(); ++k) {
    std::optional<PlanFigures>& figures = merged.result.plans[ranking[k]].figures;
    figures->flow_iteration_time.reset();
    figures->flow_average_iteration_time.reset();
    figures->flow_time_to_train_s.reset();
  }
  return merged;
}

}  // namespace dtsim::results
