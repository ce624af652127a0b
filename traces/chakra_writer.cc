#include "traces/chakra_writer.h"

#include <fmt/format.h>

#include <map>
#include <string_view>
#include <utility>

#include "sim/base/atomic_file.h"
#include "sim/base/json_reader.h"
#include "sim/base/parallel.h"
#include "traces/chakra_attrs.h"
#include "traces/chakra_export.h"
#include "traces/chakra_graph.h"
#include "traces/chakra_wire.h"
#include "traces/protobuf_wire.h"

namespace dtsim::traces {

std::string SerializeChakraTrace(const ChakraTrace& trace) {
  std::string out;
  // Chakra's Python reader stops at a zero-length record: the metadata always has a version.
  ChakraMetadata metadata{trace.version.empty() ? std::string(kChakraSchemaVersion) : trace.version,
                          trace.metadata};
  wire::AppendFramed(out, EncodeChakraMetadata(metadata));
  ChakraNodeEncoder encoder;
  for (const ChakraNode& node : trace.nodes) encoder.AppendFramed(node, out);
  return out;
}

Status WriteChakraTrace(const ChakraTrace& trace, const std::string& path) {
  return WriteFileAtomically(path, SerializeChakraTrace(trace));
}

namespace {

// Writes `rank`'s trace to `path` node by node through a buffer of about a megabyte.
Status WriteRankTrace(const ChakraExporter& exporter, int32_t rank, const std::string& path) {
  constexpr size_t kFlushBytes = size_t{1} << 20;
  DTSIM_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> file, AtomicFileWriter::Open(path));
  std::string buffer;
  wire::AppendFramed(buffer, EncodeChakraMetadata(exporter.Metadata(rank)));
  ChakraNodeEncoder encoder;
  exporter.ForEachNode(rank, [&](const ChakraNode& node) {
    encoder.AppendFramed(node, buffer);
    if (buffer.size() >= kFlushBytes) {
      file->stream().write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
      buffer.clear();
    }
  });
  file->stream().write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
  return file->Commit();
}

}  // namespace

Expected<std::vector<std::string>> WriteChakraGraph(const graph::TaskGraph& graph,
                                                    const std::string& prefix) {
  std::vector<std::string> paths;
  const ChakraExporter exporter(graph);
  const auto rank_count = static_cast<size_t>(graph.rank_count());
  for (size_t rank = 0; rank < rank_count; ++rank) {
    paths.push_back(fmt::format("{}.{}.et", prefix, rank));
  }
  // Ranks are written side by side, each holding its own task list and buffer; the first
  // failure in rank order is the one reported.
  std::vector<Status> written(rank_count);
  ParallelFor(rank_count, DefaultThreads(), [&](size_t rank) {
    written[rank] = WriteRankTrace(exporter, static_cast<int32_t>(rank), paths[rank]);
  });
  for (Status& status : written) DTSIM_RETURN_IF_ERROR(std::move(status));
  // The groups of collectives, by id (a pair's group is named by its sends and receives).
  std::vector<bool> collective_group(graph.group_count(), false);
  for (uint32_t c = 0; c < graph.comm_count(); ++c) {
    const graph::Communication& comm = graph.comm(graph::CommId(c));
    if (comm.kind != graph::CommKind::kSendRecv) collective_group[comm.group.value()] = true;
  }
  nlohmann::ordered_json groups = nlohmann::ordered_json::object();
  for (uint32_t g = 0; g < collective_group.size(); ++g) {
    if (!collective_group[g]) continue;
    const std::span<const int32_t> ranks = graph.group(graph::GroupId(g));
    groups[ChakraGroupName(graph::GroupId(g))] = std::vector<int32_t>(ranks.begin(), ranks.end());
  }
  paths.push_back(prefix + ".comm_groups.json");
  DTSIM_RETURN_IF_ERROR(WriteFileAtomically(paths.back(), DumpJson(groups, 2) + "\n"));
  return paths;
}

std::vector<std::string> ChakraExportCaveats(const graph::TaskGraph& graph) {
  std::map<std::pair<std::string_view, graph::CommKind>, int64_t> forced;
  for (uint32_t c = 0; c < graph.comm_count(); ++c) {
    const graph::Communication& comm = graph.comm(graph::CommId(c));
    const std::string_view algorithm = graph.name(comm.algorithm);
    if (!algorithm.empty()) ++forced[{algorithm, comm.kind}];
  }
  std::vector<std::string> caveats;
  for (const auto& [key, count] : forced) {
    const auto& [algorithm, kind] = key;
    const std::string_view why =
        algorithm == "parameter_server"
            ? " (its push and pull go through servers that are not ranks, which Chakra has no node "
              "for)"
            : "";
    caveats.push_back(fmt::format(
        "{} {} communication{} forced to dtsim's {} algorithm{} {} written as plain Chakra {} "
        "nodes (the algorithm in attribute {}); a tool that reads only Chakra's fields, as "
        "ASTRA-sim does, runs them with its own algorithm and will not agree with dtsim's time",
        count, graph::CommKindName(kind), count == 1 ? "" : "s", algorithm, why,
        count == 1 ? "is" : "are", graph::CommKindName(kind), chakra::attr::kAlgorithm));
  }
  return caveats;
}

}  // namespace dtsim::traces
