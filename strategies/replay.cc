#include "strategies/replay.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <memory>

#include "models/cost_model.h"
#include "network/analytical_model.h"
#include "network/network_models.h"
#include "sim/engine/communication.h"

namespace dtsim::strategies {
namespace {

// The largest rank any collective is priced over, plus one: the GPUs the cluster needs.
int32_t PricedRanks(const graph::TaskGraph& graph) {
  int32_t ranks = graph.rank_count();
  for (uint32_t c = 0; c < graph.comm_count(); ++c) {
    for (const int32_t rank : graph.group(graph.comm(graph::CommId(c)).priced_group)) {
      ranks = std::max(ranks, rank + 1);
    }
  }
  return ranks;
}

// Every collective takes the duration its NCCL kernel took in the trace.
class MeasuredCommunicationModel final : public engine::CommunicationModel {
 public:
  explicit MeasuredCommunicationModel(const std::vector<DurationNs>& durations)
      : durations_(durations) {}
  std::string_view name() const override { return "measured"; }
  void Start(graph::CommId comm, engine::CommunicationContext& context) override {
    const DurationNs duration =
        comm.value() < durations_.size() ? durations_[comm.value()] : DurationNs::Zero();
    context.CompleteAt(comm, context.Now() + duration);
  }

 private:
  const std::vector<DurationNs>& durations_;
};

Expected<MeasuredRun> RunWith(const graph::TaskGraph& graph, engine::CommunicationModel& model) {
  engine::Simulator simulator(graph, model);
  DTSIM_RETURN_IF_ERROR(simulator.Run());
  return MeasuredRun{.summary = simulator.Summarize(), .times = simulator.TakeTimes()};
}

}  // namespace

Expected<MeasuredRun> SimulateOnCluster(const graph::TaskGraph& graph,
                                        network::ClusterSpec cluster) {
  DTSIM_RETURN_IF_ERROR(network::FitCluster(cluster, PricedRanks(graph)));
  DTSIM_ASSIGN_OR_RETURN(
      const std::unique_ptr<network::ClusterModel> model,
      network::MakePreparedModel(network::DefaultNetworkModel(), std::move(cluster), graph));
  DTSIM_ASSIGN_OR_RETURN(MeasuredRun run, RunWith(graph, *model));
  run.methods = model->methods();
  return run;
}

double ReplayStepResult::Error() const {
  if (measured.ns() == 0) return 0;
  return static_cast<double>(simulated.ns() - measured.ns()) / static_cast<double>(measured.ns());
}

Expected<MeasuredRun> SimulateMeasured(const graph::TaskGraph& graph,
                                       const std::vector<DurationNs>& comm_durations) {
  MeasuredCommunicationModel model(comm_durations);
  return RunWith(graph, model);
}

Expected<ReplayResult> SimulateReplay(const traces::ReplayGraph& replay) {
  DTSIM_ASSIGN_OR_RETURN(MeasuredRun run, SimulateMeasured(replay.graph, replay.comm_durations));
  ReplayResult result;
  result.summary = run.summary;
  result.times = std::move(run.times);
  double error_sum = 0;
  const std::vector<StepPath> paths = StepPaths({}, replay, result.times);
  for (const traces::ReplayStep& step : replay.steps) {
    ReplayStepResult row;
    if (result.steps.size() < paths.size()) row.path = paths[result.steps.size()];
    row.trace = step.trace;
    row.number = step.number;
    row.measured = step.measured;
    if (step.begin.valid() && step.end.valid()) {
      row.simulated =
          result.times.task_start[step.end.value()] - result.times.task_start[step.begin.value()];
    }
    error_sum += std::abs(row.Error());
    result.steps.push_back(row);
  }
  // In double: a corrupt trace's drifts (each up to the timestamp range) overflow an int64 sum.
  double drift_sum = 0;
  for (uint32_t task = 0; task < replay.graph.task_count(); ++task) {
    if (replay.task_device_event[task] == traces::kNone) continue;
    const DurationNs drift =
        result.times.task_start[task] - (TimeNs::Zero() + replay.measured_start[task]);
    const DurationNs magnitude(std::abs(drift.ns()));
    result.max_start_drift = std::max(result.max_start_drift, magnitude);
    drift_sum += static_cast<double>(magnitude.ns());
    ++result.gpu_ops;
  }
  if (result.gpu_ops > 0) {
    result.mean_start_drift =
        DurationNs(std::llround(drift_sum / static_cast<double>(result.gpu_ops)));
  }
  if (!result.steps.empty()) {
    result.mean_absolute_error = error_sum / static_cast<double>(result.steps.size());
  }
  return result;
}

double WhatIfStep::Change() const {
  if (replayed.ns() == 0) return 0;
  return static_cast<double>(what_if.ns() - replayed.ns()) / static_cast<double>(replayed.ns());
}

std::string ReplayWhatIf::Describe() const {
  std::vector<std::string> parts;
  for (const traces::KernelSpeedup& speedup : speedups) {
    parts.push_back(fmt::format("{} kernels ×{:g} faster{}",
                                traces::KernelClassName(speedup.kernels), speedup.factor,
                                speedup.rank >= 0 ? fmt::format(" on rank {}", speedup.rank) : ""));
  }
  if (serialize_gpu_streams) parts.push_back("GPU streams serialized (no overlap)");
  if (overlap_collectives) parts.push_back("collectives moved off compute streams (overlap)");
  if (cluster) {
    parts.push_back(fmt::format("collectives priced on {} (analytical)", cluster->name));
  }
  if (traced_cluster) {
    parts.push_back(fmt::format("their waits for peers kept (traced on {})", traced_cluster->name));
  }
  if (data_parallel > 0) {
    parts.push_back(fmt::format("world collectives over {} ranks", data_parallel));
  }
  if (compression) {
    parts.push_back(fmt::format("{} gradient compression (compressed phase, kernels on {})",
                                compression->method, gpu ? gpu->name : "?"));
  }
  return parts.empty() ? "none" : fmt::format("{}", fmt::join(parts, "; "));
}

namespace {

constexpr std::array<std::string_view, 3> kOverlapNames = {"as_traced", "none", "collectives"};

// A what-if file's cluster under `key`: a preset name or a cluster object; none when absent.
Expected<std::optional<network::ClusterSpec>> ClusterOf(JsonObjectReader& reader,
                                                        std::string_view key,
                                                        const std::string& path) {
  const Json* value = reader.Find(key);
  if (value == nullptr) return std::optional<network::ClusterSpec>();
  const std::string key_path = JsonChildPath(path, key);
  if (value->is_string()) {
    Expected<network::ClusterSpec> cluster = network::ClusterPreset(value->get<std::string>(), 0);
    if (!cluster.ok()) return std::move(cluster).error().Under(key_path);
    return std::optional(*std::move(cluster));
  }
  DTSIM_ASSIGN_OR_RETURN(network::ClusterSpec cluster, network::ClusterFromJson(*value, key_path));
  return std::optional(std::move(cluster));
}

// Per job index and Trace::collectives index, the part of each measured collective of the
// default replay graph `replayed` that was waiting for peers the job does not load: its measured
// time (for a collective the job's traces shared, their transfer) less the analytical model's
// price of its transfer on the cluster the trace ran on (none when the model prices it longer).
// A collective every member of which the job loads waits for none: the replay's rendezvous
// rebuilds its waits.
Expected<std::vector<std::vector<DurationNs>>> PeerWaits(std::span<const traces::Trace* const> job,
                                                         const traces::ReplayGraph& replayed,
                                                         network::ClusterSpec traced) {
  DTSIM_RETURN_IF_ERROR(network::FitCluster(traced, PricedRanks(replayed.graph)));
  network::AnalyticalModel model(std::move(traced));
  DTSIM_RETURN_IF_ERROR(model.Prepare(replayed.graph));
  std::vector<std::vector<DurationNs>> waits(job.size());
  for (size_t i = 0; i < job.size(); ++i) waits[i].resize(job[i]->collectives.size());
  for (uint32_t c = 0; c < replayed.comm_source.size(); ++c) {
    const traces::CommSource& source = replayed.comm_source[c];
    if (source.collective == traces::kNone || source.trace >= job.size()) continue;
    const DurationNs wait =
        std::max(DurationNs::Zero(), replayed.comm_durations[c] - model.Cost(graph::CommId(c)));
    if (source.job_collective == traces::kNone) {
      waits[source.trace][source.collective] = wait;
      continue;
    }
    const traces::JobCollective& shared = replayed.job.collectives[source.job_collective];
    const traces::CollectiveInfo& info = job[source.trace]->collectives[source.collective];
    if (static_cast<int64_t>(shared.members.size()) >= info.group_size) continue;
    for (const auto& [trace, collective] : shared.members) waits[trace][collective] = wait;
  }
  return waits;
}

}  // namespace

Expected<ReplayWhatIf> ReplayWhatIfFromJson(const Json& value, const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, path));
  ReplayWhatIf what_if;
  if (const Json* speedups = reader.Find("speedups")) {
    const std::string speedups_path = JsonChildPath(path, "speedups");
    if (!speedups->is_array()) {
      return Error("must be an array of \"CLASS=FACTOR\" strings", speedups_path,
                   JsonValueForError(*speedups));
    }
    for (size_t i = 0; i < speedups->size(); ++i) {
      const Json& item = (*speedups)[i];
      const std::string item_path = JsonIndexPath(speedups_path, i);
      if (!item.is_string()) {
        return Error("must be a \"CLASS=FACTOR\" string, e.g. \"gemm=1.5\"", item_path,
                     JsonValueForError(item));
      }
      Expected<traces::KernelSpeedup> speedup = traces::ParseKernelSpeedup(item.get<std::string>());
      if (!speedup.ok()) return std::move(speedup).error().Under(item_path);
      what_if.speedups.push_back(*speedup);
    }
    if (const std::optional<size_t> i = traces::RepeatedSpeedup(what_if.speedups)) {
      return traces::RepeatedSpeedupError(what_if.speedups[*i], (*speedups)[*i].get<std::string>())
          .Under(JsonIndexPath(speedups_path, *i));
    }
  }
  size_t overlap = 0;
  DTSIM_RETURN_IF_ERROR(reader.ReadOptionalChoice("overlap", kOverlapNames, overlap));
  what_if.serialize_gpu_streams = overlap == 1;
  what_if.overlap_collectives = overlap == 2;
  DTSIM_ASSIGN_OR_RETURN(what_if.cluster, ClusterOf(reader, "network", path));
  DTSIM_ASSIGN_OR_RETURN(what_if.traced_cluster, ClusterOf(reader, "traced_network", path));

  DTSIM_RETURN_IF_ERROR(reader.ReadOptionalInt("data_parallel", what_if.data_parallel, 1, 1 << 24));
  if (const Json* compression = reader.Find("compression")) {
    const std::string compression_path = JsonChildPath(path, "compression");
    const Json section = compression->is_string() ? Json{{"method", *compression}} : *compression;
    DTSIM_ASSIGN_OR_RETURN(what_if.compression, CompressionFromJson(section, compression_path));
  }
  if (const Json* gpu = reader.Find("gpu")) {
    DTSIM_ASSIGN_OR_RETURN(what_if.gpu, models::GpuFromJson(*gpu, JsonChildPath(path, "gpu")));
  }
  DTSIM_RETURN_IF_ERROR(reader.Finish());
  return what_if;
}

namespace {

// The compressed reduction of a world all-reduce: the method's steps over the priced group,
// kernels priced by the roofline model. Collectives the method does not apply to (not an
// all-reduce, an element type other than 16 or 32 bits) are kept.
class CompressionRewrite {
 public:
  CompressionRewrite(const CompressionConfig& config, const models::GpuSpec& gpu)
      : method_(MakeCompression(config)), cost_(gpu) {}

  std::optional<std::vector<traces::CollectiveRewriteStep>> operator()(
      const traces::CollectiveInfo& info, int32_t ranks) {
    if (!method_->Compresses() || info.kind != graph::CommKind::kAllReduce || ranks < 2 ||
        (info.element_bytes != 2 && info.element_bytes != 4)) {
      return std::nullopt;
    }
    const DType dtype = info.element_bytes == 2 ? DType::kBf16 : DType::kFp32;
    const GradientTensors bucket{.matrices = {},
                                 .vector_elements = info.bytes.count() / info.element_bytes};
    std::vector<traces::CollectiveRewriteStep> steps;
    for (const ReductionStep& step : method_->Reduce(bucket, ranks, dtype)) {
      traces::CollectiveRewriteStep rewritten{
          .name = step.name, .collective = step.collective, .bytes = step.bytes, .duration = {}};
      for (const models::Op& kernel : step.kernels) {
        Expected<models::OpCost> cost = cost_.PriceOrError(kernel, "compression kernel");
        if (!cost.ok()) {
          if (!error_) error_ = std::move(cost).error();
          return std::nullopt;
        }
        rewritten.duration += cost->duration;
      }
      steps.push_back(std::move(rewritten));
    }
    return steps;
  }

  const std::optional<Error>& error() const { return error_; }

 private:
  std::unique_ptr<GradientCompression> method_;
  models::RooflineCostModel cost_;
  std::optional<Error> error_;
};

}  // namespace

Expected<WhatIfResult> SimulateWhatIf(std::span<const traces::Trace* const> job,
                                      const traces::ReplayGraph& replayed,
                                      const ReplayResult& replay, const ReplayWhatIf& what_if) {
  if (job.empty()) return Error("no trace to replay");
  if (what_if.data_parallel > 0 && !what_if.cluster) {
    return Error(
        "scaling data parallelism re-prices collectives: it needs a cluster to price "
        "them on");
  }
  for (const traces::Trace* trace : job) {
    if (what_if.data_parallel > 0 && trace->world_size <= 0) {
      return Error(
                 "the trace has no world size (distributedInfo): its data-parallel collectives "
                 "cannot be told apart")
          .InFile(trace->file);
    }
  }
  if (what_if.data_parallel > 0 && static_cast<size_t>(what_if.data_parallel) < job.size()) {
    return Error(
        fmt::format("the job loads {} ranks: the world cannot shrink below them", job.size()),
        "data_parallel", std::to_string(what_if.data_parallel));
  }
  for (const traces::KernelSpeedup& speedup : what_if.speedups) {
    if (speedup.rank >= 0 && std::find(replayed.ranks.begin(), replayed.ranks.end(),
                                       speedup.rank) == replayed.ranks.end()) {
      return Error(fmt::format("no trace of rank {} in the replay (ranks {})", speedup.rank,
                               fmt::join(replayed.ranks, ", ")),
                   "speedups");
    }
  }
  if (what_if.serialize_gpu_streams && what_if.overlap_collectives) {
    return Error(
        "removing overlap (GPU streams serialized) and adding it (collectives moved off "
        "compute streams) contradict each other: choose one");
  }
  if (what_if.traced_cluster && !what_if.cluster) {
    return Error(
        "the cluster the trace ran on splits its collectives into waits and transfers for a "
        "network what-if: it needs the cluster to price the transfers on");
  }
  if (what_if.compression && (!what_if.cluster || !what_if.gpu)) {
    return Error(
        "gradient compression changes the collectives and adds kernels: it needs a "
        "cluster to price the collectives on and a GPU to price the kernels on");
  }
  traces::ReplayOptions options;
  if (what_if.traced_cluster) {  // the waits for peers of the replayed graph's collectives
    DTSIM_ASSIGN_OR_RETURN(options.collective_waits,
                           PeerWaits(job, replayed, *what_if.traced_cluster));
  }
  options.speedups = what_if.speedups;
  options.serialize_gpu_streams = what_if.serialize_gpu_streams;
  options.overlap_collectives = what_if.overlap_collectives;
  options.world_group_size = what_if.data_parallel;
  std::shared_ptr<CompressionRewrite> rewrite;
  if (what_if.compression) {
    rewrite = std::make_shared<CompressionRewrite>(*what_if.compression, *what_if.gpu);
    options.rewrite_world_collectives = [rewrite](const traces::CollectiveInfo& info,
                                                  int32_t ranks) {
      return (*rewrite)(info, ranks);
    };
  }
  DTSIM_ASSIGN_OR_RETURN(traces::ReplayGraph graph, traces::BuildReplayGraph(job, options));
  if (rewrite && rewrite->error()) return *rewrite->error();
  Expected<MeasuredRun> run = what_if.cluster ? SimulateOnCluster(graph.graph, *what_if.cluster)
                                              : SimulateMeasured(graph.graph, graph.comm_durations);
  if (!run.ok()) return std::move(run).error();
  WhatIfResult result{.graph = std::move(graph),
                      .summary = run->summary,
                      .times = std::move(run->times),
                      .communication_model = what_if.cluster ? "analytical" : "measured",
                      .methods = std::move(run->methods),
                      .steps = {},
                      .replayed_span = replay.summary.makespan - TimeNs::Zero(),
                      .what_if_span = run->summary.makespan - TimeNs::Zero()};
  // Both paths with the what-if's classes.
  const std::vector<StepPath> replayed_paths =
      StepPaths(job, replayed, replay.times, what_if.speedups);
  const std::vector<StepPath> what_if_paths =
      StepPaths(job, result.graph, result.times, what_if.speedups);
  for (size_t i = 0; i < result.graph.steps.size() && i < replay.steps.size(); ++i) {
    const traces::ReplayStep& step = result.graph.steps[i];
    WhatIfStep row{.trace = step.trace,
                   .number = step.number,
                   .measured = step.measured,
                   .replayed = replay.steps[i].simulated,
                   .what_if = DurationNs::Zero(),
                   .replayed_path = i < replayed_paths.size() ? replayed_paths[i] : StepPath{},
                   .what_if_path = i < what_if_paths.size() ? what_if_paths[i] : StepPath{}};
    if (step.begin.valid() && step.end.valid()) {
      row.what_if =
          result.times.task_start[step.end.value()] - result.times.task_start[step.begin.value()];
    }
    result.steps.push_back(row);
  }
  return result;
}

Expected<WhatIfResult> SimulateWhatIf(const traces::Trace& trace,
                                      const traces::ReplayGraph& replayed,
                                      const ReplayResult& replay, const ReplayWhatIf& what_if) {
  const traces::Trace* job[] = {&trace};
  return SimulateWhatIf(job, replayed, replay, what_if);
}

}  // namespace dtsim::strategies
