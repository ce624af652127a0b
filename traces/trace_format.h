// Which trace format a file holds, decided by its content (never its name): a Chakra protobuf
// stream is recognized by a first record that decodes as a Chakra GlobalMetadata; JSON by the
// first top-level key that tells the JSON formats apart. gzip is looked through.
#pragma once

#include <string>
#include <string_view>

#include "sim/base/status.h"

namespace dtsim::traces {

enum class TraceFormat : uint8_t {
  kKineto,                 // PyTorch profiler / Chrome trace JSON (object or bare array)
  kChakraProtobuf,         // Chakra ET: varint-length-framed GlobalMetadata, then Nodes
  kChakraJsonizer,         // chakra_jsonizer: the same messages as concatenated proto3 JSON
  kChakraWorkloadGraph,    // {"workload_graph": [{"Id", "Name", "NodeType", ...}]}
  kPytorchExecutionTrace,  // PyTorch host execution trace {"schema", "nodes": [...]}
};

std::string_view TraceFormatName(TraceFormat format);
bool IsChakraFormat(TraceFormat format);

Expected<TraceFormat> DetectTraceFormat(const std::string& path);

// Whether `head` (the first bytes of a file) starts with a varint-framed message that decodes
// as a Chakra GlobalMetadata using only its own fields.
bool LooksLikeChakraProtobuf(std::string_view head);

}  // namespace dtsim::traces
