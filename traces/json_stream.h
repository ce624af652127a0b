// Streaming JSON for trace readers: documents far larger than memory are parsed with nlohmann's
// SAX interface, and only the pieces a reader asks for become DOM values, one at a time.
#pragma once

#include <functional>
#include <istream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/json_reader.h"

namespace dtsim::traces {

// Builds one JSON value from SAX callbacks (a metadata value, an event's args, one node).
class DomBuilder {
 public:
  void Begin(Json* root) {
    root_ = root;
    stack_.clear();
  }
  bool active() const { return root_ != nullptr; }
  // Adds a scalar; true when it completes the value.
  bool Scalar(Json value);
  void Open(bool object);
  // Closes the innermost container; true when that completes the value.
  bool Close();
  void Key(std::string key) { key_ = std::move(key); }

 private:
  bool Done();
  Json* Put(Json value);

  Json* root_ = nullptr;
  std::vector<Json*> stack_;
  std::string key_;
};

// nlohmann's parse error as "JSON syntax error at line L, column C (byte B): <what>".
std::string DescribeJsonSyntaxError(size_t position, const std::exception& exception);

// The error half of an nlohmann SAX handler: keeps the first parse error, described.
class SaxErrors {
 public:
  const std::optional<std::string>& error() const { return error_; }
  bool parse_error(size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& exception);

 protected:
  std::optional<std::string> error_;
};

// SAX callbacks that accept every value and build nothing: a parse that only validates (its
// error kept), or the base of a handler that watches a few callbacks (it hides those).
class NullSax : public SaxErrors {
 public:
  bool null() { return true; }
  bool boolean(bool /*value*/) { return true; }
  bool number_integer(int64_t /*value*/) { return true; }
  bool number_unsigned(uint64_t /*value*/) { return true; }
  bool number_float(double /*value*/, const std::string& /*text*/) { return true; }
  bool string(std::string& /*value*/) { return true; }
  bool binary(Json::binary_t& /*value*/) { return true; }
  bool start_object(size_t /*size*/) { return true; }
  bool start_array(size_t /*size*/) { return true; }
  bool key(std::string& /*key*/) { return true; }
  bool end_object() { return true; }
  bool end_array() { return true; }
};

// The SAX callbacks of a reader that builds values: every scalar goes to Derived::Scalar(Json),
// objects and arrays to Derived::Open(bool object) and Derived::Close(). A reader that treats
// some callback differently (numbers, strings) defines its own, which hides this one.
template <typename Derived>
class ValueSax : public SaxErrors {
 public:
  bool null() { return self().Scalar(Json()); }
  bool boolean(bool value) { return self().Scalar(Json(value)); }
  bool number_integer(int64_t value) { return self().Scalar(Json(value)); }
  bool number_unsigned(uint64_t value) { return self().Scalar(Json(value)); }
  bool number_float(double value, const std::string& /*text*/) {
    return self().Scalar(Json(value));
  }
  bool string(std::string& value) { return self().Scalar(Json(std::move(value))); }
  bool binary(Json::binary_t& /*value*/) { return self().Scalar(Json()); }
  bool start_object(size_t /*size*/) { return self().Open(true); }
  bool start_array(size_t /*size*/) { return self().Open(false); }
  bool end_object() { return self().Close(); }
  bool end_array() { return self().Close(); }

 private:
  Derived& self() { return static_cast<Derived&>(*this); }
};

// Called with each streamed element; returns an error message to stop the parse.
using JsonElementSink = std::function<std::optional<std::string>(Json& element)>;

// Parses a document whose root is an object. Members other than `array_key` are built into
// `members`; each element of the array under `array_key` is built alone and handed to `sink`,
// then dropped, so memory holds one element at a time. Returns the syntax or sink error.
std::optional<std::string> StreamArrayElements(std::istream& in, std::string_view array_key,
                                               Json& members, const JsonElementSink& sink);

// Parses a stream of JSON values written one after another (whitespace between them allowed,
// nothing else), handing each to `sink`. Errors name the value's index in the stream.
std::optional<std::string> StreamConcatenatedValues(std::istream& in, const JsonElementSink& sink);

}  // namespace dtsim::traces
