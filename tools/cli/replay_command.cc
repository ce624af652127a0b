#include "tools/cli/replay_command.h"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <chrono>

#include "sim/base/atomic_file.h"
#include "strategies/replay.h"
#include "tools/cli/command_line.h"
#include "tools/cli/trace_report.h"
#include "traces/chrome_trace_writer.h"
#include "traces/kineto_reader.h"
#include "traces/replay_graph.h"

namespace dtsim::cli {
namespace {

namespace po = boost::program_options;

inline constexpr std::string_view kReplayResultFormat = "dtsim.replay_result";
inline constexpr std::string_view kReplayResultVersion = "1.0";

struct ReplayOptions {
  std::string trace;
  std::string result_path;
  std::string timeline_path;
  bool stats_only = false;
  bool help = false;
};

po::options_description Describe(ReplayOptions& o) {
  po::options_description description(
      "Usage: dtsim replay TRACE [options]\n\n"
      "Imports a PyTorch profiler (Kineto) or Chrome trace (.json or .json.gz), rebuilds its\n"
      "dependency graph (launches, stream order, event waits, syncs, host time between API\n"
      "calls), simulates it with the measured durations and compares each ProfilerStep's\n"
      "simulated duration with the measured one (docs/replay.md).\n\nOptions");
  description.add_options()("help,h", po::bool_switch(&o.help), "show this help")(
      "output,o", po::value(&o.result_path)->value_name("FILE"),
      "write the import statistics and per-step comparison as JSON")(
      "timeline", po::value(&o.timeline_path)->value_name("FILE"),
      "write the simulated replay as a Chrome trace / Perfetto timeline")(
      "stats-only", po::bool_switch(&o.stats_only),
      "import the trace, print its statistics and stop (no graph, no simulation)");
  return description;
}

std::string Ms(DurationNs duration) { return fmt::format("{:.3f} ms", duration.ns() / 1e6); }

Status Execute(const ReplayOptions& options, std::ostream& out) {
  const auto started = std::chrono::steady_clock::now();
  DTSIM_ASSIGN_OR_RETURN(const traces::Trace trace, traces::ReadKinetoTrace(options.trace));
  const double import_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  fmt::print(out, "dtsim replay {}\n\n", options.trace);
  PrintImportStats(out, trace);
  if (options.stats_only) {
    fmt::print(out, "  read in    {:.2f} s ({:.0f} MB/s of JSON)\n", import_seconds,
               static_cast<double>(trace.stats.bytes) / 1e6 / std::max(import_seconds, 1e-9));
    return Status::Ok();
  }
  DTSIM_ASSIGN_OR_RETURN(const traces::ReplayGraph replay, traces::BuildReplayGraph(trace));
  DTSIM_ASSIGN_OR_RETURN(const strategies::ReplayResult result, strategies::SimulateReplay(replay));
  const traces::ReplayStats& g = replay.stats;
  fmt::print(out,
             "  graph      {} tasks ({} host, {} GPU, {} collectives); edges: {} launch, {} "
             "stream-wait, {} sync, inferred {} sync + {} cross-stream; {} GPU gaps kept ({})\n",
             replay.graph.task_count(), g.host_tasks, g.gpu_tasks, g.collectives, g.launch_edges,
             g.stream_wait_edges, g.sync_edges, g.inferred_sync_edges, g.inferred_stream_edges,
             g.gpu_gaps, Ms(g.gpu_gap_time));
  fmt::print(out,
             "  simulated  {} (trace span); GPU op starts vs measured: mean {:.3f} us, max {:.3f} "
             "us over {} ops; imported in {:.2f} s\n\n",
             Ms(result.summary.makespan - TimeNs::Zero()),
             result.mean_start_drift.ToMicrosecondsDouble(),
             result.max_start_drift.ToMicrosecondsDouble(), result.gpu_ops, import_seconds);
  OrderedJson steps = OrderedJson::array();
  if (result.steps.empty()) {
    fmt::print(out, "  no ProfilerStep annotations: nothing to compare step by step\n");
  } else {
    fmt::print(out, "  {:<22} {:>14} {:>14} {:>9}\n", "step", "measured", "simulated", "error");
    for (const strategies::ReplayStepResult& step : result.steps) {
      fmt::print(out, "  {:<22} {:>14} {:>14} {:>+8.2f}%\n",
                 fmt::format("ProfilerStep#{}", step.number), Ms(step.measured), Ms(step.simulated),
                 100 * step.Error());
      steps.push_back({{"step", step.number},
                       {"measured_ms", step.measured.ns() / 1e6},
                       {"simulated_ms", step.simulated.ns() / 1e6},
                       {"error", step.Error()}});
    }
    fmt::print(out, "\n  mean absolute error over {} steps: {:.2f}%\n", result.steps.size(),
               100 * result.mean_absolute_error);
  }
  if (!options.result_path.empty()) {
    const OrderedJson document = {
        {"format", kReplayResultFormat},
        {"version", kReplayResultVersion},
        {"trace", ImportStatsJson(trace)},
        {"graph",
         {{"tasks", replay.graph.task_count()},
          {"host_tasks", g.host_tasks},
          {"gpu_tasks", g.gpu_tasks},
          {"collectives", g.collectives},
          {"launch_edges", g.launch_edges},
          {"stream_wait_edges", g.stream_wait_edges},
          {"sync_edges", g.sync_edges},
          {"inferred_sync_edges", g.inferred_sync_edges},
          {"inferred_stream_edges", g.inferred_stream_edges},
          {"gpu_gaps", g.gpu_gaps},
          {"gpu_gap_ms", g.gpu_gap_time.ns() / 1e6}}},
        {"simulated_span_ms", (result.summary.makespan - TimeNs::Zero()).ns() / 1e6},
        {"gpu_op_start_drift_us",
         {{"mean", result.mean_start_drift.ToMicrosecondsDouble()},
          {"max", result.max_start_drift.ToMicrosecondsDouble()},
          {"ops", result.gpu_ops}}},
        {"steps", std::move(steps)},
        {"mean_absolute_error", result.mean_absolute_error}};
    DTSIM_RETURN_IF_ERROR(WriteFileAtomically(options.result_path, document.dump(2) + "\n"));
  }
  if (!options.timeline_path.empty()) {
    DTSIM_RETURN_IF_ERROR(traces::WriteChromeTraceFile(options.timeline_path, replay.graph,
                                                       result.times, {options.trace, "measured"}));
  }
  return Status::Ok();
}

}  // namespace

CommandOutcome ReplayCommand(std::span<const std::string> args, std::ostream& out) {
  ReplayOptions options;
  const po::options_description description = Describe(options);
  return RunCommandLine(args, description, "trace", options.trace, options.help,
                        "a trace file to replay", out,
                        [&] { return FailureUnlessOk(Execute(options, out)); });
}

}  // namespace dtsim::cli
