#include "tools/results/simulate_result.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <cmath>
#include <limits>

#include "sim/base/atomic_file.h"
#include "sim/base/buffered_text_writer.h"
#include "strategies/training_section.h"
#include "tools/results/result_file.h"
#include "tools/results/run_result.h"

namespace dtsim::results {
namespace {

using strategies::SimulationConfig;
using strategies::SimulationResult;

// "uniform", "balanced", or the counts per model chunk: given, or the uniform split's with the
// embedding and loss counted as layers.
OrderedJson LayerSplitJson(const strategies::ParallelPlan& plan) {
  switch (plan.layer_split) {
    case strategies::ParallelPlan::LayerSplit::kUniform:
      if (!plan.chunk_layers.empty()) return plan.chunk_layers;
      return "uniform";
    case strategies::ParallelPlan::LayerSplit::kBalanced:
      return "balanced";
    case strategies::ParallelPlan::LayerSplit::kGiven:
      break;
  }
  return plan.chunk_layers;
}

OrderedJson PlanJson(const SimulationConfig& c) {
  OrderedJson plan = {
      {"data", c.plan.data},
      {"tensor", c.plan.tensor},
      {"pipeline", c.plan.pipeline},
      {"context", c.plan.context},
      {"context_comm", models::ContextCommNames()[static_cast<size_t>(c.plan.context_comm)]},
      {"tensor_mode", models::TensorLayoutNames()[static_cast<size_t>(c.plan.tensor_layout)]},
      {"tensor_depth", c.plan.tensor_depth},
      {"sequence_parallel", c.plan.sequence_parallel},
      {"expert", c.plan.expert},
      {"expert_imbalance", c.plan.expert_imbalance},
      {"schedule", models::PipelineScheduleName(c.plan.schedule)},
      {"virtual_stages", c.plan.virtual_stages},
      {"layers", LayerSplitJson(c.plan)},
      {"zero_stage", c.plan.zero_stage},
      {"gradient_sync", strategies::GradientSyncName(c.plan.gradient_sync)},
      {"order", strategies::PlanOrderName(c.plan)},
      {"global_batch", c.training.global_batch},
      {"micro_batch", c.training.micro_batch},
      {"microbatches", c.Microbatches()},
      {"seq_len", c.training.seq_len},
      {"recompute", models::RecomputeName(c.training.recompute)},
      {"precision", c.training.fp8 != models::Fp8Recipe::kNone
                        ? std::string("fp8")
                        : std::string(DTypeName(c.training.dtype))},
      {"fp8_recipe", models::Fp8RecipeNames()[static_cast<size_t>(c.training.fp8)]}};
  // Only where the policy skips layers (training.recompute_every), so results of configs
  // without it keep their keys.
  if (c.training.recompute_every > 1) plan["recompute_every"] = c.training.recompute_every;
  // Megatron-Core's expert all-to-all overlap, likewise only when set.
  if (c.plan.expert_overlap) plan["expert_overlap"] = true;
  if (c.plan.expert_delay_wgrad) plan["expert_delay_wgrad"] = true;
  // Megatron-Core's modules "selective" re-runs, where not the core attention alone.
  if (c.training.recompute == models::Recompute::kSelective &&
      c.training.recompute_modules != models::kRecomputeCoreAttn) {
    OrderedJson modules = OrderedJson::array();
    for (size_t bit = 0; bit < models::RecomputeModuleNames().size(); ++bit) {
      if ((c.training.recompute_modules & (1U << bit)) != 0) {
        modules.push_back(models::RecomputeModuleNames()[bit]);
      }
    }
    plan["recompute_modules"] = std::move(modules);
  }
  // Likewise only for PyTorch (training.framework), with the parameters' dtype it defaults.
  if (c.training.framework != models::Framework::kMegatron) {
    plan["framework"] = models::FrameworkName(c.training.framework);
  }
  if (c.training.framework != models::Framework::kMegatron || c.training.fp8_params) {
    plan["param_precision"] =
        c.training.fp8_params ? std::string("fp8") : std::string(DTypeName(c.training.param_dtype));
  }
  // The gradients' and the optimizer state's dtypes, where not the defaults.
  if (c.training.grad_dtype != strategies::DefaultGradDtype(c.training)) {
    plan["grad_precision"] = DTypeName(c.training.grad_dtype);
  }
  if (c.training.optimizer_state.master != DType::kFp32) {
    plan["master_precision"] = DTypeName(c.training.optimizer_state.master);
  }
  if (c.training.optimizer_state.moments != DType::kFp32) {
    plan["moment_precision"] = DTypeName(c.training.optimizer_state.moments);
  }
  if (c.training.framework_release != std::array<int, 3>{0, 0, 0}) {
    plan["framework_version"] = fmt::format("{}", fmt::join(c.training.framework_release, "."));
  }
  return plan;
}

OrderedJson BreakdownJson(const strategies::TimeBreakdown& b) {
  return {{"rank", b.rank},
          {"compute_ns", b.compute.ns()},
          {"recompute_ns", b.recompute.ns()},
          {"tp_exposed_ns", b.tensor.ns()},
          {"pp_wait_ns", b.pipeline.ns()},
          {"ep_exposed_ns", b.expert.ns()},
          {"cp_exposed_ns", b.context.ns()},
          {"dp_exposed_ns", b.data_exposed.ns()},
          {"optimizer_ns", b.optimizer.ns()},
          {"idle_ns", b.idle.ns()},
          {"sm_shared_ns", b.sm_shared.ns()}};
}

OrderedJson MemoryJson(const models::MemoryBreakdown& m, Bytes capacity) {
  OrderedJson out = {{"parameters_bytes", m.parameters},
                     {"gradients_bytes", m.gradients},
                     {"optimizer_state_bytes", m.optimizer_state},
                     {"activations_bytes", m.activations},
                     {"temporary_bytes", m.temporary},
                     {"fp8_weights_bytes", m.fp8_weights}};
  if (m.reserve_modelled) out["allocator_reserve_bytes"] = m.allocator_reserve;
  out["runtime_bytes"] = m.runtime;
  out["nccl_bytes"] = m.nccl;
  out["total_bytes"] = m.total();
  out["capacity_bytes"] = capacity.count();
  out["microbatches_in_flight"] = m.microbatches_in_flight;
  return out;
}

OrderedJson CompressionJson(const SimulationConfig& c, const SimulationResult& r) {
  OrderedJson phases = OrderedJson::array();
  for (const strategies::PhaseResult& phase : r.phases) {
    phases.push_back({{"phase", strategies::CompressionPhaseName(phase.phase)},
                      {"steps", phase.steps},
                      {"iteration_time_ns", phase.iteration_time.ns()}});
  }
  return {{"method", c.compression.method},
          {"phases", std::move(phases)},
          {"average_iteration_time_ns", r.average_iteration_time.ns()}};
}

// DiLoCo's replicas and outer synchronization (docs/diloco.md).
OrderedJson DilocoJson(const SimulationConfig& c, const SimulationResult& r) {
  const strategies::DilocoConfig& config = *c.diloco;
  const strategies::DilocoResult& d = *r.diloco;
  return {{"replicas", config.replicas},
          {"replica_gpus", c.plan.world() / config.replicas},
          {"sync_every", config.sync_every},
          {"fragments", config.fragments},
          {"overlap_steps", config.overlap_steps},
          {"precision",
           std::string(strategies::OuterPrecisionNames()[static_cast<size_t>(config.precision)])},
          {"across_sites", config.link.has_value()},
          {"fragment_bytes", d.fragment_bytes.count()},
          {"copies_ns", d.copies.ns()},
          {"all_reduce_ns", d.all_reduce.ns()},
          {"update_ns", d.update.ns()},
          {"all_gather_ns", d.all_gather.ns()},
          {"synchronization_ns", d.synchronization.ns()},
          {"exposed_ns", d.exposed.ns()},
          {"inner_step_ns", r.iteration_time.ns()},
          {"average_step_ns", r.average_iteration_time.ns()},
          {"outer_state",
           std::string(strategies::OuterStateNames()[static_cast<size_t>(config.outer_state)])},
          {"outer_state_bytes", d.outer_state_bytes}};
}

// The training run (docs/time_to_train.md): seconds, tokens and counts as numbers.
OrderedJson TimeToTrainJson(const strategies::TimeToTrain& t) {
  const strategies::TokenBudget& b = t.budget;
  OrderedJson out = {{"budget", b.how},
                     {"unit", b.unit},
                     {"budget_tokens", b.budget_tokens},
                     {"batch_factor", b.batch_factor},
                     {"tokens", b.tokens},
                     {"iterations", b.iterations},
                     {"compute_s", t.compute_s},
                     {"wall_s", t.wall_s},
                     {"gpu_hours", t.gpu_hours}};
  if (t.cost) out["cost"] = *t.cost;
  if (t.reliability) {
    const strategies::ReliabilityEstimate& r = *t.reliability;
    // An infinite MTBF (no failures) is written as null: JSON has no infinity.
    out["reliability"] = {
        {"mtbf_s", std::isfinite(r.mtbf_s) ? OrderedJson(r.mtbf_s) : OrderedJson()},
        {"expected_failures", r.expected_failures},
        {"checkpoint_interval_s", r.interval_s},
        {"checkpoint_interval_optimal", r.interval_optimal},
        {"checkpoints", r.checkpoints},
        {"checkpoint_blocking_s", r.save_blocking_s},
        {"checkpoint_write_s", r.save_write_s},
        {"restart_s", r.restart_s},
        {"lost_per_failure_s", r.lost_per_failure_s},
        {"effective_training_time_ratio", r.effective_training_time_ratio}};
  }
  out["assumptions"] = t.assumptions;
  return out;
}

// The transformer layers stage `i` holds (null for a model without layers to split).
OrderedJson StageLayerCount(const SimulationConfig& c, const SimulationResult& r, size_t i) {
  if (c.model.family != models::ModelFamily::kTransformer) return nullptr;
  if (!r.stage_layers.empty()) return r.stage_layers[i];
  return c.model.transformer.layers / c.plan.pipeline;
}

Expected<DurationNs> Nanoseconds(JsonObjectReader& reader, std::string_view key) {
  DTSIM_ASSIGN_OR_RETURN(const int64_t ns, reader.Int(key));
  return DurationNs(ns);
}

Expected<strategies::TimeBreakdown> BreakdownFromJson(JsonObjectReader& time) {
  strategies::TimeBreakdown b;
  DTSIM_ASSIGN_OR_RETURN(const int64_t rank, time.Int("rank"));
  b.rank = static_cast<int32_t>(rank);
  DTSIM_ASSIGN_OR_RETURN(b.compute, Nanoseconds(time, "compute_ns"));
  DTSIM_ASSIGN_OR_RETURN(b.recompute, Nanoseconds(time, "recompute_ns"));
  DTSIM_ASSIGN_OR_RETURN(b.tensor, Nanoseconds(time, "tp_exposed_ns"));
  DTSIM_ASSIGN_OR_RETURN(b.pipeline, Nanoseconds(time, "pp_wait_ns"));
  DTSIM_ASSIGN_OR_RETURN(b.expert, Nanoseconds(time, "ep_exposed_ns"));
  if (time.Has("cp_exposed_ns")) {  // since 1.2
    DTSIM_ASSIGN_OR_RETURN(b.context, Nanoseconds(time, "cp_exposed_ns"));
  }
  DTSIM_ASSIGN_OR_RETURN(b.data_exposed, Nanoseconds(time, "dp_exposed_ns"));
  DTSIM_ASSIGN_OR_RETURN(b.optimizer, Nanoseconds(time, "optimizer_ns"));
  DTSIM_ASSIGN_OR_RETURN(b.idle, Nanoseconds(time, "idle_ns"));
  if (time.Has("sm_shared_ns")) {  // since 1.10
    DTSIM_ASSIGN_OR_RETURN(b.sm_shared, Nanoseconds(time, "sm_shared_ns"));
  }
  return b;
}

Expected<models::MemoryBreakdown> MemoryFromJson(JsonObjectReader& memory) {
  models::MemoryBreakdown m;
  DTSIM_ASSIGN_OR_RETURN(m.parameters, memory.Int("parameters_bytes"));
  DTSIM_ASSIGN_OR_RETURN(m.gradients, memory.Int("gradients_bytes"));
  DTSIM_ASSIGN_OR_RETURN(m.optimizer_state, memory.Int("optimizer_state_bytes"));
  DTSIM_ASSIGN_OR_RETURN(m.activations, memory.Int("activations_bytes"));
  DTSIM_ASSIGN_OR_RETURN(m.temporary, memory.Int("temporary_bytes"));
  // Since 1.1.
  if (memory.Has("fp8_weights_bytes")) {
    DTSIM_ASSIGN_OR_RETURN(m.fp8_weights, memory.Int("fp8_weights_bytes"));
  }
  // Since 1.4.
  if (memory.Has("runtime_bytes")) {
    DTSIM_ASSIGN_OR_RETURN(m.runtime, memory.Int("runtime_bytes"));
  }
  // Since 1.8.
  if (memory.Has("nccl_bytes")) {
    DTSIM_ASSIGN_OR_RETURN(m.nccl, memory.Int("nccl_bytes"));
  }
  // Since 1.9, where modelled.
  if (memory.Has("allocator_reserve_bytes")) {
    DTSIM_ASSIGN_OR_RETURN(m.allocator_reserve, memory.Int("allocator_reserve_bytes"));
    m.reserve_modelled = true;
  }
  DTSIM_ASSIGN_OR_RETURN(m.microbatches_in_flight, memory.Number("microbatches_in_flight"));
  // The GPU's memory, drawn by `dtsim report` as the line a stage must stay under.
  int64_t capacity = 0;
  DTSIM_RETURN_IF_ERROR(
      memory.ReadOptional("capacity_bytes", 0, std::numeric_limits<int64_t>::max(), capacity));
  DTSIM_ASSIGN_OR_RETURN(const int64_t total, memory.Int("total_bytes"));
  if (total != m.total()) {
    return Error(fmt::format("is not the sum of the parts ({} bytes)", m.total()),
                 JsonChildPath(memory.path(), "total_bytes"), std::to_string(total));
  }
  return m;
}

Status ReadStages(JsonObjectReader& root, SimulateResultRecord& record) {
  DTSIM_ASSIGN_OR_RETURN(const Json* stages, ChildArray(root, "stages"));
  if (stages->empty())
    return Error("expected at least one stage", JsonChildPath(root.path(), "stages"));
  for (size_t i = 0; i < stages->size(); ++i) {
    DTSIM_ASSIGN_OR_RETURN(
        JsonObjectReader stage,
        JsonObjectReader::Make((*stages)[i],
                               JsonIndexPath(JsonChildPath(root.path(), "stages"), i)));
    DTSIM_ASSIGN_OR_RETURN(JsonObjectReader time, ChildObject(stage, "time"));
    DTSIM_ASSIGN_OR_RETURN(JsonObjectReader memory, ChildObject(stage, "memory"));
    DTSIM_ASSIGN_OR_RETURN(strategies::TimeBreakdown breakdown, BreakdownFromJson(time));
    DTSIM_ASSIGN_OR_RETURN(models::MemoryBreakdown footprint, MemoryFromJson(memory));
    record.stage_times.push_back(breakdown);
    record.stage_memory.push_back(footprint);
  }
  return Status::Ok();
}

Status ReadInput(JsonObjectReader& root, SimulateResultRecord& record) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader input, ChildObject(root, "input"));
  DTSIM_ASSIGN_OR_RETURN(record.config, input.String("config"));
  DTSIM_ASSIGN_OR_RETURN(record.model, input.String("model"));
  DTSIM_ASSIGN_OR_RETURN(record.gpu, input.String("gpu"));
  DTSIM_ASSIGN_OR_RETURN(record.cluster, input.String("cluster"));
  // Sizes a run has at least one of (`dtsim report` divides by them and draws them on log axes).
  constexpr int64_t kMost = std::numeric_limits<int32_t>::max();
  DTSIM_RETURN_IF_ERROR(input.Int("nodes"));
  DTSIM_RETURN_IF_ERROR(input.ReadOptional("nodes", 1, kMost, record.nodes));
  DTSIM_RETURN_IF_ERROR(input.Int("gpus_per_node"));
  DTSIM_RETURN_IF_ERROR(input.ReadOptional("gpus_per_node", 1, kMost, record.gpus_per_node));
  DTSIM_ASSIGN_OR_RETURN(record.network_model, input.String("network_model"));
  DTSIM_ASSIGN_OR_RETURN(record.cost_model, input.String("cost_model"));
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader plan, ChildObject(input, "plan"));
  for (const char* key : {"data", "tensor", "pipeline", "micro_batch", "zero_stage"}) {
    DTSIM_RETURN_IF_ERROR(plan.Int(key));
    int64_t value = 0;
    const bool stage = std::string_view(key) == "zero_stage";
    DTSIM_RETURN_IF_ERROR(plan.ReadOptional(key, stage ? 0 : 1, stage ? 3 : kMost, value));
  }
  if (input.Has("calibration")) {  // since 1.5: which calibration set the GPU's constants
    DTSIM_ASSIGN_OR_RETURN(JsonObjectReader calibration, ChildObject(input, "calibration"));
    DTSIM_RETURN_IF_ERROR(calibration.String("source"));
  }
  return Status::Ok();
}

// Optional sections that `dtsim report` and `dtsim diff` show beside the figures: absent in
// older files, of their written shape when present (an object, not a string; the band a
// number), so that what the readers accept the report can draw.
Status ReadDescriptions(JsonObjectReader& root) {
  if (root.Has("error_band")) {
    DTSIM_ASSIGN_OR_RETURN(JsonObjectReader band, ChildObject(root, "error_band"));
    DTSIM_RETURN_IF_ERROR(band.Number("mape_percent"));
  }
  if (!root.Has("provenance")) return Status::Ok();
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader provenance, ChildObject(root, "provenance"));
  if (!provenance.Has("resolved")) return Status::Ok();
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader resolved, ChildObject(provenance, "resolved"));
  if (resolved.Has("cluster")) DTSIM_RETURN_IF_ERROR(ChildObject(resolved, "cluster"));
  return Status::Ok();
}

}  // namespace

// Every distinct communication, costliest first (strategies/collective_summary.h).
OrderedJson CollectivesJson(const SimulationResult& r) {
  OrderedJson out = OrderedJson::array();
  for (const strategies::CollectiveSummary& sum : r.collectives) {
    out.push_back({{"op", graph::CommKindName(sum.kind)},
                   {"size_bytes", sum.size_bytes},
                   {"group_size", sum.group_size},
                   {"method", sum.method},
                   {"count", sum.count},
                   {"total_ns", sum.total.ns()},
                   {"longest_ns", sum.longest.ns()}});
  }
  return out;
}

std::array<DurationNs, 9> BreakdownCsvParts(const strategies::TimeBreakdown& b) {
  return {b.compute,  b.recompute,    b.tensor,    b.expert, b.context,
          b.pipeline, b.data_exposed, b.optimizer, b.idle};
}

std::string CsvPathBeside(const std::string& result_path) {
  for (const std::string_view suffix : {".json.gz", ".json"}) {
    if (result_path.size() > suffix.size() && result_path.ends_with(suffix)) {
      return result_path.substr(0, result_path.size() - suffix.size()) + ".csv";
    }
  }
  return result_path + ".csv";
}

Status WriteSimulateCsv(const std::string& path, const SimulationConfig& c,
                        const SimulationResult& r) {
  DTSIM_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> writer, AtomicFileWriter::Open(path));
  BufferedTextWriter csv(writer->stream());
  csv.Append(
      "stage,layers,rank,iteration_time_s,{},parameters_bytes,gradients_bytes,"
      "optimizer_state_bytes,activations_bytes,temporary_bytes,fp8_weights_bytes,"
      "runtime_bytes,nccl_bytes,memory_bytes,capacity_bytes\n",
      kBreakdownCsvColumns);
  const std::vector<models::MemoryBreakdown>& memory = r.iteration->stats.stage_memory;
  for (size_t i = 0; i < r.stages.size(); ++i) {
    const strategies::TimeBreakdown& b = r.stages[i];
    const OrderedJson layers = StageLayerCount(c, r, i);
    csv.Append("{},{},{},{}", i, layers.is_null() ? std::string() : layers.dump(), b.rank,
               r.iteration_time.ToSecondsDouble());
    for (DurationNs part : BreakdownCsvParts(b)) csv.Append(",{}", part.ToSecondsDouble());
    const models::MemoryBreakdown& m = memory[i];
    csv.Append(",{},{},{},{},{},{},{},{},{},{}\n", m.parameters, m.gradients, m.optimizer_state,
               m.activations, m.temporary, m.fp8_weights, m.runtime, m.nccl, m.total(),
               c.gpu.memory.count());
  }
  csv.Flush();
  return writer->Commit();
}

OrderedJson SimulateResultJson(const SimulationConfig& c, const SimulationResult& r) {
  const strategies::IterationStats& stats = r.iteration->stats;
  OrderedJson stages = OrderedJson::array();
  for (size_t i = 0; i < r.stages.size(); ++i) {
    OrderedJson stage = {{"stage", i},
                         {"layers", StageLayerCount(c, r, i)},
                         {"time", BreakdownJson(r.stages[i])},
                         {"memory", MemoryJson(stats.stage_memory[i], c.gpu.memory)}};
    stages.push_back(std::move(stage));
  }
  OrderedJson sources = OrderedJson::object();
  for (auto source : {models::CostSource::kMeasured, models::CostSource::kInterpolated,
                      models::CostSource::kRoofline}) {
    sources[std::string(models::CostSourceName(source))] = stats.sources.Share(source);
  }
  OrderedJson document = FormatHeader(kSimulateResultFormat);
  document.update(OrderedJson{{"input",
                               {{"config", c.source},
                                {"model", c.model.name},
                                {"gpu", c.gpu.name},
                                {"cluster", c.cluster.name},
                                {"nodes", c.cluster.nodes},
                                {"gpus_per_node", c.cluster.gpus_per_node},
                                {"network_model", c.network_model->name},
                                {"cost_model", r.cost_model},
                                {"plan", PlanJson(c)}}},
                              {"iteration_time_ns", r.iteration_time.ns()},
                              {"samples_per_second", r.samples_per_second},
                              {"tokens_per_second", r.tokens_per_second},
                              {"model_tflops_per_gpu", r.model_tflops_per_gpu},
                              {"hardware_tflops_per_gpu", r.hardware_tflops_per_gpu},
                              {"mfu", r.mfu},
                              {"hfu", r.hfu},
                              {"mfu_fp8", r.mfu_fp8},
                              {"model_flops_per_iteration", stats.model_flops},
                              {"hardware_flops_per_iteration", stats.hardware_flops},
                              {"stages", std::move(stages)},
                              {"compression", CompressionJson(c, r)},
                              {"collectives", CollectivesJson(r)},
                              {"warnings", r.warnings},
                              {"cost_source_shares", std::move(sources)},
                              {"simulator",
                               {{"tasks", r.summary.tasks},
                                {"communications", r.summary.communications},
                                {"events", r.summary.events},
                                {"fingerprint", FingerprintText(r.summary.fingerprint)},
                                {"build_seconds", r.build_seconds},
                                {"simulate_seconds", r.simulate_seconds}}}});
  if (r.time_to_train) document["time_to_train"] = TimeToTrainJson(*r.time_to_train);
  if (r.diloco) document["diloco"] = DilocoJson(c, r);
  // Which calibration set the GPU's constants (strategies/calibration.h), when one did.
  if (!c.calibration_source.empty()) {
    document["input"]["calibration"] = {{"source", c.calibration_source},
                                        {"constants", c.calibration}};
  }
  // The calibration's error band for this GPU and framework (docs/calibration.md).
  if (c.error_band) {
    document["error_band"] = {{"mape_percent", c.error_band->mean_absolute_percentage_error},
                              {"mean_error_percent", c.error_band->mean_error},
                              {"points", c.error_band->points},
                              {"gpu", c.error_band->gpu},
                              {"framework", c.error_band->framework}};
  }
  return document;
}

Expected<SimulateResultRecord> SimulateResultFromJson(const Json& document,
                                                      const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader root, JsonObjectReader::Make(document, path));
  DTSIM_RETURN_IF_ERROR(CheckFormat(root, kSimulateResultFormat));
  SimulateResultRecord record;
  DTSIM_RETURN_IF_ERROR(ReadInput(root, record));
  DTSIM_ASSIGN_OR_RETURN(record.iteration_time, Nanoseconds(root, "iteration_time_ns"));
  DTSIM_ASSIGN_OR_RETURN(record.samples_per_second, root.Number("samples_per_second"));
  DTSIM_ASSIGN_OR_RETURN(record.tokens_per_second, root.Number("tokens_per_second"));
  DTSIM_ASSIGN_OR_RETURN(record.mfu, root.Number("mfu"));
  DTSIM_ASSIGN_OR_RETURN(record.hfu, root.Number("hfu"));
  if (root.Has("mfu_fp8")) {  // since 1.1
    DTSIM_ASSIGN_OR_RETURN(record.mfu_fp8, root.Number("mfu_fp8"));
  }
  DTSIM_RETURN_IF_ERROR(ReadStages(root, record));
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader compression, ChildObject(root, "compression"));
  DTSIM_ASSIGN_OR_RETURN(record.compression, compression.String("method"));
  DTSIM_ASSIGN_OR_RETURN(record.average_iteration_time,
                         Nanoseconds(compression, "average_iteration_time_ns"));
  DTSIM_ASSIGN_OR_RETURN(const Json* warnings, ChildArray(root, "warnings"));
  for (size_t i = 0; i < warnings->size(); ++i) {
    const Json& warning = (*warnings)[i];
    if (!warning.is_string()) {
      return Error("expected a string", JsonIndexPath(JsonChildPath(path, "warnings"), i),
                   JsonValueForError(warning));
    }
    record.warnings.push_back(warning.get<std::string>());
  }
  if (root.Has("time_to_train")) {  // since 1.11
    DTSIM_ASSIGN_OR_RETURN(JsonObjectReader run, ChildObject(root, "time_to_train"));
    DTSIM_ASSIGN_OR_RETURN(record.time_to_train_s, run.Number("wall_s"));
  }
  DTSIM_RETURN_IF_ERROR(ReadDescriptions(root));
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader simulator, ChildObject(root, "simulator"));
  DTSIM_ASSIGN_OR_RETURN(const std::string fingerprint, simulator.String("fingerprint"));
  DTSIM_ASSIGN_OR_RETURN(
      record.fingerprint,
      FingerprintFromText(fingerprint, JsonChildPath(simulator.path(), "fingerprint")));
  return record;
}

}  // namespace dtsim::results
