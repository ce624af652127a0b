// vTrain's all-reduce curves (../shared/network/vtrain-allreduce/): nccl-tests all_reduce_perf
// on the first 2–8 GPUs of one A100 NVSwitch node and one V100 hybrid cube-mesh node, every
// size from 1 MiB to 1 GiB in 1 MiB steps (measured_collectives.h).
#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "network/measured_collectives.h"
#include "sim/base/strings.h"

namespace dtsim::network {
namespace {

struct VtrainSystem {
  const char* folder;
  const char* system;
  const char* preset;
};

// The files do not name their systems; their 8-GPU peaks (229 and 134 GB/s of bus bandwidth at
// 1 GiB) are an NVSwitch A100 node's and a DGX-1 V100 node's (../shared/network/README.md).
constexpr std::array<VtrainSystem, 2> kSystems = {{
    {"a100", "vTrain A100 (NVSwitch)", "dgx-a100"},
    {"v100", "vTrain V100 (hybrid cube-mesh)", "dgx1-v100"},
}};

// Whether `size` is one of the sampled sizes: 1 MiB · 2^i.
bool PowerOfTwoMiB(int64_t size) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  return size >= kMiB && size % kMiB == 0 && ((size / kMiB) & (size / kMiB - 1)) == 0;
}

// One file's rows at the sampled sizes. Columns: size(B), count, type, time(ns), busbw(GB/s)
// out of place, then time(ns), busbw(GB/s) in place.
Status ReadCurve(const std::string& path, const VtrainSystem& system, int gpus,
                 std::vector<MeasuredCollective>& out) {
  std::ifstream in(path);
  if (!in) return Error("cannot open the file").InFile(path);
  std::string line;
  if (!std::getline(in, line) || line.rfind("size(B),count,type,time(ns)", 0) != 0) {
    return Error("expected the header \"size(B),count,type,time(ns),busbw(GB/s),...\"")
        .InFile(path);
  }
  int64_t rows = 0;
  for (int number = 2; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    std::vector<std::string> cells;
    std::stringstream row(line);
    for (std::string cell; std::getline(row, cell, ',');) cells.push_back(cell);
    const std::string where = fmt::format("line {}", number);
    if (cells.size() < 5) return Error("expected at least 5 columns", where, line).InFile(path);
    int64_t size = 0;
    double time_ns = 0;
    const std::string& size_cell = cells[0];
    const std::string& time_cell = cells[3];
    const auto parsed_size =
        std::from_chars(size_cell.data(), size_cell.data() + size_cell.size(), size);
    const auto parsed_time =
        std::from_chars(time_cell.data(), time_cell.data() + time_cell.size(), time_ns);
    if (parsed_size.ec != std::errc() || parsed_size.ptr != size_cell.data() + size_cell.size() ||
        parsed_time.ec != std::errc() || parsed_time.ptr != time_cell.data() + time_cell.size()) {
      return Error("expected a size in bytes and a time in ns", where, line).InFile(path);
    }
    if (size <= 0 || size > (int64_t{1} << 40) || !std::isfinite(time_ns) || time_ns <= 0 ||
        time_ns > 1e15) {
      return Error("size or time out of range", where, line).InFile(path);
    }
    ++rows;
    if (!PowerOfTwoMiB(size)) continue;
    MeasuredCollective point;
    point.id = fmt::format("vtrain-{}-{}g-{}MiB", system.folder, gpus, size >> 20);
    point.system = system.system;
    point.preset = system.preset;
    point.kind = graph::CommKind::kAllReduce;
    point.gpus = gpus;
    point.nodes = 1;
    point.node_gpus = 8;
    point.size = size;
    point.time = DurationNs(std::llround(time_ns));
    out.push_back(std::move(point));
  }
  if (rows == 0) return Error("no rows").InFile(path);
  return Status::Ok();
}

}  // namespace

Expected<MeasuredCollectives> ReadVtrainAllReduce(const std::string& dir) {
  MeasuredCollectives out;
  for (const VtrainSystem& system : kSystems) {
    for (int gpus = 2; gpus <= 8; ++gpus) {
      const std::string path = fmt::format("{}/{}/all_reduce_{}gpu.csv", dir, system.folder, gpus);
      DTSIM_RETURN_IF_ERROR(ReadCurve(path, system, gpus, out.points));
    }
  }
  return out;
}

}  // namespace dtsim::network
