#include "strategies/simulate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <span>
#include <string>
#include <string_view>

#include "models/parameters.h"
#include "network/network_models.h"
#include "sim/base/strings.h"
#include "strategies/collective_summary.h"
#include "strategies/diloco_sync.h"
#include "strategies/footprint.h"
#include "strategies/stage_balance.h"
#include "traces/op_cost_table.h"

namespace dtsim::strategies {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

static_assert(models::GpuSpec::kMaxSms == engine::Simulator::kMaxSms,
              "every SM count a config may give is one the engine can share");

// Runs the graph; `methods`, when given, receives how the network model ran each communication.
// Its durations priced in isolation (`cost`), compute runs on the SMs NCCL's kernels leave;
// times taken inside a training run already hold that.
Expected<engine::RunSummary> Run(const SimulationConfig& config, const models::OpCostModel& cost,
                                 const graph::TaskGraph& graph, graph::TaskTimes& times,
                                 network::CommMethods* methods = nullptr) {
  DTSIM_ASSIGN_OR_RETURN(const std::unique_ptr<network::ClusterModel> model,
                         network::MakePreparedModel(*config.network_model, config.cluster, graph));
  engine::Simulator simulator(graph, *model);
  if (config.gpu.sms > 0 && !cost.TimedInRun()) simulator.ShareSms(config.gpu.sms);
  DTSIM_RETURN_IF_ERROR(simulator.Run());
  engine::RunSummary summary = simulator.Summarize();
  times = simulator.TakeTimes();
  if (methods != nullptr) *methods = model->methods();
  return summary;
}

// The category of the dependency of `id` that ended last (what it waited for), or "".
std::string_view LastDependencyCategory(const graph::TaskGraph& graph,
                                        const graph::TaskTimes& times, graph::TaskId id) {
  std::optional<graph::TaskId> last;
  for (graph::TaskId dependency : graph.dependencies(id)) {
    if (!last || times.task_end[dependency.value()] > times.task_end[last->value()]) {
      last = dependency;
    }
  }
  return last ? graph.category_name(graph.task(*last).category) : std::string_view();
}

TimeBreakdown Breakdown(const graph::TaskGraph& graph, const graph::TaskTimes& times, int32_t rank,
                        TimeNs makespan) {
  TimeBreakdown breakdown{.rank = rank};
  TimeNs before_optimizer = TimeNs::Zero();
  for (size_t s = 0; s < graph.stream_count(); ++s) {
    const graph::Stream& stream = graph.stream(graph::StreamId(static_cast<uint32_t>(s)));
    if (stream.rank != rank || graph.name(stream.name) != StreamName(StreamRole::kCompute))
      continue;
    TimeNs previous_end = TimeNs::Zero();
    for (graph::TaskId id : graph.stream_tasks(graph::StreamId(static_cast<uint32_t>(s)))) {
      const DurationNs length = times.task_end[id.value()] - times.task_start[id.value()];
      const std::string_view category = graph.category_name(graph.task(id).category);
      // A wait for a tensor-parallel collective on another stream (SUMMA's broadcasts and
      // reduces on the "tp" stream) is exposed tensor-parallel time.
      if (times.task_start[id.value()] > previous_end) {
        const std::string_view waited = LastDependencyCategory(graph, times, id);
        // Likewise for a ring attention's shift on the "cp" stream: exposed context time.
        if (waited == kTensorCategory)
          breakdown.tensor += times.task_start[id.value()] - previous_end;
        if (waited == kContextCategory) {
          breakdown.context += times.task_start[id.value()] - previous_end;
        }
        // And for an expert all-to-all on the "ep" stream (Megatron-Core's overlap).
        if (waited == kExpertCategory) {
          breakdown.expert += times.task_start[id.value()] - previous_end;
        }
        // And for a ZeRO-3 gather on the "zero" stream: exposed data-parallel time (the
        // optimizer step's wait for the reduction is counted below).
        if (waited == kDataCategory && category != kOptimizerCategory) {
          breakdown.data_exposed += times.task_start[id.value()] - previous_end;
        }
      }
      previous_end = times.task_end[id.value()];
      if (category == kOptimizerCategory) {
        breakdown.optimizer += length;
        breakdown.data_exposed += times.task_start[id.value()] - before_optimizer;
        continue;
      }
      before_optimizer = times.task_end[id.value()];
      if (category == kComputeCategory) breakdown.compute += length;
      if (category == kRecomputeCategory) breakdown.recompute += length;
      const graph::Task& task = graph.task(id);
      if (task.kind == graph::TaskKind::kCompute &&
          (category == kComputeCategory || category == kRecomputeCategory)) {
        breakdown.sm_shared += length - task.duration;
      }
      if (category == kTensorCategory) breakdown.tensor += length;
      if (category == kPipelineCategory) breakdown.pipeline += length;
      if (category == kExpertCategory) breakdown.expert += length;
      if (category == kContextCategory) breakdown.context += length;
      // DeepSpeed's synchronized ZeRO-3 collectives and their copies run on the compute stream.
      if (category == kDataCategory) breakdown.data_exposed += length;
    }
  }
  breakdown.idle = (makespan - TimeNs::Zero()) - breakdown.compute - breakdown.recompute -
                   breakdown.tensor - breakdown.pipeline - breakdown.expert - breakdown.context -
                   breakdown.data_exposed - breakdown.optimizer;
  return breakdown;
}

// A compression method with a full-precision warm-up: simulate a warm-up iteration too and
// average the two over the run, weighted by their steps.
Status SimulatePhases(const ResolvedConfig& config, const models::OpCostModel& cost,
                      SimulationResult& result) {
  const std::unique_ptr<GradientCompression> compression = MakeCompression(config.compression);
  const int64_t warmup = compression->warmup_steps();
  if (!compression->Compresses() || warmup == 0 || config.plan.DataIndices() < 2)
    return Status::Ok();
  DTSIM_ASSIGN_OR_RETURN(const IterationGraph iteration,
                         BuildIteration(config, cost, CompressionPhase::kWarmup));
  graph::TaskTimes times;
  DTSIM_ASSIGN_OR_RETURN(const engine::RunSummary summary,
                         Run(config, cost, iteration.graph, times));
  const DurationNs warm = summary.makespan - TimeNs::Zero();
  const int64_t steps = compression->steps();
  result.phases = {{CompressionPhase::kWarmup, warmup, warm},
                   {CompressionPhase::kCompressed, steps - warmup, result.iteration_time}};
  const double average_ns =
      (static_cast<double>(warmup) * static_cast<double>(warm.ns()) +
       static_cast<double>(steps - warmup) * static_cast<double>(result.iteration_time.ns())) /
      static_cast<double>(steps);
  result.average_iteration_time = DurationNs(std::llround(average_ns));
  return Status::Ok();
}

// A table measured on another GPU would price this one with its times (an H100's on an A100
// ran at 77% MFU): refused when the two names are presets that differ, or speak of different
// families ("NVIDIA A100-PG509-200", a trace's device, against h100-sxm5-80gb). A name that
// tells nothing (a custom GPU's, "unknown") is taken as the user's word.
Status CheckTableGpu(const traces::OpCostTable& table, const models::GpuSpec& gpu,
                     const std::string& profile) {
  if (table.gpu() == gpu.name) return Status::Ok();
  const auto is_preset = [](std::string_view name) {
    const std::span<const std::string_view> presets = models::GpuPresetNames();
    return std::find(presets.begin(), presets.end(), name) != presets.end();
  };
  const std::string table_family = models::GpuFamilyOf(table.gpu());
  const std::string family = models::GpuFamilyOf(gpu.name);
  const bool differ = (is_preset(table.gpu()) && is_preset(gpu.name)) ||
                      (!table_family.empty() && !family.empty() && table_family != family);
  if (!differ) return Status::Ok();
  return Error(fmt::format("the op-cost table was measured on {}, the config's GPU is {}: its "
                           "times would price another GPU. Give a table of {} (dtsim ops, "
                           "tools/op_benchmark.py), or no profile (the roofline)",
                           table.gpu(), gpu.name, gpu.name),
               "profile", Quote(profile));
}

// The training run the iteration is one of (strategies/time_to_train.h).
Expected<TimeToTrain> TimeToTrainOf(const ResolvedConfig& config, const SimulationResult& result) {
  const TrainingConfig& training = config.training;
  const models::ParameterCount parameters = models::CountParameters(config.model);
  TrainingRun run{
      .model = &config.model,
      .global_batch = training.global_batch,
      .sequence = std::max<int64_t>(training.seq_len, 0),
      .gpus = config.plan.world(),
      .checkpoint_bytes = CheckpointBytes(parameters.total + parameters.mtp, training.optimizer,
                                          training.param_dtype, training.optimizer_state),
      .host_bandwidth = config.gpu.host_bandwidth,
      .iteration_time = config.diloco ? result.average_iteration_time : result.iteration_time,
  };
  if (!result.phases.empty() && result.phases.front().phase == CompressionPhase::kWarmup) {
    run.warmup_steps = result.phases.front().steps;
    run.warmup_time = result.phases.front().iteration_time;
  }
  DTSIM_ASSIGN_OR_RETURN(TimeToTrain estimate, EstimateTimeToTrain(*config.time_to_train, run));
  if (config.diloco) {
    estimate.assumptions.push_back(
        "DiLoCo trains on the budget's tokens as data parallelism would: its effect on the "
        "tokens to reach a loss is not modelled (give the tokens your DiLoCo run needs)");
  }
  return estimate;
}

// The outer synchronization of a DiLoCo job whose replica ran `result`: the busiest stage's
// rank's (all synchronize at once; the step waits for the last), priced on the job's cluster.
Expected<DilocoResult> PriceDiloco(const ResolvedConfig& job, const ResolvedConfig& replica,
                                   const models::OpCostModel& cost,
                                   const SimulationResult& result) {
  const DilocoConfig& diloco = *job.diloco;
  const std::vector<models::MemoryBreakdown>& stages = result.iteration->stats.stage_memory;
  int busiest = 0;
  double site_parameters = 0;  // every parameter of a replica, once per tensor-parallel rank
  for (size_t s = 0; s < stages.size(); ++s) {
    if (stages[s].parameter_count > stages[static_cast<size_t>(busiest)].parameter_count) {
      busiest = static_cast<int>(s);
    }
    site_parameters += static_cast<double>(stages[s].parameter_count) * replica.plan.tensor;
  }
  const int64_t parameters = stages[static_cast<size_t>(busiest)].parameter_count;
  DTSIM_ASSIGN_OR_RETURN(const graph::TaskGraph graph,
                         OuterSyncGraph(job, replica, busiest, parameters));
  graph::TaskTimes times;
  DTSIM_ASSIGN_OR_RETURN(const engine::RunSummary summary, Run(job, cost, graph, times));
  DilocoResult out;
  out.fragment_bytes =
      Bytes(static_cast<int64_t>(std::ceil(static_cast<double>(OuterShare(replica, parameters)) *
                                           OuterPrecisionBytes(diloco.precision))));
  for (size_t t = 0; t < graph.task_count(); ++t) {
    const graph::TaskId id(static_cast<uint32_t>(t));
    const DurationNs length = times.task_end[t] - times.task_start[t];
    const std::string_view name = graph.name(graph.task(id).name);
    if (name == "outer all-reduce") out.all_reduce = length;
    if (name == "outer update") out.update = length;
    if (name == "outer all-gather") out.all_gather = length;
    if (name == "outer copy in" || name == "outer copy out") out.copies += length;
  }
  if (diloco.link) {
    out.all_reduce = SiteAllReduce(
        diloco, site_parameters * OuterPrecisionBytes(diloco.precision) / diloco.fragments);
  }
  // The graph holds the all-reduce unless the link prices it.
  out.synchronization =
      (summary.makespan - TimeNs::Zero()) + (diloco.link ? out.all_reduce : DurationNs::Zero());
  out.exposed = ExposedSynchronization(diloco, out.synchronization, result.iteration_time);
  out.outer_state_bytes = OuterStateBytes(replica, parameters);
  return out;
}

// A DiLoCo job: one replica simulated, its outer synchronizations priced and averaged in.
Expected<SimulationResult> SimulateDiloco(const ResolvedConfig& job,
                                          const models::OpCostModel& cost) {
  DTSIM_ASSIGN_OR_RETURN(const ResolvedConfig replica, DilocoReplica(job));
  DTSIM_ASSIGN_OR_RETURN(SimulationResult result, Simulate(replica, cost));
  DTSIM_ASSIGN_OR_RETURN(result.diloco, PriceDiloco(job, replica, cost, result));
  const DilocoConfig& diloco = *job.diloco;
  // One synchronization every H/F steps: F / H of its exposed time a step, in floating point
  // (exposed × F may not fit an int64).
  result.average_iteration_time =
      result.iteration_time +
      ClampedNs(std::floor(static_cast<double>(result.diloco->exposed.ns()) * diloco.fragments /
                           static_cast<double>(diloco.sync_every)));
  // The whole job's batch over the inner step (like a compressed phase's, the figures are the
  // iteration's; readers scale them by iteration / average); per GPU the replica's figures hold.
  result.samples_per_second =
      static_cast<double>(job.training.global_batch) / result.iteration_time.ToSecondsDouble();
  result.tokens_per_second = result.samples_per_second * static_cast<double>(job.training.seq_len);
  if (!diloco.link && diloco.overlap_steps > 0) {
    result.warnings.push_back(
        "the outer synchronizations run behind the inner steps on the same network: their "
        "traffic is not made to share the links with the inner steps' (give diloco.link when "
        "the replicas are apart, whose link carries the outer traffic alone)");
  }
  if (job.time_to_train) {
    DTSIM_ASSIGN_OR_RETURN(result.time_to_train, TimeToTrainOf(job, result));
  }
  return result;
}

}  // namespace

Expected<ConfigCostModel> LoadCostModel(const SimulationConfig& config) {
  const models::CostModelEntry& entry = *config.cost_model;
  ConfigCostModel loaded;
  if (config.profile.empty()) {
    if (entry.needs_table) {
      return Error(fmt::format("cost model \"{}\" needs a \"profile\"", entry.name),
                   "simulation.cost_model", Quote(entry.name));
    }
  } else {
    DTSIM_ASSIGN_OR_RETURN(traces::OpCostTable table, traces::ReadOpCostTable(config.profile));
    DTSIM_RETURN_IF_ERROR(CheckTableGpu(table, config.gpu, config.profile));
    loaded.table = std::make_unique<traces::OpCostTable>(std::move(table));
  }
  loaded.model = entry.make(config.gpu, loaded.table.get());
  return loaded;
}

Expected<SimulationResult> Simulate(const ResolvedConfig& config) {
  DTSIM_ASSIGN_OR_RETURN(const ConfigCostModel cost, LoadCostModel(config));
  return Simulate(config, *cost.model);
}

Expected<SimulationResult> Simulate(const ResolvedConfig& input, const models::OpCostModel& cost) {
  if (input.diloco && !input.diloco->replica) return SimulateDiloco(input, cost);
  DTSIM_RETURN_IF_ERROR(CheckFootprint(input, input.max_memory));
  ResolvedConfig config = input;  // with the balanced stages filled in
  if (config.plan.layer_split == ParallelPlan::LayerSplit::kBalanced &&
      config.plan.chunk_layers.empty() &&
      config.model.family == models::ModelFamily::kTransformer) {
    DTSIM_ASSIGN_OR_RETURN(config.plan.chunk_layers, BalanceStageLayers(config, cost));
  }
  SimulationResult result;
  if (!config.plan.chunk_layers.empty()) {
    // Per stage: the layers of its chunks (chunk k of the model runs on stage k mod p).
    result.stage_layers.assign(static_cast<size_t>(config.plan.pipeline), 0);
    for (size_t k = 0; k < config.plan.chunk_layers.size(); ++k) {
      result.stage_layers[k % result.stage_layers.size()] += config.plan.chunk_layers[k];
    }
  }
  result.cost_model = std::string(cost.name());
  const auto build_start = std::chrono::steady_clock::now();
  DTSIM_ASSIGN_OR_RETURN(IterationGraph iteration,
                         BuildIteration(config, cost, CompressionPhase::kCompressed));
  result.iteration.emplace(std::move(iteration));
  const graph::TaskGraph& graph = result.iteration->graph;
  const IterationStats& stats = result.iteration->stats;
  result.build_seconds = Seconds(build_start);
  const auto run_start = std::chrono::steady_clock::now();
  DTSIM_ASSIGN_OR_RETURN(result.summary, Run(config, cost, graph, result.times, &result.methods));
  result.simulate_seconds = Seconds(run_start);
  result.collectives = SummarizeCollectives(graph, result.times, result.methods);

  result.iteration_time = result.summary.makespan - TimeNs::Zero();
  result.average_iteration_time = result.iteration_time;
  result.warnings.insert(result.warnings.end(), config.cluster.assumed.begin(),
                         config.cluster.assumed.end());
  if (config.training.framework == models::Framework::kPyTorch &&
      config.training.recompute == models::Recompute::kSelective) {
    result.warnings.push_back(
        "recompute \"selective\" is Megatron-Core's attention-core recompute, which PyTorch "
        "does not have: priced as such by the analytic memory model, without the caching "
        "allocator's reserve (PyTorch's selective activation checkpointing, as torchtitan "
        "configures it, is \"selective_op\")");
  }
  for (std::string& unmodelled : UnmodelledCompile(config)) {
    result.warnings.push_back(std::move(unmodelled));
  }
  if (config.ranks == RanksMode::kSymmetric && SkewedRouting(config)) {
    result.warnings.push_back(fmt::format(
        "symmetric ranks simulate balanced routing: the expert imbalance of {} is not in this "
        "result (simulate \"ranks\": \"full\" to see it)",
        config.plan.expert_imbalance));
  }
  // Every tensor-parallel peer's and every stage's data-parallel group pushes to the same
  // servers; only the flow model with every rank simulated sees them share.
  const int sharing = config.plan.tensor * config.plan.pipeline;
  if (config.plan.gradient_sync == GradientSync::kParameterServer && sharing > 1 &&
      (!config.network_model->shares_links || config.ranks == RanksMode::kSymmetric)) {
    result.warnings.push_back(fmt::format(
        "{} data-parallel groups (one per tensor-parallel rank and stage) push to the same {} "
        "parameter server{}; {} prices each group alone, as if it had the servers to itself "
        "(simulate \"network_model\": \"{}\" with \"ranks\": \"full\" to see them share)",
        sharing, config.cluster.servers.count, config.cluster.servers.count == 1 ? "" : "s",
        config.network_model->shares_links
            ? "symmetric ranks"
            : fmt::format("the {} model", config.network_model->name),
        network::LinkSharingNetworkModel().name));
  }
  DTSIM_RETURN_IF_ERROR(SimulatePhases(config, cost, result));
  const double seconds = result.iteration_time.ToSecondsDouble();
  const double gpus = config.plan.world();
  const double peak = config.gpu.MatrixPeak(config.training.dtype).flop_per_second();
  result.samples_per_second = static_cast<double>(config.training.global_batch) / seconds;
  result.tokens_per_second =
      result.samples_per_second * static_cast<double>(config.training.seq_len);
  result.model_tflops_per_gpu = stats.model_flops / seconds / gpus / 1e12;
  result.hardware_tflops_per_gpu = stats.hardware_flops / seconds / gpus / 1e12;
  result.mfu = result.model_tflops_per_gpu * 1e12 / peak;
  result.hfu = result.hardware_tflops_per_gpu * 1e12 / peak;
  if (config.training.fp8 != models::Fp8Recipe::kNone) {
    result.mfu_fp8 =
        result.model_tflops_per_gpu * 1e12 / config.gpu.MatrixPeak(DType::kFp8).flop_per_second();
  }
  for (int stage = 0; stage < config.plan.pipeline; ++stage) {
    result.stages.push_back(
        Breakdown(graph, result.times, config.plan.Rank(0, stage, 0), result.summary.makespan));
  }
  if (config.time_to_train) {
    DTSIM_ASSIGN_OR_RETURN(result.time_to_train, TimeToTrainOf(config, result));
  }
  return result;
}

Expected<std::vector<models::RecordingCostModel::Recorded>> PricedOps(
    const ResolvedConfig& config) {
  DTSIM_ASSIGN_OR_RETURN(const ConfigCostModel cost, LoadCostModel(config));
  const models::RecordingCostModel recording(*cost.model);
  DTSIM_RETURN_IF_ERROR(BuildIteration(config, recording, CompressionPhase::kCompressed));
  if (MakeCompression(config.compression)->warmup_steps() > 0) {
    DTSIM_RETURN_IF_ERROR(BuildIteration(config, recording, CompressionPhase::kWarmup));
  }
  return recording.recorded();
}

}  // namespace dtsim::strategies
