// Flow-model benchmark (issue: a 1,024-GPU ring all-reduce simulated in under 50 ms): one
// collective over every GPU of a DGX A100 cluster in flow mode, timed, with the flows started,
// steps taken on the exact fast path, rate recomputations and engine events, and the simulated
// time next to the analytical model's.
//
//   dtsim_network_bench [--gpus N] [--size BYTES]
//   dtsim_network_bench --busbw   bus bandwidth of all-reduce and all-to-all on the DGX presets,
//                                 1 MiB to 4 GiB, next to published nccl-tests figures
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "network/analytical_model.h"
#include "network/flow_model.h"
#include "sim/engine/simulator.h"
#include "sim/graph/builder.h"

namespace dtsim {
namespace {

graph::TaskGraph OneCollective(graph::CommKind kind, int32_t gpus, int64_t size,
                               std::string_view algorithm) {
  graph::TaskGraphBuilder builder;
  std::vector<int32_t> group(static_cast<size_t>(gpus));
  for (int32_t r = 0; r < gpus; ++r) group[static_cast<size_t>(r)] = r;
  const graph::CommId comm = builder.AddCollective(kind, Bytes(size), group, "", algorithm);
  for (int32_t r : group) builder.AddCollectiveTask(builder.Stream(r, "nccl"), comm, "", "");
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
             int64_t size) {
  const graph::TaskGraph graph = OneCollective(kind, gpus, size, algorithm);
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
  std::printf("| %-24s | %5d | %10lld | %9.1f | %11llu | %10llu | %9llu | %9llu | %8.2f M | %12.3f | %12.3f |\n",
              label, gpus, static_cast<long long>(size), flow_wall * 1e3,
              static_cast<unsigned long long>(flow.flows_started()),
              static_cast<unsigned long long>(flow.fast_steps()),
              static_cast<unsigned long long>(flow.rate_updates()),
              static_cast<unsigned long long>(events),
              static_cast<double>(flow.flows_started()) / flow_wall / 1e6,
              flow_time.ToSecondsDouble() * 1e3, analytical_time.ToSecondsDouble() * 1e3);
  return true;
}

// nccl-tests' bus bandwidth (doc/PERFORMANCE.md): algbw = S / t; all-reduce busbw = algbw ·
// 2(n-1)/n; all-to-all busbw = algbw · (n-1)/n; S is one rank's buffer.
double BusBandwidth(graph::CommKind kind, int32_t gpus, int64_t size, DurationNs time) {
  const double algbw = static_cast<double>(size) / time.ToSecondsDouble();
  const double n = gpus;
  return algbw * (kind == graph::CommKind::kAllReduce ? 2 * (n - 1) / n : (n - 1) / n);
}

void BusBandwidthTable() {
  struct Case {
    const char* preset;
    const char* label;
    graph::CommKind kind;
    int32_t gpus;
    double published_gbps;  // peak bus bandwidth reported for this system (docs/network.md)
  };
  const Case cases[] = {
      {"dgx-a100", "all_reduce 8 GPUs (1 node)", graph::CommKind::kAllReduce, 8, 232.5},
      {"dgx-a100", "all_reduce 128 GPUs (16 nodes)", graph::CommKind::kAllReduce, 128, 192},
      // All-to-all across nodes runs at one NIC's rate per GPU; busbw = NIC · N/(N-1) · (n-1)/n
      // with N = 16 nodes, n = 128 GPUs: HDR 24 GB/s -> 25.40, NDR 48.5 GB/s -> 51.33.
      {"dgx-a100", "all_to_all 128 GPUs (16 nodes)", graph::CommKind::kAllToAll, 128, 25.40},
      {"dgx-h100", "all_reduce 8 GPUs (1 node)", graph::CommKind::kAllReduce, 8, 370},
      {"dgx-h100", "all_reduce 128 GPUs (16 nodes)", graph::CommKind::kAllReduce, 128, 0},
      {"dgx-h100", "all_to_all 128 GPUs (16 nodes)", graph::CommKind::kAllToAll, 128, 51.33},
  };
  std::printf("| preset   | case                           |    size | algorithm | busbw GB/s | published | ratio |\n");
  std::printf("|----------|--------------------------------|--------:|-----------|-----------:|----------:|------:|\n");
  for (const Case& c : cases) {
    for (int64_t size = int64_t{1} << 20; size <= int64_t{4} << 30; size *= 16) {
      const graph::TaskGraph graph = OneCollective(c.kind, c.gpus, size, "");
      network::AnalyticalModel model(*network::ClusterPreset(c.preset, 0));
      if (!model.Prepare(graph).ok()) return;
      const double busbw = BusBandwidth(c.kind, c.gpus, size, model.Cost(graph::CommId(0))) / 1e9;
      const std::string size_text = size >= (int64_t{1} << 30)
                                        ? std::to_string(size >> 30) + " GiB"
                                        : std::to_string(size >> 20) + " MiB";
      if (c.published_gbps > 0 && size == (int64_t{4} << 30)) {
        std::printf("| %-8s | %-30s | %7s | %-9s | %10.1f | %9.1f | %5.3f |\n", c.preset,
                    c.label, size_text.c_str(), std::string(model.AlgorithmOf(graph::CommId(0))).c_str(),
                    busbw, c.published_gbps, busbw / c.published_gbps);
      } else {
        std::printf("| %-8s | %-30s | %7s | %-9s | %10.1f |           |       |\n", c.preset,
                    c.label, size_text.c_str(), std::string(model.AlgorithmOf(graph::CommId(0))).c_str(),
                    busbw);
      }
    }
  }
}

}  // namespace
}  // namespace dtsim

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--busbw") {
    dtsim::BusBandwidthTable();
    return 0;
  }
  int32_t gpus = 1024;
  int64_t size = int64_t{1} << 30;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--gpus") {
      gpus = std::atoi(argv[i + 1]);
    } else if (flag == "--size") {
      size = std::atoll(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: %s [--gpus N] [--size BYTES]\n", argv[0]);
      return 2;
    }
  }
  std::printf("| case                     |  GPUs |      bytes |  wall ms |       flows | fast steps | rate upd. |    events | flows/s    | flow sim ms | analytical ms |\n");
  std::printf("|--------------------------|------:|-----------:|---------:|------------:|-----------:|----------:|----------:|-----------:|------------:|-------------:|\n");
  using dtsim::graph::CommKind;
  const bool ok = dtsim::RunCase("all_reduce ring", CommKind::kAllReduce, "ring", gpus, size) &&
                  dtsim::RunCase("all_to_all direct", CommKind::kAllToAll, "direct", gpus, size) &&
                  dtsim::RunCase("all_to_all hierarchical", CommKind::kAllToAll, "hierarchical",
                                 gpus, size);
  return ok ? 0 : 1;
}
