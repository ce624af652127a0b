#include "traces/chakra_wire.h"

#include <fmt/format.h>

#include <bit>

#include "traces/protobuf_wire.h"

namespace dtsim::traces {
namespace {

using wire::Field;
using wire::WireType;

// Field numbers of et_def.proto.
namespace node_field {
constexpr uint32_t kId = 1, kName = 2, kType = 3, kCtrlDeps = 4, kDataDeps = 5,
                   kStartTimeMicros = 6, kDurationMicros = 7, kInputs = 8, kOutputs = 9, kAttr = 10;
}  // namespace node_field
namespace metadata_field {
constexpr uint32_t kVersion = 1, kAttr = 2;
}  // namespace metadata_field
namespace attr_field {
constexpr uint32_t kName = 1, kDocString = 2;
}  // namespace attr_field
namespace io_field {
constexpr uint32_t kValues = 1, kShapes = 2, kTypes = 3;
}  // namespace io_field
constexpr uint32_t kListValues = 1;  // XxxList { repeated xxx values = 1; }

// The scalar type of a list type (its field number minus one) and the wire type of a scalar.
AttributeType ElementType(AttributeType type) {
  return IsList(type) ? static_cast<AttributeType>(static_cast<uint8_t>(type) - 1) : type;
}

WireType ScalarWireType(AttributeType scalar) {
  switch (scalar) {
    case AttributeType::kDouble:
    case AttributeType::kFixed64:
    case AttributeType::kSfixed64:
      return WireType::kFixed64;
    case AttributeType::kFloat:
    case AttributeType::kFixed32:
    case AttributeType::kSfixed32:
      return WireType::kFixed32;
    case AttributeType::kString:
    case AttributeType::kBytes:
      return WireType::kLengthDelimited;
    default:
      return WireType::kVarint;
  }
}

// The raw 64 bits of a varint or fixed field as the integer the type means.
int64_t IntegerFromWire(AttributeType scalar, uint64_t raw) {
  switch (scalar) {
    case AttributeType::kInt32:
    case AttributeType::kSfixed32:
      return static_cast<int32_t>(static_cast<uint32_t>(raw));
    case AttributeType::kUint32:
    case AttributeType::kFixed32:
      return static_cast<int64_t>(raw & 0xffffffffu);
    case AttributeType::kSint32:
    case AttributeType::kSint64:
      return wire::ZigZagDecode(raw);
    case AttributeType::kBool:
      return raw != 0 ? 1 : 0;
    default:  // int64, uint64 (kept as its bit pattern), fixed64, sfixed64
      return static_cast<int64_t>(raw);
  }
}

uint64_t IntegerToWire(AttributeType scalar, int64_t value) {
  switch (scalar) {
    case AttributeType::kInt32:  // negative int32s are sign-extended to ten bytes
      return static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(value)));
    case AttributeType::kUint32:
    case AttributeType::kFixed32:
    case AttributeType::kSfixed32:
      return static_cast<uint64_t>(value) & 0xffffffffu;
    case AttributeType::kSint32:
      return wire::ZigZagEncode(static_cast<int32_t>(value));
    case AttributeType::kSint64:
      return wire::ZigZagEncode(value);
    default:
      return static_cast<uint64_t>(value);
  }
}

double RealFromWire(AttributeType scalar, uint64_t raw) {
  if (scalar == AttributeType::kFloat) {
    return std::bit_cast<float>(static_cast<uint32_t>(raw));
  }
  return std::bit_cast<double>(raw);
}

// Adds one scalar element from a field whose wire type matches `scalar`.
void AppendScalar(ChakraAttribute& attr, AttributeType scalar, const Field& field) {
  switch (ClassOf(scalar)) {
    case AttributeClass::kReal:
      attr.reals.push_back(RealFromWire(scalar, field.value));
      break;
    case AttributeClass::kText:
      attr.texts.emplace_back(field.bytes);
      break;
    default:
      attr.integers.push_back(IntegerFromWire(scalar, field.value));
  }
}

std::string WireTypeError(const Field& field, std::string_view message, WireType expected) {
  return fmt::format("{}: field {} has wire type {}, expected {}", message, field.number,
                     static_cast<int>(field.type), static_cast<int>(expected));
}

// Decodes the values of an XxxList message: packed, or one field per element.
Status DecodeList(std::string_view payload, ChakraAttribute& attr) {
  const AttributeType scalar = ElementType(attr.type);
  const WireType element_wire = ScalarWireType(scalar);
  wire::Reader reader(payload);
  Field field;
  while (reader.Next(field)) {
    if (field.number != kListValues) continue;
    if (field.type == element_wire) {
      AppendScalar(attr, scalar, field);
      continue;
    }
    if (field.type != WireType::kLengthDelimited) {
      return Error(WireTypeError(field, fmt::format("attribute \"{}\"", attr.name), element_wire));
    }
    std::vector<uint64_t> raw;
    const bool ok = element_wire == WireType::kVarint ? wire::ReadPackedVarints(field.bytes, raw)
                    : element_wire == WireType::kFixed64
                        ? wire::ReadPackedFixed64(field.bytes, raw)
                        : wire::ReadPackedFixed32(field.bytes, raw);
    if (!ok) return Error(fmt::format("attribute \"{}\": malformed packed list", attr.name));
    for (const uint64_t value : raw) {
      Field element{kListValues, element_wire, value, {}};
      AppendScalar(attr, scalar, element);
    }
  }
  if (reader.error()) {
    return Error(fmt::format("attribute \"{}\": {}", attr.name, *reader.error()));
  }
  return Status::Ok();
}

Expected<ChakraAttribute> DecodeAttribute(std::string_view message, int64_t& unknown_fields) {
  ChakraAttribute attr;
  bool has_value = false;
  wire::Reader reader(message);
  Field field;
  while (reader.Next(field)) {
    if (field.number == attr_field::kName || field.number == attr_field::kDocString) {
      if (field.type != WireType::kLengthDelimited) {
        return Error(WireTypeError(field, "attribute", WireType::kLengthDelimited));
      }
      (field.number == attr_field::kName ? attr.name : attr.doc_string) = field.bytes;
      continue;
    }
    if (field.number < kFirstAttributeField || field.number > kLastAttributeField) {
      ++unknown_fields;
      continue;
    }
    // A oneof keeps the last value set, as protobuf does.
    attr.type = static_cast<AttributeType>(field.number);
    attr.integers.clear();
    attr.reals.clear();
    attr.texts.clear();
    has_value = true;
    if (IsList(attr.type)) {
      if (field.type != WireType::kLengthDelimited) {
        return Error(WireTypeError(field, fmt::format("attribute \"{}\"", attr.name),
                                   WireType::kLengthDelimited));
      }
      DTSIM_RETURN_IF_ERROR(DecodeList(field.bytes, attr));
      continue;
    }
    const WireType expected = ScalarWireType(attr.type);
    if (field.type != expected) {
      return Error(WireTypeError(field, fmt::format("attribute \"{}\"", attr.name), expected));
    }
    AppendScalar(attr, attr.type, field);
  }
  if (reader.error()) return Error(fmt::format("attribute: {}", *reader.error()));
  if (!has_value) {
    // proto3 leaves a scalar at its default out: an attribute without a value is a zero int64
    // or, for a name that says so, false. Keep it as int64 0.
    attr.type = AttributeType::kInt64;
    attr.integers = {0};
  }
  return attr;
}

Status DecodeIoInfo(std::string_view message, ChakraIoInfo& io, int64_t& unknown_fields) {
  wire::Reader reader(message);
  Field field;
  while (reader.Next(field)) {
    std::string* slot = field.number == io_field::kValues   ? &io.values
                        : field.number == io_field::kShapes ? &io.shapes
                        : field.number == io_field::kTypes  ? &io.types
                                                            : nullptr;
    if (slot == nullptr) {
      ++unknown_fields;
    } else if (field.type != WireType::kLengthDelimited) {
      return Error(WireTypeError(field, "inputs/outputs", WireType::kLengthDelimited));
    } else {
      *slot = field.bytes;
    }
  }
  if (reader.error()) return Error(fmt::format("inputs/outputs: {}", *reader.error()));
  return Status::Ok();
}

// Repeated uint64 node ids: packed or not.
Status DecodeIds(const Field& field, std::vector<uint64_t>& out, std::string_view what) {
  if (field.type == WireType::kVarint) {
    out.push_back(field.value);
    return Status::Ok();
  }
  if (field.type != WireType::kLengthDelimited || !wire::ReadPackedVarints(field.bytes, out)) {
    return Error(fmt::format("{}: malformed list of node ids", what));
  }
  return Status::Ok();
}

Status ExpectVarint(const Field& field) {
  if (field.type == WireType::kVarint) return Status::Ok();
  return Error(WireTypeError(field, "node", WireType::kVarint));
}

Status ExpectBytes(const Field& field) {
  if (field.type == WireType::kLengthDelimited) return Status::Ok();
  return Error(WireTypeError(field, "node", WireType::kLengthDelimited));
}

Status DecodeNodeField(const Field& field, ChakraNode& node, int64_t& unknown_fields) {
  switch (field.number) {
    case node_field::kId:
      DTSIM_RETURN_IF_ERROR(ExpectVarint(field));
      node.id = field.value;
      return Status::Ok();
    case node_field::kName:
      DTSIM_RETURN_IF_ERROR(ExpectBytes(field));
      node.name = field.bytes;
      return Status::Ok();
    case node_field::kType:
      DTSIM_RETURN_IF_ERROR(ExpectVarint(field));
      if (field.value >= kChakraNodeTypeCount) {
        return Error(fmt::format("node type {} is not a Chakra NodeType (0..{})", field.value,
                                 kChakraNodeTypeCount - 1));
      }
      node.type = static_cast<ChakraNodeType>(field.value);
      return Status::Ok();
    case node_field::kCtrlDeps:
      return DecodeIds(field, node.ctrl_deps, "ctrl_deps");
    case node_field::kDataDeps:
      return DecodeIds(field, node.data_deps, "data_deps");
    case node_field::kStartTimeMicros:
    case node_field::kDurationMicros:
      DTSIM_RETURN_IF_ERROR(ExpectVarint(field));
      (field.number == node_field::kStartTimeMicros ? node.start_time_micros
                                                    : node.duration_micros) = field.value;
      return Status::Ok();
    case node_field::kInputs:
    case node_field::kOutputs:
      DTSIM_RETURN_IF_ERROR(ExpectBytes(field));
      return DecodeIoInfo(field.bytes,
                          field.number == node_field::kInputs ? node.inputs : node.outputs,
                          unknown_fields);
    case node_field::kAttr: {
      DTSIM_RETURN_IF_ERROR(ExpectBytes(field));
      DTSIM_ASSIGN_OR_RETURN(ChakraAttribute attr, DecodeAttribute(field.bytes, unknown_fields));
      node.attrs.push_back(std::move(attr));
      return Status::Ok();
    }
    default:
      ++unknown_fields;
      return Status::Ok();
  }
}

// `message` and `values` are scratch writers, cleared here. Numeric lists are packed, as
// protobuf writes proto3's repeated scalars (so Chakra's own classes re-encode a node to the
// same bytes: tools/peers/check_chakra_export.py); strings are one field each.
void EncodeAttribute(wire::Writer& out, uint32_t number, const ChakraAttribute& attr,
                     wire::Writer& message, wire::Writer& values) {
  message.Clear();
  values.Clear();
  message.Bytes(attr_field::kName, attr.name);
  if (!attr.doc_string.empty()) message.Bytes(attr_field::kDocString, attr.doc_string);
  const AttributeType scalar = ElementType(attr.type);
  const auto field = static_cast<uint32_t>(attr.type);
  const bool list = IsList(attr.type);
  switch (ClassOf(scalar)) {
    case AttributeClass::kText:
      for (const std::string& text : attr.texts) {
        (list ? values : message).Bytes(list ? kListValues : field, text);
      }
      if (list) message.Bytes(field, values.data());
      break;
    case AttributeClass::kReal:
      for (const double real : attr.reals) {
        if (scalar == AttributeType::kFloat) {
          const auto raw = std::bit_cast<uint32_t>(static_cast<float>(real));
          list ? values.RawFixed32(raw) : message.Fixed32(field, raw);
        } else {
          const auto raw = std::bit_cast<uint64_t>(real);
          list ? values.RawFixed64(raw) : message.Fixed64(field, raw);
        }
      }
      if (list) message.WrappedBytes(field, kListValues, values.data());
      break;
    default:
      for (const int64_t integer : attr.integers) {
        const uint64_t raw = IntegerToWire(scalar, integer);
        switch (ScalarWireType(scalar)) {
          case WireType::kFixed64:
            list ? values.RawFixed64(raw) : message.Fixed64(field, raw);
            break;
          case WireType::kFixed32:
            list ? values.RawFixed32(static_cast<uint32_t>(raw))
                 : message.Fixed32(field, static_cast<uint32_t>(raw));
            break;
          default:
            list ? values.RawVarint(raw) : message.Varint(field, raw);
        }
      }
      if (list) message.WrappedBytes(field, kListValues, values.data());
  }
  out.Bytes(number, message.data());
}

void EncodeIoInfo(wire::Writer& out, uint32_t number, const ChakraIoInfo& io) {
  if (io.empty()) return;
  wire::Writer message;
  if (!io.values.empty()) message.Bytes(io_field::kValues, io.values);
  if (!io.shapes.empty()) message.Bytes(io_field::kShapes, io.shapes);
  if (!io.types.empty()) message.Bytes(io_field::kTypes, io.types);
  out.Bytes(number, message.data());
}

}  // namespace

Expected<ChakraMetadata> DecodeChakraMetadata(std::string_view message, int64_t& unknown_fields) {
  ChakraMetadata metadata;
  wire::Reader reader(message);
  Field field;
  while (reader.Next(field)) {
    if (field.number != metadata_field::kVersion && field.number != metadata_field::kAttr) {
      ++unknown_fields;
      continue;
    }
    if (field.type != WireType::kLengthDelimited) {
      return Error(WireTypeError(field, "GlobalMetadata", WireType::kLengthDelimited));
    }
    if (field.number == metadata_field::kVersion) {
      metadata.version = field.bytes;
      continue;
    }
    DTSIM_ASSIGN_OR_RETURN(ChakraAttribute attr, DecodeAttribute(field.bytes, unknown_fields));
    metadata.attrs.push_back(std::move(attr));
  }
  if (reader.error()) return Error(fmt::format("GlobalMetadata: {}", *reader.error()));
  return metadata;
}

Expected<ChakraNode> DecodeChakraNode(std::string_view message, int64_t& unknown_fields) {
  ChakraNode node;
  wire::Reader reader(message);
  Field field;
  while (reader.Next(field)) {
    DTSIM_RETURN_IF_ERROR(DecodeNodeField(field, node, unknown_fields));
  }
  if (reader.error()) return Error(*reader.error());
  return node;
}

std::string EncodeChakraMetadata(const ChakraMetadata& metadata) {
  wire::Writer out;
  wire::Writer message;
  wire::Writer values;
  if (!metadata.version.empty()) out.Bytes(metadata_field::kVersion, metadata.version);
  for (const ChakraAttribute& attr : metadata.attrs) {
    EncodeAttribute(out, metadata_field::kAttr, attr, message, values);
  }
  return std::move(out).Take();
}

std::string EncodeChakraNode(const ChakraNode& node) {
  ChakraNodeEncoder encoder;
  return encoder.Encode(node);
}

void ChakraNodeEncoder::AppendFramed(const ChakraNode& node, std::string& out) {
  wire::AppendFramed(out, Encode(node));
}

const std::string& ChakraNodeEncoder::Encode(const ChakraNode& node) {
  wire::Writer& out = node_;
  out.Clear();
  if (node.id != 0) out.Varint(node_field::kId, node.id);
  if (!node.name.empty()) out.Bytes(node_field::kName, node.name);
  if (node.type != ChakraNodeType::kInvalid) {
    out.Varint(node_field::kType, static_cast<uint64_t>(node.type));
  }
  if (!node.ctrl_deps.empty()) out.PackedVarints(node_field::kCtrlDeps, node.ctrl_deps);
  if (!node.data_deps.empty()) out.PackedVarints(node_field::kDataDeps, node.data_deps);
  if (node.start_time_micros != 0) out.Varint(node_field::kStartTimeMicros, node.start_time_micros);
  if (node.duration_micros != 0) out.Varint(node_field::kDurationMicros, node.duration_micros);
  EncodeIoInfo(out, node_field::kInputs, node.inputs);
  EncodeIoInfo(out, node_field::kOutputs, node.outputs);
  for (const ChakraAttribute& attr : node.attrs) {
    EncodeAttribute(out, node_field::kAttr, attr, attr_, values_);
  }
  return out.data();
}

}  // namespace dtsim::traces
