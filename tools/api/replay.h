// `dtsim replay` as functions: a job's profiler (Kineto / Chrome) traces, or a Chakra job,
// read, replayed as measured and under a what-if, and the replay result document
// (docs/formats/replay-result.md). The command (tools/cli/replay_command.cc) prints from the
// same objects; the Python module returns the document.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/gpu.h"
#include "network/cluster.h"
#include "sim/base/json_reader.h"
#include "sim/base/status.h"
#include "strategies/replay.h"
#include "traces/chakra_graph.h"
#include "traces/chakra_trace.h"
#include "traces/replay_graph.h"
#include "traces/trace.h"
#include "traces/trace_link.h"

namespace dtsim::api {

// A job replayed: its traces in rank order, the replay graph, its simulation with the
// measured durations and, with a what-if, the simulation under it.
struct ProfilerReplay {
  std::vector<traces::Trace> traces;
  traces::ReplayGraph replay;
  strategies::ReplayResult result;
  std::optional<strategies::WhatIfResult> what_if;

  // The traces as the replay functions take them.
  std::vector<const traces::Trace*> Job() const;
};

// A what-if a profiler trace can take: --gpu prices compression kernels, so it needs a
// compression method. `gpu_location` names the gpu in the error ("--gpu", "gpu").
Status CheckProfilerWhatIf(const strategies::ReplayWhatIf& what_if, std::string_view gpu_location);

// A what-if a Chakra trace can take: its communication priced on a cluster, and a GPU for its
// compute nodes without a duration; the others need what a profiler trace records. `network`
// and `gpu` name those two as the caller's user writes them ("--network" or "network").
Status CheckChakraWhatIf(const strategies::ReplayWhatIf& what_if, std::string_view network,
                         std::string_view gpu);

// Builds and simulates the replay graph of `traces` (a job read by ReadTraceJob), and, unless
// `what_if` is empty, the what-if. Errors name the first trace.
Expected<ProfilerReplay> ReplayTraces(std::vector<traces::Trace> traces,
                                      const strategies::ReplayWhatIf& what_if);

// A Chakra job: one trace per rank (in rank order), or a PyTorch host execution trace linked
// with the Kineto trace recorded with it (traces/trace_link.h).
struct ChakraJob {
  std::vector<std::string> files;
  std::vector<traces::ChakraTrace> ranks;
  std::optional<traces::TraceLinkStats> linked;  // when two traces were linked into one
};

// Whether `files` are a host execution trace and a Kineto trace, in either order.
Expected<bool> AreHostAndDeviceTraces(const std::vector<std::string>& files);

// The files of every rank of the job `path` belongs to (PREFIX.<rank>.et[.gz]), in rank order.
Expected<std::vector<std::string>> ChakraRankFiles(const std::string& path);

// Reads `files`: linked when they are a host and a device trace, else one Chakra trace each.
Expected<ChakraJob> ReadChakraJob(const std::vector<std::string>& files);

struct ChakraReplayOptions {
  std::string comm_groups;               // ASTRA-sim's comm group file ({"name": [ranks]}), or none
  std::optional<int64_t> element_bytes;  // for traces whose sizes count elements (STAGE's)
  std::optional<models::GpuSpec> gpu;    // prices compute nodes that recorded no duration
  std::optional<network::ClusterSpec> cluster;  // prices the collectives and sends
};

// A Chakra job replayed with its recorded durations and, with a cluster, with its
// communication priced on it.
struct ChakraReplay {
  traces::ChakraGraph chakra;
  strategies::MeasuredRun run;
  DurationNs span;
  std::optional<strategies::MeasuredRun> priced;
};

// Errors for a host execution trace alone (it records no durations) and name the file.
Expected<ChakraReplay> ReplayChakraJob(const ChakraJob& job, const ChakraReplayOptions& options);

// The dtsim.replay_result document of a Chakra replay, with provenance.
OrderedJson ChakraReplayJson(const ChakraJob& job, const ChakraReplay& replay,
                             const ChakraReplayOptions& options);

// What dtsim.replay takes: trace files or directories (one job, one trace per rank), a what-if
// as a document (what a what-if file holds, docs/replay.md) or a file, and for Chakra traces
// the comm groups and element size.
struct ReplayInput {
  std::vector<std::string> traces;
  std::optional<Json> what_if;
  std::string what_if_path;
  std::string comm_groups;
  std::optional<int64_t> element_bytes;  // default: traces::kDefaultChakraElementBytes
};

// `dtsim replay -o`: the dtsim.replay_result document, with provenance. A Chakra trace takes
// the network what-if (and a GPU for its compute nodes without a duration) only.
Expected<OrderedJson> ReplayJson(const ReplayInput& input);

}  // namespace dtsim::api
