// Reading trace files: plain or gzip-compressed, detected by content (the gzip magic bytes
// 1f 8b), never by name, and streamed in chunks of at most 256 KiB so that a reader's memory
// does not grow with the file. Files are opened read-only; nothing here ever writes to an input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <streambuf>
#include <string>
#include <vector>

#include "sim/base/status.h"

namespace dtsim::traces {

// A std::streambuf over a trace file that inflates gzip transparently. After the stream hits
// its end, error() says whether that end was the real one: a truncated or corrupt gzip member
// reads as an early end of input to the parser, and error() then gives the reason.
class TraceInputBuffer final : public std::streambuf {
 public:
  static Expected<std::unique_ptr<TraceInputBuffer>> Open(const std::string& path);
  ~TraceInputBuffer() override;
  TraceInputBuffer(const TraceInputBuffer&) = delete;
  TraceInputBuffer& operator=(const TraceInputBuffer&) = delete;

  bool compressed() const { return compressed_; }
  // Uncompressed bytes handed out so far.
  uint64_t bytes_read() const { return bytes_read_; }
  // Compressed bytes of the file (its size on disk).
  uint64_t file_bytes() const { return file_bytes_; }
  // The read or decompression error that ended the stream early, if any.
  const std::optional<Error>& error() const { return error_; }

 protected:
  int_type underflow() override;

 private:
  explicit TraceInputBuffer(std::string path) : path_(std::move(path)) {}

  std::string path_;
  void* gz_ = nullptr;  // gzFile, kept opaque so that <zlib.h> stays out of this header
  bool compressed_ = false;
  uint64_t bytes_read_ = 0;
  uint64_t file_bytes_ = 0;
  size_t chunk_bytes_ = 0;  // what one gzread asks for (ChunkBytes)
  std::unique_ptr<char[]> chunk_;
  std::optional<Error> error_;
};

}  // namespace dtsim::traces
