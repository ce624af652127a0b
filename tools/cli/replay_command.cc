#include "tools/cli/replay_command.h"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>

#include "models/gpu.h"
#include "network/cluster.h"
#include "sim/base/quantity.h"
#include "strategies/replay.h"
#include "tools/api/replay.h"
#include "tools/api/trace_job.h"
#include "tools/cli/command_line.h"
#include "tools/cli/trace_report.h"
#include "tools/results/provenance.h"
#include "tools/results/replay_result.h"
#include "tools/results/result_file.h"
#include "traces/chakra_graph.h"
#include "traces/chakra_reader.h"
#include "traces/chrome_trace_writer.h"
#include "traces/kineto_reader.h"
#include "traces/replay_graph.h"
#include "traces/trace_format.h"
#include "traces/trace_link.h"

namespace dtsim::cli {
namespace {

// A job of more traces than this lists some ranks only (ListedSteps, PrintPaceSetters).
constexpr size_t kListedRanks = 8;

// Durations in the replay tables: "12.346 ms".
std::string MsWithUnit(DurationNs duration) { return FormatMilliseconds(duration, 3) + " ms"; }

namespace po = boost::program_options;

struct ReplayOptions {
  std::vector<std::string> traces;  // as given: files and directories
  std::string trace;                // the first
  std::vector<std::string> files;   // the trace files they name
  std::string result_path;
  std::string timeline_path;
  bool stats_only = false;
  bool all_ranks = false;
  std::string comm_groups;
  bool help = false;
  // What-ifs.
  std::string what_if_file;
  std::vector<std::string> speedups;
  bool no_overlap = false;
  bool overlap = false;
  std::string network;
  std::string traced_network;
  int32_t data_parallel = 0;
  std::string compression;
  std::string gpu;
  std::optional<int64_t> element_bytes;
};

po::options_description Describe(ReplayOptions& o) {
  po::options_description description(
      "Usage: dtsim replay TRACE... [options]\n\n"
      "Imports a PyTorch profiler (Kineto) or Chrome trace (.json or .json.gz), rebuilds its\n"
      "dependency graph (launches, stream order, event waits, syncs, host time between API\n"
      "calls), simulates it with the measured durations and compares each ProfilerStep's\n"
      "simulated duration with the measured one (docs/replay.md).\n\n"
      "Several traces, or a directory of them, are one job, one trace per rank: replayed\n"
      "together, the collectives the ranks shared start when the last rank arrives.\n\n"
      "A Chakra execution trace (.et protobuf stream or one of its JSON forms, plain or gzip)\n"
      "is imported as its node graph and simulated with the recorded node durations\n"
      "(docs/formats/chakra.md). The format is detected from the content.\n\nOptions");
  description.add_options()("help,h", po::bool_switch(&o.help), "show this help")(
      "output,o", po::value(&o.result_path)->value_name("FILE"),
      "write the import statistics and per-step comparison as JSON")(
      "timeline", po::value(&o.timeline_path)->value_name("FILE"),
      "write the simulated replay as a Chrome trace / Perfetto timeline")(
      "stats-only", po::bool_switch(&o.stats_only),
      "import the trace, print its statistics and stop (no graph, no simulation)")(
      "all-ranks", po::bool_switch(&o.all_ranks),
      "Chakra: TRACE is PREFIX.<rank>.et[.gz]; replay PREFIX.0.et, PREFIX.1.et, ... together")(
      "comm-groups", po::value(&o.comm_groups)->value_name("FILE"),
      "Chakra: the ranks of each pg_name, as ASTRA-sim's comm group file ({\"name\": [ranks]}); "
      "without it every collective spans all ranks given")(
      "what-if", po::value(&o.what_if_file)->value_name("FILE"),
      "what-if read from a JSON file (docs/replay.md); the flags below override its values")(
      "speedup", po::value(&o.speedups)->value_name("CLASS=FACTOR")->composing(),
      "what-if: GPU ops of a kernel class run FACTOR times faster (gemm, attention, conv, "
      "elementwise, memory, all; repeatable)")(
      "no-overlap", po::bool_switch(&o.no_overlap),
      "what-if: merge each GPU's streams into one, so nothing on the GPU overlaps")(
      "overlap", po::bool_switch(&o.overlap),
      "what-if: collectives on a stream that also computes move to a stream of their own, so "
      "the work after them no longer waits for them")(
      "network", po::value(&o.network)->value_name("CLUSTER"),
      "what-if: price collectives with the analytical network model on CLUSTER (a preset "
      "such as dgx-a100, or a cluster JSON file) instead of their measured time; the one "
      "what-if a Chakra trace takes")(
      "traced-network", po::value(&o.traced_network)->value_name("CLUSTER"),
      "with --network: the cluster the trace ran on; each collective keeps the part of its "
      "measured time the model does not price there (waiting for peers)")(
      "data-parallel", AtLeastValue(&o.data_parallel, 1, "data-parallel"),
      "what-if: collectives over the traced world run over N ranks (needs --network)")(
      "compression", po::value(&o.compression)->value_name("METHOD|JSON"),
      "what-if: compress the all-reduces over the traced world with a registered method "
      "(onebit_adam, topk, qsgd, ...; or a compression section as JSON); needs --network and "
      "--gpu")("gpu", po::value(&o.gpu)->value_name("PRESET"),
               "the GPU that prices compression kernels (a preset such as a100-sxm4-80gb); for "
               "a Chakra trace, the GPU whose roofline prices the compute nodes that recorded "
               "no duration (STAGE's) from their num_ops and tensor_size")(
      "element-bytes", po::value<int64_t>()->value_name("N")->notifier([&o](int64_t bytes) {
        o.element_bytes = bytes;
      }),
      "Chakra: bytes an element, for traces whose sizes count elements (STAGE's): 1 to 16; "
      "default 2 (bf16)");
  return description;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The conventions of another tool's trace, and how its compute nodes without a duration were
// priced.
void PrintConventions(std::ostream& out, const traces::ChakraGraph& chakra,
                      const std::optional<models::GpuSpec>& gpu) {
  if (chakra.conventions.producer == "STAGE") {
    fmt::print(out,
               "  producer   STAGE (metadata schema symbolic_tensor_network): comm_size and "
               "tensor_size count elements, read as {} B each (--element-bytes); an einsum's "
               "num_ops counts multiply-adds, 2 FLOPs each\n",
               chakra.element_bytes);
  }
  if (chakra.stats.compute_priced > 0) {
    fmt::print(out,
               "  compute    {} compute nodes without a duration priced on the {} roofline "
               "from num_ops and tensor_size\n",
               chakra.stats.compute_priced, gpu->name);
  } else if (chakra.stats.compute_unpriced > 0) {
    fmt::print(out,
               "  compute    {} compute nodes record no duration and take none here: --gpu "
               "PRESET prices them from num_ops and tensor_size\n",
               chakra.stats.compute_unpriced);
  }
}

Status ExecuteChakra(const ReplayOptions& options, const api::ChakraReplayOptions& replay_options,
                     std::ostream& out) {
  const auto started = std::chrono::steady_clock::now();
  DTSIM_ASSIGN_OR_RETURN(const bool linking, api::AreHostAndDeviceTraces(options.files));
  std::vector<std::string> files = {options.trace};
  if (linking) {
    files = options.files;
  } else if (options.all_ranks) {
    DTSIM_ASSIGN_OR_RETURN(files, api::ChakraRankFiles(options.trace));
  }
  DTSIM_ASSIGN_OR_RETURN(const api::ChakraJob job, api::ReadChakraJob(files));
  const double import_seconds = SecondsSince(started);
  fmt::print(out, "dtsim replay {}\n\n", fmt::join(options.traces, " "));
  if (const std::optional<traces::TraceLinkStats>& linked = job.linked) {
    fmt::print(out,
               "  linked     {} of the host trace's {} ops with Kineto ops (by {}): their "
               "exclusive durations; {} GPU ops added after the ops that launched them ({} whose "
               "launch no linked op contains)\n",
               linked->linked, linked->host_ops, linked->key, linked->gpu_ops,
               linked->gpu_ops_unlinked);
  }
  if (job.ranks.size() > 1) {
    int64_t nodes = 0;
    for (const traces::ChakraTrace& rank : job.ranks) nodes += rank.stats.nodes;
    fmt::print(out, "  ranks      {} files ({} ... {}), {} nodes in all; rank 0:\n",
               job.ranks.size(), files.front(), files.back(), nodes);
  }
  PrintChakraImportStats(out, job.ranks.front());
  if (options.stats_only) {
    fmt::print(out, "  read in    {:.2f} s\n", import_seconds);
    return Status::Ok();
  }
  DTSIM_ASSIGN_OR_RETURN(const api::ChakraReplay replay, api::ReplayChakraJob(job, replay_options));
  const traces::ChakraGraph& chakra = replay.chakra;
  PrintConventions(out, chakra, replay_options.gpu);
  const traces::ChakraGraphStats& g = chakra.stats;
  fmt::print(out,
             "  graph      {} tasks ({} host, {} GPU, {} collectives, {} sends/recvs), {} "
             "dependencies\n",
             chakra.graph.task_count(), g.host_tasks, g.gpu_tasks, g.collectives, g.point_to_point,
             g.dependencies);
  if (g.collectives_outside_groups > 0) {
    fmt::print(out,
               "             {} collective nodes name a pg_name the comm groups do not list: "
               "they span every rank given\n",
               g.collectives_outside_groups);
  }
  fmt::print(out, "  simulated  {} with the recorded durations{}{}; imported in {:.2f} s\n",
             MsWithUnit(replay.span),
             g.compute_priced > 0 ? " and the compute priced on the GPU" : "",
             chakra.written_by_dtsim && !replay_options.cluster
                 ? " (collectives of dtsim's own export take no time here: price them with "
                   "--network, or simulate its config)"
                 : "",
             import_seconds);
  const std::optional<strategies::MeasuredRun>& priced = replay.priced;
  if (priced) {
    fmt::print(out,
               "  network    {} with the collectives and sends priced on {} (analytical), the "
               "other nodes as above\n",
               MsWithUnit(priced->summary.makespan - TimeNs::Zero()), replay_options.cluster->name);
  }
  if (!options.result_path.empty()) {
    DTSIM_RETURN_IF_ERROR(results::WriteResultFile(
        options.result_path, api::ChakraReplayJson(job, replay, replay_options)));
  }
  if (!options.timeline_path.empty()) {
    traces::TimelineInfo info{.source = options.trace,
                              .communication_model = priced ? "analytical" : "measured"};
    if (priced) {
      info.method_labels = priced->methods.labels;
      info.comm_methods = priced->methods.of_comm;
    }
    DTSIM_RETURN_IF_ERROR(traces::WriteChromeTraceFile(
        options.timeline_path, chakra.graph, priced ? priced->times : replay.run.times, info));
  }
  return Status::Ok();
}

// The what-if of the file (if any) with the flags applied over it: a flag replaces the file's
// value (a --speedup the file's speedup of the same class and rank); speedups from the flags
// come first, so they win where classes overlap.
Expected<strategies::ReplayWhatIf> WhatIfOf(const ReplayOptions& options) {
  strategies::ReplayWhatIf what_if;
  if (!options.what_if_file.empty()) {
    DTSIM_ASSIGN_OR_RETURN(const Json file, ReadJsonFile(options.what_if_file));
    Expected<strategies::ReplayWhatIf> read = strategies::ReplayWhatIfFromJson(file, "");
    if (!read.ok()) return std::move(read).error().InFile(options.what_if_file);
    what_if = *std::move(read);
  }
  std::vector<traces::KernelSpeedup> speedups;
  for (const std::string& text : options.speedups) {
    Expected<traces::KernelSpeedup> speedup = traces::ParseKernelSpeedup(text);
    if (!speedup.ok()) return std::move(speedup).error().Under("--speedup");
    speedups.push_back(*speedup);
  }
  if (const std::optional<size_t> i = traces::RepeatedSpeedup(speedups)) {
    return traces::RepeatedSpeedupError(speedups[*i], options.speedups[*i]).Under("--speedup");
  }
  std::erase_if(what_if.speedups, [&](const traces::KernelSpeedup& in_file) {
    return std::ranges::any_of(speedups, [&](const traces::KernelSpeedup& flag) {
      return flag.kernels == in_file.kernels && flag.rank == in_file.rank;
    });
  });
  what_if.speedups.insert(what_if.speedups.begin(), speedups.begin(), speedups.end());
  if (options.no_overlap && options.overlap) {
    return Error("--no-overlap removes overlap and --overlap adds it: choose one");
  }
  if (options.no_overlap || options.overlap) {
    what_if.serialize_gpu_streams = options.no_overlap;
    what_if.overlap_collectives = options.overlap;
  }
  if (!options.traced_network.empty()) {
    DTSIM_ASSIGN_OR_RETURN(what_if.traced_cluster, network::LoadCluster(options.traced_network));
  }
  if (!options.network.empty()) {
    DTSIM_ASSIGN_OR_RETURN(what_if.cluster, network::LoadCluster(options.network));
  }
  if (options.data_parallel > 0) what_if.data_parallel = options.data_parallel;
  if (!options.compression.empty()) {
    Json section = Json{{"method", options.compression}};
    if (options.compression.starts_with("{")) {
      DTSIM_ASSIGN_OR_RETURN(section, ParseJson(options.compression, "--compression"));
    }
    DTSIM_ASSIGN_OR_RETURN(what_if.compression,
                           strategies::CompressionFromJson(section, "--compression"));
  }
  if (!options.gpu.empty()) {
    DTSIM_ASSIGN_OR_RETURN(what_if.gpu, models::GpuPreset(options.gpu));
  }
  return what_if;
}

// One row of a step's critical path, in ms per part and as the share of the step.
// "r1 ProfilerStep#551" in a job of several traces, "ProfilerStep#551" for one.
std::string StepLabel(const traces::ReplayGraph& replay, uint32_t trace, int64_t number) {
  if (replay.ranks.size() < 2) return fmt::format("ProfilerStep#{}", number);
  return fmt::format("r{} ProfilerStep#{}", replay.ranks[trace], number);
}

// In a job, the last column is the path's time on other ranks.
void PrintPathRow(std::ostream& out, std::string_view label, const strategies::StepPath& path,
                  bool job) {
  fmt::print(out, "  {:<22}", label);
  for (const DurationNs part : path.parts) {
    fmt::print(out, " {:>14.3f}", static_cast<double>(part.ns()) / 1e6);
  }
  if (job) fmt::print(out, " {:>14.3f}", static_cast<double>(path.on_peers.ns()) / 1e6);
  fmt::print(out, "\n");
}

void PrintPathHeader(std::ostream& out, bool job) {
  fmt::print(out, "\n  {:<22}", "critical path (ms)");
  for (size_t part = 0; part < strategies::kPathParts; ++part) {
    fmt::print(out, " {:>14}", strategies::PathPartName(static_cast<strategies::PathPart>(part)));
  }
  if (job) fmt::print(out, " {:>14}", "of it on peers");
  fmt::print(out, "\n");
}

// In a job, per step number: the ranks whose critical path stayed on their own rank (they set
// the pace), when the others' paths ran at least 1% of their step on peers (they waited).
void PrintPaceSetters(std::ostream& out, const traces::ReplayGraph& replay,
                      const strategies::ReplayResult& result) {
  std::map<int64_t, std::vector<const strategies::ReplayStepResult*>> by_number;
  for (const strategies::ReplayStepResult& step : result.steps) {
    by_number[step.number].push_back(&step);
  }
  for (const auto& [number, steps] : by_number) {
    std::vector<std::string> own;
    const strategies::ReplayStepResult* most = nullptr;
    for (const strategies::ReplayStepResult* step : steps) {
      if (step->path.on_peers == DurationNs::Zero()) {
        own.push_back(fmt::format("r{}", replay.ranks[step->trace]));
      } else if (most == nullptr || step->path.on_peers > most->path.on_peers) {
        most = step;
      }
    }
    if (own.empty() || most == nullptr || most->path.on_peers.ns() * 100 < most->simulated.ns()) {
      continue;
    }
    if (own.size() > kListedRanks) {
      const size_t more = own.size() - kListedRanks;
      own.resize(kListedRanks);
      own.push_back(fmt::format("{} more", more));
    }
    fmt::print(out,
               "  ProfilerStep#{}: the pace is set by {} (its critical path stays on its own "
               "rank); r{}'s ran {} ({:.0f}% of its step) on peers\n",
               number, fmt::join(own, ", "), replay.ranks[most->trace],
               MsWithUnit(most->path.on_peers),
               100.0 * static_cast<double>(most->path.on_peers.ns()) /
                   static_cast<double>(std::max<int64_t>(most->simulated.ns(), 1)));
  }
}

// Each step as measured and simulated, and where its time went.
// The steps a job's tables show: every rank's in a job of up to kListedRanks traces; in a larger
// one, per step number, the rank whose simulated step was longest and the one whose was shortest
// (-o writes every rank's).

std::vector<size_t> ListedSteps(const traces::ReplayGraph& replay,
                                const std::vector<strategies::ReplayStepResult>& steps) {
  std::vector<size_t> listed;
  if (replay.ranks.size() <= kListedRanks) {
    for (size_t i = 0; i < steps.size(); ++i) listed.push_back(i);
    return listed;
  }
  std::map<int64_t, std::pair<size_t, size_t>> extremes;  // step number → (longest, shortest)
  for (size_t i = 0; i < steps.size(); ++i) {
    auto [it, added] = extremes.try_emplace(steps[i].number, i, i);
    if (steps[i].simulated > steps[it->second.first].simulated) it->second.first = i;
    if (steps[i].simulated < steps[it->second.second].simulated) it->second.second = i;
  }
  for (const auto& [number, pair] : extremes) {
    listed.push_back(pair.first);
    if (pair.second != pair.first) listed.push_back(pair.second);
  }
  return listed;
}

void PrintSteps(std::ostream& out, const traces::ReplayGraph& replay,
                const strategies::ReplayResult& result) {
  if (result.steps.empty()) {
    fmt::print(out, "  no ProfilerStep annotations: nothing to compare step by step\n");
    return;
  }
  const std::vector<size_t> listed = ListedSteps(replay, result.steps);
  if (listed.size() < result.steps.size()) {
    fmt::print(out,
               "  {} ranks: per step, the ranks with the longest and the shortest simulated step "
               "(-o writes every rank's)\n",
               replay.ranks.size());
  }
  fmt::print(out, "  {:<22} {:>14} {:>14} {:>9}\n", "step", "measured", "simulated", "error");
  for (const size_t i : listed) {
    const strategies::ReplayStepResult& step = result.steps[i];
    fmt::print(out, "  {:<22} {:>14} {:>14} {:>+8.2f}%\n",
               StepLabel(replay, step.trace, step.number), MsWithUnit(step.measured),
               MsWithUnit(step.simulated), 100 * step.Error());
  }
  fmt::print(out, "\n  mean absolute error over {} steps: {:.2f}%\n", result.steps.size(),
             100 * result.mean_absolute_error);
  const bool job = replay.ranks.size() > 1;
  PrintPathHeader(out, job);
  for (const size_t i : listed) {
    const strategies::ReplayStepResult& step = result.steps[i];
    PrintPathRow(out, StepLabel(replay, step.trace, step.number), step.path, job);
  }
  if (job) PrintPaceSetters(out, replay, result);
}

// The what-if's steps beside the replay's (`listed`: the indices of the steps shown).
void PrintWhatIf(std::ostream& out, const strategies::ReplayWhatIf& what_if,
                 const traces::ReplayGraph& replay, const strategies::WhatIfResult& result,
                 const std::vector<size_t>& listed) {
  const bool job = replay.ranks.size() > 1;
  std::vector<const strategies::WhatIfStep*> steps;
  for (const size_t i : listed) {
    if (i < result.steps.size()) steps.push_back(&result.steps[i]);
  }
  const traces::ReplayStats& g = result.graph.stats;
  fmt::print(out, "\n  what-if    {}\n", what_if.Describe());
  fmt::print(out,
             "             {} GPU ops sped up, {} collectives moved off a compute stream, {} "
             "re-sized, {} compressed; communication {}\n",
             g.sped_up_ops, g.moved_collectives, g.rescaled_collectives, g.rewritten_collectives,
             result.communication_model);
  if (what_if.traced_cluster) {
    fmt::print(out, "             {} collectives keep a wait for peers ({} in all)\n", g.peer_waits,
               MsWithUnit(g.peer_wait_time));
  }
  fmt::print(out, "  span       {} replayed, {} what-if\n", MsWithUnit(result.replayed_span),
             MsWithUnit(result.what_if_span));
  if (!result.steps.empty()) {
    fmt::print(out, "  {:<22} {:>14} {:>14} {:>14} {:>9}\n", "step", "measured", "replayed",
               "what-if", "change");
  }
  for (const strategies::WhatIfStep* step : steps) {
    fmt::print(out, "  {:<22} {:>14} {:>14} {:>14} {:>+8.2f}%\n",
               StepLabel(replay, step->trace, step->number), MsWithUnit(step->measured),
               MsWithUnit(step->replayed), MsWithUnit(step->what_if), 100 * step->Change());
  }
  if (steps.empty()) return;
  PrintPathHeader(out, job);
  for (const strategies::WhatIfStep* step : steps) {
    const std::string label = job ? fmt::format("r{} #{}", replay.ranks[step->trace], step->number)
                                  : fmt::format("#{}", step->number);
    PrintPathRow(out, label + " replayed", step->replayed_path, job);
    PrintPathRow(out, label + " what-if", step->what_if_path, job);
  }
  if (what_if.speedups.empty()) return;
  for (const strategies::WhatIfStep* step : steps) {
    const std::string why = strategies::WhyUnmoved(step->replayed_path, step->Change());
    if (!why.empty()) {
      fmt::print(out, "  {}: {}\n", StepLabel(replay, step->trace, step->number), why);
    }
  }
}

// How the job's traces were put together: ranks, shared collectives, clocks.
void PrintJob(std::ostream& out, std::span<const traces::Trace* const> job,
              const traces::ReplayGraph& replay) {
  const traces::JobCollectives& shared = replay.job;
  // Up to kListedRanks items of a list, then how many more.
  const auto capped = [](std::vector<std::string> items, size_t more) {
    if (items.size() > kListedRanks) {
      more += items.size() - kListedRanks;
      items.resize(kListedRanks);
    }
    if (more > 0) items.push_back(fmt::format("{} more", more));
    return fmt::format("{}", fmt::join(items, ", "));
  };
  std::vector<std::string> ranks;
  std::vector<std::string> unmatched;
  std::vector<std::string> clocks;
  int64_t unmatched_total = 0;
  size_t zero_offsets = 0;
  for (size_t i = 0; i < job.size(); ++i) {
    ranks.push_back(std::to_string(replay.ranks[i]));
    unmatched_total += shared.unmatched[i];
    if (shared.unmatched[i] > 0) {
      unmatched.push_back(fmt::format("r{} {}", replay.ranks[i], shared.unmatched[i]));
    }
    if (i == 0) continue;
    if (!shared.aligned[i]) {
      clocks.push_back(fmt::format("r{} not aligned (no collective shared)", replay.ranks[i]));
    } else if (shared.clock_offset[i] == DurationNs::Zero() && job.size() > kListedRanks) {
      ++zero_offsets;  // listed only in small jobs
    } else {
      clocks.push_back(fmt::format("r{} {:+.3f} ms", replay.ranks[i],
                                   static_cast<double>(shared.clock_offset[i].ns()) / 1e6));
    }
  }
  fmt::print(out,
             "  job        {} traces, ranks {}{}: {} collectives shared, matched by process group "
             "and the ends of their kernels; {} left to their own rank{}\n",
             job.size(), capped(ranks, 0),
             job.front()->world_size > 0 ? fmt::format(" of {}", job.front()->world_size) : "",
             shared.collectives.size(), unmatched_total,
             unmatched.empty() ? "" : fmt::format(" ({})", capped(unmatched, 0)));
  if (clocks.empty()) {
    fmt::print(out, "  clocks     the same as r{}'s\n", replay.ranks[0]);
    return;
  }
  fmt::print(out, "  clocks     against r{}'s: {}{}\n", replay.ranks[0], capped(clocks, 0),
             zero_offsets > 0 ? fmt::format("; {} more at +0.000 ms", zero_offsets) : "");
}

Status ExecuteKineto(const ReplayOptions& options, const strategies::ReplayWhatIf& what_if,
                     std::ostream& out) {
  const auto started = std::chrono::steady_clock::now();
  DTSIM_ASSIGN_OR_RETURN(std::vector<traces::Trace> traces, api::ReadTraceJob(options.files));
  const double import_seconds = SecondsSince(started);
  fmt::print(out, "dtsim replay {}\n\n", fmt::join(options.traces, " "));
  for (const traces::Trace& trace : traces) {
    if (traces.size() > 1) fmt::print(out, "  {}\n", trace.file);
    PrintImportStats(out, trace);
  }
  if (options.stats_only) {
    uint64_t bytes = 0;
    for (const traces::Trace& trace : traces) bytes += trace.stats.bytes;
    fmt::print(out, "  read in    {:.2f} s ({:.0f} MB/s of JSON)\n", import_seconds,
               static_cast<double>(bytes) / 1e6 / std::max(import_seconds, 1e-9));
    return Status::Ok();
  }
  DTSIM_ASSIGN_OR_RETURN(const api::ProfilerReplay replayed,
                         api::ReplayTraces(std::move(traces), what_if));
  const std::vector<const traces::Trace*> job = replayed.Job();
  const traces::ReplayGraph& replay = replayed.replay;
  const strategies::ReplayResult& result = replayed.result;
  const std::optional<strategies::WhatIfResult>& what_if_result = replayed.what_if;
  if (job.size() > 1) PrintJob(out, job, replay);
  const traces::ReplayStats& g = replay.stats;
  fmt::print(out,
             "  graph      {} tasks ({} host, {} GPU, {} collectives); edges: {} launch, {} "
             "stream-wait, {} sync, inferred {} sync + {} cross-stream + {} cross-thread + {} "
             "queue-full; {} GPU gaps kept ({})\n",
             replay.graph.task_count(), g.host_tasks, g.gpu_tasks, g.collectives, g.launch_edges,
             g.stream_wait_edges, g.sync_edges, g.inferred_sync_edges, g.inferred_stream_edges,
             g.inferred_thread_edges, g.inferred_queue_edges, g.gpu_gaps,
             MsWithUnit(g.gpu_gap_time));
  if (g.unsized_collectives > 0) {
    fmt::print(out,
               "  warning    {} NCCL collective(s) without a size in the trace (first: {}): kept "
               "at their measured time; no what-if re-prices them\n",
               g.unsized_collectives, g.first_unsized);
  }
  fmt::print(out,
             "  simulated  {} (trace span); GPU op starts vs measured: mean {:.3f} us, max {:.3f} "
             "us over {} ops; imported in {:.2f} s\n\n",
             MsWithUnit(result.summary.makespan - TimeNs::Zero()),
             result.mean_start_drift.ToMicrosecondsDouble(),
             result.max_start_drift.ToMicrosecondsDouble(), result.gpu_ops, import_seconds);
  PrintSteps(out, replay, result);
  if (what_if_result) {
    PrintWhatIf(out, what_if, replay, *what_if_result, ListedSteps(replay, result.steps));
  }
  if (!options.result_path.empty()) {
    std::optional<results::WhatIfOutcome> outcome;
    if (what_if_result) outcome.emplace(results::WhatIfOutcome{what_if, *what_if_result});
    DTSIM_RETURN_IF_ERROR(results::WriteResultFile(
        options.result_path, results::ReplayResultJson(job, replay, result, outcome)));
  }
  if (!options.timeline_path.empty() && what_if_result) {
    return traces::WriteChromeTraceFile(options.timeline_path, what_if_result->graph.graph,
                                        what_if_result->times,
                                        {.source = options.trace,
                                         .communication_model = what_if_result->communication_model,
                                         .method_labels = what_if_result->methods.labels,
                                         .comm_methods = what_if_result->methods.of_comm});
  }
  if (!options.timeline_path.empty()) {
    DTSIM_RETURN_IF_ERROR(traces::WriteChromeTraceFile(options.timeline_path, replay.graph,
                                                       result.times, {options.trace, "measured"}));
  }
  return Status::Ok();
}

// --stats-only stops before the graph is simulated: what needs the simulation would be ignored.
Status CheckStatsOnly(const ReplayOptions& options) {
  if (!options.stats_only) return Status::Ok();
  const std::pair<const char*, bool> needs_simulation[] = {
      {"--timeline", !options.timeline_path.empty()},
      {"--what-if", !options.what_if_file.empty()},
      {"--speedup", !options.speedups.empty()},
      {"--no-overlap", options.no_overlap},
      {"--overlap", options.overlap},
      {"--network", !options.network.empty()},
      {"--traced-network", !options.traced_network.empty()},
      {"--data-parallel", options.data_parallel > 0},
      {"--compression", !options.compression.empty()},
      {"--gpu", !options.gpu.empty()}};
  for (const auto& [option, given] : needs_simulation) {
    if (given) {
      return Error(
          fmt::format("--stats-only stops before the simulation, which {} needs: drop "
                      "one of the two",
                      option));
    }
  }
  return Status::Ok();
}

Status Execute(const ReplayOptions& options, std::ostream& out) {
  DTSIM_RETURN_IF_ERROR(CheckStatsOnly(options));
  std::vector<std::string> inputs = options.files;
  inputs.push_back(options.comm_groups);
  inputs.push_back(options.what_if_file);
  DTSIM_RETURN_IF_ERROR(
      RefuseOutputsOverInputs(inputs, {options.result_path, options.timeline_path}));
  DTSIM_ASSIGN_OR_RETURN(const strategies::ReplayWhatIf what_if, WhatIfOf(options));
  DTSIM_ASSIGN_OR_RETURN(const traces::TraceFormat format,
                         traces::DetectTraceFormat(options.trace));
  DTSIM_ASSIGN_OR_RETURN(const bool linking, api::AreHostAndDeviceTraces(options.files));
  if (traces::IsChakraFormat(format) || linking) {
    if (options.files.size() > 1 && !linking) {
      return Error(
                 "a Chakra job is read from its rank files PREFIX.<rank>.et: give rank 0's with "
                 "--all-ranks")
          .InFile(options.trace);
    }
    if (Status checked = api::CheckChakraWhatIf(what_if, "--network", "--gpu"); !checked.ok()) {
      return std::move(checked).error().InFile(options.trace);
    }
    return ExecuteChakra(options,
                         {.comm_groups = options.comm_groups,
                          .element_bytes = options.element_bytes,
                          .gpu = what_if.gpu,
                          .cluster = what_if.cluster},
                         out);
  }
  DTSIM_RETURN_IF_ERROR(api::CheckProfilerWhatIf(what_if, options.gpu.empty() ? "gpu" : "--gpu"));
  if (options.element_bytes) {
    return Error("--element-bytes applies to Chakra traces; this is a profiler trace")
        .InFile(options.trace);
  }
  if (options.all_ranks || !options.comm_groups.empty()) {
    return Error(fmt::format("{} applies to Chakra traces; this is a profiler trace",
                             options.all_ranks ? "--all-ranks" : "--comm-groups"))
        .InFile(options.trace);
  }
  return ExecuteKineto(options, what_if, out);
}

}  // namespace

CommandOutcome ReplayCommand(std::span<const std::string> args, std::ostream& out) {
  results::ResetProvenance("replay", {args.begin(), args.end()});
  ReplayOptions options;
  const po::options_description description = Describe(options);
  if (Status parsed = ParseCommandLine(args, description, "trace", options.traces); !parsed.ok()) {
    return CommandOutcome::Usage(std::move(parsed).error());
  }
  if (options.help) {
    out << description << "\n";
    return CommandOutcome::Ok();
  }
  if (options.traces.empty()) return CommandOutcome::Usage(Error("a trace file to replay"));
  Expected<std::vector<std::string>> files = api::TraceFiles(options.traces);
  if (!files.ok()) return CommandOutcome::Failure(std::move(files).error());
  options.files = *std::move(files);
  options.trace = options.files.front();
  return FailureUnlessOk(Execute(options, out));
}

}  // namespace dtsim::cli
