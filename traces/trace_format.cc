#include "traces/trace_format.h"

#include <fmt/format.h>

#include <array>
#include <istream>
#include <memory>

#include "sim/base/json_reader.h"
#include "traces/chakra_wire.h"
#include "traces/json_stream.h"
#include "traces/protobuf_wire.h"
#include "traces/trace_input.h"

namespace dtsim::traces {
namespace {

// Enough for any GlobalMetadata seen in practice (a few hundred bytes).
constexpr size_t kSniffBytes = size_t{64} * 1024;

struct KeyFormat {
  std::string_view key;
  TraceFormat format;
};
// Top-level keys that belong to one JSON format only.
constexpr std::array<KeyFormat, 17> kDecidingKeys = {{
    {"traceEvents", TraceFormat::kKineto},
    {"schemaVersion", TraceFormat::kKineto},
    {"deviceProperties", TraceFormat::kKineto},
    {"distributedInfo", TraceFormat::kKineto},
    {"displayTimeUnit", TraceFormat::kKineto},
    {"baseTimeNanoseconds", TraceFormat::kKineto},
    {"workload_graph", TraceFormat::kChakraWorkloadGraph},
    {"nodes", TraceFormat::kPytorchExecutionTrace},
    {"schema", TraceFormat::kPytorchExecutionTrace},
    {"finish_ts", TraceFormat::kPytorchExecutionTrace},
    {"version", TraceFormat::kChakraJsonizer},
    {"attr", TraceFormat::kChakraJsonizer},
    {"id", TraceFormat::kChakraJsonizer},
    {"type", TraceFormat::kChakraJsonizer},
    {"dataDeps", TraceFormat::kChakraJsonizer},
    {"ctrlDeps", TraceFormat::kChakraJsonizer},
    {"durationMicros", TraceFormat::kChakraJsonizer},
}};

// Walks the JSON until a top-level key decides the format, then stops the parse.
class FormatSax : public NullSax {
 public:
  std::optional<TraceFormat> format;

  bool start_object(size_t /*size*/) { return Open(); }
  bool start_array(size_t /*size*/) {
    if (depth_ == 0) {
      format = TraceFormat::kKineto;  // a bare array of Chrome trace events
      return false;
    }
    return Open();
  }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }
  bool key(std::string& key) {
    if (depth_ != 1) return true;
    for (const KeyFormat& deciding : kDecidingKeys) {
      if (deciding.key == key) {
        format = deciding.format;
        return false;
      }
    }
    return true;
  }
  bool parse_error(size_t /*position*/, const std::string& /*token*/,
                   const nlohmann::detail::exception& /*exception*/) {
    return false;
  }

 private:
  bool Open() {
    ++depth_;
    return true;
  }
  bool Close() {
    --depth_;
    return depth_ > 0;  // the first value ended without a deciding key
  }
  int depth_ = 0;
};

Expected<std::string> ReadHead(const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(std::unique_ptr<TraceInputBuffer> buffer, TraceInputBuffer::Open(path));
  std::string head(kSniffBytes, '\0');
  head.resize(static_cast<size_t>(buffer->sgetn(head.data(), kSniffBytes)));
  if (head.empty() && buffer->error()) return *buffer->error();
  return head;
}

}  // namespace

std::string_view TraceFormatName(TraceFormat format) {
  switch (format) {
    case TraceFormat::kKineto:
      return "kineto";
    case TraceFormat::kChakraProtobuf:
      return "chakra_protobuf";
    case TraceFormat::kChakraJsonizer:
      return "chakra_jsonizer";
    case TraceFormat::kChakraWorkloadGraph:
      return "chakra_workload_graph";
    case TraceFormat::kPytorchExecutionTrace:
      return "pytorch_execution_trace";
  }
  return "unknown";
}

bool IsChakraFormat(TraceFormat format) { return format != TraceFormat::kKineto; }

bool LooksLikeChakraProtobuf(std::string_view head) {
  wire::Reader framing(head);
  const std::optional<uint64_t> length = framing.ReadVarint();
  if (!length || *length == 0 || *length > head.size() - framing.offset()) return false;
  int64_t unknown_fields = 0;
  const Expected<ChakraMetadata> metadata =
      DecodeChakraMetadata(head.substr(framing.offset(), *length), unknown_fields);
  return metadata.ok() && unknown_fields == 0;
}

Expected<TraceFormat> DetectTraceFormat(const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(const std::string head, ReadHead(path));
  if (head.empty()) return Error("the file is empty").InFile(path);
  if (LooksLikeChakraProtobuf(head)) return TraceFormat::kChakraProtobuf;
  const size_t first = head.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || (head[first] != '{' && head[first] != '[')) {
    return Error(fmt::format(
                     "not a trace dtsim reads: neither JSON nor a Chakra protobuf stream (first "
                     "byte 0x{:02x})",
                     static_cast<uint8_t>(head[first == std::string::npos ? 0 : first])))
        .InFile(path);
  }
  // The deciding key may lie past the head (after a large metadata member): parse the stream.
  DTSIM_ASSIGN_OR_RETURN(std::unique_ptr<TraceInputBuffer> buffer, TraceInputBuffer::Open(path));
  std::istream stream(buffer.get());
  FormatSax sax;
  Json::sax_parse(stream, &sax, Json::input_format_t::json, /*strict=*/false);
  return sax.format.value_or(TraceFormat::kKineto);  // Kineto's reader says what is missing
}

}  // namespace dtsim::traces
