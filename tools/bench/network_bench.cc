// Flow-model benchmark (issue: a 1,024-GPU ring all-reduce simulated in under 50 ms): one
// collective over every GPU of a DGX A100 cluster in flow mode, timed, with the flows started,
// steps taken on the exact fast path, rate recomputations and engine events, and the simulated
// time next to the analytical model's.
//
//   dtsim_network_bench [--gpus N] [--size BYTES]
//   dtsim_network_bench --busbw [FILE] [--points] [--csv OUT]   the analytical model against the
//       bus bandwidths of FILE, whichever of the two forms it holds (read by its JSON):
//       - measured NCCL collectives (a JSON array, ../shared/network/measured-collectives.json,
//         issue 25's yardstick): the model's time for every measured point, scored per curve,
//         per size band, per collective (--points: each point's line; --csv: every point with
//         both bus bandwidths, for tools/bench/plot_measured.py's plot per curve);
//       - vTrain's all-reduce curves (a directory, ../shared/network/vtrain-allreduce: 2–8 GPUs
//         of an A100 and a V100 node, 1 MiB to 1 GiB), scored the same way;
//       - published curves (an object, the default tests/data/network/published_busbw.json):
//         the model's bus bandwidth next to every published figure, then on every preset from
//         1 MiB to 4 GiB
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "network/analytical_model.h"
#include "network/flow_model.h"
#include "network/measured_collectives.h"
#include "network/published_busbw.h"
#include "sim/base/atomic_file.h"
#include "sim/base/json_reader.h"
#include "sim/engine/simulator.h"
#include "sim/graph/builder.h"

namespace dtsim {
namespace {

// `copies` identical collectives over all GPUs, each on a stream of its own, all posted at 0:
// they run side by side through the same links.
graph::TaskGraph Collectives(graph::CommKind kind, int32_t gpus, int64_t size,
                             std::string_view algorithm, int copies) {
  graph::TaskGraphBuilder builder;
  std::vector<int32_t> group(static_cast<size_t>(gpus));
  for (int32_t r = 0; r < gpus; ++r) group[static_cast<size_t>(r)] = r;
  for (int copy = 0; copy < copies; ++copy) {
    const graph::CommId comm = builder.AddCollective(kind, Bytes(size), group, "", algorithm);
    const std::string stream = "nccl" + std::to_string(copy);
    for (int32_t r : group) builder.AddCollectiveTask(builder.Stream(r, stream), comm, "", "");
  }
  return std::move(builder).Build().value();
}

template <typename Model>
bool Simulate(const graph::TaskGraph& graph, Model& model, double& wall, TimeNs& makespan,
              uint64_t& events) {
  const Status prepared = model.Prepare(graph);
  if (!prepared.ok()) {
    std::fprintf(stderr, "%s\n", prepared.error().ToString().c_str());
    return false;
  }
  engine::Simulator simulator(graph, model);
  const auto start = std::chrono::steady_clock::now();
  if (!simulator.Run().ok()) return false;
  wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  makespan = simulator.makespan();
  events = simulator.events_processed();
  return true;
}

bool RunCase(const char* label, graph::CommKind kind, std::string_view algorithm, int32_t gpus,
             int64_t size, int copies = 1) {
  const graph::TaskGraph graph = Collectives(kind, gpus, size, algorithm, copies);
  const network::ClusterSpec cluster = *network::ClusterPreset("dgx-a100", 0);
  network::FlowModel flow(cluster);
  network::AnalyticalModel analytical(cluster);
  double flow_wall = 0, analytical_wall = 0;
  TimeNs flow_time, analytical_time;
  uint64_t events = 0, analytical_events = 0;
  if (!Simulate(graph, flow, flow_wall, flow_time, events) ||
      !Simulate(graph, analytical, analytical_wall, analytical_time, analytical_events)) {
    return false;
  }
  std::printf(
      "| %-24s | %5d | %10lld | %9.1f | %11llu | %10llu | %9llu | %9llu | %8.2f M | %12.3f | "
      "%12.3f |\n",
      label, gpus, static_cast<long long>(size), flow_wall * 1e3,
      static_cast<unsigned long long>(flow.flows_started()),
      static_cast<unsigned long long>(flow.fast_steps()),
      static_cast<unsigned long long>(flow.rate_updates()), static_cast<unsigned long long>(events),
      static_cast<double>(flow.flows_started()) / flow_wall / 1e6,
      flow_time.ToSecondsDouble() * 1e3, analytical_time.ToSecondsDouble() * 1e3);
  return true;
}

std::string SizeText(int64_t size) {
  if (size >= (int64_t{1} << 30)) return std::to_string(size >> 30) + " GiB";
  if (size >= (int64_t{1} << 20)) return std::to_string(size >> 20) + " MiB";
  return std::to_string(size >> 10) + " KiB";
}

// Every published point next to the analytical model's prediction, then each curve's ratios
// over its scored points (those that ran an algorithm dtsim models).
bool CompareWithPublished(const std::string& path) {
  Expected<std::vector<network::PublishedCurve>> curves = network::ReadPublishedCurves(path);
  if (!curves.ok()) {
    std::fprintf(stderr, "%s\n", curves.error().ToString().c_str());
    return false;
  }
  std::printf(
      "| curve                 | preset   | kind       | GPUs |    size | algorithm | model GB/s | "
      "published | ratio | note |\n");
  std::printf(
      "|-----------------------|----------|------------|-----:|--------:|-----------|-----------:|-"
      "---------:|------:|------|\n");
  struct Summary {
    std::string id;
    int scored = 0;
    double log_sum = 0, low = 1e300, high = 0;
  };
  std::vector<Summary> summaries;
  for (const network::PublishedCurve& curve : *curves) {
    Summary summary{.id = curve.id};
    for (const network::PublishedPoint& point : curve.points) {
      Expected<network::PredictedBusbw> predicted =
          network::PredictBusbw(curve.preset, curve.kind, curve.gpus, point.size, curve.algorithm);
      if (!predicted.ok()) {
        std::fprintf(stderr, "%s: %s\n", curve.id.c_str(), predicted.error().ToString().c_str());
        return false;
      }
      const double ratio = predicted->busbw / point.busbw;
      const bool scored = curve.Scored(point) && !curve.fitted;
      if (scored) {
        ++summary.scored;
        summary.log_sum += std::log(ratio);
        summary.low = std::min(summary.low, ratio);
        summary.high = std::max(summary.high, ratio);
      }
      std::printf("| %-21s | %-8s | %-10s | %4d | %7s | %-9s | %10.1f | %9.1f | %5.2f | %s |\n",
                  curve.id.c_str(), curve.preset.c_str(),
                  std::string(graph::CommKindName(curve.kind)).c_str(), curve.gpus,
                  SizeText(point.size).c_str(), std::string(predicted->algorithm).c_str(),
                  predicted->busbw, point.busbw, ratio,
                  curve.fitted ? "fitted" : (curve.Scored(point) ? "" : "not modeled"));
    }
    summaries.push_back(summary);
  }
  std::printf(
      "\n| curve                 | scored points | geometric-mean ratio | lowest | highest |\n");
  std::printf(
      "|-----------------------|--------------:|---------------------:|-------:|--------:|\n");
  for (const Summary& summary : summaries) {
    if (summary.scored == 0) continue;
    std::printf("| %-21s | %13d | %20.2f | %6.2f | %7.2f |\n", summary.id.c_str(), summary.scored,
                std::exp(summary.log_sum / summary.scored), summary.low, summary.high);
  }
  return true;
}

// The model's bus bandwidth on every preset, 1 MiB to 4 GiB (no published figure needed).
bool PresetSweep() {
  struct Case {
    const char* preset;
    graph::CommKind kind;
    int gpus;
  };
  const Case cases[] = {
      {"dgx-a100", graph::CommKind::kAllReduce, 8},
      {"dgx-a100", graph::CommKind::kAllReduce, 128},
      {"dgx-a100", graph::CommKind::kAllToAll, 128},
      {"dgx-h100", graph::CommKind::kAllReduce, 8},
      {"dgx-h100", graph::CommKind::kAllReduce, 128},
      {"dgx-h100", graph::CommKind::kAllToAll, 128},
      {"dgx1-v100", graph::CommKind::kAllReduce, 8},
      {"dgx1-v100", graph::CommKind::kAllReduce, 128},
      {"ethernet-25g", graph::CommKind::kAllReduce, 8},
      {"ethernet-25g", graph::CommKind::kAllReduce, 128},
  };
  std::printf("\n| preset       | kind       | GPUs |   1 MiB |  16 MiB | 256 MiB |   4 GiB |\n");
  std::printf("|--------------|------------|-----:|--------:|--------:|--------:|--------:|\n");
  for (const Case& c : cases) {
    std::printf("| %-12s | %-10s | %4d |", c.preset,
                std::string(graph::CommKindName(c.kind)).c_str(), c.gpus);
    for (int64_t size = int64_t{1} << 20; size <= int64_t{4} << 30; size *= 16) {
      const Expected<network::PredictedBusbw> predicted =
          network::PredictBusbw(c.preset, c.kind, c.gpus, size);
      if (!predicted.ok()) {
        std::printf("\n");
        std::fprintf(stderr, "%s: %s\n", c.preset, predicted.error().ToString().c_str());
        return false;
      }
      std::printf(" %7.1f |", predicted->busbw);
    }
    std::printf("\n");
  }
  return true;
}

// Accuracy of a set of points: how many, how many within ±10% of the measured time, and the
// geometric mean and extremes of predicted / measured time (below 1: optimistic).
struct Score {
  int points = 0;
  int within = 0;
  double log_sum = 0;
  double lowest = 1e300;
  double highest = 0;
  void Add(double ratio) {
    ++points;
    within += std::abs(ratio - 1) <= 0.1 ? 1 : 0;
    log_sum += std::log(ratio);
    lowest = std::min(lowest, ratio);
    highest = std::max(highest, ratio);
  }
  void Print(const std::string& name) const {
    std::printf("| %-44s | %6d | %5.0f%% | %7.3f | %6.2f | %6.2f |\n", name.c_str(), points,
                100.0 * within / std::max(points, 1), std::exp(log_sum / std::max(points, 1)),
                lowest, highest);
  }
};

void PrintScores(const char* title, const std::map<std::string, Score>& scores) {
  std::printf("\n| %-44s | points | ±10%%   | geomean |  lowest | highest |\n", title);
  std::printf("|%s|-------:|-------:|--------:|-------:|-------:|\n", std::string(46, '-').c_str());
  for (const auto& [name, score] : scores) score.Print(name);
}

std::string SizeBand(int64_t size) {
  if (size < (int64_t{1} << 20)) return "a: < 1 MiB";
  if (size < (int64_t{64} << 20)) return "b: 1-64 MiB";
  if (size < (int64_t{1} << 30)) return "c: 64 MiB-1 GiB";
  return "d: >= 1 GiB";
}

// nccl-tests' bus bandwidth factor (its doc/PERFORMANCE.md): all-reduce 2(n−1)/n; all-gather,
// reduce-scatter and all-to-all (n−1)/n; send/recv 1. Bus bandwidth = S / t × factor, with S
// nccl-tests' size.
double BusFactor(graph::CommKind kind, int gpus) {
  const double n = gpus;
  if (kind == graph::CommKind::kAllReduce) return 2 * (n - 1) / n;
  if (kind == graph::CommKind::kSendRecv) return 1;
  return (n - 1) / n;
}

// Every measured point of the shared file against the analytical model (issue 25's yardstick);
// `csv`, when given, receives every point with both times and bus bandwidths, for
// tools/bench/plot_measured.py.
bool ScoreMeasured(const std::string& path, bool every_point, const std::string& csv) {
  const Expected<network::MeasuredCollectives> measured =
      std::filesystem::is_directory(path) ? network::ReadVtrainAllReduce(path)
                                          : network::ReadMeasuredCollectives(path);
  if (!measured.ok()) {
    std::fprintf(stderr, "%s\n", measured.error().ToString().c_str());
    return false;
  }
  std::map<std::string, Score> curves, bands, kinds;
  Score all;
  int unpriced = 0;
  std::string rows =
      "curve,collective,gpus,nodes,size_bytes,measured_us,predicted_us,measured_busbw_gbps,"
      "predicted_busbw_gbps,method\n";
  for (const network::MeasuredCollective& point : measured->points) {
    const Expected<network::PredictedCollective> predicted =
        network::PredictMeasuredCollective(point);
    if (!predicted.ok()) {
      ++unpriced;
      continue;
    }
    const double ratio = static_cast<double>(predicted->time.ns()) /
                         static_cast<double>(std::max<int64_t>(point.time.ns(), 1));
    const std::string system = point.system.substr(0, point.system.find(" ("));
    const std::string curve = fmt::format("{} {}g/{}n {}", system.substr(0, 20), point.gpus,
                                          point.nodes, graph::CommKindName(point.kind));
    curves[curve].Add(ratio);
    const double bus = static_cast<double>(point.size) * BusFactor(point.kind, point.gpus);
    rows += fmt::format("\"{}\",{},{},{},{},{:.3f},{:.3f},{:.3f},{:.3f},{}\n", curve,
                        graph::CommKindName(point.kind), point.gpus, point.nodes, point.size,
                        point.time.ns() / 1e3, predicted->time.ns() / 1e3,
                        bus / static_cast<double>(point.time.ns()),
                        bus / static_cast<double>(predicted->time.ns()), predicted->algorithm);
    if (every_point) {
      std::printf("| %-44s | %12lld | %12.2f | %12.2f | %6.3f | %s\n", curve.c_str(),
                  static_cast<long long>(point.size), point.time.ns() / 1e3,
                  predicted->time.ns() / 1e3, ratio, predicted->algorithm.c_str());
    }
    bands[SizeBand(point.size)].Add(ratio);
    kinds[std::string(graph::CommKindName(point.kind))].Add(ratio);
    all.Add(ratio);
  }
  std::printf(
      "%zu measured points (%d without a preset), %lld other records; predicted / measured "
      "time, below 1 optimistic\n",
      measured->points.size(), unpriced, static_cast<long long>(measured->other_records));
  PrintScores("curve", curves);
  PrintScores("size band", bands);
  PrintScores("collective", kinds);
  PrintScores("all", {{"all", all}});
  if (!csv.empty()) {
    const Status written = WriteFileAtomically(csv, rows);
    if (!written.ok()) {
      std::fprintf(stderr, "%s\n", written.error().ToString().c_str());
      return false;
    }
  }
  return true;
}

}  // namespace
}  // namespace dtsim

namespace dtsim {
namespace {

// Whether FILE holds measured collectives (a JSON array of records) rather than published curves
// (an object). A file that is not JSON goes to the published-curves reader, whose error names it.
bool HoldsMeasuredCollectives(const std::string& path) {
  const Expected<Json> value = ReadJsonFile(path);
  return value.ok() && value->is_array();
}

// --busbw [FILE] [--points] [--csv OUT]: 0, 1 (a file that cannot be read), 2 (usage).
int Busbw(int argc, char** argv, const char* usage) {
  std::string file = "tests/data/network/published_busbw.json";
  bool every_point = false;
  std::string csv;
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--points") {
      every_point = true;
    } else if (flag == "--csv" && i + 1 < argc) {
      csv = argv[++i];
    } else if (i == 2 && !flag.starts_with("--")) {
      file = flag;
    } else {
      std::fprintf(stderr, usage, argv[0], argv[0]);
      return 2;
    }
  }
  if (std::filesystem::is_directory(file) || HoldsMeasuredCollectives(file))
    return ScoreMeasured(file, every_point, csv) ? 0 : 1;
  if (every_point || !csv.empty()) {
    std::fprintf(stderr,
                 "--points and --csv score measured collectives; %s holds published curves\n",
                 file.c_str());
    return 2;
  }
  return CompareWithPublished(file) && PresetSweep() ? 0 : 1;
}

}  // namespace
}  // namespace dtsim

int main(int argc, char** argv) {
  constexpr const char* kUsage =
      "usage: %s [--gpus N] [--size BYTES]   time the flow model on one collective (1,024 GPUs, "
      "1 GiB)\n"
      "       %s --busbw [FILE] [--points] [--csv OUT]\n"
      "           the model against FILE's bus bandwidths. Measured NCCL collectives (a JSON array,"
      " ../shared/network/measured-collectives.json) or vTrain's curves (a directory, "
      "../shared/network/vtrain-allreduce): every point's time, scored per curve, size "
      "band and collective (--points: each point's line too; --csv: every point with both bus "
      "bandwidths, for tools/bench/plot_measured.py). Published curves (an object; default "
      "tests/data/network/published_busbw.json): every published figure, then every preset\n";
  if (argc >= 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::printf(kUsage, argv[0], argv[0]);
    return 0;
  }
  if (argc >= 2 && std::string(argv[1]) == "--busbw") return dtsim::Busbw(argc, argv, kUsage);
  int32_t gpus = 1024;
  int64_t size = int64_t{1} << 30;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--gpus" && i + 1 < argc && std::atoi(argv[i + 1]) >= 2) {
      gpus = std::atoi(argv[i + 1]);
    } else if (flag == "--size" && i + 1 < argc && std::atoll(argv[i + 1]) > 0) {
      size = std::atoll(argv[i + 1]);
    } else {
      std::fprintf(stderr, kUsage, argv[0], argv[0]);
      return 2;
    }
  }
  std::printf(
      "| case                     |  GPUs |      bytes |  wall ms |       flows | fast steps | "
      "rate upd. |    events | flows/s    | flow sim ms | analytical ms |\n");
  std::printf(
      "|--------------------------|------:|-----------:|---------:|------------:|-----------:|-----"
      "-----:|----------:|-----------:|------------:|-------------:|\n");
  using dtsim::graph::CommKind;
  const bool ok =
      dtsim::RunCase("all_reduce ring", CommKind::kAllReduce, "ring", gpus, size) &&
      dtsim::RunCase("2 all_reduce rings at once", CommKind::kAllReduce, "ring", gpus, size, 2) &&
      dtsim::RunCase("all_to_all direct", CommKind::kAllToAll, "direct", gpus, size) &&
      dtsim::RunCase("all_to_all hierarchical", CommKind::kAllToAll, "hierarchical", gpus, size);
  return ok ? 0 : 1;
}
