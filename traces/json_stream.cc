#include "traces/json_stream.h"

#include <fmt/format.h>

namespace dtsim::traces {

bool DomBuilder::Scalar(Json value) {
  Put(std::move(value));
  return Done();
}

void DomBuilder::Open(bool object) {
  stack_.push_back(Put(object ? Json::object() : Json::array()));
}

bool DomBuilder::Close() {
  stack_.pop_back();
  return Done();
}

bool DomBuilder::Done() {
  if (!stack_.empty()) return false;
  root_ = nullptr;
  return true;
}

Json* DomBuilder::Put(Json value) {
  if (stack_.empty()) {
    *root_ = std::move(value);
    return root_;
  }
  Json& top = *stack_.back();
  if (top.is_array()) {
    top.push_back(std::move(value));
    return &top.back();
  }
  Json& slot = top[key_];
  slot = std::move(value);
  return &slot;
}

std::string DescribeJsonSyntaxError(size_t position, const std::exception& exception) {
  // nlohmann's message: "[json.exception.parse_error.101] parse error at line 1, column 5:
  // syntax error while parsing value - unexpected end of input; expected '['".
  std::string what = exception.what();
  std::string where;
  if (const size_t at = what.find("parse error at "); at != std::string::npos) {
    const size_t colon = what.find(": ", at);
    if (colon != std::string::npos) {
      where = what.substr(at + 15, colon - at - 15);  // "line 1, column 5"
      what = what.substr(colon + 2);
    }
  }
  if (what.starts_with("syntax error ")) what = what.substr(13);
  if (where.empty()) {  // "[json.exception.out_of_range.406] number overflow parsing '1e400'"
    if (const size_t end = what.find("] ");
        what.starts_with("[json.") && end != std::string::npos) {
      what = what.substr(end + 2);
    }
    return fmt::format("JSON syntax error at byte {}: {}", position, what);
  }
  return fmt::format("JSON syntax error at {} (byte {}): {}", where, position, what);
}

bool SaxErrors::parse_error(size_t position, const std::string& /*last_token*/,
                            const nlohmann::detail::exception& exception) {
  error_ = DescribeJsonSyntaxError(position, exception);
  return false;
}

namespace {

// The SAX side of both streaming parsers. With an empty array key every root value is an
// element; otherwise the root must be an object, its member `array_key` an array whose entries
// are the elements, and every other member is built into `members`.
class ElementSax : public ValueSax<ElementSax> {
 public:
  ElementSax(std::string_view array_key, Json* members, const JsonElementSink& sink)
      : array_key_(array_key), members_(members), sink_(sink) {}

  bool key(std::string& key) {
    if (dom_.active()) {
      dom_.Key(key);
    } else {
      top_key_ = key;  // outside a built value, keys are the root object's
    }
    return true;
  }

 private:
  // Where a value that starts outside any built value goes; nullptr for the containers that
  // are walked, not built (the root object, the element array).
  Json* Slot(bool opens_array) {
    if (array_key_.empty() || (in_array_ && depth_ == 2)) {
      building_element_ = true;
      return &element_;
    }
    if (depth_ == 0) return nullptr;
    if (depth_ == 1 && top_key_ == array_key_ && opens_array) {
      in_array_ = true;
      return nullptr;
    }
    return &(*members_)[top_key_];
  }

  friend class ValueSax<ElementSax>;

  bool Open(bool object) {
    if (depth_ >= kMaxJsonDepth) {
      return Fail(fmt::format("JSON nested deeper than {} levels", kMaxJsonDepth));
    }
    ++depth_;
    if (dom_.active()) {
      dom_.Open(object);
      return true;
    }
    --depth_;  // Slot() looks at the depth the value starts at
    Json* slot = Slot(!object);
    ++depth_;
    if (slot == nullptr) {
      if (depth_ == 1 && !object) return Fail("the root is an array, not an object");
      return true;
    }
    dom_.Begin(slot);
    dom_.Open(object);
    return true;
  }

  bool Close() {
    --depth_;
    if (!dom_.active()) {
      if (depth_ == 1) in_array_ = false;
      return true;
    }
    return dom_.Close() ? Completed() : true;
  }

  bool Scalar(Json value) {
    if (dom_.active()) return dom_.Scalar(std::move(value)) ? Completed() : true;
    Json* slot = Slot(false);
    if (slot == nullptr) return Fail("the root is not an object");
    *slot = std::move(value);
    return Completed();
  }

  bool Completed() {
    if (!building_element_) return true;
    building_element_ = false;
    error_ = sink_(element_);
    element_ = Json();
    return !error_.has_value();
  }

  bool Fail(std::string message) {
    error_ = std::move(message);
    return false;
  }

  std::string array_key_;
  Json* members_;
  const JsonElementSink& sink_;
  DomBuilder dom_;
  Json element_;
  std::string top_key_;
  int depth_ = 0;
  bool in_array_ = false;
  bool building_element_ = false;
};

}  // namespace

std::optional<std::string> StreamArrayElements(std::istream& in, std::string_view array_key,
                                               Json& members, const JsonElementSink& sink) {
  ElementSax sax(array_key, &members, sink);
  if (!Json::sax_parse(in, &sax, Json::input_format_t::json, /*strict=*/true)) {
    return sax.error().value_or("not valid JSON");
  }
  return std::nullopt;
}

std::optional<std::string> StreamConcatenatedValues(std::istream& in, const JsonElementSink& sink) {
  for (int64_t index = 0;; ++index) {
    in >> std::ws;
    if (in.peek() == std::char_traits<char>::eof()) return std::nullopt;
    ElementSax sax({}, nullptr, sink);
    if (!Json::sax_parse(in, &sax, Json::input_format_t::json, /*strict=*/false)) {
      return fmt::format("JSON value {} of the stream: {}", index,
                         sax.error().value_or("not valid JSON"));
    }
  }
}

}  // namespace dtsim::traces
