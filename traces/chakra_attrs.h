// Internal to chakra_graph.cc and chakra_export.cc: the attributes dtsim writes beside
// Chakra's own, so that reading its files back gives the same graph, and reading a node's
// attributes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "traces/chakra_trace.h"

namespace dtsim::traces::chakra {

// Attributes dtsim writes beside Chakra's own.
namespace attr {
constexpr std::string_view kStream = "dtsim.stream";
constexpr std::string_view kKind = "dtsim.kind";
constexpr std::string_view kCategory = "dtsim.category";
constexpr std::string_view kDurationNs = "dtsim.duration_ns";
constexpr std::string_view kComm = "dtsim.comm";
constexpr std::string_view kGroup = "dtsim.group";
constexpr std::string_view kPricedGroup = "dtsim.priced_group";
constexpr std::string_view kRoot = "dtsim.root";
constexpr std::string_view kAlgorithm = "dtsim.algorithm";
constexpr std::string_view kLabel = "dtsim.label";
constexpr std::string_view kExternalId = "dtsim.external_id";
// The last data_dep is the stream predecessor only (not a dependency of the task).
constexpr std::string_view kStreamDep = "dtsim.stream_dep";
// Dependencies on tasks of other ranks (by global node id): Chakra's data_deps are per file.
constexpr std::string_view kRemoteDeps = "dtsim.remote_deps";
// A shift (context parallelism's ring step; Chakra has no such collective) is exported as a
// COMM_RECV_NODE from the previous member carrying the collective's dtsim attributes, and a
// COMM_SEND_NODE to the next member naming the task it belongs to with this attribute (its id
// is past every task's); dtsim's reader rebuilds the shift from the first and skips the second.
constexpr std::string_view kShiftSendOf = "dtsim.shift_send_of";
constexpr std::string_view kFormat = "dtsim.format";
constexpr std::string_view kFormatVersion = "dtsim.format_version";
}  // namespace attr

constexpr int64_t kNanosecondsPerMicrosecond = 1000;

inline std::string_view StringAttr(const ChakraNode& node, std::string_view name) {
  const ChakraAttribute* a = node.Attr(name);
  return a != nullptr ? a->AsString().value_or("") : "";
}

inline std::optional<int64_t> IntegerAttr(const ChakraNode& node, std::string_view name) {
  const ChakraAttribute* a = node.Attr(name);
  return a != nullptr ? a->AsInteger() : std::nullopt;
}

}  // namespace dtsim::traces::chakra
