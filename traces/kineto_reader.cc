#include "traces/kineto_reader.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <filesystem>
#include <memory>
#include <utility>

#include "sim/base/json_reader.h"
#include "sim/base/strings.h"
#include "traces/json_splitter.h"
#include "traces/json_stream.h"
#include "traces/kineto_assembler.h"
#include "traces/kineto_event.h"
#include "traces/trace_input.h"

namespace dtsim::traces {
namespace {

// Walks the document's top levels as a strict parser would: the root object's members, whose
// traceEvents array is streamed entry by entry into the assembler while the other members are
// validated and the few ReadMetadata uses kept; or a bare array of events. Every value is
// validated by the event parser, every separator here.
class KinetoDocument {
 public:
  KinetoDocument(std::streambuf& in, KinetoAssembler& assembler, Json& metadata)
      : splitter_(in, kMaxTraceValueBytes, kMaxJsonDepth),
        assembler_(assembler),
        metadata_(metadata) {}

  bool saw_events() const { return saw_events_; }
  bool root_is_array() const { return root_is_array_; }

  std::optional<JsonSplitError> Read() {
    splitter_.SkipByteOrderMark();
    const std::optional<char> first = splitter_.Peek();
    std::optional<JsonSplitError> error;
    if (first == '{') {
      splitter_.Consume('{');
      error = Members();
    } else if (first == '[') {
      splitter_.Consume('[');
      root_is_array_ = saw_events_ = true;
      error = Events(1);
    } else {
      JsonSlice value;
      error = splitter_.Next(0, value);
      if (!error) error = parser_.ParseValue(value, assembler_.events(), nullptr);
    }
    if (error) return error;
    if (splitter_.Peek()) return Missing("the end of the document");
    return std::nullopt;
  }

 private:
  // A syntax error at the next byte, which is not `what` the grammar needs there.
  JsonSplitError Missing(std::string_view what) {
    const std::optional<char> next = splitter_.Peek();
    return JsonSplitError{next ? fmt::format("{} where {} was expected", QuoteChar(*next), what)
                               : fmt::format("unexpected end of input; expected {}", what),
                          splitter_.offset()};
  }

  // After the root's '{'.
  std::optional<JsonSplitError> Members() {
    if (splitter_.Consume('}')) return std::nullopt;
    for (;;) {
      if (splitter_.Peek() != '"') return Missing("a member name");
      JsonSlice key_text;
      Json key;
      if (auto error = splitter_.Next(1, key_text)) return error;
      if (auto error = parser_.ParseValue(key_text, assembler_.events(), &key)) return error;
      if (!splitter_.Consume(':')) return Missing("':'");
      if (auto error = Member(key.get<std::string>())) return error;
      if (splitter_.Consume(',')) continue;
      if (splitter_.Consume('}')) return std::nullopt;
      return Missing("',' or '}'");
    }
  }

  std::optional<JsonSplitError> Member(const std::string& key) {
    if (splitter_.Peek() == '[') {
      splitter_.Consume('[');
      if (key == "traceEvents") {
        saw_events_ = true;
        return Events(2);
      }
      return MetadataArray(key);
    }
    JsonSlice value;
    if (auto error = splitter_.Next(1, value)) return error;
    // Only what ReadMetadata reads is built; the rest is validated, and its key kept.
    Json& kept = metadata_[key];
    const bool build = key == "distributedInfo" || key == "baseTimeNanoseconds";
    kept = nullptr;
    return parser_.ParseValue(value, assembler_.events(), build ? &kept : nullptr);
  }

  // After a metadata member's '[': elements one at a time (an execution trace's "nodes" may be
  // large); deviceProperties' are kept.
  std::optional<JsonSplitError> MetadataArray(const std::string& key) {
    Json& kept = metadata_[key];
    kept = Json::array();
    const bool build = key == "deviceProperties";
    if (splitter_.Consume(']')) return std::nullopt;
    for (;;) {
      JsonSlice value;
      if (auto error = splitter_.Next(2, value)) return error;
      Json element;
      if (auto error = parser_.ParseValue(value, assembler_.events(), build ? &element : nullptr)) {
        return error;
      }
      if (build) kept.push_back(std::move(element));
      if (splitter_.Consume(',')) continue;
      if (splitter_.Consume(']')) return std::nullopt;
      return Missing("',' or ']'");
    }
  }

  // After the events array's '['; entries sit `depth` containers deep.
  std::optional<JsonSplitError> Events(int depth) {
    if (splitter_.Consume(']')) return std::nullopt;
    for (;;) {
      JsonSlice entry;
      if (auto error = splitter_.Next(depth, entry)) return error;
      if (entry.data[0] == '{') {
        if (auto error = parser_.ParseEvent(entry, assembler_.events(), event_)) return error;
        if (assembler_.events() >= kMaxTraceEvents) {
          return JsonSplitError{fmt::format("more than {} traceEvents entries: dtsim indexes a "
                                            "trace's events with 32 bits",
                                            kMaxTraceEvents),
                                entry.offset, /*syntax=*/false};
        }
        assembler_.Add(event_);
      } else {
        if (auto error = parser_.ParseValue(entry, assembler_.events(), nullptr)) return error;
        assembler_.Drop("traceEvents entry that is not an object");
      }
      if (splitter_.Consume(',')) continue;
      if (splitter_.Consume(']')) return std::nullopt;
      return Missing("',' or ']'");
    }
  }

  JsonSplitter splitter_;
  KinetoEventParser parser_;
  KinetoAssembler& assembler_;
  Json& metadata_;
  RawEvent event_;
  bool saw_events_ = false;
  bool root_is_array_ = false;
};

// A syntax error, described as nlohmann describes it (line, column, byte and what it
// expected): the file is read again, only now that it is known to be malformed. An input that
// cannot be read twice (a pipe) keeps the fast reader's description.
Error DescribeSyntaxError(const std::string& path, const JsonSplitError& found) {
  Error fallback =
      Error(fmt::format("JSON syntax error at byte {}: {}", found.offset, found.message))
          .InFile(path);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return fallback;
  Expected<std::unique_ptr<TraceInputBuffer>> buffer = TraceInputBuffer::Open(path);
  if (!buffer.ok()) return fallback;
  std::istream stream(buffer->get());
  NullSax sax;
  try {
    Json::sax_parse(stream, &sax, Json::input_format_t::json, /*strict=*/true);
  } catch (const std::exception& e) {  // nlohmann reports through parse_error; belt and braces
    return Error(fmt::format("cannot parse: {}", e.what())).InFile(path);
  }
  return sax.error() ? Error(*sax.error()).InFile(path) : fallback;
}

int64_t JsonInt(const Json& object, std::string_view key, int64_t fallback) {
  const auto it = object.find(key);
  if (it == object.end()) return fallback;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_number_float()) return static_cast<int64_t>(std::llround(it->get<double>()));
  return fallback;
}

std::string JsonString(const Json& object, std::string_view key) {
  if (!object.is_object()) return {};
  const auto it = object.find(key);
  if (it == object.end()) return {};
  return it->is_string() ? it->get<std::string>() : it->dump();
}

void ReadMetadata(const Json& metadata, Trace& trace) {
  const bool kineto = metadata.contains("schemaVersion") || metadata.contains("deviceProperties") ||
                      metadata.contains("distributedInfo");
  trace.format = kineto ? "kineto" : "chrome";
  if (const auto it = metadata.find("distributedInfo"); it != metadata.end() && it->is_object()) {
    trace.rank = static_cast<int32_t>(JsonInt(*it, "rank", -1));
    trace.world_size = static_cast<int32_t>(JsonInt(*it, "world_size", 0));
    trace.backend = JsonString(*it, "backend");
  }
  if (const auto it = metadata.find("deviceProperties");
      it != metadata.end() && it->is_array() && !it->empty()) {
    trace.gpu_name = JsonString((*it)[0], "name");
  }
  if (const auto it = metadata.find("baseTimeNanoseconds");
      it != metadata.end() && it->is_number_integer()) {
    trace.base_time_ns = it->get<int64_t>();
  }
}

}  // namespace

std::optional<int64_t> MicrosecondsTextToNs(std::string_view text) {
  if (text.empty()) return std::nullopt;
  size_t dot = std::string_view::npos;
  bool exponent = false;
  for (size_t i = 0; i < text.size(); ++i) {  // short texts: a loop beats find's memchr calls
    exponent = exponent || text[i] == 'e' || text[i] == 'E';
    if (text[i] == '.' && dot == std::string_view::npos) dot = i;
  }
  if (exponent) {
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value) ||
        std::abs(value) > 9e15) {
      return std::nullopt;
    }
    return std::llround(value * 1000.0);
  }
  const bool negative = text.front() == '-';
  if (negative) {
    text.remove_prefix(1);
    if (dot != std::string_view::npos) --dot;
  }
  const std::string_view whole = text.substr(0, dot);
  const std::string_view fraction = dot == std::string_view::npos ? "" : text.substr(dot + 1);
  constexpr int64_t kMaxMicroseconds = 9'000'000'000'000'000;  // ×1000 still fits an int64
  int64_t micros = 0;
  if (!whole.empty()) {
    const auto [end, ec] = std::from_chars(whole.data(), whole.data() + whole.size(), micros);
    if (ec != std::errc() || end != whole.data() + whole.size() || micros > kMaxMicroseconds) {
      return std::nullopt;
    }
  } else if (fraction.empty()) {
    return std::nullopt;
  }
  int64_t nanos = 0;
  for (size_t i = 0; i < fraction.size(); ++i) {
    const char c = fraction[i];
    if (c < '0' || c > '9') return std::nullopt;
    if (i < 3) nanos = nanos * 10 + (c - '0');
    if (i == 3 && c >= '5') ++nanos;  // round half up on the fourth decimal
  }
  for (size_t i = fraction.size(); i < 3; ++i) nanos *= 10;
  const int64_t ns = micros * 1000 + nanos;
  return negative ? -ns : ns;
}

Expected<Trace> ReadKinetoTrace(const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(std::unique_ptr<TraceInputBuffer> buffer, TraceInputBuffer::Open(path));
  Trace trace;
  trace.file = path;
  Json metadata = Json::object();
  KinetoAssembler assembler(trace);
  if (!buffer->compressed()) assembler.Reserve(buffer->file_bytes());
  KinetoDocument document(*buffer, assembler, metadata);
  const std::optional<JsonSplitError> error = document.Read();
  if (buffer->error()) return *buffer->error();
  if (error) {
    return error->syntax ? DescribeSyntaxError(path, *error) : Error(error->message).InFile(path);
  }
  if (!document.saw_events()) {
    const bool execution_trace = metadata.contains("nodes");
    return Error(execution_trace
                     ? "a PyTorch execution trace (\"nodes\"), not a profiler trace: it has no "
                       "traceEvents"
                     : "not a Kineto or Chrome trace: no \"traceEvents\" array and not a bare "
                       "array of events")
        .InFile(path);
  }
  ReadMetadata(metadata, trace);
  if (document.root_is_array()) trace.format = "chrome";
  trace.stats.bytes = buffer->bytes_read();
  trace.stats.file_bytes = buffer->file_bytes();
  trace.stats.gzip = buffer->compressed();
  assembler.Finish();
  return trace;
}

}  // namespace dtsim::traces
