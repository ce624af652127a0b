// gzip for inputs and outputs, detected by content on the way in (the magic bytes 1f 8b, never
// the name) and chosen by the name on the way out (a path ending in ".gz"): a config, table or
// result may be read compressed, and an output named *.gz is written compressed.
#pragma once

#include <cstddef>
#include <memory>
#include <streambuf>
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/status.h"

namespace dtsim {

// The largest number of bytes InflateGzip hands back: a JSON input larger than this is not a
// config or a table (and a few kilobytes of gzip can claim gigabytes).
inline constexpr size_t kMaxInflatedBytes = size_t{1} << 30;

// True when `bytes` start with the gzip magic bytes.
bool LooksGzipped(std::string_view bytes);

// The uncompressed content of one or more concatenated gzip members. Errors name `path` and
// say whether the stream was truncated, corrupt or inflated past `max_bytes`.
Expected<std::string> InflateGzip(std::string_view compressed, const std::string& path,
                                  size_t max_bytes = kMaxInflatedBytes);

// True when an output at `path` is to be written gzip-compressed (its name ends in ".gz").
bool WantsGzip(std::string_view path);

// A std::streambuf that deflates what is written to it into gzip and passes the compressed
// bytes to `sink`. Finish() writes the gzip trailer; without it the output is truncated.
class GzipOutputBuffer final : public std::streambuf {
 public:
  explicit GzipOutputBuffer(std::streambuf* sink);
  ~GzipOutputBuffer() override;
  GzipOutputBuffer(const GzipOutputBuffer&) = delete;
  GzipOutputBuffer& operator=(const GzipOutputBuffer&) = delete;

  // Deflates what is buffered and ends the gzip member; false when zlib or the sink failed.
  bool Finish();

 protected:
  int_type overflow(int_type c) override;
  int sync() override;

 private:
  bool Deflate(int flush);

  std::streambuf* sink_;
  std::unique_ptr<struct GzipStream> stream_;
  std::vector<char> in_;
  std::vector<char> out_;
  bool failed_ = false;
  bool finished_ = false;
};

}  // namespace dtsim
