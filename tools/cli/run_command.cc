#include "tools/cli/run_command.h"

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <chrono>
#include <memory>
#include <vector>

#include "network/network_models.h"
#include "sim/base/atomic_file.h"
#include "sim/base/quantity.h"
#include "sim/base/strings.h"
#include "sim/engine/fixed_cost_model.h"
#include "sim/engine/simulator.h"
#include "sim/graph/graph_json.h"
#include "tools/cli/command_line.h"
#include "tools/cli/run_report.h"
#include "tools/cli/timeline_options.h"
#include "tools/results/provenance.h"
#include "tools/results/result_file.h"
#include "traces/chrome_trace_writer.h"

namespace dtsim::cli {
namespace {

namespace po = boost::program_options;

// The run command's own model, beside the network models of network/network_models.h: the
// engine's fixed cost per communication, which needs no cluster.
constexpr std::string_view kFixedModel = "fixed";
constexpr std::string_view kDefaultLatency = "5 us";
constexpr std::string_view kDefaultBandwidth = "100 GB/s";

// "fixed", "analytical", "flow": every name --network-model accepts.
std::vector<std::string_view> ModelNames() {
  std::vector<std::string_view> names = {kFixedModel};
  for (std::string_view name : network::NetworkModelNames()) names.push_back(name);
  return names;
}

struct RunOptions {
  std::string graph_path;
  std::string result_path;
  std::string timeline_path;
  TimelineSelection timeline_selection;
  std::string latency_text;    // empty: kDefaultLatency
  std::string bandwidth_text;  // empty: kDefaultBandwidth
  std::string cluster;
  std::string network_model;  // empty: the default network model with --cluster, else fixed
  bool quiet = false;
  bool help = false;
};

po::options_description Describe(RunOptions& options) {
  po::options_description description(
      "Usage: dtsim run GRAPH [options]\n\n"
      "Simulates a task-graph file (docs/formats/task-graph.md). Communication is priced by the\n"
      "fixed-cost model (latency + size / bandwidth for every collective and send/recv) or, with\n"
      "--cluster, by the analytical model (each collective algorithm's cost on the cluster) or\n"
      "the flow model (algorithm steps as flows sharing links max-min fairly).\n\n"
      "Options");
  description.add_options()("help,h", po::bool_switch(&options.help), "show this help")(
      "output,o", po::value(&options.result_path)->value_name("FILE"),
      "write the result JSON here (docs/formats/run-result.md)")(
      "timeline", po::value(&options.timeline_path)->value_name("FILE"),
      "write a Chrome trace / Perfetto timeline here (docs/formats/timeline.md)")(
      "network-model", po::value(&options.network_model)->value_name("NAME"),
      fmt::format("one of {} (default: {} with --cluster, else {})", JoinQuoted(ModelNames()),
                  network::DefaultNetworkModel().name, kFixedModel)
          .c_str())(
      "cluster", po::value(&options.cluster)->value_name("PRESET|FILE"),
      "the cluster the analytical or flow model prices communication on: a preset (dgx-a100, "
      "dgx-h100, gb200-nvl72, ...) or a cluster JSON file (docs/network.md)")(
      "comm-latency", po::value(&options.latency_text)->value_name("DURATION"),
      "fixed model: latency of every communication (default \"5 us\")")(
      "comm-bandwidth", po::value(&options.bandwidth_text)->value_name("BANDWIDTH"),
      "fixed model: bandwidth of every communication (default \"100 GB/s\")")(
      "quiet,q", po::bool_switch(&options.quiet), "print nothing on success");
  AddTimelineOptions(description, options.timeline_selection);
  return description;
}

struct CommunicationCost {
  DurationNs latency;
  Bandwidth bandwidth;
};

Expected<CommunicationCost> ParseCommunicationCost(const RunOptions& options) {
  const std::string_view latency_text =
      options.latency_text.empty() ? kDefaultLatency : options.latency_text;
  const std::string_view bandwidth_text =
      options.bandwidth_text.empty() ? kDefaultBandwidth : options.bandwidth_text;
  Expected<DurationNs> latency = ParseDuration(latency_text);
  if (!latency.ok()) return std::move(latency).error().Under("--comm-latency");
  Expected<Bandwidth> bandwidth = ParseBandwidth(bandwidth_text);
  if (!bandwidth.ok()) return std::move(bandwidth).error().Under("--comm-bandwidth");
  if (bandwidth->bits_per_second() == 0) {
    return Error("bandwidth must be positive", "--comm-bandwidth", Quote(bandwidth_text));
  }
  return CommunicationCost{*latency, *bandwidth};
}

// Options of one communication model given with another, which would ignore them.
Status CheckModelOptions(const RunOptions& options) {
  if (options.network_model == kFixedModel) {
    if (!options.cluster.empty()) {
      return Error(
          "the fixed model prices every communication by --comm-latency and "
          "--comm-bandwidth, not on a cluster: drop --cluster, or --network-model fixed",
          "--cluster", Quote(options.cluster));
    }
    return Status::Ok();
  }
  for (const auto& [option, value] : {std::pair{"--comm-latency", &options.latency_text},
                                      std::pair{"--comm-bandwidth", &options.bandwidth_text}}) {
    if (!value->empty()) {
      return Error(fmt::format("sets the fixed model's cost, and the {} model prices "
                               "communication on the cluster: drop it, or --cluster",
                               options.network_model),
                   option, Quote(*value));
    }
  }
  return Status::Ok();
}

// A communication model made for one graph, and how the result describes it.
struct ModelSetup {
  std::unique_ptr<engine::CommunicationModel> model;
  OrderedJson description;
  const network::CommMethods* methods = nullptr;  // a network model's, for the timeline
};

Expected<ModelSetup> MakeFixedModel(const CommunicationCost& cost) {
  return ModelSetup{std::make_unique<engine::FixedCostModel>(cost.latency, cost.bandwidth),
                    {{"name", kFixedModel},
                     {"latency_ns", cost.latency.ns()},
                     {"bandwidth_bits_per_second", cost.bandwidth.bits_per_second()}}};
}

// A network model on the cluster of --cluster, prepared for `graph`.
Expected<ModelSetup> MakeClusterModel(const RunOptions& options,
                                      const network::NetworkModelEntry& entry,
                                      const graph::TaskGraph& graph) {
  if (options.cluster.empty()) {
    return Error(
        fmt::format("the {} model needs a cluster: give --cluster PRESET|FILE", entry.name),
        "--network-model", Quote(options.network_model));
  }
  DTSIM_ASSIGN_OR_RETURN(network::ClusterSpec cluster, network::LoadCluster(options.cluster));
  Expected<std::unique_ptr<network::ClusterModel>> model =
      network::MakePreparedModel(entry, std::move(cluster), graph);
  if (!model.ok()) return std::move(model).error().InFile(options.graph_path);
  const network::ClusterSpec& sized = (*model)->cluster();
  OrderedJson description = {{"name", entry.name},
                             {"cluster", sized.name},
                             {"nodes", sized.nodes},
                             {"gpus_per_node", sized.gpus_per_node}};
  const network::CommMethods* methods = &(*model)->methods();
  return ModelSetup{std::move(model).value(), std::move(description), methods};
}

// The network model --network-model names; nullptr for the fixed model.
Expected<const network::NetworkModelEntry*> FindModel(const RunOptions& options) {
  const std::string& name = options.network_model;
  if (name == kFixedModel) return nullptr;
  if (Expected<const network::NetworkModelEntry*> entry = network::FindNetworkModel(name);
      entry.ok()) {
    return *entry;
  }
  const std::vector<std::string_view> names = ModelNames();
  return Error(
      "unknown network model" + DidYouMean(name, names) + "; registered: " + JoinQuoted(names),
      "--network-model", Quote(name));
}

Status Execute(const RunOptions& options, const network::NetworkModelEntry* entry,
               const CommunicationCost& cost, std::ostream& out) {
  DTSIM_RETURN_IF_ERROR(RefuseOutputsOverInputs({options.graph_path, options.cluster},
                                                {options.result_path, options.timeline_path}));
  traces::TimelineInfo info{.source = options.graph_path};
  DTSIM_RETURN_IF_ERROR(
      ApplyTimelineSelection(options.timeline_selection, options.timeline_path, info));
  DTSIM_ASSIGN_OR_RETURN(const graph::TaskGraph graph, graph::LoadTaskGraph(options.graph_path));
  DTSIM_ASSIGN_OR_RETURN(ModelSetup setup, entry == nullptr
                                               ? MakeFixedModel(cost)
                                               : MakeClusterModel(options, *entry, graph));
  engine::CommunicationModel& model = *setup.model;
  engine::Simulator simulator(graph, model);
  const auto begin = std::chrono::steady_clock::now();
  Status status = simulator.Run();
  const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - begin;
  if (!status.ok()) return std::move(status).error().InFile(options.graph_path);

  results::RunContext context{.graph_path = options.graph_path,
                              .communication_model = std::move(setup.description),
                              .streams = graph.stream_count(),
                              .wall_seconds = wall.count()};
  const engine::RunSummary summary = simulator.Summarize();
  // A selection with nothing in it fails before any output is written.
  DTSIM_RETURN_IF_ERROR(traces::CheckTimelineSelection(graph, simulator.times(), info));
  if (!options.result_path.empty()) {
    DTSIM_RETURN_IF_ERROR(
        results::WriteResultFile(options.result_path, results::RunResultJson(summary, context)));
  }
  if (!options.timeline_path.empty()) {
    info.communication_model = std::string(model.name());
    if (setup.methods != nullptr) {
      info.method_labels = setup.methods->labels;
      info.comm_methods = setup.methods->of_comm;
    }
    DTSIM_RETURN_IF_ERROR(
        traces::WriteChromeTraceFile(options.timeline_path, graph, simulator.times(), info));
  }
  if (!options.quiet) PrintRunSummary(out, summary, context);
  return Status::Ok();
}

}  // namespace

CommandOutcome RunCommand(std::span<const std::string> args, std::ostream& out) {
  results::ResetProvenance("run", {args.begin(), args.end()});
  RunOptions options;
  const po::options_description description = Describe(options);
  return RunCommandLine(args, description, "graph", options.graph_path, options.help,
                        "missing the GRAPH file", out, [&]() -> CommandOutcome {
                          // Quantity options are part of the command line: a bad one is a usage
                          // error.
                          Expected<CommunicationCost> cost = ParseCommunicationCost(options);
                          if (!cost.ok()) return CommandOutcome::Usage(std::move(cost).error());
                          if (options.network_model.empty()) {
                            options.network_model = options.cluster.empty()
                                                        ? kFixedModel
                                                        : network::DefaultNetworkModel().name;
                          }
                          Expected<const network::NetworkModelEntry*> entry = FindModel(options);
                          if (!entry.ok()) return CommandOutcome::Usage(std::move(entry).error());
                          if (Status checked = CheckModelOptions(options); !checked.ok()) {
                            return CommandOutcome::Usage(std::move(checked).error());
                          }
                          return FailureUnlessOk(Execute(options, *entry, *cost, out));
                        });
}

}  // namespace dtsim::cli
