// What `dtsim sweep --vary KEY=V1,V2,...` reads: the axes of a sweep, and their checks against
// the config. Separate from the command so the fuzzer (tests/fuzz/overrides_fuzzer.cc)
// reaches them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sim/base/json_reader.h"
#include "sim/base/status.h"
#include "tools/cli/run_report.h"

namespace dtsim::api {

struct Axis {
  std::string key;
  std::vector<std::string> values;
};

// "a,b,[1,2],{"x": 1},"c,d"" → a | b | [1,2] | {"x": 1} | "c,d": commas at the top level only.
std::vector<std::string> SplitValues(std::string_view text);

// "KEY.PATH=V1,V2,...": errors name --vary and the text.
Expected<Axis> ParseVary(const std::string& text);

// An --vary key the config cannot have: the strict reader's "unknown key" at the key or one of
// its parents, with its suggestion. Other errors belong to the sweep's points.
Status CheckKey(const Json& base, const Axis& axis, const std::string& source);

// A value as the JSON it parses as, or as text (how --set and --vary read it); text nested
// deeper than kMaxJsonDepth stays text.
OrderedJson ValueJson(const std::string& text);

}  // namespace dtsim::api
