#include "tools/results/replay_result.h"

#include "tools/results/provenance.h"
#include "tools/results/result_file.h"

namespace dtsim::results {
namespace {

double Ms(DurationNs duration) { return static_cast<double>(duration.ns()) / 1e6; }

OrderedJson ImportStatsJson(const traces::Trace& trace) {
  const traces::ImportStats& s = trace.stats;
  OrderedJson categories = OrderedJson::object();
  for (const auto& [category, count] : s.categories) categories[category] = count;
  OrderedJson dropped = OrderedJson::object();
  for (const auto& [reason, count] : s.dropped) dropped[reason] = count;
  return {{"file", trace.file},
          {"format", trace.format},
          {"rank", trace.rank},
          {"world_size", trace.world_size},
          {"gpu", trace.gpu_name},
          {"bytes", s.bytes},
          {"file_bytes", s.file_bytes},
          {"gzip", s.gzip},
          {"events", s.events},
          {"host_ops", s.host_ops},
          {"annotations", s.annotations},
          {"api_calls", s.api_calls},
          {"kernels", s.kernels},
          {"memcpys", s.memcpys},
          {"memsets", s.memsets},
          {"streams", trace.StreamCount()},
          {"sync_records", s.syncs},
          {"collectives", s.collectives},
          {"collectives_inferred", s.collectives_inferred},
          {"flows", s.flows},
          {"profiler_steps", trace.steps.size()},
          {"launches_without_gpu_op", s.launches_without_gpu_op},
          {"gpu_ops_without_launch", s.gpu_ops_without_launch},
          {"dropped", std::move(dropped)},
          {"categories", std::move(categories)}};
}

OrderedJson ChakraImportStatsJson(const traces::ChakraTrace& trace) {
  const traces::ChakraImportStats& s = trace.stats;
  OrderedJson types = OrderedJson::object();
  for (int type = 0; type < traces::kChakraNodeTypeCount; ++type) {
    if (s.nodes_by_type[type] == 0) continue;
    types[std::string(traces::ChakraNodeTypeName(static_cast<traces::ChakraNodeType>(type)))] =
        s.nodes_by_type[type];
  }
  return {{"file", trace.file},
          {"format", "chakra"},
          {"form", s.form},
          {"schema_version", trace.version},
          {"bytes", s.bytes},
          {"file_bytes", s.file_bytes},
          {"gzip", s.gzip},
          {"nodes", s.nodes},
          {"nodes_by_type", std::move(types)},
          {"collectives", s.collectives},
          {"cpu_ops", s.cpu_ops},
          {"attributes", s.attributes},
          {"data_deps", s.data_deps},
          {"dangling_data_deps", s.dangling_data_deps},
          {"ctrl_deps", s.ctrl_deps},
          {"duplicate_ids", s.duplicate_ids},
          {"nodes_without_duration", s.nodes_without_duration},
          {"unknown_fields", s.unknown_fields}};
}

// A step's critical path: ms per part (strategies/replay_path.h), and with `sped_up` the GPU
// time of the what-if's kernel classes on it.
OrderedJson PathJson(const strategies::StepPath& path, bool sped_up) {
  OrderedJson json = OrderedJson::object();
  for (size_t part = 0; part < strategies::kPathParts; ++part) {
    json[std::string(strategies::PathPartName(static_cast<strategies::PathPart>(part)))] =
        Ms(path.parts[part]);
  }
  if (sped_up) json["sped_up"] = Ms(path.sped_up);
  json["on_peers"] = Ms(path.on_peers);
  return json;
}

OrderedJson WhatIfJson(const WhatIfOutcome& outcome, const std::vector<int32_t>& ranks) {
  const strategies::WhatIfResult& result = outcome.result;
  const traces::ReplayStats& g = result.graph.stats;
  const bool speedups = !outcome.what_if.speedups.empty();
  OrderedJson steps = OrderedJson::array();
  for (const strategies::WhatIfStep& step : result.steps) {
    OrderedJson row = {{"rank", ranks[step.trace]},
                       {"step", step.number},
                       {"measured_ms", Ms(step.measured)},
                       {"replayed_ms", Ms(step.replayed)},
                       {"what_if_ms", Ms(step.what_if)},
                       {"change", step.Change()},
                       {"replayed_critical_path_ms", PathJson(step.replayed_path, speedups)},
                       {"what_if_critical_path_ms", PathJson(step.what_if_path, speedups)}};
    if (speedups) {
      if (std::string why = strategies::WhyUnmoved(step.replayed_path, step.Change());
          !why.empty()) {
        row["why_unmoved"] = std::move(why);
      }
    }
    steps.push_back(std::move(row));
  }
  return {{"description", outcome.what_if.Describe()},
          {"communication_model", result.communication_model},
          {"sped_up_ops", g.sped_up_ops},
          {"moved_collectives", g.moved_collectives},
          {"rescaled_collectives", g.rescaled_collectives},
          {"compressed_collectives", g.rewritten_collectives},
          {"peer_waits", g.peer_waits},
          {"peer_wait_ms", Ms(g.peer_wait_time)},
          {"replayed_span_ms", Ms(result.replayed_span)},
          {"what_if_span_ms", Ms(result.what_if_span)},
          {"steps", std::move(steps)}};
}

// A job of several traces: each trace's rank and import statistics, the collectives they
// shared, and each clock against the first trace's.
OrderedJson JobJson(std::span<const traces::Trace* const> job, const traces::ReplayGraph& replay) {
  OrderedJson traces = OrderedJson::array();
  for (size_t i = 0; i < job.size(); ++i) {
    traces.push_back({{"rank", replay.ranks[i]},
                      {"clock_offset_ms", Ms(replay.job.clock_offset[i])},
                      {"clock_aligned", static_cast<bool>(replay.job.aligned[i])},
                      {"unmatched_collectives", replay.job.unmatched[i]},
                      {"import", ImportStatsJson(*job[i])}});
  }
  return {{"shared_collectives", replay.job.collectives.size()}, {"traces", std::move(traces)}};
}

// The keys every replay result has, in order.
OrderedJson Document(OrderedJson trace, OrderedJson graph, DurationNs span) {
  OrderedJson document = FormatHeader(kReplayResultFormat);
  document["trace"] = std::move(trace);
  document["graph"] = std::move(graph);
  document["simulated_span_ms"] = Ms(span);
  document["provenance"] = ProvenanceJson();
  return document;
}

// A critical path (ms per part, PathJson) when `key` is present: an object of numbers, as
// `dtsim report` draws it.
Status CheckPathMs(JsonObjectReader& parent, std::string_view key) {
  if (!parent.Has(key)) return Status::Ok();
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader path, ChildObject(parent, key));
  for (const auto& [part, ms] : parent.Find(key)->items()) {
    if (!ms.is_number()) {
      return Error("expected a number of milliseconds", JsonChildPath(path.path(), part),
                   JsonValueForError(ms));
    }
  }
  return Status::Ok();
}

Expected<ReplayResultRecord::Step> StepFromJson(const Json& value, const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader step, JsonObjectReader::Make(value, path));
  ReplayResultRecord::Step out;
  DTSIM_ASSIGN_OR_RETURN(out.number, step.Int("step"));
  DTSIM_ASSIGN_OR_RETURN(out.measured_ms, step.Number("measured_ms"));
  DTSIM_ASSIGN_OR_RETURN(out.simulated_ms, step.Number("simulated_ms"));
  if (step.Has("rank")) DTSIM_RETURN_IF_ERROR(step.Int("rank"));  // since 1.3
  DTSIM_RETURN_IF_ERROR(CheckPathMs(step, "critical_path_ms"));   // since 1.2
  return out;
}

// A what-if's step, as `dtsim report` tabulates and draws it beside the replayed one.
Status CheckWhatIfStep(const Json& value, const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader step, JsonObjectReader::Make(value, path));
  DTSIM_RETURN_IF_ERROR(step.Number("what_if_ms"));
  DTSIM_RETURN_IF_ERROR(step.Number("change"));
  DTSIM_RETURN_IF_ERROR(CheckPathMs(step, "what_if_critical_path_ms"));
  if (step.Has("why_unmoved")) DTSIM_RETURN_IF_ERROR(step.String("why_unmoved"));
  return Status::Ok();
}

Expected<ReplayResultRecord::WhatIf> WhatIfFromJson(JsonObjectReader& what_if) {
  ReplayResultRecord::WhatIf out;
  DTSIM_ASSIGN_OR_RETURN(out.description, what_if.String("description"));
  DTSIM_ASSIGN_OR_RETURN(out.replayed_span_ms, what_if.Number("replayed_span_ms"));
  DTSIM_ASSIGN_OR_RETURN(out.what_if_span_ms, what_if.Number("what_if_span_ms"));
  if (what_if.Has("steps")) {
    DTSIM_ASSIGN_OR_RETURN(const Json* steps, ChildArray(what_if, "steps"));
    for (size_t i = 0; i < steps->size(); ++i) {
      DTSIM_RETURN_IF_ERROR(
          CheckWhatIfStep((*steps)[i], JsonIndexPath(JsonChildPath(what_if.path(), "steps"), i)));
    }
  }
  return out;
}

}  // namespace

OrderedJson ReplayResultJson(std::span<const traces::Trace* const> job,
                             const traces::ReplayGraph& replay,
                             const strategies::ReplayResult& result,
                             std::optional<WhatIfOutcome> what_if) {
  const traces::ReplayStats& g = replay.stats;
  OrderedJson document = Document(ImportStatsJson(*job.front()),
                                  {{"tasks", replay.graph.task_count()},
                                   {"host_tasks", g.host_tasks},
                                   {"gpu_tasks", g.gpu_tasks},
                                   {"collectives", g.collectives},
                                   {"launch_edges", g.launch_edges},
                                   {"stream_wait_edges", g.stream_wait_edges},
                                   {"sync_edges", g.sync_edges},
                                   {"inferred_sync_edges", g.inferred_sync_edges},
                                   {"inferred_stream_edges", g.inferred_stream_edges},
                                   {"inferred_thread_edges", g.inferred_thread_edges},
                                   {"inferred_queue_edges", g.inferred_queue_edges},
                                   {"gpu_gaps", g.gpu_gaps},
                                   {"gpu_gap_ms", Ms(g.gpu_gap_time)},
                                   {"unsized_collectives", g.unsized_collectives},
                                   {"shared_collectives", g.job_collectives}},
                                  result.summary.makespan - TimeNs::Zero());
  if (job.size() > 1) document["job"] = JobJson(job, replay);
  document["gpu_op_start_drift_us"] = {{"mean", result.mean_start_drift.ToMicrosecondsDouble()},
                                       {"max", result.max_start_drift.ToMicrosecondsDouble()},
                                       {"ops", result.gpu_ops}};
  OrderedJson steps = OrderedJson::array();
  for (const strategies::ReplayStepResult& step : result.steps) {
    steps.push_back({{"rank", replay.ranks[step.trace]},
                     {"step", step.number},
                     {"measured_ms", Ms(step.measured)},
                     {"simulated_ms", Ms(step.simulated)},
                     {"error", step.Error()},
                     {"critical_path_ms", PathJson(step.path, false)}});
  }
  document["steps"] = std::move(steps);
  document["mean_absolute_error"] = result.mean_absolute_error;
  if (what_if) document["what_if"] = WhatIfJson(*what_if, replay.ranks);
  return document;
}

OrderedJson ChakraReplayResultJson(const traces::ChakraTrace& trace,
                                   const traces::ChakraGraph& chakra, DurationNs span,
                                   const std::optional<ChakraNetworkOutcome>& priced,
                                   std::string_view compute_gpu) {
  const traces::ChakraGraphStats& g = chakra.stats;
  OrderedJson document = Document(ChakraImportStatsJson(trace),
                                  {{"tasks", chakra.graph.task_count()},
                                   {"host_tasks", g.host_tasks},
                                   {"gpu_tasks", g.gpu_tasks},
                                   {"collectives", g.collectives},
                                   {"point_to_point", g.point_to_point},
                                   {"dependencies", g.dependencies},
                                   {"dangling_dependencies", g.dangling_dependencies},
                                   {"collectives_outside_groups", g.collectives_outside_groups},
                                   {"compute_priced", g.compute_priced},
                                   {"compute_unpriced", g.compute_unpriced}},
                                  span);
  if (!chakra.conventions.producer.empty()) {
    document["conventions"] = {
        {"producer", chakra.conventions.producer},
        {"sizes", chakra.conventions.sizes_in_elements ? "elements" : "bytes"},
        {"element_bytes", chakra.element_bytes}};
  }
  if (!compute_gpu.empty()) document["compute_priced_on"] = compute_gpu;
  document["steps"] = OrderedJson::array();
  if (priced) {
    document["network"] = {{"cluster", priced->cluster},
                           {"communication_model", "analytical"},
                           {"span_ms", Ms(priced->span)}};
  }
  return document;
}

Expected<ReplayResultRecord> ReplayResultFromJson(const Json& document) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader root, JsonObjectReader::Make(document, ""));
  DTSIM_RETURN_IF_ERROR(CheckFormat(root, kReplayResultFormat));
  ReplayResultRecord record;
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader trace, ChildObject(root, "trace"));
  DTSIM_ASSIGN_OR_RETURN(record.trace_file, trace.String("file"));
  DTSIM_ASSIGN_OR_RETURN(record.trace_format, trace.String("format"));
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader graph, ChildObject(root, "graph"));
  DTSIM_ASSIGN_OR_RETURN(record.tasks, graph.Int("tasks"));
  DTSIM_ASSIGN_OR_RETURN(record.simulated_span_ms, root.Number("simulated_span_ms"));
  DTSIM_ASSIGN_OR_RETURN(const Json* steps, ChildArray(root, "steps"));
  for (size_t i = 0; i < steps->size(); ++i) {
    DTSIM_ASSIGN_OR_RETURN(ReplayResultRecord::Step step,
                           StepFromJson((*steps)[i], JsonIndexPath("steps", i)));
    record.steps.push_back(step);
  }
  if (root.Has("mean_absolute_error")) {
    DTSIM_ASSIGN_OR_RETURN(record.mean_absolute_error, root.Number("mean_absolute_error"));
  }
  if (root.Has("what_if")) {
    DTSIM_ASSIGN_OR_RETURN(JsonObjectReader what_if, ChildObject(root, "what_if"));
    DTSIM_ASSIGN_OR_RETURN(record.what_if, WhatIfFromJson(what_if));
  }
  if (root.Has("job")) {  // since 1.4: several traces, one a rank
    DTSIM_ASSIGN_OR_RETURN(JsonObjectReader job, ChildObject(root, "job"));
    DTSIM_RETURN_IF_ERROR(ChildArray(job, "traces"));
  }
  return record;
}

}  // namespace dtsim::results
