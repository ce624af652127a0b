// Reads one rank's Chakra execution trace (docs/formats/chakra.md) in any of its forms,
// detected by content and gzip or plain:
//   - the binary protobuf stream (.et): [varint length][GlobalMetadata], then one
//     [varint length][Node] per node, read record by record;
//   - chakra_jsonizer output: the same messages as proto3 JSON objects written one after another
//     (lowerCamelCase keys, 64-bit integers as strings, enums by name; snake_case accepted);
//   - the converted {"workload_graph": [{"Id", "Name", "NodeType", "data_deps", "runtime",
//     ...}]} form;
//   - a PyTorch host execution trace {"schema", "nodes": [...]} (Chakra's converter input),
//     read as its CPU ops with their call hierarchy in ctrl_deps and no timing.
// The JSON forms are streamed one node at a time. A Chakra schema version other than 0.0.x, or
// a PyTorch ET schema other than 1.x, is rejected by name. Errors name the file and the record
// (index and node id) and what is wrong.
#pragma once

#include <string>

#include "sim/base/status.h"
#include "traces/chakra_trace.h"

namespace dtsim::traces {

Expected<ChakraTrace> ReadChakraTrace(const std::string& path);

// The bound on one protobuf record: a length prefix beyond it is corruption, not a node.
inline constexpr uint64_t kMaxChakraRecordBytes = uint64_t{256} << 20;

}  // namespace dtsim::traces
