// Errors for bad input. An Error says where (a file, and a JSON path or a line inside it),
// what is wrong, and the offending value; Status and Expected<T> carry one or a result.
// Library code returns these and never exits; only the CLI's main maps them to exit codes.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "sim/base/check.h"

namespace dtsim {

class Error {
 public:
  // `location` is a JSON path ("tasks[3].duration") or a line ("line 12"); `value` the
  // offending input as the user wrote it. Either may be empty.
  explicit Error(std::string message, std::string location = {}, std::string value = {})
      : message_(std::move(message)), location_(std::move(location)), value_(std::move(value)) {}

  // Returns this error attributed to `file` (kept if one is already set: the innermost wins).
  Error InFile(std::string file) &&;
  // Returns this error with `outer` prepended to its location ("collectives[2]" + "group").
  Error Under(const std::string& outer) &&;

  const std::string& file() const { return file_; }
  const std::string& location() const { return location_; }
  const std::string& message() const { return message_; }
  const std::string& value() const { return value_; }

  // "file: location: message, got value", leaving out the parts that are empty.
  std::string ToString() const;

 private:
  std::string message_;
  std::string location_;
  std::string value_;
  std::string file_;
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)) {}  // NOLINT(google-explicit-constructor)
  static Status Ok() { return Status(); }

  bool ok() const { return !error_.has_value(); }
  const Error& error() const& {
    DTSIM_CHECK(!ok(), "error() on an ok Status");
    return *error_;
  }
  Error&& error() && {
    DTSIM_CHECK(!ok(), "error() on an ok Status");
    return std::move(*error_);
  }

 private:
  std::optional<Error> error_;
};

template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : state_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Expected(Error error) : state_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return std::holds_alternative<T>(state_); }
  const T& value() const& {
    DTSIM_CHECK(ok(), "value() on an Expected holding an error");
    return std::get<T>(state_);
  }
  T& value() & {
    DTSIM_CHECK(ok(), "value() on an Expected holding an error");
    return std::get<T>(state_);
  }
  T&& value() && {
    DTSIM_CHECK(ok(), "value() on an Expected holding an error");
    return std::get<T>(std::move(state_));
  }
  const Error& error() const& {
    DTSIM_CHECK(!ok(), "error() on an Expected holding a value");
    return std::get<Error>(state_);
  }
  Error&& error() && {
    DTSIM_CHECK(!ok(), "error() on an Expected holding a value");
    return std::get<Error>(std::move(state_));
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  std::variant<T, Error> state_;
};

}  // namespace dtsim

#define DTSIM_INTERNAL_CONCAT2(a, b) a##b
#define DTSIM_INTERNAL_CONCAT(a, b) DTSIM_INTERNAL_CONCAT2(a, b)

// Returns the error of a Status or Expected expression from the enclosing function.
#define DTSIM_RETURN_IF_ERROR(expr)                                   \
  do {                                                                \
    auto dtsim_status_ = (expr);                                      \
    if (!dtsim_status_.ok()) return std::move(dtsim_status_).error(); \
  } while (false)

// Declares `lhs` from an Expected expression, or returns its error.
#define DTSIM_ASSIGN_OR_RETURN(lhs, expr) \
  DTSIM_INTERNAL_ASSIGN_OR_RETURN(DTSIM_INTERNAL_CONCAT(dtsim_expected_, __LINE__), lhs, expr)
// `tmp` and `lhs` are declarations, which parentheses would break.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define DTSIM_INTERNAL_ASSIGN_OR_RETURN(tmp, lhs, expr) \
  auto tmp = (expr);                                    \
  if (!tmp.ok()) return std::move(tmp).error();         \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)
