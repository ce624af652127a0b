// Engine benchmark: builds synthetic task graphs of 10^4 to 10^7 tasks and simulates them,
// printing a table of events per second and bytes per task (DESIGN §10: >= 10 M events/s on
// one core, <= 200 bytes per task). Not a test: run it by hand on a quiet machine.
//
//   dtsim_engine_bench [--max-tasks N] [--repeat R] [--shapes chain,fanout,collectives,layered]
//
// Shapes:
//   chain        one stream, each task depending on the previous one
//   fanout       one root; every other task depends on it, spread over 8 ranks x 8 streams
//   collectives  1024 ranks; per rank a chain of compute tasks, each followed by an all-reduce
//                over its group of 8 consecutive ranks on a second stream (tensor-parallel-like)
//   layered      64 ranks x 4 streams; each task depends on 2 random tasks of the layer before
//                (seeded), so most dependencies cross ranks
// Each graph is simulated R times (default 3) by fresh Simulators; the table shows the fastest
// run, since on a shared machine interference only ever adds time.
// Columns: tasks, dependencies, events delivered, graph build time, simulation time, events/s
// and tasks/s of the simulation alone, bytes per task (graph + simulator state, counted from
// container capacities), and the process's peak RSS growth per task (getrusage; each case runs
// in a forked process; an upper bound, as it includes the builder's temporaries).
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "sim/base/rng.h"
#include "sim/engine/fixed_cost_model.h"
#include "sim/engine/simulator.h"
#include "sim/graph/builder.h"

namespace dtsim {
namespace {

using graph::CommId;
using graph::StreamId;
using graph::TaskGraph;
using graph::TaskGraphBuilder;
using graph::TaskId;
using graph::TaskKind;

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

long PeakRssKiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

DurationNs RandomDuration(Rng& rng) {
  return Nanoseconds(1000 + static_cast<int64_t>(rng.Uniform(9000)));
}

TaskGraph Chain(size_t n) {
  TaskGraphBuilder b;
  Rng rng(1);
  const StreamId s = b.Stream(0, "compute");
  TaskId previous = TaskId::Invalid();
  for (size_t i = 0; i < n; ++i) {
    const TaskId t = b.AddTask(s, TaskKind::kCompute, "op", "", RandomDuration(rng));
    if (previous.valid()) b.AddDependency(t, previous);
    previous = t;
  }
  return std::move(b).Build().value();
}

TaskGraph FanOut(size_t n) {
  TaskGraphBuilder b;
  Rng rng(2);
  const TaskId root = b.AddTask(b.Stream(0, "s0"), TaskKind::kCompute, "root", "", Microseconds(1));
  std::vector<StreamId> streams;
  for (int32_t rank = 0; rank < 8; ++rank) {
    for (int s = 0; s < 8; ++s) streams.push_back(b.Stream(rank, fmt::format("s{}", s)));
  }
  for (size_t i = 1; i < n; ++i) {
    const TaskId t =
        b.AddTask(streams[i % streams.size()], TaskKind::kCompute, "leaf", "", RandomDuration(rng));
    b.AddDependency(t, root);
  }
  return std::move(b).Build().value();
}

TaskGraph Collectives(size_t n) {
  constexpr int32_t kRanks = 1024;
  constexpr int32_t kGroup = 8;
  TaskGraphBuilder b;
  Rng rng(3);
  const size_t steps = std::max<size_t>(1, n / (size_t{2} * kRanks));
  std::vector<TaskId> last(kRanks, TaskId::Invalid());
  for (size_t step = 0; step < steps; ++step) {
    for (int32_t first = 0; first < kRanks; first += kGroup) {
      std::vector<int32_t> group;
      for (int32_t r = first; r < first + kGroup; ++r) group.push_back(r);
      const CommId ar = b.AddCollective(graph::CommKind::kAllReduce, Bytes(1 << 20), group);
      for (int32_t r : group) {
        const TaskId work =
            b.AddTask(b.Stream(r, "compute"), TaskKind::kCompute, "gemm", "", RandomDuration(rng));
        if (last[r].valid()) b.AddDependency(work, last[r]);
        const TaskId post = b.AddCollectiveTask(b.Stream(r, "tp"), ar, "all-reduce", "");
        b.AddDependency(post, work);
        last[r] = post;
      }
    }
  }
  return std::move(b).Build().value();
}

TaskGraph Layered(size_t n) {
  constexpr int32_t kRanks = 64;
  constexpr int kStreams = 4;
  constexpr size_t kWidth = size_t{kRanks} * kStreams;
  TaskGraphBuilder b;
  Rng rng(4);
  std::vector<StreamId> streams;
  for (int32_t r = 0; r < kRanks; ++r) {
    for (int s = 0; s < kStreams; ++s) streams.push_back(b.Stream(r, fmt::format("s{}", s)));
  }
  std::vector<TaskId> previous_layer;
  std::vector<TaskId> layer;
  for (size_t i = 0; i < n; i += kWidth) {
    layer.clear();
    for (size_t j = 0; j < kWidth && i + j < n; ++j) {
      const TaskId t = b.AddTask(streams[j], TaskKind::kCompute, "op", "", RandomDuration(rng));
      for (int k = 0; k < 2 && !previous_layer.empty(); ++k) {
        b.AddDependency(t, previous_layer[rng.Uniform(previous_layer.size())]);
      }
      layer.push_back(t);
    }
    std::swap(previous_layer, layer);
  }
  return std::move(b).Build().value();
}

struct Shape {
  const char* name;
  std::function<TaskGraph(size_t)> make;
};

bool RunOne(const Shape& shape, size_t n, int repeat) {
  const long rss_before = PeakRssKiB();
  const auto build_start = Clock::now();
  const TaskGraph graph = shape.make(n);
  const double build_seconds = Seconds(build_start);
  engine::FixedCostModel model(Microseconds(5), Bandwidth::BytesPerSecond(100 * kGiga));
  double run_seconds = 1e30;
  uint64_t events = 0;
  size_t simulator_bytes = 0;
  for (int r = 0; r < repeat; ++r) {
    engine::Simulator simulator(graph, model);
    const auto run_start = Clock::now();
    const Status status = simulator.Run();
    run_seconds = std::min(run_seconds, Seconds(run_start));
    if (!status.ok()) {
      std::fprintf(stderr, "%s: %s\n", shape.name, status.error().ToString().c_str());
      return false;
    }
    events = simulator.events_processed();
    simulator_bytes = simulator.MemoryBytes();
  }
  const double tasks = static_cast<double>(graph.task_count());
  const double bytes = static_cast<double>(graph.MemoryBytes() + simulator_bytes);
  const double rss_growth = static_cast<double>(PeakRssKiB() - rss_before) * 1024.0;
  std::printf(
      "| %-11s | %10zu | %10zu | %10llu | %8.3f | %8.3f | %9.2f M | %9.2f M | %7.1f | %11.1f |\n",
      shape.name, graph.task_count(), graph.dependency_count(),
      static_cast<unsigned long long>(events), build_seconds, run_seconds,
      static_cast<double>(events) / run_seconds / 1e6, tasks / run_seconds / 1e6, bytes / tasks,
      rss_growth > 0 ? rss_growth / tasks : 0.0);
  std::fflush(stdout);
  return true;
}

}  // namespace
}  // namespace dtsim

int main(int argc, char** argv) {
  size_t max_tasks = 10'000'000;
  int repeat = 3;
  std::string only;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--max-tasks") {
      max_tasks = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (flag == "--repeat") {
      repeat = std::max(1, std::atoi(argv[i + 1]));
    } else if (flag == "--shapes") {
      only = fmt::format(",{},", argv[i + 1]);
    } else {
      std::fprintf(
          stderr,
          "usage: %s [--max-tasks N] [--repeat R] [--shapes chain,fanout,collectives,layered]\n",
          argv[0]);
      return 2;
    }
  }
  const std::vector<dtsim::Shape> shapes = {{"chain", dtsim::Chain},
                                            {"fanout", dtsim::FanOut},
                                            {"collectives", dtsim::Collectives},
                                            {"layered", dtsim::Layered}};
  std::printf(
      "| shape       |      tasks |       deps |     events |  build s |    sim s |"
      "  events/s  |   tasks/s  | B/task  | peak RSS B/t|\n");
  std::printf(
      "|-------------|-----------:|-----------:|-----------:|---------:|---------:|"
      "-----------:|-----------:|--------:|-----------:|\n");
  for (const dtsim::Shape& shape : shapes) {
    if (!only.empty() && only.find(fmt::format(",{},", shape.name)) == std::string::npos) {
      continue;
    }
    for (size_t n = 10'000; n <= max_tasks; n *= 10) {
      // Each case in its own process, so its peak RSS is its own.
      std::fflush(stdout);
      const pid_t child = fork();
      if (child == 0) {
        std::_Exit(dtsim::RunOne(shape, n, repeat) ? 0 : 1);  // no atexit handlers in a fork child
      }
      int status = 0;
      waitpid(child, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
    }
  }
  return 0;
}
