#include "tools/api/sweep_axes.h"

#include "sim/base/strings.h"
#include "strategies/config.h"

namespace dtsim::api {

std::vector<std::string> SplitValues(std::string_view text) {
  std::vector<std::string> values;
  std::string current;
  int depth = 0;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '\\' && i + 1 < text.size())
        current += text[i++];
      else if (c == '"')
        quoted = false;
    } else if (c == '"') {
      quoted = true;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (c == ',' && depth == 0) {
      values.push_back(std::move(current));
      current.clear();
      continue;
    }
    current += c;
  }
  values.push_back(std::move(current));
  return values;
}

Expected<Axis> ParseVary(const std::string& text) {
  const size_t equals = text.find('=');
  if (equals == std::string::npos || equals == 0) {
    return Error("expected KEY.PATH=V1,V2,...", "--vary", Quote(text));
  }
  Axis axis{.key = text.substr(0, equals),
            .values = SplitValues(std::string_view(text).substr(equals + 1))};
  for (const std::string& value : axis.values) {
    if (value.empty()) return Error("empty value in the list", "--vary", Quote(text));
  }
  return axis;
}

Status CheckKey(const Json& base, const Axis& axis, const std::string& source) {
  Json trial = base;
  DTSIM_RETURN_IF_ERROR(strategies::ApplyOverride(trial, axis.key + "=" + axis.values.front()));
  Expected<strategies::ResolvedConfig> config = strategies::ConfigFromJson(trial, source);
  if (config.ok()) return Status::Ok();
  const Error& error = config.error();
  const std::string& at = error.location();
  const bool on_path = axis.key == at || axis.key.starts_with(at + ".");
  if (on_path && error.message().starts_with("unknown key")) {
    return Error(error.message(), axis.key);
  }
  return Status::Ok();  // other errors belong to points (a value may be bad with others only)
}

OrderedJson ValueJson(const std::string& text) {
  if (FindJsonNestingPastLimit(text, kMaxJsonDepth)) return OrderedJson(text);
  OrderedJson parsed = OrderedJson::parse(text, nullptr, /*allow_exceptions=*/false);
  return parsed.is_discarded() ? OrderedJson(text) : parsed;
}

}  // namespace dtsim::api
