// Strict reading of JSON inputs: typed field access that reports the JSON path and the bad
// value, units parsed with the quantity parser, and unknown keys rejected with a suggestion.
// Part of the base layer as a separate target (dtsim_json) because it needs nlohmann-json.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/status.h"
#include "sim/base/time.h"
#include "sim/base/units.h"

namespace dtsim {

using Json = nlohmann::json;

// The deepest nesting of arrays and objects any reader accepts. Real inputs nest a few levels
// (a config ~6, a trace event's args ~4); the limit keeps a hostile file from exhausting the
// stack of the recursive code that copies, compares or prints a JSON value.
inline constexpr int kMaxJsonDepth = 256;

// Parses JSON text; a syntax error names `file`, the line and column, and the parser's reason.
// Nesting deeper than kMaxJsonDepth is an error naming where the limit was crossed.
Expected<Json> ParseJson(std::string_view text, const std::string& file);
// The byte offset where `text` first opens an array or object deeper than `max_depth`, if it
// does (strings are skipped; the text need not be valid JSON).
std::optional<size_t> FindJsonNestingPastLimit(std::string_view text, int max_depth);
// Reads and parses a file, plain or gzip-compressed (detected by content: sim/base/gzip.h).
Expected<Json> ReadJsonFile(const std::string& path);

// The path of a child of `parent`: JsonChildPath("tasks[3]", "rank") == "tasks[3].rank".
std::string JsonChildPath(const std::string& parent, std::string_view key);
std::string JsonIndexPath(const std::string& parent, size_t index);
// A short rendering of a JSON value for error messages (truncated past 60 characters).
std::string JsonValueForError(const Json& value);

// `value` as JSON text, with bytes that are not UTF-8 (a path or a --set value from the
// command line) replaced by U+FFFD instead of nlohmann's exception. Every writer uses it.
template <typename AnyJson>
std::string DumpJson(const AnyJson& value, int indent = -1) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false, AnyJson::error_handler_t::replace);
}

// Reads one JSON object. Every getter records its key as known; Finish() reports any key of
// the object that no getter asked about, suggesting the nearest known key. Errors carry the
// object's path joined with the key; callers attribute them to a file with Error::InFile.
class JsonObjectReader {
 public:
  // Errors unless `value` is an object. The reader points into `value`, which must outlive it.
  static Expected<JsonObjectReader> Make(const Json& value, std::string path);

  const std::string& path() const { return path_; }
  bool Has(std::string_view key) const;
  // The raw value, or nullptr when absent; marks the key as known.
  const Json* Find(std::string_view key);
  // Declares a key as known without reading it (for keys read elsewhere or kept opaque).
  void Allow(std::string_view key);

  Expected<std::string> String(std::string_view key);
  Expected<std::string> StringOr(std::string_view key, std::string fallback);
  Expected<int64_t> Int(std::string_view key);
  Expected<int64_t> IntOr(std::string_view key, int64_t fallback);
  Expected<double> Number(std::string_view key);

  // The key holds a quantity string ("2 us", "1 MiB", "100 Gbps").
  Expected<DurationNs> Duration(std::string_view key);
  Expected<Bytes> Size(std::string_view key);
  Expected<Bandwidth> Rate(std::string_view key);

  // Optional fields: `out` keeps its value (a default, or a preset's) when the key is absent.
  // An integer in [min, max] ("must be at least 1, got -4"), a boolean, or one of `names`
  // (stored as its index; an unknown name suggests the nearest and lists them all).
  Status ReadOptional(std::string_view key, int64_t min, int64_t max, int64_t& out);
  Status ReadOptional(std::string_view key, bool& out);
  Status ReadOptionalChoice(std::string_view key, std::span<const std::string_view> names,
                            size_t& index);
  // An integer >= min that fits `Int` and is at most `cap` ("too large" otherwise).
  template <typename Int>
  Status ReadOptionalInt(std::string_view key, Int& out, int64_t min = 1,
                         int64_t cap = std::numeric_limits<int64_t>::max()) {
    int64_t value = out;
    DTSIM_RETURN_IF_ERROR(ReadOptional(key, min, std::numeric_limits<int64_t>::max(), value));
    const int64_t most = std::min<int64_t>(cap, std::numeric_limits<Int>::max());
    if (value > most) return TooLarge(key, most);
    out = static_cast<Int>(value);
    return Status::Ok();
  }
  template <typename Enum>
  Status ReadOptionalEnum(std::string_view key, std::span<const std::string_view> names,
                          Enum& out) {
    auto index = static_cast<size_t>(out);
    DTSIM_RETURN_IF_ERROR(ReadOptionalChoice(key, names, index));
    out = static_cast<Enum>(index);
    return Status::Ok();
  }

  // Errors unless exactly one of the two keys is present; returns which (0 = first).
  Expected<int> OneOf(std::string_view first, std::string_view second);

  Status Finish() const;

 private:
  JsonObjectReader(const Json& object, std::string path)
      : object_(&object), path_(std::move(path)) {}
  Expected<const Json*> Required(std::string_view key);
  Error TypeError(std::string_view key, std::string_view expected, const Json& value) const;
  Error TooLarge(std::string_view key, int64_t most) const;

  const Json* object_;
  std::string path_;
  std::vector<std::string_view> known_keys_;
};

// An integer in [min, max], else an error at `path` naming the value.
Expected<int64_t> JsonToInt(const Json& value, const std::string& path, int64_t min, int64_t max);

}  // namespace dtsim
