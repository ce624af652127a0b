// config.h's --set overrides: "a.b.c=value" applied to a config's JSON before it is read.
#include <fmt/format.h>

#include <string>
#include <string_view>
#include <vector>

#include "sim/base/strings.h"
#include "strategies/config.h"

namespace dtsim::strategies {
namespace {

Status SplitAssignment(std::string_view assignment, std::vector<std::string>& keys,
                       std::string& value) {
  const size_t equals = assignment.find('=');
  if (equals == std::string_view::npos || equals == 0) {
    return Error("expected KEY.PATH=VALUE", "--set", Quote(assignment));
  }
  value = std::string(assignment.substr(equals + 1));
  std::string_view path = assignment.substr(0, equals);
  while (!path.empty()) {
    const size_t dot = path.find('.');
    keys.emplace_back(path.substr(0, dot));
    if (keys.back().empty()) return Error("empty key in the path", "--set", Quote(assignment));
    path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
  }
  return Status::Ok();
}

}  // namespace

bool OverrideReplaces(std::string_view key, std::string_view earlier) {
  key = key.substr(0, key.find('='));
  earlier = earlier.substr(0, earlier.find('='));
  return earlier == key || (earlier.starts_with(key) && earlier[key.size()] == '.');
}

Status ApplyOverride(Json& config, std::string_view assignment) {
  std::vector<std::string> keys;
  std::string text;
  DTSIM_RETURN_IF_ERROR(SplitAssignment(assignment, keys, text));
  Json* node = &config;
  for (size_t i = 0; i + 1 < keys.size(); ++i) {
    if (!node->is_object()) {
      return Error(fmt::format("\"{}\" is not an object in the config", i == 0 ? "" : keys[i - 1]),
                   "--set", Quote(assignment));
    }
    // A preset name given as a string becomes {"preset": name} so fields can override it (a
    // compression method name, {"method": name}).
    Json& child = (*node)[keys[i]];
    if (child.is_string()) {
      const bool method = i == 0 && keys[i] == "compression";
      child = Json{{method ? "method" : "preset", child.get<std::string>()}};
    }
    // A size given as a number ("tensor": 8) becomes {"size": 8} so its options can be set.
    if (child.is_number_integer()) child = Json{{"size", child}};
    if (child.is_null()) child = Json::object();
    node = &child;
  }
  if (!node->is_object()) {
    return Error("the path does not lead to an object", "--set", Quote(assignment));
  }
  if (FindJsonNestingPastLimit(text, kMaxJsonDepth)) {
    return Error(fmt::format("the value nests deeper than {} levels", kMaxJsonDepth), "--set",
                 Quote(assignment.substr(0, 60)));
  }
  Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  // null removes the key: the field falls back to its default (a cluster sized to the plan).
  if (parsed.is_null()) {
    node->erase(keys.back());
    return Status::Ok();
  }
  (*node)[keys.back()] = parsed.is_discarded() ? Json(text) : parsed;
  return Status::Ok();
}

}  // namespace dtsim::strategies
