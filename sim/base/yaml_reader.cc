#include "sim/base/yaml_reader.h"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include "sim/base/atomic_file.h"

namespace dtsim {
namespace {

// yaml-cpp's marks count from 0; a mark it made up has none.
std::string Where(const YAML::Mark& mark) {
  if (mark.is_null()) return {};
  return fmt::format("line {}, column {}", mark.line + 1, mark.column + 1);
}

// Thrown from the event handler to stop yaml-cpp's parser at the first error.
struct Stop {
  Error error;
};

// Builds the JSON value from yaml-cpp's parser events. yaml-cpp's node API is not used: its
// YAML::LoadAll never returns on some malformed inputs (it keeps starting empty documents), so
// the documents are taken one at a time here.
class JsonBuilder : public YAML::EventHandler {
 public:
  explicit JsonBuilder(const std::string& file) : file_(file) {}

  Json TakeRoot() { return std::move(root_).value_or(Json(nullptr)); }
  const YAML::Mark& start() const { return start_; }

  void OnDocumentStart(const YAML::Mark& mark) override { start_ = mark; }
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    Complete(Json(nullptr), 1, anchor, mark, /*key_like=*/false);
  }
  void OnScalar(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                const std::string& value) override {
    Complete(Json(value), 1, anchor, mark, /*key_like=*/true);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    const auto found = anchors_.find(anchor);
    if (found == anchors_.end()) Fail("an alias of the node it is in", mark);
    Complete(found->second.first, found->second.second, 0, mark, /*key_like=*/false);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value /*style*/) override {
    Open(Json::array(), anchor, mark);
  }
  void OnMapStart(const YAML::Mark& mark, const std::string& /*tag*/, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value /*style*/) override {
    Open(Json::object(), anchor, mark);
  }
  void OnSequenceEnd() override { Close(); }
  void OnMapEnd() override { Close(); }

 private:
  // A mapping or sequence being read: its values so far, how many values it holds in all, the
  // key read and waiting for its value.
  struct Collection {
    Json value;
    int64_t values = 1;
    YAML::anchor_t anchor = 0;
    YAML::Mark mark;
    std::optional<std::string> key;
    std::vector<Json> merges;  // the mappings of YAML's merge key (`<<: *base`), in order
  };

  [[noreturn]] void Fail(std::string message, const YAML::Mark& mark,
                         std::string value = {}) const {
    throw Stop{Error(std::move(message), Where(mark), std::move(value)).InFile(file_)};
  }

  void Count(int64_t values, const YAML::Mark& mark) {
    values_ += values;
    if (values_ > kMaxYamlValues) {
      Fail(fmt::format("more than {} values (aliases expanded)", kMaxYamlValues), mark);
    }
  }

  void Open(Json value, YAML::anchor_t anchor, const YAML::Mark& mark) {
    if (static_cast<int>(open_.size()) >= kMaxYamlDepth) {
      Fail(fmt::format("nested deeper than {} levels", kMaxYamlDepth), mark);
    }
    if (!open_.empty() && open_.back().value.is_object() && !open_.back().key) {
      Fail("a mapping key that is not a plain value", mark);
    }
    Count(1, mark);
    open_.push_back({.value = std::move(value), .anchor = anchor, .mark = mark});
  }

  void Close() {
    Collection closed = std::move(open_.back());
    open_.pop_back();
    if (closed.key) Fail("a key without a value", closed.mark, *closed.key);
    // A key of the mapping itself wins over a merged one, an earlier merge over a later one.
    for (const Json& merged : closed.merges) {
      for (const auto& [key, item] : merged.items()) {
        if (!closed.value.contains(key)) closed.value[key] = item;
      }
    }
    Complete(std::move(closed.value), closed.values, closed.anchor, closed.mark,
             /*key_like=*/false, /*counted=*/true);
  }

  // A value read whole: the root, an item of the open sequence, or the open mapping's key or
  // its value. `values`: how many values it holds (itself included), for the budget.
  void Complete(Json value, int64_t values, YAML::anchor_t anchor, const YAML::Mark& mark,
                bool key_like, bool counted = false) {
    if (!counted) Count(values, mark);
    if (anchor != 0) {  // the copy kept for its aliases counts too (anchors nested 64 deep)
      Count(values, mark);
      anchors_[anchor] = {value, values};
    }
    if (open_.empty()) {
      root_ = std::move(value);
      return;
    }
    Collection& parent = open_.back();
    parent.values += values;
    if (parent.value.is_array()) {
      parent.value.push_back(std::move(value));
    } else if (!parent.key) {
      if (!key_like) Fail("a mapping key that is not a plain value", mark);
      if (parent.value.contains(value.get<std::string>())) {
        Fail("a key given twice in one mapping", mark, value.get<std::string>());
      }
      parent.key = value.get<std::string>();
    } else if (*parent.key == "<<") {
      if (value.is_object()) value = Json::array({std::move(value)});
      if (!value.is_array()) Fail("a merge key (<<) takes mappings", mark);
      for (Json& merged : value) {
        if (!merged.is_object()) Fail("a merge key (<<) takes mappings", mark);
        parent.merges.push_back(std::move(merged));
      }
      parent.key.reset();
    } else {
      parent.value[*parent.key] = std::move(value);
      parent.key.reset();
    }
  }

  const std::string& file_;
  std::vector<Collection> open_;
  std::map<YAML::anchor_t, std::pair<Json, int64_t>> anchors_;
  std::optional<Json> root_;
  YAML::Mark start_ = YAML::Mark::null_mark();
  int64_t values_ = 0;
};

}  // namespace

Expected<Json> ParseYaml(std::string_view text, const std::string& file) {
  std::istringstream in{std::string(text)};
  try {
    YAML::Parser parser(in);
    JsonBuilder builder(file);
    if (!parser.HandleNextDocument(builder)) return Json(nullptr);
    Json root = builder.TakeRoot();
    JsonBuilder next(file);
    if (parser.HandleNextDocument(next)) {
      return Error("several YAML documents; expected one", Where(next.start())).InFile(file);
    }
    return root;
  } catch (const YAML::Exception& e) {
    return Error(fmt::format("not valid YAML: {}", e.msg), Where(e.mark)).InFile(file);
  } catch (Stop& stop) {
    return std::move(stop.error);
  }
}

Expected<Json> ReadYamlFile(const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(const std::string text, ReadFile(path, FileContent::kTextOrGzip));
  return ParseYaml(text, path);
}

}  // namespace dtsim
