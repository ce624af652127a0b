#include "traces/chakra_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <istream>
#include <limits>
#include <memory>

#include "sim/base/json_reader.h"
#include "traces/chakra_wire.h"
#include "traces/json_stream.h"
#include "traces/protobuf_wire.h"
#include "traces/trace_format.h"
#include "traces/trace_input.h"

namespace dtsim::traces {
namespace {

// ---- versions ---------------------------------------------------------------------------

// "0.0.4" → "0.0"; "1.0.2-chakra.0.0.4" → "1.0"; the text up to the second dot.
std::string_view MajorMinor(std::string_view version) {
  const size_t first = version.find('.');
  if (first == std::string_view::npos) return version;
  return version.substr(0, version.find('.', first + 1));
}

Status CheckChakraVersion(std::string_view version) {
  if (version.empty() || MajorMinor(version) == MajorMinor(kChakraSchemaVersion)) {
    return Status::Ok();
  }
  return Error(fmt::format("Chakra ET schema version \"{}\" is not one this reader knows ({}.x); "
                           "it may come from a newer Chakra",
                           version, MajorMinor(kChakraSchemaVersion)),
               "GlobalMetadata.version", std::string(version));
}

Status CheckPytorchSchema(std::string_view schema) {
  if (schema.starts_with("1.")) return Status::Ok();
  return Error(fmt::format("PyTorch execution trace schema \"{}\" is not one this reader knows "
                           "(1.x)",
                           schema),
               "schema", std::string(schema));
}

// ---- the protobuf stream ----------------------------------------------------------------

// Reads the varint length prefix of the next record; nothing at a clean end of file.
Expected<std::optional<uint64_t>> ReadRecordLength(std::streambuf& in, int64_t record) {
  uint64_t value = 0;
  for (int i = 0; i < wire::kMaxVarintBytes; ++i) {
    const std::streambuf::int_type c = in.sbumpc();
    if (c == std::streambuf::traits_type::eof()) {
      if (i == 0) return std::optional<uint64_t>();
      return Error(fmt::format("record {}: the file ends inside its length prefix", record));
    }
    value |= static_cast<uint64_t>(c & 0x7f) << (7 * i);
    if ((c & 0x80) == 0) return std::optional<uint64_t>(value);
  }
  return Error(fmt::format("record {}: its length prefix is not a varint", record));
}

// Reads a record's `length` bytes into `message` and returns how many the file held. The
// buffer grows with what arrives, a chunk at a time, never to the length a prefix declares:
// a corrupt 4-byte prefix may declare 200 MiB in a file of 100 bytes.
uint64_t ReadRecordBytes(std::streambuf& in, uint64_t length, std::string& message) {
  constexpr uint64_t kChunkBytes = uint64_t{1} << 20;
  message.clear();
  while (message.size() < length) {
    const uint64_t have = message.size();
    const uint64_t want = std::min(kChunkBytes, length - have);
    message.resize(have + want);
    const auto got =
        static_cast<uint64_t>(in.sgetn(message.data() + have, static_cast<std::streamsize>(want)));
    message.resize(have + got);
    if (got < want) break;
  }
  return message.size();
}

std::string RecordName(int64_t record, const ChakraNode* node) {
  if (record == 0) return "record 0 (GlobalMetadata)";
  if (node == nullptr) return fmt::format("record {} (node {})", record, record - 1);
  return fmt::format("record {} (node {}, id {})", record, record - 1, node->id);
}

Status ReadProtobufStream(TraceInputBuffer& in, ChakraTrace& trace) {
  std::string message;
  for (int64_t record = 0;; ++record) {
    DTSIM_ASSIGN_OR_RETURN(const std::optional<uint64_t> length, ReadRecordLength(in, record));
    if (!length) break;
    if (*length > kMaxChakraRecordBytes) {
      return Error(
          fmt::format("{} declares {} bytes, more than the {} MiB a record may hold: the "
                      "file is corrupt",
                      RecordName(record, nullptr), *length, kMaxChakraRecordBytes >> 20));
    }
    const uint64_t got = ReadRecordBytes(in, *length, message);
    if (got != *length) {
      if (in.error()) return *in.error();
      return Error(
          fmt::format("{} declares {} bytes but the file ends after {}: the file is "
                      "truncated",
                      RecordName(record, nullptr), *length, got));
    }
    int64_t& unknown = trace.stats.unknown_fields;
    if (record == 0) {
      Expected<ChakraMetadata> metadata = DecodeChakraMetadata(message, unknown);
      if (!metadata.ok()) {
        return Error(fmt::format("{}: {}", RecordName(0, nullptr), metadata.error().message()));
      }
      trace.version = std::move(metadata->version);
      trace.metadata = std::move(metadata->attrs);
      DTSIM_RETURN_IF_ERROR(CheckChakraVersion(trace.version));
      continue;
    }
    Expected<ChakraNode> node = DecodeChakraNode(message, unknown);
    if (!node.ok()) {
      return Error(fmt::format("{}: {}", RecordName(record, nullptr), node.error().message()));
    }
    trace.nodes.push_back(std::move(node).value());
  }
  if (in.error()) return *in.error();
  return Status::Ok();
}

// ---- JSON values ------------------------------------------------------------------------

// An integer written as a JSON number or, as proto3 JSON writes 64-bit ones, a string.
std::optional<int64_t> JsonInteger(const Json& value) {
  if (value.is_number_unsigned()) {
    const auto u = value.get<uint64_t>();
    return static_cast<int64_t>(u);  // uint64 ids above 2^63 keep their bit pattern
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_number_float()) {
    const double d = value.get<double>();
    if (std::trunc(d) == d && std::abs(d) < 9.0e18) return static_cast<int64_t>(d);
    return std::nullopt;
  }
  if (!value.is_string()) return std::nullopt;
  const auto& text = value.get_ref<const std::string&>();
  int64_t signed_value = 0;
  if (auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), signed_value);
      ec == std::errc() && end == text.data() + text.size() && !text.empty()) {
    return signed_value;
  }
  uint64_t unsigned_value = 0;
  if (auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), unsigned_value);
      ec == std::errc() && end == text.data() + text.size() && !text.empty()) {
    return static_cast<int64_t>(unsigned_value);
  }
  return std::nullopt;
}

std::optional<double> JsonReal(const Json& value) {
  if (value.is_number()) return value.get<double>();
  if (!value.is_string()) return std::nullopt;
  const auto& text = value.get_ref<const std::string&>();
  if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (text == "Infinity") return std::numeric_limits<double>::infinity();
  if (text == "-Infinity") return -std::numeric_limits<double>::infinity();
  return std::nullopt;
}

Error BadValue(std::string_view what, const std::string& location, const Json& value) {
  return Error(fmt::format("{} expected", what), location, JsonValueForError(value));
}

Expected<uint64_t> NodeId(const Json& value, const std::string& location) {
  const std::optional<int64_t> id = JsonInteger(value);
  if (!id) return BadValue("a node id (an integer)", location, value);
  return static_cast<uint64_t>(*id);
}

Status ReadIds(const Json& value, const std::string& location, std::vector<uint64_t>& out) {
  if (!value.is_array()) {  // the workload_graph form writes a lone parent as a number
    DTSIM_ASSIGN_OR_RETURN(const uint64_t id, NodeId(value, location));
    out.push_back(id);
    return Status::Ok();
  }
  for (size_t i = 0; i < value.size(); ++i) {
    DTSIM_ASSIGN_OR_RETURN(const uint64_t id, NodeId(value[i], fmt::format("{}[{}]", location, i)));
    out.push_back(id);
  }
  return Status::Ok();
}

// One element of an attribute's value, by its class.
Status AppendJsonElement(ChakraAttribute& attr, const Json& value, const std::string& location) {
  switch (ClassOf(attr.type)) {
    case AttributeClass::kBool:
      if (!value.is_boolean()) return BadValue("true or false", location, value);
      attr.integers.push_back(value.get<bool>() ? 1 : 0);
      return Status::Ok();
    case AttributeClass::kReal: {
      const std::optional<double> real = JsonReal(value);
      if (!real) return BadValue("a number", location, value);
      attr.reals.push_back(*real);
      return Status::Ok();
    }
    case AttributeClass::kText:
      if (!value.is_string()) return BadValue("a string", location, value);
      attr.texts.push_back(value.get<std::string>());
      return Status::Ok();
    case AttributeClass::kInteger: {
      const std::optional<int64_t> integer = JsonInteger(value);
      if (!integer) return BadValue("an integer", location, value);
      attr.integers.push_back(*integer);
      return Status::Ok();
    }
  }
  return Status::Ok();
}

// A proto3 JSON AttributeProto: {"name", "docString"?, "<type>Val": v | "<type>List": {values}}.
Expected<ChakraAttribute> AttributeFromJson(const Json& json, const std::string& location) {
  if (!json.is_object()) return BadValue("an attribute object", location, json);
  ChakraAttribute attr;
  bool has_value = false;
  for (const auto& [key, value] : json.items()) {
    const std::string where = fmt::format("{}.{}", location, key);
    if (key == "name" || key == "docString" || key == "doc_string") {
      if (!value.is_string()) return BadValue("a string", where, value);
      (key == "name" ? attr.name : attr.doc_string) = value.get<std::string>();
      continue;
    }
    const std::optional<AttributeType> type = AttributeTypeFromJsonKey(key);
    if (!type) return Error("not an AttributeProto field", where, key);
    attr.type = *type;
    has_value = true;
    if (!IsList(*type)) {
      DTSIM_RETURN_IF_ERROR(AppendJsonElement(attr, value, where));
      continue;
    }
    const Json* values = value.is_object() && value.contains("values") ? &value["values"] : nullptr;
    if (value.is_object() && values == nullptr) continue;  // an empty list
    if (values == nullptr || !values->is_array()) {
      return BadValue("{\"values\": [...]}", where, value);
    }
    for (size_t i = 0; i < values->size(); ++i) {
      DTSIM_RETURN_IF_ERROR(
          AppendJsonElement(attr, (*values)[i], fmt::format("{}.values[{}]", where, i)));
    }
  }
  if (!has_value) return Error("the attribute has no value", location, JsonValueForError(json));
  return attr;
}

// A JSON scalar or array of integers as the attribute a converter would have written.
std::optional<ChakraAttribute> AttributeFromPlainValue(const std::string& name, const Json& value) {
  if (value.is_boolean()) return ChakraAttribute::Bool(name, value.get<bool>());
  if (value.is_number_integer()) {
    return ChakraAttribute::Integer(name, AttributeType::kInt64, *JsonInteger(value));
  }
  if (value.is_number_float()) {
    ChakraAttribute attr;
    attr.name = name;
    attr.type = AttributeType::kDouble;
    attr.reals = {value.get<double>()};
    return attr;
  }
  if (value.is_string()) return ChakraAttribute::String(name, value.get<std::string>());
  if (value.is_array()) {
    std::vector<int64_t> integers;
    for (const Json& element : value) {
      const std::optional<int64_t> integer =
          element.is_number_integer() ? JsonInteger(element) : std::nullopt;
      if (!integer) return std::nullopt;
      integers.push_back(*integer);
    }
    return ChakraAttribute::Int64List(name, std::move(integers));
  }
  return std::nullopt;
}

Status IoFromJson(const Json& json, const std::string& location, ChakraIoInfo& io) {
  if (!json.is_object()) return BadValue("an object", location, json);
  for (const auto& [key, value] : json.items()) {
    std::string* slot = key == "values"   ? &io.values
                        : key == "shapes" ? &io.shapes
                        : key == "types"  ? &io.types
                                          : nullptr;
    if (slot == nullptr) continue;
    if (!value.is_string()) return BadValue("a string", fmt::format("{}.{}", location, key), value);
    *slot = value.get<std::string>();
  }
  return Status::Ok();
}

Expected<ChakraNodeType> NodeTypeFromJson(const Json& value, const std::string& location) {
  if (value.is_string()) {
    if (const auto type = ChakraNodeTypeFromName(value.get<std::string>())) return *type;
  }
  const std::optional<int64_t> number = value.is_string() ? std::nullopt : JsonInteger(value);
  if (number && *number >= 0 && *number < kChakraNodeTypeCount) {
    return static_cast<ChakraNodeType>(*number);
  }
  return BadValue("a Chakra NodeType (COMP_NODE, COMM_COLL_NODE, ... or 0..7)", location, value);
}

Expected<uint64_t> ReadMicros(const Json& value, const std::string& location) {
  const std::optional<int64_t> micros = JsonInteger(value);
  if (!micros || *micros < 0)
    return BadValue("a non-negative integer of microseconds", location, value);
  return static_cast<uint64_t>(*micros);
}

// ---- jsonizer: proto3 JSON messages -------------------------------------------------------

Status MetadataFromJson(const Json& json, ChakraTrace& trace) {
  for (const auto& [key, value] : json.items()) {
    if (key == "version") {
      if (!value.is_string()) return BadValue("a string", "GlobalMetadata.version", value);
      trace.version = value.get<std::string>();
    } else if (key == "attr" && value.is_array()) {
      for (size_t i = 0; i < value.size(); ++i) {
        DTSIM_ASSIGN_OR_RETURN(
            ChakraAttribute attr,
            AttributeFromJson(value[i], fmt::format("GlobalMetadata.attr[{}]", i)));
        trace.metadata.push_back(std::move(attr));
      }
    } else {
      ++trace.stats.unknown_fields;
    }
  }
  return CheckChakraVersion(trace.version);
}

Status JsonizerNodeField(const std::string& key, const Json& value, const std::string& where,
                         ChakraNode& node, int64_t& unknown_fields) {
  if (key == "id") {
    DTSIM_ASSIGN_OR_RETURN(node.id, NodeId(value, where));
  } else if (key == "name") {
    if (!value.is_string()) return BadValue("a string", where, value);
    node.name = value.get<std::string>();
  } else if (key == "type") {
    DTSIM_ASSIGN_OR_RETURN(node.type, NodeTypeFromJson(value, where));
  } else if (key == "ctrlDeps" || key == "ctrl_deps") {
    return ReadIds(value, where, node.ctrl_deps);
  } else if (key == "dataDeps" || key == "data_deps") {
    return ReadIds(value, where, node.data_deps);
  } else if (key == "startTimeMicros" || key == "start_time_micros") {
    DTSIM_ASSIGN_OR_RETURN(node.start_time_micros, ReadMicros(value, where));
  } else if (key == "durationMicros" || key == "duration_micros") {
    DTSIM_ASSIGN_OR_RETURN(node.duration_micros, ReadMicros(value, where));
  } else if (key == "inputs" || key == "outputs") {
    return IoFromJson(value, where, key == "inputs" ? node.inputs : node.outputs);
  } else if (key == "attr" && value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) {
      DTSIM_ASSIGN_OR_RETURN(ChakraAttribute attr,
                             AttributeFromJson(value[i], fmt::format("{}[{}]", where, i)));
      node.attrs.push_back(std::move(attr));
    }
  } else {
    ++unknown_fields;
  }
  return Status::Ok();
}

std::optional<std::string> AddJsonizerValue(Json& json, int64_t index, ChakraTrace& trace) {
  if (!json.is_object()) return fmt::format("JSON value {} of the stream is not an object", index);
  const bool is_metadata = index == 0 && !json.contains("id") && !json.contains("type");
  if (is_metadata) {
    const Status status = MetadataFromJson(json, trace);
    if (!status.ok()) return status.error().ToString();
    return std::nullopt;
  }
  ChakraNode node;
  const std::string location = fmt::format("node {}", trace.nodes.size());
  for (const auto& [key, value] : json.items()) {
    const Status status = JsonizerNodeField(key, value, fmt::format("{}.{}", location, key), node,
                                            trace.stats.unknown_fields);
    if (!status.ok()) return status.error().ToString();
  }
  trace.nodes.push_back(std::move(node));
  return std::nullopt;
}

// ---- workload_graph and the PyTorch host execution trace ---------------------------------

Status WorkloadNodeField(const std::string& key, const Json& value, const std::string& where,
                         ChakraNode& node) {
  if (key == "Id") {
    DTSIM_ASSIGN_OR_RETURN(node.id, NodeId(value, where));
  } else if (key == "Name") {
    if (!value.is_string()) return BadValue("a string", where, value);
    node.name = value.get<std::string>();
  } else if (key == "NodeType") {
    DTSIM_ASSIGN_OR_RETURN(node.type, NodeTypeFromJson(value, where));
  } else if (key == "ctrlDeps" || key == "ctrl_deps") {
    return ReadIds(value, where, node.ctrl_deps);
  } else if (key == "data_deps" || key == "dataDeps") {
    return ReadIds(value, where, node.data_deps);
  } else if (key == "runtime") {
    DTSIM_ASSIGN_OR_RETURN(node.duration_micros, ReadMicros(value, where));
  } else if (std::optional<ChakraAttribute> attr = AttributeFromPlainValue(key, value)) {
    node.attrs.push_back(std::move(*attr));
  } else {
    return BadValue("a scalar or a list of integers", where, value);
  }
  return Status::Ok();
}

// PyTorch ET node fields kept as attributes under the names Chakra's converter uses.
constexpr std::array<std::string_view, 7> kPytorchIntegerAttrs = {
    "rf_id", "fw_parent", "seq_id", "scope", "tid", "fw_tid", "stream"};

Status PytorchNodeField(const std::string& key, const Json& value, const std::string& where,
                        ChakraNode& node) {
  if (key == "id") {
    DTSIM_ASSIGN_OR_RETURN(node.id, NodeId(value, where));
  } else if (key == "name") {
    if (!value.is_string()) return BadValue("a string", where, value);
    node.name = value.get<std::string>();
  } else if (key == "parent" || key == "ctrl_deps") {
    return ReadIds(value, where, node.ctrl_deps);
  } else if (key == "inputs" || key == "outputs") {
    (key == "inputs" ? node.inputs : node.outputs).values = value.dump();
  } else if (key == "input_shapes" || key == "output_shapes") {
    (key == "input_shapes" ? node.inputs : node.outputs).shapes = value.dump();
  } else if (key == "input_types" || key == "output_types") {
    (key == "input_types" ? node.inputs : node.outputs).types = value.dump();
  } else if (key == "ts") {
    DTSIM_ASSIGN_OR_RETURN(node.start_time_micros, ReadMicros(value, where));
  } else if (key == "exclusive_dur") {  // what Chakra's converter simulates a CPU op for
    DTSIM_ASSIGN_OR_RETURN(node.duration_micros, ReadMicros(value, where));
  } else if (std::find(kPytorchIntegerAttrs.begin(), kPytorchIntegerAttrs.end(), key) !=
             kPytorchIntegerAttrs.end()) {
    const std::optional<int64_t> integer = JsonInteger(value);
    if (!integer) return BadValue("an integer", where, value);
    node.attrs.push_back(ChakraAttribute::Integer(key, AttributeType::kInt64, *integer));
  } else if (std::optional<ChakraAttribute> attr = AttributeFromPlainValue(key, value)) {
    node.attrs.push_back(std::move(*attr));
  }  // other structured fields (there are none in schema 1.x) are left out
  return Status::Ok();
}

// The root nodes PyTorch writes for the process and its threads carry no work.
bool IsPytorchMetadataNode(std::string_view name) {
  return name.starts_with("[pytorch|profiler|execution_trace|");
}

using NodeFieldReader = Status (*)(const std::string&, const Json&, const std::string&,
                                   ChakraNode&);

std::optional<std::string> AddElementNode(Json& json, NodeFieldReader read_field,
                                          std::string_view array_key, ChakraTrace& trace) {
  const std::string location = fmt::format("{}[{}]", array_key, trace.nodes.size());
  if (!json.is_object()) {
    return Error("a node object expected", location, JsonValueForError(json)).ToString();
  }
  ChakraNode node;
  for (const auto& [key, value] : json.items()) {
    const Status status = read_field(key, value, fmt::format("{}.{}", location, key), node);
    if (!status.ok()) return status.error().ToString();
  }
  trace.nodes.push_back(std::move(node));
  return std::nullopt;
}

void FinishPytorchNodes(ChakraTrace& trace) {
  for (ChakraNode& node : trace.nodes) {
    node.type =
        IsPytorchMetadataNode(node.name) ? ChakraNodeType::kMetadata : ChakraNodeType::kCompute;
    node.attrs.insert(node.attrs.begin(), ChakraAttribute::Bool("is_cpu_op", true));
  }
}

// Top-level members of the JSON forms become GlobalMetadata attributes.
void MembersToMetadata(const Json& members, ChakraTrace& trace) {
  for (const auto& [key, value] : members.items()) {
    if (std::optional<ChakraAttribute> attr = AttributeFromPlainValue(key, value)) {
      trace.metadata.push_back(std::move(*attr));
    } else {
      ++trace.stats.unknown_fields;
    }
  }
}

Status ReadJsonForm(std::istream& stream, TraceFormat format, ChakraTrace& trace) {
  std::optional<std::string> error;
  Json members = Json::object();
  switch (format) {
    case TraceFormat::kChakraJsonizer: {
      int64_t index = 0;
      error = StreamConcatenatedValues(
          stream, [&](Json& value) { return AddJsonizerValue(value, index++, trace); });
      break;
    }
    case TraceFormat::kChakraWorkloadGraph:
      error = StreamArrayElements(stream, "workload_graph", members, [&](Json& node) {
        return AddElementNode(node, WorkloadNodeField, "workload_graph", trace);
      });
      break;
    default:
      error = StreamArrayElements(stream, "nodes", members, [&](Json& node) {
        return AddElementNode(node, PytorchNodeField, "nodes", trace);
      });
      if (!error && members.contains("schema") && members["schema"].is_string()) {
        const Status status = CheckPytorchSchema(members["schema"].get<std::string>());
        if (!status.ok()) error = status.error().ToString();
      }
      if (!error) FinishPytorchNodes(trace);
  }
  if (error) return Error(*error);
  MembersToMetadata(members, trace);
  return Status::Ok();
}

// "protobuf", "jsonizer", "workload_graph", "pytorch_execution_trace".
std::string_view FormName(TraceFormat format) {
  std::string_view name = TraceFormatName(format);
  if (name.starts_with("chakra_")) name.remove_prefix(7);
  return name;
}

}  // namespace

Expected<ChakraTrace> ReadChakraTrace(const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(const TraceFormat format, DetectTraceFormat(path));
  if (!IsChakraFormat(format)) {
    return Error("a PyTorch profiler (Kineto) or Chrome trace, not a Chakra execution trace")
        .InFile(path);
  }
  DTSIM_ASSIGN_OR_RETURN(std::unique_ptr<TraceInputBuffer> buffer, TraceInputBuffer::Open(path));
  ChakraTrace trace;
  trace.file = path;
  Status status = Status::Ok();
  if (format == TraceFormat::kChakraProtobuf) {
    status = ReadProtobufStream(*buffer, trace);
  } else {
    std::istream stream(buffer.get());
    status = ReadJsonForm(stream, format, trace);
    if (buffer->error()) status = *buffer->error();  // a truncated gzip reads as an early end
  }
  if (!status.ok()) return std::move(status).error().InFile(path);
  trace.stats.form = FormName(format);
  trace.stats.bytes = buffer->bytes_read();
  trace.stats.file_bytes = buffer->file_bytes();
  trace.stats.gzip = buffer->compressed();
  trace.CountNodes();
  return trace;
}

}  // namespace dtsim::traces
