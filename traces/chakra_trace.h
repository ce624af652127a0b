// MLCommons Chakra execution traces (docs/formats/chakra.md): the node graph of one rank as
// Chakra's et_def.proto defines it (mlcommons/chakra v0.0.4 schema), kept field for field so
// that a trace read and written again is the same trace. The readers (chakra_reader.h) fill it
// from the binary protobuf stream or one of the JSON forms; the writer (chakra_writer.h)
// serializes it; chakra_graph.h turns ranks of it into a task graph and back.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/graph/task.h"

namespace dtsim::traces {

// The Chakra ET schema version this code reads and writes (GlobalMetadata.version). Files
// whose version has another major.minor are rejected by name; files without one (written
// before Chakra versioned its schema, like the shared chakra.0.et) are read as this version.
inline constexpr std::string_view kChakraSchemaVersion = "0.0.4";

// et_def.proto NodeType, same values.
enum class ChakraNodeType : uint8_t {
  kInvalid = 0,
  kMetadata = 1,
  kMemLoad = 2,
  kMemStore = 3,
  kCompute = 4,
  kCommSend = 5,
  kCommRecv = 6,
  kCommCollective = 7,
};
inline constexpr int kChakraNodeTypeCount = 8;
std::string_view ChakraNodeTypeName(ChakraNodeType type);  // "COMP_NODE"
std::optional<ChakraNodeType> ChakraNodeTypeFromName(std::string_view name);

// et_def.proto CollectiveCommType, same values: what the `comm_type` attribute holds.
enum class ChakraCollective : uint8_t {
  kAllReduce = 0,
  kReduce = 1,
  kAllGather = 2,
  kGather = 3,
  kScatter = 4,
  kBroadcast = 5,
  kAllToAll = 6,
  kReduceScatter = 7,
  kReduceScatterBlock = 8,
  kBarrier = 9,
};
inline constexpr int64_t kChakraCollectiveCount = 10;
std::string_view ChakraCollectiveName(ChakraCollective collective);  // "ALL_REDUCE"
// The dtsim collective a Chakra one is simulated as (gather and scatter have no dtsim kind and
// are priced as an all-gather and a broadcast of the same bytes), and back.
graph::CommKind CommKindOfChakra(ChakraCollective collective);
ChakraCollective ChakraOfCommKind(graph::CommKind kind);

// The oneof of AttributeProto: its field number in et_def.proto names the value's type.
enum class AttributeType : uint8_t {
  kDouble = 3,
  kDoubleList = 4,
  kFloat = 5,
  kFloatList = 6,
  kInt32 = 7,
  kInt32List = 8,
  kInt64 = 9,
  kInt64List = 10,
  kUint32 = 11,
  kUint32List = 12,
  kUint64 = 13,
  kUint64List = 14,
  kSint32 = 15,
  kSint32List = 16,
  kSint64 = 17,
  kSint64List = 18,
  kFixed32 = 19,
  kFixed32List = 20,
  kFixed64 = 21,
  kFixed64List = 22,
  kSfixed32 = 23,
  kSfixed32List = 24,
  kSfixed64 = 25,
  kSfixed64List = 26,
  kBool = 27,
  kBoolList = 28,
  kString = 29,
  kStringList = 30,
  kBytes = 31,
  kBytesList = 32,
};
inline constexpr uint32_t kFirstAttributeField = 3;
inline constexpr uint32_t kLastAttributeField = 32;

enum class AttributeClass : uint8_t { kInteger, kReal, kBool, kText };
AttributeClass ClassOf(AttributeType type);
// The list types are the even field numbers.
inline bool IsList(AttributeType type) { return static_cast<uint8_t>(type) % 2 == 0; }
// The proto3 JSON name of the value field: "int64Val", "boolList", ...
std::string_view AttributeJsonKey(AttributeType type);
std::optional<AttributeType> AttributeTypeFromJsonKey(std::string_view key);

// One AttributeProto. A scalar holds one element; the value sits in the vector of its class:
// every integer type (unsigned ones as their two's-complement bit pattern) and bool in
// `integers`, double and float in `reals`, string and bytes in `texts`.
struct ChakraAttribute {
  std::string name;
  std::string doc_string;
  AttributeType type = AttributeType::kInt64;
  std::vector<int64_t> integers;
  std::vector<double> reals;
  std::vector<std::string> texts;

  static ChakraAttribute Integer(std::string name, AttributeType type, int64_t value);
  static ChakraAttribute Bool(std::string name, bool value);
  static ChakraAttribute String(std::string name, std::string value);
  static ChakraAttribute Int64List(std::string name, std::vector<int64_t> values);

  // The scalar value, when the attribute is a scalar of that class.
  std::optional<int64_t> AsInteger() const;
  std::optional<bool> AsBool() const;
  std::optional<std::string_view> AsString() const;
  bool operator==(const ChakraAttribute&) const = default;
};

struct ChakraIoInfo {
  std::string values;
  std::string shapes;
  std::string types;
  bool empty() const { return values.empty() && shapes.empty() && types.empty(); }
  bool operator==(const ChakraIoInfo&) const = default;
};

struct ChakraNode {
  uint64_t id = 0;
  std::string name;
  ChakraNodeType type = ChakraNodeType::kInvalid;
  std::vector<uint64_t> ctrl_deps;  // the parent in the call hierarchy (not an order)
  std::vector<uint64_t> data_deps;  // what a simulator must wait for
  uint64_t start_time_micros = 0;
  uint64_t duration_micros = 0;
  ChakraIoInfo inputs;
  ChakraIoInfo outputs;
  std::vector<ChakraAttribute> attrs;

  const ChakraAttribute* Attr(std::string_view attr_name) const;
  // `is_cpu_op` (false when absent: GPU work).
  bool is_cpu_op() const;
  bool operator==(const ChakraNode&) const = default;
};

struct ChakraImportStats {
  std::string form;         // "protobuf", "jsonizer", "workload_graph", "pytorch_execution_trace"
  uint64_t bytes = 0;       // uncompressed bytes read
  uint64_t file_bytes = 0;  // size on disk
  bool gzip = false;
  int64_t nodes = 0;
  std::array<int64_t, kChakraNodeTypeCount> nodes_by_type{};
  std::map<std::string, int64_t> collectives;  // by CollectiveCommType name
  int64_t cpu_ops = 0;
  int64_t attributes = 0;
  int64_t data_deps = 0;
  int64_t ctrl_deps = 0;
  int64_t dangling_data_deps = 0;  // naming a node id the file does not have
  int64_t duplicate_ids = 0;
  int64_t unknown_fields = 0;  // protobuf fields this schema does not define, skipped
  int64_t nodes_without_duration = 0;
};

struct ChakraTrace {
  std::string file;
  std::string version;  // GlobalMetadata.version; empty when the file had none
  std::vector<ChakraAttribute> metadata;
  std::vector<ChakraNode> nodes;  // in file order
  ChakraImportStats stats;

  const ChakraAttribute* MetadataAttr(std::string_view name) const;
  // Recomputes the node, dependency and collective counts of `stats` from `nodes`.
  void CountNodes();
};

}  // namespace dtsim::traces
