#include "traces/chakra_trace.h"

#include <algorithm>
#include <unordered_set>

#include "sim/base/check.h"

namespace dtsim::traces {
namespace {

constexpr std::array<std::string_view, kChakraNodeTypeCount> kNodeTypeNames = {
    "INVALID_NODE", "METADATA_NODE",  "MEM_LOAD_NODE",  "MEM_STORE_NODE",
    "COMP_NODE",    "COMM_SEND_NODE", "COMM_RECV_NODE", "COMM_COLL_NODE"};

constexpr std::array<std::string_view, kChakraCollectiveCount> kCollectiveNames = {
    "ALL_REDUCE", "REDUCE",         "ALL_GATHER",           "GATHER", "SCATTER", "BROADCAST",
    "ALL_TO_ALL", "REDUCE_SCATTER", "REDUCE_SCATTER_BLOCK", "BARRIER"};

// proto3 JSON names of the oneof fields 3..32, in field order.
constexpr std::array<std::string_view, kLastAttributeField - kFirstAttributeField + 1>
    kAttributeJsonKeys = {
        "doubleVal",  "doubleList",  "floatVal",    "floatList",    "int32Val",    "int32List",
        "int64Val",   "int64List",   "uint32Val",   "uint32List",   "uint64Val",   "uint64List",
        "sint32Val",  "sint32List",  "sint64Val",   "sint64List",   "fixed32Val",  "fixed32List",
        "fixed64Val", "fixed64List", "sfixed32Val", "sfixed32List", "sfixed64Val", "sfixed64List",
        "boolVal",    "boolList",    "stringVal",   "stringList",   "bytesVal",    "bytesList"};

}  // namespace

std::string_view ChakraNodeTypeName(ChakraNodeType type) {
  return kNodeTypeNames[static_cast<size_t>(type)];
}

std::optional<ChakraNodeType> ChakraNodeTypeFromName(std::string_view name) {
  const auto it = std::find(kNodeTypeNames.begin(), kNodeTypeNames.end(), name);
  if (it == kNodeTypeNames.end()) return std::nullopt;
  return static_cast<ChakraNodeType>(it - kNodeTypeNames.begin());
}

std::string_view ChakraCollectiveName(ChakraCollective collective) {
  return kCollectiveNames[static_cast<size_t>(collective)];
}

graph::CommKind CommKindOfChakra(ChakraCollective collective) {
  switch (collective) {
    case ChakraCollective::kAllReduce:
      return graph::CommKind::kAllReduce;
    case ChakraCollective::kReduce:
      return graph::CommKind::kReduce;
    case ChakraCollective::kAllGather:
    case ChakraCollective::kGather:
      return graph::CommKind::kAllGather;
    case ChakraCollective::kScatter:
    case ChakraCollective::kBroadcast:
      return graph::CommKind::kBroadcast;
    case ChakraCollective::kAllToAll:
      return graph::CommKind::kAllToAll;
    case ChakraCollective::kReduceScatter:
    case ChakraCollective::kReduceScatterBlock:
      return graph::CommKind::kReduceScatter;
    case ChakraCollective::kBarrier:
      return graph::CommKind::kBarrier;
  }
  DTSIM_CHECK(false, "not a Chakra collective");
  return graph::CommKind::kAllReduce;
}

ChakraCollective ChakraOfCommKind(graph::CommKind kind) {
  switch (kind) {
    case graph::CommKind::kAllReduce:
      return ChakraCollective::kAllReduce;
    case graph::CommKind::kAllGather:
      return ChakraCollective::kAllGather;
    case graph::CommKind::kReduceScatter:
      return ChakraCollective::kReduceScatter;
    case graph::CommKind::kAllToAll:
      return ChakraCollective::kAllToAll;
    case graph::CommKind::kBroadcast:
      return ChakraCollective::kBroadcast;
    case graph::CommKind::kReduce:
      return ChakraCollective::kReduce;
    case graph::CommKind::kBarrier:
      return ChakraCollective::kBarrier;
    case graph::CommKind::kShift:
    case graph::CommKind::kSendRecv:
      break;
  }
  DTSIM_CHECK(false, "send/recv and shift are not Chakra collectives");
  return ChakraCollective::kAllReduce;
}

AttributeClass ClassOf(AttributeType type) {
  switch (type) {
    case AttributeType::kDouble:
    case AttributeType::kDoubleList:
    case AttributeType::kFloat:
    case AttributeType::kFloatList:
      return AttributeClass::kReal;
    case AttributeType::kBool:
    case AttributeType::kBoolList:
      return AttributeClass::kBool;
    case AttributeType::kString:
    case AttributeType::kStringList:
    case AttributeType::kBytes:
    case AttributeType::kBytesList:
      return AttributeClass::kText;
    default:
      return AttributeClass::kInteger;
  }
}

std::string_view AttributeJsonKey(AttributeType type) {
  return kAttributeJsonKeys[static_cast<size_t>(type) - kFirstAttributeField];
}

std::optional<AttributeType> AttributeTypeFromJsonKey(std::string_view key) {
  const auto it = std::find(kAttributeJsonKeys.begin(), kAttributeJsonKeys.end(), key);
  if (it == kAttributeJsonKeys.end()) return std::nullopt;
  return static_cast<AttributeType>(kFirstAttributeField + (it - kAttributeJsonKeys.begin()));
}

ChakraAttribute ChakraAttribute::Integer(std::string name, AttributeType type, int64_t value) {
  DTSIM_CHECK(ClassOf(type) == AttributeClass::kInteger && !IsList(type), "not an integer type");
  ChakraAttribute attr;
  attr.name = std::move(name);
  attr.type = type;
  attr.integers = {value};
  return attr;
}

ChakraAttribute ChakraAttribute::Bool(std::string name, bool value) {
  ChakraAttribute attr;
  attr.name = std::move(name);
  attr.type = AttributeType::kBool;
  attr.integers = {value ? 1 : 0};
  return attr;
}

ChakraAttribute ChakraAttribute::String(std::string name, std::string value) {
  ChakraAttribute attr;
  attr.name = std::move(name);
  attr.type = AttributeType::kString;
  attr.texts = {std::move(value)};
  return attr;
}

ChakraAttribute ChakraAttribute::Int64List(std::string name, std::vector<int64_t> values) {
  ChakraAttribute attr;
  attr.name = std::move(name);
  attr.type = AttributeType::kInt64List;
  attr.integers = std::move(values);
  return attr;
}

std::optional<int64_t> ChakraAttribute::AsInteger() const {
  if (IsList(type) || ClassOf(type) != AttributeClass::kInteger || integers.size() != 1) {
    return std::nullopt;
  }
  return integers[0];
}

std::optional<bool> ChakraAttribute::AsBool() const {
  if (type != AttributeType::kBool || integers.size() != 1) return std::nullopt;
  return integers[0] != 0;
}

std::optional<std::string_view> ChakraAttribute::AsString() const {
  if (IsList(type) || ClassOf(type) != AttributeClass::kText || texts.size() != 1) {
    return std::nullopt;
  }
  return texts[0];
}

const ChakraAttribute* ChakraNode::Attr(std::string_view attr_name) const {
  for (const ChakraAttribute& attr : attrs) {
    if (attr.name == attr_name) return &attr;
  }
  return nullptr;
}

bool ChakraNode::is_cpu_op() const {
  const ChakraAttribute* attr = Attr("is_cpu_op");
  return attr != nullptr && attr->AsBool().value_or(false);
}

const ChakraAttribute* ChakraTrace::MetadataAttr(std::string_view name) const {
  for (const ChakraAttribute& attr : metadata) {
    if (attr.name == name) return &attr;
  }
  return nullptr;
}

void ChakraTrace::CountNodes() {
  ChakraImportStats& s = stats;
  s.nodes = static_cast<int64_t>(nodes.size());
  s.nodes_by_type.fill(0);
  s.collectives.clear();
  s.cpu_ops = s.attributes = s.data_deps = s.ctrl_deps = 0;
  s.dangling_data_deps = s.duplicate_ids = s.nodes_without_duration = 0;
  std::unordered_set<uint64_t> ids;
  ids.reserve(nodes.size());
  for (const ChakraNode& node : nodes) {
    if (!ids.insert(node.id).second) ++s.duplicate_ids;
  }
  for (const ChakraNode& node : nodes) {
    ++s.nodes_by_type[static_cast<size_t>(node.type)];
    if (node.is_cpu_op()) ++s.cpu_ops;
    if (node.duration_micros == 0) ++s.nodes_without_duration;
    s.attributes += static_cast<int64_t>(node.attrs.size());
    s.ctrl_deps += static_cast<int64_t>(node.ctrl_deps.size());
    s.data_deps += static_cast<int64_t>(node.data_deps.size());
    s.dangling_data_deps += std::count_if(node.data_deps.begin(), node.data_deps.end(),
                                          [&](uint64_t dep) { return !ids.contains(dep); });
    if (node.type != ChakraNodeType::kCommCollective) continue;
    const ChakraAttribute* comm_type = node.Attr("comm_type");
    const std::optional<int64_t> value = comm_type ? comm_type->AsInteger() : std::nullopt;
    const bool known = value && *value >= 0 && *value < kChakraCollectiveCount;
    ++s.collectives[known ? std::string(ChakraCollectiveName(static_cast<ChakraCollective>(*value)))
                          : "(no comm_type)"];
  }
}

}  // namespace dtsim::traces
