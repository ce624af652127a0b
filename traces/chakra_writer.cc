#include "traces/chakra_writer.h"

#include <fmt/format.h>

#include <map>

#include "sim/base/atomic_file.h"
#include "sim/base/json_reader.h"
#include "traces/chakra_graph.h"
#include "traces/chakra_wire.h"
#include "traces/protobuf_wire.h"

namespace dtsim::traces {
namespace {

void AppendRecord(std::string& out, const std::string& message) {
  wire::AppendVarint(out, message.size());
  out += message;
}

}  // namespace

std::string SerializeChakraTrace(const ChakraTrace& trace) {
  std::string out;
  // Chakra's Python reader stops at a zero-length record: the metadata always has a version.
  ChakraMetadata metadata{trace.version.empty() ? std::string(kChakraSchemaVersion) : trace.version,
                          trace.metadata};
  AppendRecord(out, EncodeChakraMetadata(metadata));
  for (const ChakraNode& node : trace.nodes) AppendRecord(out, EncodeChakraNode(node));
  return out;
}

Status WriteChakraTrace(const ChakraTrace& trace, const std::string& path) {
  return WriteFileAtomically(path, SerializeChakraTrace(trace));
}

Expected<std::vector<std::string>> WriteChakraGraph(const graph::TaskGraph& graph,
                                                    const std::string& prefix) {
  std::vector<std::string> paths;
  const std::vector<ChakraTrace> traces = ChakraTracesFromGraph(graph);
  for (size_t rank = 0; rank < traces.size(); ++rank) {
    paths.push_back(fmt::format("{}.{}.et", prefix, rank));
    DTSIM_RETURN_IF_ERROR(WriteChakraTrace(traces[rank], paths.back()));
  }
  nlohmann::ordered_json groups = nlohmann::ordered_json::object();
  for (uint32_t c = 0; c < graph.comm_count(); ++c) {
    const graph::Communication& comm = graph.comm(graph::CommId(c));
    if (comm.kind == graph::CommKind::kSendRecv) continue;
    const std::span<const int32_t> ranks = graph.group(comm.group);
    groups[ChakraGroupName(comm.group)] = std::vector<int32_t>(ranks.begin(), ranks.end());
  }
  paths.push_back(prefix + ".comm_groups.json");
  DTSIM_RETURN_IF_ERROR(WriteFileAtomically(paths.back(), DumpJson(groups, 2) + "\n"));
  return paths;
}

}  // namespace dtsim::traces
