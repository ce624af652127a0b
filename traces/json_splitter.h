// Streaming a large JSON document in pieces: the splitter reads the document in blocks of up
// to 1 MiB and hands out one value at a time as its raw text, found by tracking strings and
// brackets only (no parsing). A reader walks the top levels itself (the root object's keys, the
// elements of an array) and gives each piece to a real parser — simdjson for trace events — so
// memory holds one block and one value, never the document.
//
// The splitter only finds where a value ends; it does not validate it. Whoever parses a slice
// validates it fully, and together they accept exactly what a strict parser accepts: the
// structure between the values is checked here (Expect), the values by their parser.
#pragma once

#include <cstdint>
#include <optional>
#include <streambuf>
#include <string>
#include <string_view>
#include <vector>

namespace dtsim::traces {

// Bytes readable past the end of every slice: simdjson reads in 64-byte blocks.
inline constexpr size_t kJsonSlicePadding = 64;

// One value's text. `data` stays valid until the splitter reads again; at least
// kJsonSlicePadding bytes after it are readable.
struct JsonSlice {
  const char* data = nullptr;
  size_t size = 0;
  uint64_t offset = 0;  // of its first byte in the document
  std::string_view text() const { return {data, size}; }
};

// Where the splitter stopped: a syntax problem (the document ended inside a value, a byte that
// cannot start one) or a limit (nesting, a value's size). `offset` is the byte in the document.
struct JsonSplitError {
  std::string message;
  uint64_t offset = 0;
  bool syntax = true;
};

class JsonSplitter {
 public:
  // `max_value_bytes` bounds one value's text (and so the buffer); `max_depth` the nesting of
  // arrays and objects over the whole document, as sim/base/json_reader.h counts it.
  JsonSplitter(std::streambuf& in, size_t max_value_bytes, int max_depth);

  // Skips a UTF-8 byte order mark at the start of the input (nlohmann's parser does).
  void SkipByteOrderMark();
  // Skips whitespace; the next byte, or nothing at the end of the input.
  std::optional<char> Peek();
  // Skips whitespace and consumes `c` when it is next; false otherwise.
  bool Consume(char c);
  // The next value's text (whitespace skipped first). `depth` is how many arrays and objects
  // enclose it. Errors when the input ends inside it, it is too large or nests too deep.
  std::optional<JsonSplitError> Next(int depth, JsonSlice& slice);
  // The offset of the next unread byte (after Peek: of the byte it returned).
  uint64_t offset() const { return consumed_ + pos_; }

 private:
  // Reads more input after end_, keeping the bytes from mark_ on (moved to the buffer's start
  // when that makes room; `index` is moved with them). False at the end of the input.
  bool More(size_t& index);
  std::optional<JsonSplitError> NeedMore(size_t& i, std::string_view what);
  std::optional<JsonSplitError> SkipString(size_t& i);
  std::optional<JsonSplitError> SkipContainer(int depth, size_t& i);
  std::optional<JsonSplitError> TooLarge() const;
  std::optional<JsonSplitError> EndInside(std::string_view what) const;

  std::streambuf& in_;
  size_t max_value_bytes_;
  int max_depth_;
  std::vector<char> buffer_;  // [0, end_) holds input; kJsonSlicePadding spare bytes after
  size_t pos_ = 0;            // next unread byte
  size_t end_ = 0;
  size_t mark_ = 0;        // the start of the value being split
  uint64_t consumed_ = 0;  // document bytes before buffer_[0]
  bool eof_ = false;
};

}  // namespace dtsim::traces
