#include "sim/base/json_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "sim/base/atomic_file.h"
#include "sim/base/gzip.h"
#include "sim/base/quantity.h"
#include "sim/base/strings.h"

namespace dtsim {
namespace {

// Line and column (1-based) of a byte offset, for parse errors.
std::pair<size_t, size_t> LineAndColumn(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  size_t line = 1;
  size_t column = 1;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

}  // namespace

std::optional<size_t> FindJsonNestingPastLimit(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

Expected<Json> ParseJson(std::string_view text, const std::string& file) {
  if (const std::optional<size_t> offset = FindJsonNestingPastLimit(text, kMaxJsonDepth)) {
    const auto [line, column] = LineAndColumn(text, *offset);
    return Error(fmt::format("JSON nested deeper than {} levels", kMaxJsonDepth),
                 fmt::format("line {}, column {}", line, column))
        .InFile(file);
  }
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    // nlohmann's byte is one past the offending character.
    const auto [line, column] = LineAndColumn(text, e.byte == 0 ? 0 : e.byte - 1);
    std::string reason = e.what();
    const size_t colon = reason.rfind(": ");
    if (colon != std::string::npos) reason = reason.substr(colon + 2);
    return Error("invalid JSON: " + reason, fmt::format("line {}, column {}", line, column))
        .InFile(file);
  } catch (const Json::exception& e) {  // a number too large for a double ("1e400")
    std::string reason = e.what();
    if (const size_t bracket = reason.find("] "); bracket != std::string::npos) {
      reason = reason.substr(bracket + 2);
    }
    return Error("invalid JSON: " + reason).InFile(file);
  }
}

Expected<Json> ReadJsonFile(const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(std::string text, ReadFile(path, FileContent::kJsonOrGzip));
  if (LooksGzipped(text)) {
    DTSIM_ASSIGN_OR_RETURN(text, InflateGzip(text, path));
  }
  return ParseJson(text, path);
}

std::string JsonChildPath(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}

std::string JsonIndexPath(const std::string& parent, size_t index) {
  return fmt::format("{}[{}]", parent, index);
}

std::string JsonValueForError(const Json& value) {
  std::string text = DumpJson(value);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

Expected<JsonObjectReader> JsonObjectReader::Make(const Json& value, std::string path) {
  if (!value.is_object()) {
    return Error("expected a JSON object", path, JsonValueForError(value));
  }
  return JsonObjectReader(value, std::move(path));
}

bool JsonObjectReader::Has(std::string_view key) const { return object_->contains(key); }

const Json* JsonObjectReader::Find(std::string_view key) {
  Allow(key);
  const auto it = object_->find(key);
  return it == object_->end() ? nullptr : &*it;
}

void JsonObjectReader::Allow(std::string_view key) {
  if (std::find(known_keys_.begin(), known_keys_.end(), key) == known_keys_.end()) {
    known_keys_.push_back(key);
  }
}

Expected<const Json*> JsonObjectReader::Required(std::string_view key) {
  const Json* value = Find(key);
  if (value == nullptr) return Error("missing required field", JsonChildPath(path_, key));
  return value;
}

Error JsonObjectReader::TypeError(std::string_view key, std::string_view expected,
                                  const Json& value) const {
  return Error(fmt::format("expected {}", expected), JsonChildPath(path_, key),
               JsonValueForError(value));
}

Expected<std::string> JsonObjectReader::String(std::string_view key) {
  DTSIM_ASSIGN_OR_RETURN(const Json* value, Required(key));
  if (!value->is_string()) return TypeError(key, "a string", *value);
  return value->get<std::string>();
}

Expected<std::string> JsonObjectReader::StringOr(std::string_view key, std::string fallback) {
  if (!Has(key)) {
    Allow(key);
    return fallback;
  }
  return String(key);
}

Status JsonObjectReader::ReadOptional(std::string_view key, int64_t min, int64_t max,
                                      int64_t& out) {
  const Json* value = Find(key);
  if (value == nullptr) return Status::Ok();
  DTSIM_ASSIGN_OR_RETURN(out, JsonToInt(*value, JsonChildPath(path_, key), min, max));
  return Status::Ok();
}

Error JsonObjectReader::TooLarge(std::string_view key, int64_t most) const {
  return Error(fmt::format("too large: at most {}", most), JsonChildPath(path_, key),
               JsonValueForError(*object_->find(key)));
}

Status JsonObjectReader::ReadOptional(std::string_view key, bool& out) {
  const Json* value = Find(key);
  if (value == nullptr) return Status::Ok();
  if (!value->is_boolean()) {
    return Error("expected true or false", JsonChildPath(path_, key), JsonValueForError(*value));
  }
  out = value->get<bool>();
  return Status::Ok();
}

Status JsonObjectReader::ReadOptionalChoice(std::string_view key,
                                            std::span<const std::string_view> names,
                                            size_t& index) {
  Allow(key);
  if (!Has(key)) return Status::Ok();
  DTSIM_ASSIGN_OR_RETURN(const std::string name, String(key));
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) {
      index = i;
      return Status::Ok();
    }
  }
  return Error(
      fmt::format("unknown {}{}; known: {}", key, DidYouMean(name, names), JoinQuoted(names)),
      JsonChildPath(path_, key), Quote(name));
}

Expected<int64_t> JsonToInt(const Json& value, const std::string& path, int64_t min, int64_t max) {
  int64_t result = 0;
  if (value.is_number_integer()) {
    if (value.is_number_unsigned() &&
        value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Error("integer out of range", path, JsonValueForError(value));
    }
    result = value.get<int64_t>();
  } else if (value.is_number_float() && value.get<double>() == std::floor(value.get<double>()) &&
             std::abs(value.get<double>()) < 9.0e15) {
    result = static_cast<int64_t>(value.get<double>());  // 1e6 written in exponent form
  } else {
    return Error("expected an integer", path, JsonValueForError(value));
  }
  if (result < min || result > max) {
    return Error(max == std::numeric_limits<int64_t>::max()
                     ? fmt::format("must be at least {}", min)
                     : fmt::format("must be in [{}, {}]", min, max),
                 path, JsonValueForError(value));
  }
  return result;
}

Expected<int64_t> JsonObjectReader::Int(std::string_view key) {
  DTSIM_ASSIGN_OR_RETURN(const Json* value, Required(key));
  return JsonToInt(*value, JsonChildPath(path_, key), std::numeric_limits<int64_t>::min(),
                   std::numeric_limits<int64_t>::max());
}

Expected<int64_t> JsonObjectReader::IntOr(std::string_view key, int64_t fallback) {
  if (!Has(key)) {
    Allow(key);
    return fallback;
  }
  return Int(key);
}

Expected<double> JsonObjectReader::Number(std::string_view key) {
  DTSIM_ASSIGN_OR_RETURN(const Json* value, Required(key));
  if (!value->is_number()) return TypeError(key, "a number", *value);
  return value->get<double>();
}

namespace {
template <typename T, typename Parser>
Expected<T> ReadQuantity(JsonObjectReader& reader, std::string_view key, Parser parse,
                         std::string_view example) {
  const Json* value = reader.Find(key);
  const std::string path = JsonChildPath(reader.path(), key);
  if (value == nullptr) return Error("missing required field", path);
  if (!value->is_string()) {
    return Error(fmt::format("expected a quantity with a unit, such as \"{}\"", example), path,
                 JsonValueForError(*value));
  }
  Expected<T> parsed = parse(value->get<std::string>());
  if (!parsed.ok()) return std::move(parsed).error().Under(path);
  return parsed;
}
}  // namespace

Expected<DurationNs> JsonObjectReader::Duration(std::string_view key) {
  return ReadQuantity<DurationNs>(*this, key, ParseDuration, "2 us");
}

Expected<Bytes> JsonObjectReader::Size(std::string_view key) {
  return ReadQuantity<Bytes>(*this, key, ParseBytes, "4 MiB");
}

Expected<Bandwidth> JsonObjectReader::Rate(std::string_view key) {
  return ReadQuantity<Bandwidth>(*this, key, ParseBandwidth, "100 Gbps");
}

Expected<int> JsonObjectReader::OneOf(std::string_view first, std::string_view second) {
  Allow(first);
  Allow(second);
  const bool has_first = Has(first);
  const bool has_second = Has(second);
  if (has_first && has_second) {
    return Error(fmt::format("give either \"{}\" or \"{}\", not both", first, second), path_);
  }
  if (!has_first && !has_second) {
    return Error(fmt::format("missing required field \"{}\" (or \"{}\")", first, second), path_);
  }
  return has_first ? 0 : 1;
}

Status JsonObjectReader::Finish() const {
  for (const auto& [key, value] : object_->items()) {
    if (std::find(known_keys_.begin(), known_keys_.end(), key) != known_keys_.end()) continue;
    std::string hint = DidYouMean(key, known_keys_);
    if (hint.empty()) hint = fmt::format(" (expected one of {})", JoinQuoted(known_keys_));
    return Error("unknown key" + hint, JsonChildPath(path_, key));
  }
  return Status::Ok();
}

}  // namespace dtsim
