// The Chakra half of tools/api/replay.h: reading a Chakra job (rank files, or a host execution
// trace linked with its Kineto trace) and replaying it.
#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <utility>

#include "models/cost_model.h"
#include "tools/api/replay.h"
#include "tools/results/replay_result.h"
#include "traces/chakra_reader.h"
#include "traces/kineto_reader.h"
#include "traces/trace_format.h"

namespace dtsim::api {
namespace {

// Prices a compute node of a Chakra trace from its work on `gpu`'s roofline (bf16).
std::function<DurationNs(const traces::ChakraComputeWork&)> RooflinePricer(models::GpuSpec gpu) {
  return [model = std::make_shared<models::RooflineCostModel>(std::move(gpu))](
             const traces::ChakraComputeWork& work) {
    models::Op op{.name = "chakra compute node",
                  .kind = work.matmul ? models::OpKind::kGemm : models::OpKind::kElementwise,
                  .flops = work.flops,
                  .bytes = work.bytes,
                  .matmul = work.matmul};
    return model->Price(op)->duration;
  };
}

}  // namespace

Expected<bool> AreHostAndDeviceTraces(const std::vector<std::string>& files) {
  if (files.size() != 2) return false;
  DTSIM_ASSIGN_OR_RETURN(const traces::TraceFormat a, traces::DetectTraceFormat(files[0]));
  DTSIM_ASSIGN_OR_RETURN(const traces::TraceFormat b, traces::DetectTraceFormat(files[1]));
  const auto either = [&](traces::TraceFormat format) { return a == format || b == format; };
  return a != b && either(traces::TraceFormat::kPytorchExecutionTrace) &&
         either(traces::TraceFormat::kKineto);
}

Expected<std::vector<std::string>> ChakraRankFiles(const std::string& path) {
  std::string_view stem = path;
  const bool gzip = stem.ends_with(".gz");
  if (gzip) stem.remove_suffix(3);
  const bool et = stem.ends_with(".et");
  if (et) stem.remove_suffix(3);
  const size_t dot = stem.find_last_of('.');
  const std::string_view rank = dot == std::string_view::npos ? "" : stem.substr(dot + 1);
  if (!et || rank.empty() || rank.find_first_not_of("0123456789") != std::string_view::npos) {
    return Error("--all-ranks needs a trace named PREFIX.<rank>.et or PREFIX.<rank>.et.gz", "",
                 path);
  }
  const std::string_view prefix = stem.substr(0, dot);
  std::vector<std::string> files;
  for (int r = 0;; ++r) {
    const std::string file = fmt::format("{}.{}.et{}", prefix, r, gzip ? ".gz" : "");
    if (!std::filesystem::exists(file)) break;
    files.push_back(file);
  }
  if (files.empty()) return Error("no rank 0 file beside it", "", path);
  return files;
}

Expected<ChakraJob> ReadChakraJob(const std::vector<std::string>& files) {
  ChakraJob job{.files = files};
  DTSIM_ASSIGN_OR_RETURN(const bool linking, AreHostAndDeviceTraces(files));
  if (linking) {
    DTSIM_ASSIGN_OR_RETURN(const traces::TraceFormat first, traces::DetectTraceFormat(files[0]));
    const bool et_first = first == traces::TraceFormat::kPytorchExecutionTrace;
    DTSIM_ASSIGN_OR_RETURN(const traces::ChakraTrace host,
                           traces::ReadChakraTrace(files[et_first ? 0 : 1]));
    DTSIM_ASSIGN_OR_RETURN(const traces::Trace kineto,
                           traces::ReadKinetoTrace(files[et_first ? 1 : 0]));
    traces::TraceLinkStats stats;
    DTSIM_ASSIGN_OR_RETURN(traces::ChakraTrace linked,
                           traces::LinkExecutionTrace(host, kineto, stats));
    job.ranks.push_back(std::move(linked));
    job.linked = stats;
    return job;
  }
  for (const std::string& file : files) {
    DTSIM_ASSIGN_OR_RETURN(traces::ChakraTrace trace, traces::ReadChakraTrace(file));
    job.ranks.push_back(std::move(trace));
  }
  return job;
}

Expected<ChakraReplay> ReplayChakraJob(const ChakraJob& job, const ChakraReplayOptions& options) {
  for (size_t rank = 0; rank < job.ranks.size(); ++rank) {
    // A PyTorch host execution trace records what ran, not for how long: replayed alone it
    // would take 0 ms whatever it holds.
    const traces::ChakraImportStats& s = job.ranks[rank].stats;
    if (s.form == "pytorch_execution_trace" && s.nodes_without_duration == s.nodes) {
      return Error(fmt::format(
                       "a PyTorch host execution trace has no durations (none of its {} nodes "
                       "has one): it cannot be replayed alone. Replay the Kineto trace recorded "
                       "with it, or link the two with Chakra's chakra_trace_link and replay the "
                       "linked trace",
                       s.nodes))
          .InFile(job.files[rank]);
    }
  }
  const std::string& first = job.files.front();
  traces::ChakraImportOptions import{.element_bytes = options.element_bytes};
  if (!options.comm_groups.empty()) {
    DTSIM_ASSIGN_OR_RETURN(import.comm_groups, traces::ReadChakraCommGroups(options.comm_groups));
  }
  if (options.gpu) import.price_compute = RooflinePricer(*options.gpu);
  Expected<traces::ChakraGraph> chakra = traces::BuildChakraGraph(job.ranks, import);
  if (!chakra.ok()) return std::move(chakra).error().InFile(first);
  DTSIM_ASSIGN_OR_RETURN(strategies::MeasuredRun run,
                         strategies::SimulateMeasured(chakra->graph, chakra->comm_durations));
  const DurationNs span = run.summary.makespan - TimeNs::Zero();
  std::optional<strategies::MeasuredRun> priced;
  if (options.cluster) {
    Expected<strategies::MeasuredRun> on_cluster =
        strategies::SimulateOnCluster(chakra->graph, *options.cluster);
    if (!on_cluster.ok()) return std::move(on_cluster).error().InFile(first);
    priced = std::move(on_cluster).value();
  }
  return ChakraReplay{std::move(chakra).value(), std::move(run), span, std::move(priced)};
}

OrderedJson ChakraReplayJson(const ChakraJob& job, const ChakraReplay& replay,
                             const ChakraReplayOptions& options) {
  std::optional<results::ChakraNetworkOutcome> network;
  if (replay.priced) {
    network = results::ChakraNetworkOutcome{options.cluster->name,
                                            replay.priced->summary.makespan - TimeNs::Zero()};
  }
  return results::ChakraReplayResultJson(job.ranks.front(), replay.chakra, replay.span, network,
                                         replay.chakra.stats.compute_priced > 0
                                             ? std::string_view(options.gpu->name)
                                             : std::string_view());
}

}  // namespace dtsim::api
