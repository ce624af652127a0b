#include "traces/kineto_event.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>

#include <simdjson.h>

#include "sim/base/strings.h"
#include "traces/kineto_reader.h"

namespace dtsim::traces {
namespace od = simdjson::ondemand;

static_assert(kJsonSlicePadding >= simdjson::SIMDJSON_PADDING);

namespace {

// Writes `text` as a JSON string exactly as nlohmann's dump() does.
void DumpString(std::string_view text, std::string& out) {
  for (const char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == '"' || c == '\\') {
      out += Json(std::string(text)).dump();
      return;
    }
  }
  out += '"';
  out += text;
  out += '"';
}

}  // namespace

std::optional<int64_t> TrackId::Integer() const {
  if (is_number) return number;
  std::string_view digits = text;
  if (digits.starts_with("stream ")) digits.remove_prefix(7);
  while (!digits.empty() && digits.back() == ' ') digits.remove_suffix(1);
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty()) {
    return std::nullopt;
  }
  return value;
}

void EventArgs::Reset(bool present) {
  present_ = present;
  for (ArgValue& value : values_) value.type = ArgValue::Type::kAbsent;
}

int64_t EventArgs::Int(KinetoArg key, int64_t fallback) const {
  const ArgValue& value = Get(key);
  switch (value.type) {
    case ArgValue::Type::kInteger:
    case ArgValue::Type::kUnsigned:
      return value.integer;
    case ArgValue::Type::kFloat:
      return static_cast<int64_t>(std::llround(value.real));
    default:
      return fallback;
  }
}

std::string EventArgs::String(KinetoArg key) const {
  std::string out;
  AppendString(key, out);
  return out;
}

void EventArgs::AppendString(KinetoArg key, std::string& out) const {
  const ArgValue& value = Get(key);
  switch (value.type) {
    case ArgValue::Type::kAbsent:
      return;
    case ArgValue::Type::kInteger:
      fmt::format_to(std::back_inserter(out), "{}", value.integer);
      return;
    case ArgValue::Type::kUnsigned:
      fmt::format_to(std::back_inserter(out), "{}", static_cast<uint64_t>(value.integer));
      return;
    case ArgValue::Type::kFloat:
      out += Json(value.real).dump();
      return;
    case ArgValue::Type::kString:
    case ArgValue::Type::kJson:
      out += value.text;
      return;
  }
}

void EventArgs::AppendDump(KinetoArg key, std::string& out) const {
  const ArgValue& value = Get(key);
  if (value.type == ArgValue::Type::kString) {
    DumpString(value.text, out);
  } else {
    AppendString(key, out);
  }
}

void RawEvent::Clear() {
  name.clear();
  cat.clear();
  ph.clear();
  ts_ns.reset();
  dur_ns.reset();
  bad_time = false;
  pid.Clear();
  tid.Clear();
  args.Reset(false);
}

namespace {

enum class NumberShape : uint8_t { kInvalid, kInteger, kFraction, kExponent };

// A JSON number's grammar, -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, and which parts it has.
NumberShape ShapeOfNumber(std::string_view text) {
  size_t i = 0;
  const auto digits = [&] {
    const size_t start = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    return i > start;
  };
  NumberShape shape = NumberShape::kInteger;
  if (i < text.size() && text[i] == '-') ++i;
  if (i < text.size() && text[i] == '0') {
    ++i;
  } else if (!digits()) {
    return NumberShape::kInvalid;
  }
  if (i < text.size() && text[i] == '.') {
    ++i;
    if (!digits()) return NumberShape::kInvalid;
    shape = NumberShape::kFraction;
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    if (!digits()) return NumberShape::kInvalid;
    shape = NumberShape::kExponent;
  }
  return i == text.size() ? shape : NumberShape::kInvalid;
}

std::string_view TrimRight(std::string_view text) {
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\n' ||
                           text.back() == '\r')) {
    text.remove_suffix(1);
  }
  return text;
}

// A number as nlohmann reads it: an integer when it fits 64 bits (signed, else unsigned), a
// double otherwise; a double that overflows is an error (nlohmann: "number overflow").
bool ReadNumber(std::string_view text, NumberShape shape, ArgValue& out) {
  if (shape == NumberShape::kInvalid) return false;
  const char* first = text.data();
  const char* last = first + text.size();
  if (shape == NumberShape::kInteger) {
    if (std::from_chars(first, last, out.integer).ec == std::errc()) {
      out.type = ArgValue::Type::kInteger;
      return true;
    }
    uint64_t value = 0;
    if (text[0] != '-' && std::from_chars(first, last, value).ec == std::errc()) {
      out.type = ArgValue::Type::kUnsigned;
      out.integer = static_cast<int64_t>(value);
      return true;
    }
  }
  out.type = ArgValue::Type::kFloat;
  if (std::from_chars(first, last, out.real).ec == std::errc()) return std::isfinite(out.real);
  const std::string copy(text);  // out of range: strtod says whether it over- or underflowed
  out.real = std::strtod(copy.c_str(), nullptr);
  return std::isfinite(out.real);
}

std::optional<KinetoArg> LookUpArg(std::string_view key) {
  struct Entry {
    std::string_view name;
    KinetoArg arg;
  };
  static constexpr Entry kArgs[] = {
      {"correlation", KinetoArg::kCorrelation},
      {"External id", KinetoArg::kExternalId},
      {"external id", KinetoArg::kExternalIdLower},
      {"Record function id", KinetoArg::kRecordFunctionId},
      {"Input Dims", KinetoArg::kInputDims},
      {"Input type", KinetoArg::kInputType},
      {"device", KinetoArg::kDevice},
      {"stream", KinetoArg::kStream},
      {"bytes", KinetoArg::kBytes},
      {"Collective name", KinetoArg::kCollectiveName},
      {"In msg nelems", KinetoArg::kInMsgNelems},
      {"dtype", KinetoArg::kDtype},
      {"Group size", KinetoArg::kGroupSize},
      {"Process Group Name", KinetoArg::kProcessGroupName},
      {"Process Group Ranks", KinetoArg::kProcessGroupRanks},
      {"cuda_sync_kind", KinetoArg::kCudaSyncKind},
      {"wait_on_stream", KinetoArg::kWaitOnStream},
      {"wait_on_cuda_event_record_corr_id", KinetoArg::kWaitOnEventRecord},
  };
  for (const Entry& entry : kArgs) {
    if (entry.name.size() == key.size() && entry.name == key) return entry.arg;
  }
  return std::nullopt;
}

// An element of an on-demand array or object into `out` (get() takes the result as an rvalue).
template <typename Result, typename T>
simdjson::error_code Take(Result& result, T& out) {
  return std::move(result).get(out);  // NOLINT(performance-move-const-arg): get() is &&-only
}

}  // namespace

// The walk over simdjson's on-demand values. Each function validates what it visits and
// returns false at the first problem, which `failure` then describes.
struct KinetoEventParser::Impl {
  od::parser parser;
  std::optional<JsonSplitError> failure;
  const JsonSlice* slice = nullptr;
  int64_t index = 0;

  bool Fail(simdjson::error_code code) {
    failure = JsonSplitError{
        fmt::format("{} (in the value at byte {})", simdjson::error_message(code), slice->offset),
        slice->offset};
    return false;
  }
  bool BadNumber(std::string_view text) {
    failure = JsonSplitError{fmt::format("invalid number {} (in the value at byte {})",
                                         Quote(text.substr(0, 40)), slice->offset),
                             slice->offset};
    return false;
  }

  bool CheckLength(std::string_view text) {
    if (text.size() <= kMaxTraceStringBytes) return true;
    failure = JsonSplitError{
        fmt::format("a string of {} bytes in traceEvents entry {}: more than the {} MiB a name "
                    "or argument may take",
                    text.size(), index, kMaxTraceStringBytes >> 20),
        slice->offset, /*syntax=*/false};
    return false;
  }

  template <typename V>
  bool GetString(V& value, std::string_view& text) {
    if (const auto code = value.get_string().get(text)) return Fail(code);
    return CheckLength(text);
  }

  // A number's text as written.
  template <typename V>
  bool Token(V& value, std::string_view& token) {
    auto result = value.raw_json_token();  // a value's is a view, a document's a result
    if constexpr (std::is_same_v<decltype(result), std::string_view>) {
      token = result;
    } else if (const auto code = std::move(result).get(token)) {
      return Fail(code);
    }
    token = TrimRight(token);
    return true;
  }

  template <typename V>
  bool GetNumber(V& value, ArgValue& number, std::string_view* raw = nullptr) {
    std::string_view token;
    if (!Token(value, token)) return false;
    if (raw != nullptr) *raw = token;
    return ReadNumber(token, ShapeOfNumber(token), number) || BadNumber(token);
  }

  // Only an exponent or hundreds of digits can overflow a double (its largest, ~1.8e308, has
  // 309 digits; under 300 characters cannot reach it); any other text with a number's grammar
  // is a valid number.
  bool ValidNumber(std::string_view token) {
    const NumberShape shape = ShapeOfNumber(token);
    if (shape == NumberShape::kInvalid) return BadNumber(token);
    if (token.size() < 300 && shape != NumberShape::kExponent) return true;
    ArgValue number;
    return ReadNumber(token, shape, number) || BadNumber(token);
  }

  template <typename V>
  bool GetType(V& value, od::json_type& type) {
    if (const auto code = value.type().get(type)) return Fail(code);
    return true;
  }

  // true, false or null, exactly: the token's whole text (a document's own atom is not
  // checked for what follows it).
  template <typename V>
  bool CheckAtom(V& value, od::json_type type, std::string* out = nullptr) {
    std::string_view token;
    if (!Token(value, token)) return false;
    const std::string_view word = type == od::json_type::null ? "null"
                                  : token.starts_with('t')    ? "true"
                                                              : "false";
    if (token != word) {
      return Fail(type == od::json_type::null
                      ? simdjson::N_ATOM_ERROR
                      : (word == "true" ? simdjson::T_ATOM_ERROR : simdjson::F_ATOM_ERROR));
    }
    if (out != nullptr) *out += word;
    return true;
  }

  // Calls on_member(key, value) for each member of the object `value`, keys unescaped.
  template <typename V, typename OnMember>
  bool Members(V& value, const OnMember& on_member) {
    od::object object;
    if (const auto code = value.get_object().get(object)) return Fail(code);
    for (auto member : object) {
      od::field field;
      std::string_view key;
      if (const auto code = Take(member, field)) return Fail(code);
      if (const auto code = field.unescaped_key().get(key)) return Fail(code);
      if (!on_member(key, field.value())) return false;
    }
    return true;
  }

  // Calls on_element(value) for each element of the array `value`.
  template <typename V, typename OnElement>
  bool Elements(V& value, const OnElement& on_element) {
    od::array array;
    if (const auto code = value.get_array().get(array)) return Fail(code);
    for (auto element : array) {
      od::value item;
      if (const auto code = Take(element, item)) return Fail(code);
      if (!on_element(item)) return false;
    }
    return true;
  }

  template <typename V>
  bool Skip(V& value) {
    od::json_type type{};
    if (!GetType(value, type)) return false;
    switch (type) {
      case od::json_type::object:
        return Members(value, [&](std::string_view, od::value& member) { return Skip(member); });
      case od::json_type::array:
        return Elements(value, [&](od::value& item) { return Skip(item); });
      case od::json_type::string: {
        std::string_view text;
        return GetString(value, text);
      }
      case od::json_type::number: {
        std::string_view token;
        return Token(value, token) && ValidNumber(token);
      }
      default:
        return CheckAtom(value, type);
    }
  }

  // The value as nlohmann would build it (objects keep the last of two equal keys).
  template <typename V>
  bool Build(V& value, Json& out) {
    od::json_type type{};
    if (!GetType(value, type)) return false;
    switch (type) {
      case od::json_type::object:
        out = Json::object();
        return Members(value, [&](std::string_view key, od::value& member) {
          Json item;
          if (!Build(member, item)) return false;
          out[std::string(key)] = std::move(item);
          return true;
        });
      case od::json_type::array:
        out = Json::array();
        return Elements(value, [&](od::value& item) {
          out.push_back(Json());
          return Build(item, out.back());
        });
      case od::json_type::string: {
        std::string_view text;
        if (!GetString(value, text)) return false;
        out = std::string(text);
        return true;
      }
      case od::json_type::number: {
        ArgValue number;
        if (!GetNumber(value, number)) return false;
        if (number.type == ArgValue::Type::kFloat) {
          out = number.real;
        } else if (number.integer < 0 && number.type == ArgValue::Type::kInteger) {
          out = number.integer;
        } else {  // nlohmann keeps non-negative integers unsigned
          out = static_cast<uint64_t>(number.integer);
        }
        return true;
      }
      case od::json_type::boolean: {
        std::string word;
        if (!CheckAtom(value, type, &word)) return false;
        out = word == "true";
        return true;
      }
      default:
        out = nullptr;
        return CheckAtom(value, type);
    }
  }

  // Appends the value's JSON as nlohmann's dump() writes it (arrays of numbers and plain
  // strings directly; objects and escaped strings through nlohmann).
  template <typename V>
  bool Dump(V& value, std::string& out) {
    od::json_type type{};
    if (!GetType(value, type)) return false;
    switch (type) {
      case od::json_type::array: {
        out += '[';
        bool first = true;
        const bool read = Elements(value, [&](od::value& item) {
          if (!first) out += ',';
          first = false;
          return Dump(item, out);
        });
        out += ']';
        return read;
      }
      case od::json_type::string: {
        std::string_view text;
        if (!GetString(value, text)) return false;
        DumpString(text, out);
        return true;
      }
      case od::json_type::number: {
        std::string_view token;
        if (!Token(value, token)) return false;
        // An integer of up to 18 characters (|n| < 10^18 < 2^63: an int64) is written as it
        // was read (but "-0" as "0").
        if (token.size() <= 18 && token != "-0" && ShapeOfNumber(token) == NumberShape::kInteger) {
          out += token;
          return true;
        }
        ArgValue number;
        if (!ReadNumber(token, ShapeOfNumber(token), number)) return BadNumber(token);
        if (number.type == ArgValue::Type::kFloat) {
          out += Json(number.real).dump();
        } else if (number.type == ArgValue::Type::kUnsigned) {
          fmt::format_to(std::back_inserter(out), "{}", static_cast<uint64_t>(number.integer));
        } else {
          fmt::format_to(std::back_inserter(out), "{}", number.integer);
        }
        return true;
      }
      case od::json_type::object: {
        Json built;
        if (!Build(value, built)) return false;
        out += built.dump();
        return true;
      }
      default:
        return CheckAtom(value, type, &out);
    }
  }

  bool Arg(od::value& value, ArgValue& arg) {
    od::json_type type{};
    if (!GetType(value, type)) return false;
    if (type == od::json_type::number) return GetNumber(value, arg);
    arg.text.clear();
    if (type == od::json_type::string) {
      std::string_view text;
      if (!GetString(value, text)) return false;
      arg.type = ArgValue::Type::kString;
      arg.text = text;
      return true;
    }
    arg.type = ArgValue::Type::kJson;
    return Dump(value, arg.text);
  }

  bool Args(od::value& value, EventArgs& args) {
    return Members(value, [&](std::string_view key, od::value& member) {
      const std::optional<KinetoArg> arg = LookUpArg(key);
      return arg ? Arg(member, args.Set(*arg)) : Skip(member);
    });
  }

  // `ts` or `dur`: decimal microseconds as written (a number's text, or a string).
  bool Time(od::value& value, od::json_type type, RawEvent& event, std::optional<int64_t>& ns) {
    std::string_view text;
    if (type == od::json_type::number) {
      if (!Token(value, text) || !ValidNumber(text)) return false;
    } else if (type == od::json_type::string) {
      if (!GetString(value, text)) return false;
    } else {
      return Skip(value);
    }
    ns = MicrosecondsTextToNs(text);
    if (!ns) event.bad_time = true;
    return true;
  }

  bool Track(od::value& value, od::json_type type, TrackId& track) {
    if (type == od::json_type::number) {
      ArgValue number;
      if (!GetNumber(value, number)) return false;
      track.is_number = number.type != ArgValue::Type::kFloat;
      track.number = track.is_number ? number.integer : 0;
      return true;
    }
    if (type == od::json_type::string) {
      std::string_view text;
      if (!GetString(value, text)) return false;
      track.text = text;
      return true;
    }
    return Skip(value);
  }

  bool Field(std::string_view key, od::value& value, RawEvent& event) {
    od::json_type type{};
    if (!GetType(value, type)) return false;
    std::string* text = key == "name"  ? &event.name
                        : key == "cat" ? &event.cat
                        : key == "ph"  ? &event.ph
                                       : nullptr;
    if (text != nullptr && type == od::json_type::string) {
      std::string_view value_text;
      if (!GetString(value, value_text)) return false;
      text->assign(value_text);
      return true;
    }
    if (key == "ts") return Time(value, type, event, event.ts_ns);
    if (key == "dur") return Time(value, type, event, event.dur_ns);
    if (key == "pid") return Track(value, type, event.pid);
    if (key == "tid") return Track(value, type, event.tid);
    if (key == "args" && type == od::json_type::object) {
      event.args.Reset(true);
      return Args(value, event.args);
    }
    if (key == "args" && type == od::json_type::array) event.args.Reset(true);
    return Skip(value);
  }

  bool Event(od::document& document, RawEvent& event) {
    return Members(document, [&](std::string_view key, od::value& member) {
      return Field(key, member, event);
    });
  }

  // A number, true, false or null standing alone in its slice is the whole slice: simdjson's
  // token for a document's own scalar ends where simdjson stops reading it, so "1<FF>2" (a form
  // feed, which JSON does not count as whitespace) read as the number 1. A string or container
  // ends where the splitter ended the slice.
  bool WholeScalar(od::document& document) {
    const std::string_view text = slice->text();
    if (text.empty() || text[0] == '{' || text[0] == '[' || text[0] == '"') return true;
    std::string_view token;
    if (!Token(document, token)) return false;
    return token.size() == TrimRight(text).size() || Fail(simdjson::TRAILING_CONTENT);
  }

  bool Start(const JsonSlice& text, int64_t entry, od::document& document) {
    slice = &text;
    index = entry;
    failure.reset();
    const auto code =
        parser.iterate(text.data, text.size, text.size + kJsonSlicePadding).get(document);
    return code == simdjson::SUCCESS || Fail(code);
  }
};

KinetoEventParser::KinetoEventParser() : impl_(std::make_unique<Impl>()) {}
KinetoEventParser::~KinetoEventParser() = default;

std::optional<JsonSplitError> KinetoEventParser::ParseEvent(const JsonSlice& slice, int64_t index,
                                                            RawEvent& event) {
  event.Clear();
  od::document document;
  if (impl_->Start(slice, index, document)) impl_->Event(document, event);
  return impl_->failure;
}

std::optional<JsonSplitError> KinetoEventParser::ParseValue(const JsonSlice& slice, int64_t index,
                                                            Json* json) {
  od::document document;
  if (impl_->Start(slice, index, document) && impl_->WholeScalar(document)) {
    if (json != nullptr) {
      impl_->Build(document, *json);
    } else {
      impl_->Skip(document);
    }
  }
  return impl_->failure;
}

}  // namespace dtsim::traces
