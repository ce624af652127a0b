#include "tools/cli/simulate_command.h"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <cmath>
#include <iostream>

#include "sim/base/atomic_file.h"
#include "sim/base/quantity.h"
#include "strategies/embedding_sharding.h"
#include "strategies/simulate.h"
#include "strategies/training_section.h"
#include "tools/cli/command_line.h"
#include "tools/cli/timeline_options.h"
#include "tools/results/op_list.h"
#include "tools/results/provenance.h"
#include "tools/results/result_file.h"
#include "tools/results/simulate_result.h"
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
  TimelineSelection timeline_selection;
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
      "write the result JSON here, and its stages as CSV beside it (FILE.csv; "
      "docs/formats/simulate-result.md)")("timeline",
                                          po::value(&o.timeline_path)->value_name("FILE"),
                                          "write a Chrome trace / Perfetto timeline here")(
      "chakra", po::value(&o.chakra_prefix)->value_name("PREFIX"),
      "export the simulated task graph as Chakra ET files PREFIX.<rank>.et (+ "
      "PREFIX.comm_groups.json) for ASTRA-sim and Chakra tools")(
      "op-list", po::value(&o.op_list_path)->value_name("FILE"),
      "write every distinct op signature the plan prices (docs/formats/op-list.md): what "
      "tools/op_benchmark.py measures on a GPU")(
      "max-memory", po::value(&o.max_memory)->value_name("SIZE"), kMaxMemoryHelp)(
      "quiet,q", po::bool_switch(&o.quiet), "print nothing on success");
  AddTimelineOptions(description, o.timeline_selection);
  return description;
}

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

// 1st, 2nd, 3rd, 4th, …, 11th, 12th, 13th, 21st.
std::string Ordinal(int n) {
  const int tens = n % 100;
  const int ones = n % 10;
  const char* suffix = (tens >= 11 && tens <= 13) || ones == 0 || ones > 3 ? "th"
                       : ones == 1                                         ? "st"
                       : ones == 2                                         ? "nd"
                                                                           : "rd";
  return std::to_string(n) + suffix;
}

// ", deepspeed 0.3.13", ", deepspeed", ", pytorch memory"; "" for Megatron.
std::string FrameworkNote(const strategies::TrainingConfig& training) {
  if (training.framework == models::Framework::kMegatron) return "";
  if (training.framework_release != std::array<int, 3>{0, 0, 0}) {
    return fmt::format(", {} {}", models::FrameworkName(training.framework),
                       fmt::join(training.framework_release, "."));
  }
  // PyTorch has a memory model of its own; DeepSpeed's latest release follows Megatron's.
  return training.framework == models::Framework::kPyTorch
             ? std::string(", pytorch memory")
             : fmt::format(", {}", models::FrameworkName(training.framework));
}

// "selective", or "selective (core_attn, mlp)" for Megatron-Core's modules beyond the core
// attention.
std::string RecomputeText(const strategies::TrainingConfig& training) {
  const std::string_view name = models::RecomputeName(training.recompute);
  if (training.recompute != models::Recompute::kSelective ||
      training.recompute_modules == models::kRecomputeCoreAttn) {
    return std::string(name);
  }
  return fmt::format("{} ({})", name, models::RecomputeModulesText(training.recompute_modules));
}

// The stored precisions where they are not the framework's defaults: ", bf16 gradients",
// ", bf16 optimizer moments and master copy" (FP8 parameters are said with the recipe).
std::string PrecisionNote(const strategies::TrainingConfig& training) {
  std::string note;
  if (training.grad_dtype != strategies::DefaultGradDtype(training)) {
    note += fmt::format(", {} gradients", DTypeName(training.grad_dtype));
  }
  const models::OptimizerState& state = training.optimizer_state;
  const bool master = state.master != DType::kFp32 && training.param_dtype != DType::kFp32;
  if (state.moments != DType::kFp32 && master && state.moments == state.master) {
    note += fmt::format(", {} optimizer moments and master copy", DTypeName(state.moments));
  } else {
    if (state.moments != DType::kFp32) {
      note += fmt::format(", {} optimizer moments", DTypeName(state.moments));
    }
    if (master) note += fmt::format(", {} master copy", DTypeName(state.master));
  }
  return note;
}

// ", 16 layers' activations offloaded (TE v1)" with activation offloading.
std::string OffloadNote(const strategies::TrainingConfig& training) {
  if (training.activation_offload_layers == 0) return "";
  return fmt::format(", {} {} activations offloaded{}", training.activation_offload_layers,
                     training.activation_offload_layers == 1 ? "layer's" : "layers'",
                     training.activation_offload_v1 ? " (TE v1)" : "");
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
  if (c.model.family == models::ModelFamily::kDlrm) {
    // "tables 6 row-wise, 11 table-wise, 9 replicated" (strategies/embedding_sharding.h).
    const strategies::EmbeddingLayout layout = strategies::LayoutEmbeddings(
        c.model.dlrm, c.plan.embedding_sharding, c.plan.data, c.training.micro_batch,
        c.training.dtype, c.cluster.gpus_per_node);
    std::vector<std::string> kinds;
    for (const auto& [count, name] :
         {std::pair{layout.row_wise, "row-wise"},
          std::pair{layout.table_row_wise, "table-row-wise"},
          std::pair{layout.table_wise, "table-wise"}, std::pair{layout.replicated, "replicated"}}) {
      if (count > 0) kinds.push_back(fmt::format("{} {}", count, name));
    }
    return fmt::format("DP {} (dense part data parallel; tables {}), {}", c.plan.data,
                       fmt::join(kinds, ", "), batches);
  }
  if (c.model.family != models::ModelFamily::kTransformer) {
    return fmt::format("DP {} (data parallel), {}", c.plan.data, batches);
  }
  const std::string order = strategies::PlanOrderName(c.plan);
  const std::string fp8 =
      c.training.fp8 == models::Fp8Recipe::kNone
          ? ""
          : fmt::format(", FP8 ({}){}",
                        models::Fp8RecipeNames()[static_cast<size_t>(c.training.fp8)],
                        c.training.fp8_params ? " with FP8 parameters" : "");
  const std::string context =
      c.plan.context > 1
          ? fmt::format(" × CP {} ({})", c.plan.context,
                        models::ContextCommNames()[static_cast<size_t>(c.plan.context_comm)])
          : "";
  // Folded experts (expert TP 1 under TP t) span tensor and data ranks: said after TP.
  const bool folded = c.plan.folded_experts();
  const std::string experts =
      c.plan.expert > 1 || folded
          ? fmt::format(" (EP {}{})", c.plan.expert, folded ? " over TP × DP, expert TP 1" : "")
          : "";
  return fmt::format(
      "DP {}{}{} × TP {}{}{} × PP {}{}{}, {}, recompute {}{}{}{}", c.plan.data,
      folded ? "" : experts, context, c.plan.tensor, TensorNote(c.plan), folded ? experts : "",
      c.plan.pipeline,
      c.plan.pipeline > 1 ? fmt::format(" ({})", models::PipelineScheduleName(c.plan.schedule))
                          : "",
      order == "tp-dp-pp" ? "" : fmt::format(", ranks in order {}", order), batches,
      RecomputeText(c.training),
      c.training.recompute_every > 1
          ? fmt::format(" on every {} layer", Ordinal(c.training.recompute_every))
          : "",
      fp8 + PrecisionNote(c.training) + OffloadNote(c.training), FrameworkNote(c.training));
}

std::string SizeText(int64_t bytes) {
  constexpr double kKiB = 1024.0;
  const auto b = static_cast<double>(bytes);
  if (b < kKiB * kKiB) return fmt::format("{:.1f} KiB", b / kKiB);
  if (b < kKiB * kKiB * kKiB) return fmt::format("{:.1f} MiB", b / (kKiB * kKiB));
  return fmt::format("{:.2f} GiB", b / (kKiB * kKiB * kKiB));
}

// The costliest communications and how the network model ran them (all in the result file).
void PrintCollectives(std::ostream& out, const SimulationResult& r) {
  constexpr size_t kShown = 6;
  if (r.collectives.empty()) return;
  fmt::print(out, "\n  {:<14} {:>11} {:>6}  {:<24} {:>7} {:>10} {:>10}\n", "communication", "size",
             "ranks", "method", "count", "each ms", "total ms");
  for (size_t i = 0; i < std::min(kShown, r.collectives.size()); ++i) {
    const strategies::CollectiveSummary& sum = r.collectives[i];
    fmt::print(out, "  {:<14} {:>11} {:>6}  {:<24} {:>7} {:>10} {:>10}\n",
               graph::CommKindName(sum.kind), SizeText(sum.size_bytes), sum.group_size,
               sum.method.empty() ? "-" : sum.method, sum.count,
               FormatMilliseconds(DurationNs(sum.total.ns() / sum.count), 3),
               FormatMilliseconds(sum.total, 2));
  }
  if (r.collectives.size() > kShown) {
    fmt::print(out,
               "  ({} more kinds in the result's \"collectives\"; times from start to end, "
               "waits not counted)\n",
               r.collectives.size() - kShown);
  } else {
    fmt::print(out, "  (times from start to end, waits for late participants not counted)\n");
  }
}

// What communication kernels took from compute by holding SMs, where they did: the stage that
// lost most.
void PrintSmShared(std::ostream& out, const std::vector<strategies::TimeBreakdown>& stages) {
  const auto most =
      std::max_element(stages.begin(), stages.end(),
                       [](const auto& a, const auto& b) { return a.sm_shared < b.sm_shared; });
  if (most == stages.end() || most->sm_shared <= DurationNs::Zero()) return;
  const DurationNs work = most->compute + most->recompute;
  fmt::print(out,
             "  (compute and recompute include what NCCL's kernels took from them by holding SMs: "
             "{} ms on stage {}, {:.1f}% of its compute and recompute)\n",
             FormatMilliseconds(most->sm_shared, 2), most - stages.begin(),
             100.0 * most->sm_shared.ToSecondsDouble() / work.ToSecondsDouble());
}

// The training run the iteration is one of (docs/time_to_train.md).
void PrintTimeToTrain(std::ostream& out, const strategies::TimeToTrain& t) {
  using strategies::FormatAmount;
  using strategies::FormatSeconds;
  const strategies::TokenBudget& b = t.budget;
  fmt::print(out, "\n  time to train  {} {} ({}", FormatAmount(b.tokens), b.unit, b.how);
  if (b.batch_factor != 1) {
    fmt::print(out, ", × {:.3f} for the batch: {} at the reference", b.batch_factor,
               FormatAmount(b.budget_tokens));
  }
  fmt::print(out, ") in {} iterations: {} of training\n",
             FormatAmount(static_cast<double>(b.iterations)), FormatSeconds(t.compute_s));
  if (t.reliability) {
    const strategies::ReliabilityEstimate& r = *t.reliability;
    const std::string checkpoints =
        r.interval_s > 0
            ? fmt::format("a checkpoint every {}{} stopping {} each", FormatSeconds(r.interval_s),
                          r.interval_optimal ? " (optimal)" : "", FormatSeconds(r.save_blocking_s))
            : std::string("no checkpoints");
    if (std::isfinite(r.mtbf_s)) {
      fmt::print(out,
                 "  failures       one every {} ({:.3g} expected); {}; a restart {} (load "
                 "included), {} of work lost on average\n",
                 FormatSeconds(r.mtbf_s), r.expected_failures, checkpoints,
                 FormatSeconds(r.restart_s), FormatSeconds(r.lost_per_failure_s));
    } else {
      fmt::print(out, "  failures       none (failures_per_gpu_hour 0); {}\n", checkpoints);
    }
    fmt::print(out, "  wall clock     {} at {:.1f}% effective training time\n",
               FormatSeconds(t.wall_s), 100 * r.effective_training_time_ratio);
  }
  fmt::print(out, "  GPU-hours      {}{}\n", FormatAmount(t.gpu_hours),
             t.cost ? fmt::format(", cost {}", FormatAmount(*t.cost)) : "");
  for (const std::string& assumption : t.assumptions) {
    fmt::print(out, "  assumed        {}\n", assumption);
  }
}

// The iteration over the run's average one: what a figure of the iteration becomes over the run.
double Ratio(const SimulationResult& r) {
  return r.iteration_time.ToSecondsDouble() / r.average_iteration_time.ToSecondsDouble();
}

// DiLoCo's replicas and what their outer synchronizations cost (docs/diloco.md).
void PrintDiloco(std::ostream& out, const SimulationConfig& c, const SimulationResult& r) {
  const strategies::DilocoConfig& config = *c.diloco;
  const strategies::DilocoResult& d = *r.diloco;
  const bool host = config.outer_state == strategies::OuterState::kHost;
  fmt::print(out,
             "  diloco         {} replicas of {} GPUs; each of {} fragment{} synchronized every {} "
             "steps, {} a GPU in {}\n",
             config.replicas, c.plan.world() / config.replicas, config.fragments,
             config.fragments == 1 ? "" : "s", config.sync_every,
             SizeText(d.fragment_bytes.count()),
             strategies::OuterPrecisionNames()[static_cast<size_t>(config.precision)]);
  const std::string copies = host ? fmt::format("host copies {}, ", FormatDuration(d.copies)) : "";
  fmt::print(out,
             "  outer sync     {}all-reduce {} ({}), update {}, all-gather {}: {}, {} exposed "
             "behind {} step{}; run average {} ({:+.2f}% over the inner step)\n",
             copies, FormatDuration(d.all_reduce), config.link ? "across sites" : "cluster network",
             FormatDuration(d.update), FormatDuration(d.all_gather),
             FormatDuration(d.synchronization), FormatDuration(d.exposed), config.overlap_steps,
             config.overlap_steps == 1 ? "" : "s", FormatDuration(r.average_iteration_time),
             100 * (1 / Ratio(r) - 1));
  fmt::print(out, "  outer state    {} a GPU in optimizer state (fp32 momentum{}){}\n",
             SizeText(d.outer_state_bytes), host ? "" : " and outer copy",
             host ? "; the fp32 outer copy in host memory" : "");
}

void PrintSummary(std::ostream& out, const SimulationConfig& c, const SimulationResult& r) {
  const strategies::IterationStats& stats = r.iteration->stats;
  fmt::print(out, "dtsim simulate {}\n", c.source);
  fmt::print(out, "  model          {} on {} × {} ({}, {} network)\n", c.model.name, c.plan.world(),
             c.gpu.name, c.cluster.name, c.network_model->name);
  fmt::print(out, "  plan           {}\n", PlanLine(c));
  fmt::print(
      out, "  iteration      {}{}{}\n", FormatDuration(r.iteration_time),
      c.error_band ? fmt::format(" (±{:.1f}%)", c.error_band->mean_absolute_percentage_error) : "",
      r.phases.empty() ? (r.diloco ? " (one replica's inner step)" : "") : " (compressed phase)");
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
  if (r.diloco) PrintDiloco(out, c, r);
  fmt::print(out, "  throughput     {:.2f} samples/s{}{}\n", r.samples_per_second,
             c.training.seq_len > 0 ? fmt::format(", {:.0f} tokens/s", r.tokens_per_second) : "",
             r.diloco ? fmt::format(" (inner step; over the run average {:.2f} samples/s, MFU "
                                    "{:.1f}%)",
                                    r.samples_per_second * Ratio(r), 100 * r.mfu * Ratio(r))
                      : "");
  fmt::print(out,
             "  per GPU        {:.1f} model TFLOP/s (MFU {:.1f}%), {:.1f} hardware TFLOP/s "
             "(HFU {:.1f}%)\n",
             r.model_tflops_per_gpu, 100 * r.mfu, r.hardware_tflops_per_gpu, 100 * r.hfu);
  if (c.training.fp8 != models::Fp8Recipe::kNone) {
    fmt::print(out, "  FP8            MFU {:.1f}% of the BF16 peak, {:.1f}% of the FP8 peak\n",
               100 * r.mfu, 100 * r.mfu_fp8);
  }
  fmt::print(out,
             "  cost sources   measured {:.1f}%, interpolated {:.1f}%, roofline {:.1f}% "
             "({} model)\n",
             100 * stats.sources.Share(models::CostSource::kMeasured),
             100 * stats.sources.Share(models::CostSource::kInterpolated),
             100 * stats.sources.Share(models::CostSource::kRoofline), r.cost_model);
  if (!c.calibration_source.empty()) {
    fmt::print(out, "  calibration    {}: {}\n", c.calibration_source,
               c.calibration.empty() ? std::string("no constant for this GPU")
                                     : fmt::format("{}", fmt::join(c.calibration, ", ")));
    const std::string framework(models::FrameworkName(c.training.framework));
    if (c.error_band) {
      fmt::print(out,
                 "  error band     ±{:.1f}%: the calibrated predictions' mean absolute error over "
                 "{} measured runs on {} under {} (mean {:+.1f}%, positive optimistic)\n",
                 c.error_band->mean_absolute_percentage_error, c.error_band->points, c.gpu.name,
                 framework, c.error_band->mean_error);
    } else {
      fmt::print(out,
                 "  error band     none: the calibration has no two measured runs on {} under {}\n",
                 c.gpu.name, framework);
    }
  }
  if (!r.stage_layers.empty()) {
    using Split = strategies::ParallelPlan::LayerSplit;
    fmt::print(out, "  stage layers   {} ({})\n", fmt::join(r.stage_layers, ", "),
               c.plan.layer_split == Split::kBalanced ? "balanced by cost"
               : c.plan.layer_split == Split::kGiven  ? "as given"
                                                      : "the embedding and loss counted as layers");
  }
  fmt::print(out,
             "\n  {:<6} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}   {:>8} {:>8}\n",
             "stage", "compute", "recompute", "tp", "ep", "cp", "pp wait", "dp", "optim", "idle",
             "mem GiB", "of GiB");
  for (size_t i = 0; i < r.stages.size(); ++i) {
    const auto& b = r.stages[i];
    fmt::print(out,
               "  {:<6} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}   {:>8} {:>8}\n", i,
               FormatMilliseconds(b.compute, 2), FormatMilliseconds(b.recompute, 2),
               FormatMilliseconds(b.tensor, 2), FormatMilliseconds(b.expert, 2),
               FormatMilliseconds(b.context, 2), FormatMilliseconds(b.pipeline, 2),
               FormatMilliseconds(b.data_exposed, 2), FormatMilliseconds(b.optimizer, 2),
               FormatMilliseconds(b.idle, 2), GiB(stats.stage_memory[i].total()),
               GiB(c.gpu.memory.count()));
  }
  fmt::print(out, "  (times in ms on each stage's first rank)\n");
  PrintSmShared(out, r.stages);
  PrintCollectives(out, r);
  if (r.time_to_train) PrintTimeToTrain(out, *r.time_to_train);
  for (const std::string& warning : r.warnings) fmt::print(out, "\n  warning: {}\n", warning);
  fmt::print(out,
             "\n  simulator      {} tasks, {} events; built in {:.3f} s, simulated in {:.3f} s\n",
             r.summary.tasks, r.summary.events, r.build_seconds, r.simulate_seconds);
}

// The op list (docs/formats/op-list.md): every distinct signature the plan prices.
Status WriteOpList(const std::string& path, const strategies::ResolvedConfig& config) {
  Expected<std::vector<models::RecordingCostModel::Recorded>> ops = strategies::PricedOps(config);
  if (!ops.ok()) return std::move(ops).error().InFile(config.source);
  return results::WriteResultFile(path, results::OpListJson(config, *ops));
}

Status Execute(const SimulateOptions& options, std::ostream& out) {
  // A device or pipe (-o /dev/stdout) gets the JSON only: there is no "beside" it.
  const std::string csv_path = options.result_path.empty() || WritesInPlace(options.result_path)
                                   ? ""
                                   : results::CsvPathBeside(options.result_path);
  DTSIM_RETURN_IF_ERROR(RefuseOutputsOverInputs(
      {options.config},
      {options.result_path, csv_path, options.timeline_path, options.op_list_path}));
  if (!options.chakra_prefix.empty()) {
    DTSIM_RETURN_IF_ERROR(CheckChakraPrefix(
        options.chakra_prefix,
        {options.result_path, csv_path, options.timeline_path, options.op_list_path}));
  }
  traces::TimelineInfo checked;  // a bad --timeline-ranks fails before the simulation
  DTSIM_RETURN_IF_ERROR(
      ApplyTimelineSelection(options.timeline_selection, options.timeline_path, checked));
  std::vector<std::string> overrides = options.overrides;
  DTSIM_RETURN_IF_ERROR(AddMaxMemoryOverride(options.max_memory, overrides));
  Json document;
  DTSIM_ASSIGN_OR_RETURN(const strategies::ResolvedConfig config,
                         strategies::LoadConfig(options.config, overrides, &document));
  results::RecordConfig(document, overrides, &config);
  if (!options.chakra_prefix.empty() && config.ranks == strategies::RanksMode::kSymmetric) {
    // One rank per class of identical ranks is a graph no other tool can run: its collectives
    // are priced over groups whose other members have no trace.
    return Error(
               "--chakra exports every rank's trace, but this config simulates one rank per "
               "class of identical ranks; add --set simulation.ranks=full",
               "simulation.ranks", "\"symmetric\"")
        .InFile(options.config);
  }
  Expected<SimulationResult> result = strategies::Simulate(config);
  if (!result.ok()) return std::move(result).error().InFile(options.config);
  traces::TimelineInfo info{.source = options.config,
                            .communication_model = std::string(config.network_model->name),
                            .method_labels = result->methods.labels,
                            .comm_methods = result->methods.of_comm,
                            .world_ranks = config.plan.world()};
  if (!options.timeline_path.empty()) {
    // A selection with nothing in it fails before any output is written.
    DTSIM_RETURN_IF_ERROR(
        ApplyTimelineSelection(options.timeline_selection, options.timeline_path, info));
    DTSIM_RETURN_IF_ERROR(
        traces::CheckTimelineSelection(result->iteration->graph, result->times, info));
  }
  if (!options.result_path.empty()) {
    OrderedJson written = results::SimulateResultJson(config, *result);
    written["provenance"] = results::ProvenanceJson();
    DTSIM_RETURN_IF_ERROR(results::WriteResultFile(options.result_path, written));
    if (!csv_path.empty()) {
      DTSIM_RETURN_IF_ERROR(results::WriteSimulateCsv(csv_path, config, *result));
    }
  }
  if (!options.timeline_path.empty()) {
    DTSIM_RETURN_IF_ERROR(traces::WriteChromeTraceFile(
        options.timeline_path, result->iteration->graph, result->times, info));
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
    for (const std::string& caveat : traces::ChakraExportCaveats(result->iteration->graph)) {
      fmt::print(std::cerr, "dtsim simulate: warning: --chakra: {}\n", caveat);
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
  results::ResetProvenance("simulate", {args.begin(), args.end()});
  SimulateOptions options;
  const po::options_description description = Describe(options);
  return RunCommandLine(args, description, "config", options.config, options.help,
                        "missing the CONFIG file", out,
                        [&] { return FailureUnlessOk(Execute(options, out)); });
}

}  // namespace dtsim::cli
