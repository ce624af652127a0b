#include "network/measured_collectives.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "network/cluster.h"
#include "network/collective_algorithms.h"
#include "sim/base/json_reader.h"

namespace dtsim::network {
namespace {

// The preset standing for a measured system, by the GPU it names.
std::string PresetOf(const std::string& system) {
  if (system.find("H200") != std::string::npos) return "dgx-h200";
  if (system.find("H100") != std::string::npos) return "dgx-h100";
  if (system.find("A100") != std::string::npos) return "dgx-a100";
  return "";
}

Expected<graph::CommKind> KindOf(const std::string& collective, const std::string& path) {
  if (collective == "all_reduce") return graph::CommKind::kAllReduce;
  if (collective == "all_gather") return graph::CommKind::kAllGather;
  if (collective == "reduce_scatter") return graph::CommKind::kReduceScatter;
  if (collective == "alltoall" || collective == "all_to_all") return graph::CommKind::kAllToAll;
  if (collective == "sendrecv") return graph::CommKind::kSendRecv;
  return Error("expected all_reduce, all_gather, reduce_scatter, alltoall or sendrecv", path,
               collective);
}

Expected<MeasuredCollective> ReadMeasuredPoint(const Json& record, const std::string& path) {
  if (!record.is_object()) return Error("expected a record object", path);
  MeasuredCollective point;
  const auto string = [&](const char* key) -> Expected<std::string> {
    const auto it = record.find(key);
    if (it == record.end() || !it->is_string()) {
      return Error("expected a string", JsonChildPath(path, key));
    }
    return it->get<std::string>();
  };
  const auto number = [&](const char* key) -> Expected<double> {
    const auto it = record.find(key);
    if (it == record.end() || !it->is_number() || !std::isfinite(it->get<double>()) ||
        it->get<double>() <= 0) {
      return Error("expected a positive number", JsonChildPath(path, key));
    }
    return it->get<double>();
  };
  DTSIM_ASSIGN_OR_RETURN(point.id, string("id"));
  DTSIM_ASSIGN_OR_RETURN(point.system, string("system"));
  DTSIM_ASSIGN_OR_RETURN(const std::string collective, string("collective"));
  DTSIM_ASSIGN_OR_RETURN(point.kind, KindOf(collective, JsonChildPath(path, "collective")));
  DTSIM_ASSIGN_OR_RETURN(const double gpus, number("gpus"));
  DTSIM_ASSIGN_OR_RETURN(const double nodes, number("nodes"));
  DTSIM_ASSIGN_OR_RETURN(const double size, number("size_bytes"));
  // A record published as bandwidth only gives its time as S / algbw.
  const auto time = record.find("time_us");
  Expected<double> time_us = number("time_us");
  if ((time == record.end() || time->is_null()) && record.contains("algbw_GBps")) {
    DTSIM_ASSIGN_OR_RETURN(const double algbw, number("algbw_GBps"));
    time_us = size / (algbw * 1e3);
  }
  if (!time_us.ok()) return std::move(time_us).error();
  if (gpus > (1 << 20) || nodes > gpus || size > 1e15 || *time_us > 1e12 ||
      std::fmod(gpus, nodes) != 0) {
    return Error("gpus, nodes, size_bytes or time_us out of range", path);
  }
  point.gpus = static_cast<int>(gpus);
  point.nodes = static_cast<int>(nodes);
  point.size = static_cast<int64_t>(size);
  point.time = DurationNs(std::llround(*time_us * 1e3));
  point.preset = PresetOf(point.system);
  return point;
}

}  // namespace

Expected<MeasuredCollectives> ReadMeasuredCollectives(const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(const Json document, ReadJsonFile(path));
  if (!document.is_array()) return Error("expected an array of records").InFile(path);
  MeasuredCollectives out;
  for (size_t i = 0; i < document.size(); ++i) {
    const Json& record = document[i];
    const std::string where = JsonIndexPath("", i);
    const auto kind = record.is_object() ? record.find("kind") : record.end();
    if (record.is_object() && kind != record.end() && *kind != "measured") {
      ++out.other_records;
      continue;
    }
    Expected<MeasuredCollective> point = ReadMeasuredPoint(record, where);
    if (!point.ok()) return std::move(point).error().InFile(path);
    out.points.push_back(*std::move(point));
  }
  return out;
}

Expected<PredictedCollective> PredictMeasuredCollective(const MeasuredCollective& point) {
  if (point.preset.empty()) {
    return Error(fmt::format("no cluster preset stands for the system \"{}\"", point.system));
  }
  DTSIM_ASSIGN_OR_RETURN(ClusterSpec cluster, ClusterPreset(point.preset, point.nodes));
  cluster.gpus_per_node = point.node_gpus > 0 ? point.node_gpus : point.gpus / point.nodes;
  // A node whose job uses fewer GPUs than it has NICs reaches the network through theirs (one
  // NIC per GPU on these rail-optimized nodes).
  cluster.inter.nics_per_node = std::min(cluster.inter.nics_per_node, point.gpus / point.nodes);
  std::vector<int32_t> ranks(static_cast<size_t>(point.gpus));
  std::iota(ranks.begin(), ranks.end(), 0);
  int64_t size = point.size;
  if (point.kind == graph::CommKind::kAllGather) size /= point.gpus;  // each rank's share
  if (point.kind == graph::CommKind::kSendRecv) {
    // The ring shift's one send that crosses nodes, if any: the first node's last GPU to the next.
    const int32_t from = cluster.gpus_per_node - 1;
    ranks = {from, (from + 1) % point.gpus};
  }
  // Send/recv runs in nccl-tests' communicator of every GPU of the run (nccl_p2p.h).
  const CollectiveRequest request{
      .kind = point.kind,
      .size = Bytes(size),
      .shape = ShapeOfGroup(ranks, cluster),
      .cluster = &cluster,
      .ranks = ranks,
      .communicator = {
          .ranks = point.gpus, .nodes = point.nodes, .per_node = point.gpus / point.nodes}};
  DTSIM_ASSIGN_OR_RETURN(const AlgorithmChoice choice, ChooseCollectiveAlgorithm(request, ""));
  return PredictedCollective{choice.time, std::string(choice.algorithm->name)};
}

}  // namespace dtsim::network
