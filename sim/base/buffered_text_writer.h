// Formatted text to a stream through a buffer, for writers of large JSON files (timelines,
// profiler traces): fmt formats into memory, which goes to the stream every megabyte, and
// Separator() gives the ",\n" between elements of an array.
#pragma once

#include <fmt/format.h>

#include <iterator>
#include <ostream>
#include <utility>

namespace dtsim {

class BufferedTextWriter {
 public:
  explicit BufferedTextWriter(std::ostream& out) : out_(out) {}
  ~BufferedTextWriter() { Flush(); }
  BufferedTextWriter(const BufferedTextWriter&) = delete;
  BufferedTextWriter& operator=(const BufferedTextWriter&) = delete;

  template <typename... Args>
  void Append(fmt::format_string<Args...> format, Args&&... args) {
    fmt::format_to(std::back_inserter(buffer_), format, std::forward<Args>(args)...);
    if (buffer_.size() > kFlushBytes) Flush();
  }

  void Flush() {
    out_.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    buffer_.clear();
  }

  // "\n" before the first element of an array, ",\n" before every other.
  const char* Separator() {
    const char* separator = first_element_ ? "\n" : ",\n";
    first_element_ = false;
    return separator;
  }

 private:
  static constexpr size_t kFlushBytes = size_t{1} << 20;
  std::ostream& out_;
  fmt::memory_buffer buffer_;
  bool first_element_ = true;
};

}  // namespace dtsim
