#include "tools/api/replay.h"

#include <fmt/format.h>

#include <utility>

#include "tools/api/trace_job.h"
#include "tools/results/replay_result.h"
#include "traces/trace_format.h"

namespace dtsim::api {

namespace {

// The traces as the replay functions take them: one pointer per rank.
std::vector<const traces::Trace*> JobOf(const std::vector<traces::Trace>& traces) {
  std::vector<const traces::Trace*> job;
  job.reserve(traces.size());
  for (const traces::Trace& trace : traces) job.push_back(&trace);
  return job;
}

}  // namespace

std::vector<const traces::Trace*> ProfilerReplay::Job() const { return JobOf(traces); }

Status CheckProfilerWhatIf(const strategies::ReplayWhatIf& what_if, std::string_view gpu_location) {
  if (what_if.gpu && !what_if.compression) {
    return Error(
        "prices compression kernels: it goes with a compression method (--compression, or "
        "\"compression\" in the what-if file)",
        std::string(gpu_location), what_if.gpu->name);
  }
  return Status::Ok();
}

Status CheckChakraWhatIf(const strategies::ReplayWhatIf& what_if, std::string_view network,
                         std::string_view gpu) {
  strategies::ReplayWhatIf beside_network = what_if;
  beside_network.cluster.reset();
  beside_network.gpu.reset();
  if (!beside_network.empty()) {
    return Error(fmt::format(
        "of the what-ifs, a Chakra trace takes {} only (its collectives priced on a cluster, and "
        "{} its compute nodes without a duration); the others apply to profiler traces",
        network, gpu));
  }
  return Status::Ok();
}

Expected<ProfilerReplay> ReplayTraces(std::vector<traces::Trace> traces,
                                      const strategies::ReplayWhatIf& what_if) {
  const std::vector<const traces::Trace*> job = JobOf(traces);
  DTSIM_ASSIGN_OR_RETURN(traces::ReplayGraph replay, traces::BuildReplayGraph(job));
  DTSIM_ASSIGN_OR_RETURN(strategies::ReplayResult result, strategies::SimulateReplay(replay));
  std::optional<strategies::WhatIfResult> what_if_result;
  if (!what_if.empty()) {
    Expected<strategies::WhatIfResult> simulated =
        strategies::SimulateWhatIf(job, replay, result, what_if);
    if (!simulated.ok()) return std::move(simulated).error().InFile(traces.front().file);
    what_if_result = std::move(simulated).value();
  }
  // Moving the vector keeps its elements where they are, so what points into them stays valid.
  return ProfilerReplay{std::move(traces), std::move(replay), std::move(result),
                        std::move(what_if_result)};
}

namespace {

// A Chakra job's replay: the what-if may price its communication on a cluster (and its
// compute nodes without a duration on a GPU), nothing else.
Expected<OrderedJson> ReplayChakraJson(const ReplayInput& input,
                                       const std::vector<std::string>& files,
                                       const strategies::ReplayWhatIf& what_if) {
  if (Status checked = CheckChakraWhatIf(what_if, "network", "gpu"); !checked.ok()) {
    return std::move(checked).error().InFile(files.front());
  }
  DTSIM_ASSIGN_OR_RETURN(const ChakraJob job, ReadChakraJob(files));
  const ChakraReplayOptions options{.comm_groups = input.comm_groups,
                                    .element_bytes = input.element_bytes,
                                    .gpu = what_if.gpu,
                                    .cluster = what_if.cluster};
  DTSIM_ASSIGN_OR_RETURN(const ChakraReplay replay, ReplayChakraJob(job, options));
  return ChakraReplayJson(job, replay, options);
}

}  // namespace

Expected<OrderedJson> ReplayJson(const ReplayInput& input) {
  if (input.traces.empty()) return Error("no trace to replay", "traces");
  strategies::ReplayWhatIf what_if;
  if (input.what_if || !input.what_if_path.empty()) {
    Json document;
    if (input.what_if) {
      document = *input.what_if;
    } else {
      DTSIM_ASSIGN_OR_RETURN(document, ReadJsonFile(input.what_if_path));
    }
    Expected<strategies::ReplayWhatIf> read = strategies::ReplayWhatIfFromJson(document, "");
    if (!read.ok()) return std::move(read).error().InFile(input.what_if_path);
    what_if = *std::move(read);
  }
  DTSIM_ASSIGN_OR_RETURN(const std::vector<std::string> files, TraceFiles(input.traces));
  DTSIM_ASSIGN_OR_RETURN(const traces::TraceFormat format, traces::DetectTraceFormat(files[0]));
  DTSIM_ASSIGN_OR_RETURN(const bool linking, AreHostAndDeviceTraces(files));
  if (traces::IsChakraFormat(format) || linking) {
    return ReplayChakraJson(input, files, what_if);
  }
  if (input.element_bytes || !input.comm_groups.empty()) {
    return Error(fmt::format("{} applies to Chakra traces; this is a profiler trace",
                             input.comm_groups.empty() ? "element_bytes" : "comm_groups"))
        .InFile(files[0]);
  }
  DTSIM_RETURN_IF_ERROR(CheckProfilerWhatIf(what_if, "gpu"));
  DTSIM_ASSIGN_OR_RETURN(std::vector<traces::Trace> traces, ReadTraceJob(files));
  DTSIM_ASSIGN_OR_RETURN(const ProfilerReplay replayed, ReplayTraces(std::move(traces), what_if));
  std::optional<results::WhatIfOutcome> outcome;
  if (replayed.what_if) outcome.emplace(results::WhatIfOutcome{what_if, *replayed.what_if});
  return results::ReplayResultJson(replayed.Job(), replayed.replay, replayed.result, outcome);
}

}  // namespace dtsim::api
