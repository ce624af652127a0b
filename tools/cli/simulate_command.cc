#include "tools/cli/simulate_command.h"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include "sim/base/atomic_file.h"
#include "sim/base/quantity.h"
#include "strategies/simulate.h"
#include "tools/cli/command_line.h"
#include "tools/cli/run_report.h"
#include "traces/chakra_writer.h"
#include "traces/chrome_trace_writer.h"

namespace dtsim::cli {
namespace {

namespace po = boost::program_options;
using strategies::SimulationConfig;
using strategies::SimulationResult;

struct SimulateOptions {
  std::string config;
  std::vector<std::string> overrides;
  std::string result_path;
  std::string timeline_path;
  std::string chakra_prefix;
  std::string op_list_path;
  std::string max_memory;
  bool quiet = false;
  bool help = false;
};

po::options_description Describe(SimulateOptions& o) {
  po::options_description description(
      "Usage: dtsim simulate CONFIG [options]\n\n"
      "Builds one training iteration of the model, cluster and parallel plan in CONFIG\n"
      "(docs/config.md), simulates it, and reports iteration time, throughput, MFU, where the\n"
      "time went and memory per GPU.\n\nOptions");
  description.add_options()("help,h", po::bool_switch(&o.help), "show this help")(
      "set", po::value(&o.overrides)->value_name("KEY.PATH=VALUE")->composing(),
      "override a config field, e.g. --set parallelism.data=16 (repeatable)")(
      "output,o", po::value(&o.result_path)->value_name("FILE"),
      "write the result JSON here (docs/formats/simulate-result.md)")(
      "timeline", po::value(&o.timeline_path)->value_name("FILE"),
      "write a Chrome trace / Perfetto timeline here")(
      "chakra", po::value(&o.chakra_prefix)->value_name("PREFIX"),
      "export the simulated task graph as Chakra ET files PREFIX.<rank>.et (+ "
      "PREFIX.comm_groups.json) for ASTRA-sim and Chakra tools")(
      "op-list", po::value(&o.op_list_path)->value_name("FILE"),
      "write every distinct op signature the plan prices (docs/formats/op-list.md): what "
      "tools/op_benchmark.py measures on a GPU")(
      "max-memory", po::value(&o.max_memory)->value_name("SIZE"), kMaxMemoryHelp)(
      "quiet,q", po::bool_switch(&o.quiet), "print nothing on success");
  return description;
}

// As the config says it: "uniform", "balanced", or the given counts.
OrderedJson LayerSplitJson(const strategies::ParallelPlan& plan) {
  switch (plan.layer_split) {
    case strategies::ParallelPlan::LayerSplit::kUniform:
      return "uniform";
    case strategies::ParallelPlan::LayerSplit::kBalanced:
      return "balanced";
    case strategies::ParallelPlan::LayerSplit::kGiven:
      break;
  }
  return plan.stage_layers;
}

OrderedJson PlanJson(const SimulationConfig& c) {
  return {{"data", c.plan.data},
          {"tensor", c.plan.tensor},
          {"pipeline", c.plan.pipeline},
          {"tensor_mode", models::TensorLayoutNames()[static_cast<size_t>(c.plan.tensor_layout)]},
          {"tensor_depth", c.plan.tensor_depth},
          {"sequence_parallel", c.plan.sequence_parallel},
          {"expert", c.plan.expert},
          {"expert_imbalance", c.plan.expert_imbalance},
          {"schedule", models::PipelineScheduleName(c.plan.schedule)},
          {"layers", LayerSplitJson(c.plan)},
          {"zero_stage", c.plan.zero_stage},
          {"gradient_sync", strategies::GradientSyncName(c.plan.gradient_sync)},
          {"order", strategies::PlanOrderName(c.plan)},
          {"global_batch", c.training.global_batch},
          {"micro_batch", c.training.micro_batch},
          {"microbatches", c.Microbatches()},
          {"seq_len", c.training.seq_len},
          {"recompute", models::RecomputeName(c.training.recompute)}};
}

OrderedJson BreakdownJson(const strategies::TimeBreakdown& b) {
  return {{"rank", b.rank},
          {"compute_ns", b.compute.ns()},
          {"recompute_ns", b.recompute.ns()},
          {"tp_exposed_ns", b.tensor.ns()},
          {"pp_wait_ns", b.pipeline.ns()},
          {"ep_exposed_ns", b.expert.ns()},
          {"dp_exposed_ns", b.data_exposed.ns()},
          {"optimizer_ns", b.optimizer.ns()},
          {"idle_ns", b.idle.ns()}};
}

OrderedJson MemoryJson(const models::MemoryBreakdown& m, Bytes capacity) {
  return {{"parameters_bytes", m.parameters},
          {"gradients_bytes", m.gradients},
          {"optimizer_state_bytes", m.optimizer_state},
          {"activations_bytes", m.activations},
          {"temporary_bytes", m.temporary},
          {"total_bytes", m.total()},
          {"capacity_bytes", capacity.count()},
          {"microbatches_in_flight", m.microbatches_in_flight}};
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

// The transformer layers stage `i` holds (null for a model without layers to split).
OrderedJson StageLayerCount(const SimulationConfig& c, const SimulationResult& r, size_t i) {
  if (c.model.family != models::ModelFamily::kTransformer) return nullptr;
  if (!r.stage_layers.empty()) return r.stage_layers[i];
  return c.model.transformer.layers / c.plan.pipeline;
}

}  // namespace

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
  return {{"format", kSimulateResultFormat},
          {"version", kSimulateResultVersion},
          {"input",
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
          {"model_flops_per_iteration", stats.model_flops},
          {"hardware_flops_per_iteration", stats.hardware_flops},
          {"stages", std::move(stages)},
          {"compression", CompressionJson(c, r)},
          {"warnings", r.warnings},
          {"cost_source_shares", std::move(sources)},
          {"simulator",
           {{"tasks", r.summary.tasks},
            {"communications", r.summary.communications},
            {"events", r.summary.events},
            {"fingerprint", fmt::format("0x{:016x}", r.summary.fingerprint)},
            {"build_seconds", r.build_seconds},
            {"simulate_seconds", r.simulate_seconds}}}};
}

namespace {

std::string GiB(int64_t bytes) { return fmt::format("{:.1f}", static_cast<double>(bytes) / kGibi); }

// " (SP)", " (2D 2×2)", " (2.5D 2×2×2)" or nothing.
std::string TensorNote(const strategies::ParallelPlan& plan) {
  switch (plan.tensor_layout) {
    case models::TensorLayout::k1D:
      return plan.sequence_parallel ? " (SP)" : "";
    case models::TensorLayout::k2D:
      return fmt::format(" (2D {0}×{0})", plan.grid());
    case models::TensorLayout::k2p5D:
      return fmt::format(" (2.5D {0}×{0}×{1})", plan.grid(), plan.tensor_depth);
  }
  return "";
}

// "DP 2 × TP 4 (SP) × PP 2 (1f1b), 8 micro-batches of 4, ZeRO 1, recompute selective"; a model
// trained data parallel only (ResNet) shows no tensor or pipeline sizes, and one stage no
// schedule; parameter servers are named after the ZeRO stage.
std::string PlanLine(const SimulationConfig& c) {
  const int64_t microbatches = c.Microbatches();
  const network::ServerSpec& servers = c.cluster.servers;
  const std::string sync =
      c.plan.gradient_sync == strategies::GradientSync::kParameterServer
          ? fmt::format(", gradients through {} {} parameter server{}", servers.count,
                        network::ServerPlacementName(servers.placement),
                        servers.count == 1 ? "" : "s")
          : "";
  const std::string batches =
      fmt::format("{} micro-batch{} of {}, ZeRO {}{}", microbatches, microbatches == 1 ? "" : "es",
                  c.training.micro_batch, c.plan.zero_stage, sync);
  if (c.model.family != models::ModelFamily::kTransformer) {
    return fmt::format("DP {} (data parallel), {}", c.plan.data, batches);
  }
  const std::string order = strategies::PlanOrderName(c.plan);
  return fmt::format("DP {}{} × TP {}{} × PP {}{}{}, {}, recompute {}", c.plan.data,
                     c.plan.expert > 1 ? fmt::format(" (EP {})", c.plan.expert) : "", c.plan.tensor,
                     TensorNote(c.plan), c.plan.pipeline,
                     c.plan.pipeline > 1
                         ? fmt::format(" ({})", models::PipelineScheduleName(c.plan.schedule))
                         : "",
                     order == "tp-dp-pp" ? "" : fmt::format(", ranks in order {}", order), batches,
                     models::RecomputeName(c.training.recompute));
}

void PrintSummary(std::ostream& out, const SimulationConfig& c, const SimulationResult& r) {
  const strategies::IterationStats& stats = r.iteration->stats;
  fmt::print(out, "dtsim simulate {}\n", c.source);
  fmt::print(out, "  model          {} on {} × {} ({}, {} network)\n", c.model.name, c.plan.world(),
             c.gpu.name, c.cluster.name, c.network_model->name);
  fmt::print(out, "  plan           {}\n", PlanLine(c));
  fmt::print(out, "  iteration      {}{}\n", FormatDuration(r.iteration_time),
             r.phases.empty() ? "" : " (compressed phase)");
  if (c.compression.method != "none") {
    fmt::print(out, "  compression    {}", c.compression.method);
    for (const strategies::PhaseResult& phase : r.phases) {
      fmt::print(out, "; {} {} steps × {}", strategies::CompressionPhaseName(phase.phase),
                 phase.steps, FormatDuration(phase.iteration_time));
    }
    if (!r.phases.empty()) {
      fmt::print(out, "; run average {}", FormatDuration(r.average_iteration_time));
    }
    fmt::print(out, "\n");
  }
  fmt::print(out, "  throughput     {:.2f} samples/s{}\n", r.samples_per_second,
             c.training.seq_len > 0 ? fmt::format(", {:.0f} tokens/s", r.tokens_per_second) : "");
  fmt::print(out,
             "  per GPU        {:.1f} model TFLOP/s (MFU {:.1f}%), {:.1f} hardware TFLOP/s "
             "(HFU {:.1f}%)\n",
             r.model_tflops_per_gpu, 100 * r.mfu, r.hardware_tflops_per_gpu, 100 * r.hfu);
  fmt::print(out,
             "  cost sources   measured {:.1f}%, interpolated {:.1f}%, roofline {:.1f}% "
             "({} model)\n",
             100 * stats.sources.Share(models::CostSource::kMeasured),
             100 * stats.sources.Share(models::CostSource::kInterpolated),
             100 * stats.sources.Share(models::CostSource::kRoofline), r.cost_model);
  if (!r.stage_layers.empty()) {
    fmt::print(out, "  stage layers   {} ({})\n", fmt::join(r.stage_layers, ", "),
               c.plan.layer_split == strategies::ParallelPlan::LayerSplit::kBalanced
                   ? "balanced by cost"
                   : "as given");
  }
  fmt::print(out, "\n  {:<6} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}   {:>8} {:>8}\n",
             "stage", "compute", "recompute", "tp", "ep", "pp wait", "dp", "optim", "idle",
             "mem GiB", "of GiB");
  for (size_t i = 0; i < r.stages.size(); ++i) {
    const auto& b = r.stages[i];
    fmt::print(out, "  {:<6} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}   {:>8} {:>8}\n", i,
               FormatMilliseconds(b.compute, 2), FormatMilliseconds(b.recompute, 2),
               FormatMilliseconds(b.tensor, 2), FormatMilliseconds(b.expert, 2),
               FormatMilliseconds(b.pipeline, 2), FormatMilliseconds(b.data_exposed, 2),
               FormatMilliseconds(b.optimizer, 2), FormatMilliseconds(b.idle, 2),
               GiB(stats.stage_memory[i].total()), GiB(c.gpu.memory.count()));
  }
  fmt::print(out, "  (times in ms on each stage's first rank)\n");
  for (const std::string& warning : r.warnings) fmt::print(out, "\n  warning: {}\n", warning);
  fmt::print(out,
             "\n  simulator      {} tasks, {} events; built in {:.3f} s, simulated in {:.3f} s\n",
             r.summary.tasks, r.summary.events, r.build_seconds, r.simulate_seconds);
}

// The op list (docs/formats/op-list.md): every distinct signature the plan prices.
Status WriteOpList(const std::string& path, const strategies::ResolvedConfig& config) {
  Expected<std::vector<models::RecordingCostModel::Recorded>> ops = strategies::PricedOps(config);
  if (!ops.ok()) return std::move(ops).error().InFile(config.source);
  OrderedJson list = OrderedJson::array();
  for (const models::RecordingCostModel::Recorded& op : *ops) {
    OrderedJson dims = OrderedJson::object();
    for (const auto& [name, value] : op.signature.dims) dims[name] = value;
    list.push_back({{"op", op.signature.op},
                    {"dtype", DTypeName(op.signature.dtype)},
                    {"dims", std::move(dims)},
                    {"count", op.count},
                    {"example", op.example}});
  }
  const OrderedJson document = {{"format", "dtsim.op_list"}, {"version", 1},
                                {"config", config.source},   {"model", config.model.name},
                                {"gpu", config.gpu.name},    {"ops", std::move(list)}};
  return WriteFileAtomically(path, DumpJson(document, 2) + "\n");
}

Status Execute(const SimulateOptions& options, std::ostream& out) {
  DTSIM_RETURN_IF_ERROR(RefuseOutputsOverInputs(
      {options.config}, {options.result_path, options.timeline_path, options.op_list_path}));
  std::vector<std::string> overrides = options.overrides;
  AddMaxMemoryOverride(options.max_memory, overrides);
  DTSIM_ASSIGN_OR_RETURN(const strategies::ResolvedConfig config,
                         strategies::LoadConfig(options.config, overrides));
  Expected<SimulationResult> result = strategies::Simulate(config);
  if (!result.ok()) return std::move(result).error().InFile(options.config);
  if (!options.result_path.empty()) {
    DTSIM_RETURN_IF_ERROR(WriteFileAtomically(
        options.result_path, DumpJson(SimulateResultJson(config, *result), 2) + "\n"));
  }
  if (!options.timeline_path.empty()) {
    DTSIM_RETURN_IF_ERROR(traces::WriteChromeTraceFile(
        options.timeline_path, result->iteration->graph, result->times,
        {.source = options.config,
         .communication_model = std::string(config.network_model->name)}));
  }
  if (!options.quiet) PrintSummary(out, config, *result);
  if (!options.chakra_prefix.empty()) {
    DTSIM_ASSIGN_OR_RETURN(
        const std::vector<std::string> paths,
        traces::WriteChakraGraph(result->iteration->graph, options.chakra_prefix));
    if (!options.quiet) {
      fmt::print(out, "\n  chakra         {} ET files ({}.0.et ...) and {}\n", paths.size() - 1,
                 options.chakra_prefix, paths.back());
    }
  }
  if (!options.op_list_path.empty()) {
    DTSIM_RETURN_IF_ERROR(WriteOpList(options.op_list_path, config));
    if (!options.quiet) fmt::print(out, "\n  op list        {}\n", options.op_list_path);
  }
  return Status::Ok();
}

}  // namespace

CommandOutcome SimulateCommand(std::span<const std::string> args, std::ostream& out) {
  SimulateOptions options;
  const po::options_description description = Describe(options);
  return RunCommandLine(args, description, "config", options.config, options.help,
                        "missing the CONFIG file", out,
                        [&] { return FailureUnlessOk(Execute(options, out)); });
}

}  // namespace dtsim::cli
