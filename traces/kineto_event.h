// One traceEvents entry as dtsim reads it, and its parser: simdjson's on-demand API over the
// entry's text (handed out by traces/json_splitter.h). The parser validates every byte of the
// entry, as strictly as nlohmann's parser (a trace either parses exactly or is an error), and
// keeps only the fields and args the assembler (traces/kineto_assembler.h) reads, with the
// meaning nlohmann's DOM gave them: the last of two equal keys wins, integers keep their text
// for `ts`/`dur`, and an arg read as text is the value as nlohmann writes it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "sim/base/json_reader.h"
#include "traces/json_splitter.h"

namespace dtsim::traces {

// A pid or tid: Kineto writes integers, and strings for its own tracks ("Spans", "stream 7").
struct TrackId {
  bool is_number = false;
  int64_t number = 0;
  std::string text;

  void Clear() {
    is_number = false;
    number = 0;
    text.clear();
  }
  // The integer, also from a numeric string or "stream 7"; nothing otherwise.
  std::optional<int64_t> Integer() const;
};

// The args the assembler reads.
enum class KinetoArg : uint8_t {
  kCorrelation,
  kExternalId,       // "External id"
  kExternalIdLower,  // "external id" (older traces)
  kRecordFunctionId,
  kInputDims,
  kInputType,
  kDevice,
  kStream,
  kBytes,
  kCollectiveName,
  kInMsgNelems,
  kDtype,
  kGroupSize,
  kProcessGroupName,
  kProcessGroupRanks,
  kCudaSyncKind,
  kWaitOnStream,
  kWaitOnEventRecord,  // "wait_on_cuda_event_record_corr_id"
  kCount,
};

struct ArgValue {
  enum class Type : uint8_t { kAbsent, kInteger, kUnsigned, kFloat, kString, kJson };
  Type type = Type::kAbsent;
  int64_t integer = 0;  // kInteger; kUnsigned's bits (as nlohmann's get<int64_t> reads them)
  double real = 0;      // kFloat
  std::string text;     // kString: the string; kJson: the value's JSON as nlohmann dumps it
};

class EventArgs {
 public:
  bool present() const { return present_; }
  // "args" was seen as an object or an array: forget earlier values.
  void Reset(bool present);
  ArgValue& Set(KinetoArg key) { return values_[static_cast<size_t>(key)]; }
  const ArgValue& Get(KinetoArg key) const { return values_[static_cast<size_t>(key)]; }
  bool Has(KinetoArg key) const { return Get(key).type != ArgValue::Type::kAbsent; }
  // A number, floats rounded; `fallback` for anything else.
  int64_t Int(KinetoArg key, int64_t fallback = -1) const;
  // A string as it is, any other value as its JSON text; empty when absent.
  std::string String(KinetoArg key) const;
  void AppendString(KinetoArg key, std::string& out) const;
  // Any value as its JSON text (a string quoted); nothing when absent.
  void AppendDump(KinetoArg key, std::string& out) const;

 private:
  bool present_ = false;
  std::array<ArgValue, static_cast<size_t>(KinetoArg::kCount)> values_;
};

// The fields of one traceEvents entry that dtsim reads.
struct RawEvent {
  std::string name;
  std::string cat;
  std::string ph;
  std::optional<int64_t> ts_ns;
  std::optional<int64_t> dur_ns;
  bool bad_time = false;
  TrackId pid;
  TrackId tid;
  EventArgs args;

  void Clear();
};

class KinetoEventParser {
 public:
  KinetoEventParser();
  ~KinetoEventParser();
  KinetoEventParser(const KinetoEventParser&) = delete;
  KinetoEventParser& operator=(const KinetoEventParser&) = delete;

  // Reads the object in `slice` into `event` (cleared first). `index` is the entry's number,
  // for the error about a string over kMaxTraceStringBytes (not a syntax error); anything
  // that is not valid JSON is a syntax error.
  std::optional<JsonSplitError> ParseEvent(const JsonSlice& slice, int64_t index, RawEvent& event);
  // Validates any JSON value; with `json`, also builds it as nlohmann would.
  std::optional<JsonSplitError> ParseValue(const JsonSlice& slice, int64_t index, Json* json);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dtsim::traces
