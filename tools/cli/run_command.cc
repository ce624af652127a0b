#include "tools/cli/run_command.h"

#include <chrono>

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include "sim/base/atomic_file.h"
#include "sim/base/quantity.h"
#include "sim/base/strings.h"
#include "sim/engine/fixed_cost_model.h"
#include "sim/engine/simulator.h"
#include "sim/graph/graph_json.h"
#include "tools/cli/run_report.h"
#include "traces/chrome_trace_writer.h"

namespace dtsim::cli {
namespace {

namespace po = boost::program_options;

struct RunOptions {
  std::string graph_path;
  std::string result_path;
  std::string timeline_path;
  std::string latency_text = "5 us";
  std::string bandwidth_text = "100 GB/s";
  bool quiet = false;
  bool help = false;
};

po::options_description Describe(RunOptions& options) {
  po::options_description description(
      "Usage: dtsim run GRAPH [options]\n\n"
      "Simulates a task-graph file (docs/formats/task-graph.md). Every collective and send/recv\n"
      "takes latency + size / bandwidth (the fixed-cost model; a barrier takes the latency).\n\n"
      "Options");
  description.add_options()
      ("help,h", po::bool_switch(&options.help), "show this help")
      ("output,o", po::value(&options.result_path)->value_name("FILE"),
       "write the result JSON here (docs/formats/run-result.md)")
      ("timeline", po::value(&options.timeline_path)->value_name("FILE"),
       "write a Chrome trace / Perfetto timeline here (docs/formats/timeline.md)")
      ("comm-latency", po::value(&options.latency_text)->value_name("DURATION"),
       "latency of every communication (default \"5 us\")")
      ("comm-bandwidth", po::value(&options.bandwidth_text)->value_name("BANDWIDTH"),
       "bandwidth of every communication (default \"100 GB/s\")")
      ("quiet,q", po::bool_switch(&options.quiet), "print nothing on success");
  return description;
}

// The positional GRAPH, kept out of the help text.
po::options_description Positional(RunOptions& options) {
  po::options_description hidden;
  hidden.add_options()("graph", po::value(&options.graph_path));
  return hidden;
}

struct CommunicationCost {
  DurationNs latency;
  Bandwidth bandwidth;
};

Expected<CommunicationCost> ParseCommunicationCost(const RunOptions& options) {
  Expected<DurationNs> latency = ParseDuration(options.latency_text);
  if (!latency.ok()) return std::move(latency).error().Under("--comm-latency");
  Expected<Bandwidth> bandwidth = ParseBandwidth(options.bandwidth_text);
  if (!bandwidth.ok()) return std::move(bandwidth).error().Under("--comm-bandwidth");
  if (bandwidth->bits_per_second() == 0) {
    return Error("bandwidth must be positive", "--comm-bandwidth", Quote(options.bandwidth_text));
  }
  return CommunicationCost{*latency, *bandwidth};
}

Status Execute(const RunOptions& options, const CommunicationCost& cost, std::ostream& out) {
  const DurationNs latency = cost.latency;
  const Bandwidth bandwidth = cost.bandwidth;
  DTSIM_ASSIGN_OR_RETURN(const graph::TaskGraph graph, graph::LoadTaskGraph(options.graph_path));

  engine::FixedCostModel model(latency, bandwidth);
  engine::Simulator simulator(graph, model);
  const auto begin = std::chrono::steady_clock::now();
  Status status = simulator.Run();
  const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - begin;
  if (!status.ok()) return std::move(status).error().InFile(options.graph_path);

  RunContext context{.graph_path = options.graph_path,
                     .communication_model = {{"name", model.name()},
                                             {"latency_ns", latency.ns()},
                                             {"bandwidth_bits_per_second",
                                              bandwidth.bits_per_second()}},
                     .streams = graph.stream_count(),
                     .wall_seconds = wall.count()};
  const engine::RunSummary summary = simulator.Summarize();
  if (!options.result_path.empty()) {
    DTSIM_RETURN_IF_ERROR(WriteFileAtomically(
        options.result_path, RunResultToJson(summary, context).dump(2) + "\n"));
  }
  if (!options.timeline_path.empty()) {
    DTSIM_RETURN_IF_ERROR(traces::WriteChromeTraceFile(
        options.timeline_path, graph, simulator.times(),
        {.source = options.graph_path, .communication_model = std::string(model.name())}));
  }
  if (!options.quiet) PrintRunSummary(out, summary, context);
  return Status::Ok();
}

}  // namespace

CommandOutcome RunCommand(std::span<const std::string> args, std::ostream& out) {
  RunOptions options;
  const po::options_description description = Describe(options);
  po::options_description all;
  all.add(description).add(Positional(options));
  po::positional_options_description positional;
  positional.add("graph", 1);
  try {
    po::variables_map variables;
    po::store(po::command_line_parser(std::vector<std::string>(args.begin(), args.end()))
                  .options(all).positional(positional).run(), variables);
    po::notify(variables);
  } catch (const po::error& e) {
    return CommandOutcome::Usage(Error(e.what()));
  }
  if (options.help) {
    out << description << "\n";
    return CommandOutcome::Ok();
  }
  if (options.graph_path.empty()) return CommandOutcome::Usage(Error("missing the GRAPH file"));
  // Quantity options are part of the command line: a bad one is a usage error.
  Expected<CommunicationCost> cost = ParseCommunicationCost(options);
  if (!cost.ok()) return CommandOutcome::Usage(std::move(cost).error());
  Status status = Execute(options, *cost, out);
  if (!status.ok()) return CommandOutcome::Failure(std::move(status).error());
  return CommandOutcome::Ok();
}

}  // namespace dtsim::cli
