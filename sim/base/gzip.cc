#include "sim/base/gzip.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include <zlib.h>

namespace dtsim {

struct GzipStream {
  z_stream z{};
};

namespace {

constexpr size_t kChunkBytes = size_t{1} << 18;  // 256 KiB per deflate/inflate call
constexpr int kGzipWindowBits = 15 + 16;         // the largest window, with a gzip wrapper

}  // namespace

bool LooksGzipped(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

bool WantsGzip(std::string_view path) { return path.size() > 3 && path.ends_with(".gz"); }

Expected<std::string> InflateGzip(std::string_view compressed, const std::string& path,
                                  size_t max_bytes) {
  std::string out;
  std::vector<char> chunk(kChunkBytes);
  z_stream z{};
  // 15 + 32: the largest window, gzip or zlib header detected by zlib.
  if (inflateInit2(&z, 15 + 32) != Z_OK) return Error("cannot start zlib's inflate").InFile(path);
  size_t offset = 0;
  int code = Z_OK;
  while (true) {
    const size_t left = compressed.size() - offset;
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): zlib's API takes non-const input
    auto* const start = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data() + offset));
    z.next_in = start;
    z.avail_in = static_cast<uInt>(std::min<size_t>(left, UINT_MAX));
    z.next_out = reinterpret_cast<Bytef*>(chunk.data());
    z.avail_out = static_cast<uInt>(chunk.size());
    code = inflate(&z, Z_NO_FLUSH);
    offset += static_cast<size_t>(z.next_in - start);
    const size_t produced = chunk.size() - z.avail_out;
    if (out.size() + produced > max_bytes) {
      inflateEnd(&z);
      return Error(fmt::format("inflates to more than {} bytes, the most dtsim reads from a "
                               "compressed JSON file",
                               max_bytes))
          .InFile(path);
    }
    out.append(chunk.data(), produced);
    if (code == Z_STREAM_END) {
      // Concatenated members (gzip -c a b > c.gz) read as one stream, as gunzip reads them.
      if (offset < compressed.size() && LooksGzipped(compressed.substr(offset))) {
        inflateReset(&z);
        continue;
      }
      break;
    }
    if (code != Z_OK || (produced == 0 && offset >= compressed.size())) {
      const std::string reason = code == Z_OK || code == Z_BUF_ERROR
                                     ? std::string("unexpected end of the gzip stream")
                                     : std::string(z.msg != nullptr ? z.msg : "corrupt data");
      inflateEnd(&z);
      return Error(fmt::format("{} after {} uncompressed bytes (a truncated or corrupt gzip file)",
                               reason, out.size()))
          .InFile(path);
    }
  }
  inflateEnd(&z);
  return out;
}

GzipOutputBuffer::GzipOutputBuffer(std::streambuf* sink)
    : sink_(sink), stream_(std::make_unique<GzipStream>()), in_(kChunkBytes), out_(kChunkBytes) {
  failed_ = deflateInit2(&stream_->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, kGzipWindowBits, 8,
                         Z_DEFAULT_STRATEGY) != Z_OK;
  setp(in_.data(), in_.data() + in_.size());
}

GzipOutputBuffer::~GzipOutputBuffer() { deflateEnd(&stream_->z); }

bool GzipOutputBuffer::Deflate(int flush) {
  if (failed_) return false;
  z_stream& z = stream_->z;
  z.next_in = reinterpret_cast<Bytef*>(pbase());
  z.avail_in = static_cast<uInt>(pptr() - pbase());
  do {
    z.next_out = reinterpret_cast<Bytef*>(out_.data());
    z.avail_out = static_cast<uInt>(out_.size());
    const int code = deflate(&z, flush);
    if (code == Z_STREAM_ERROR) {
      failed_ = true;
      return false;
    }
    const auto produced = static_cast<std::streamsize>(out_.size() - z.avail_out);
    if (produced > 0 && sink_->sputn(out_.data(), produced) != produced) {
      failed_ = true;
      return false;
    }
  } while (z.avail_out == 0 || (flush == Z_FINISH && z.avail_in > 0));
  setp(in_.data(), in_.data() + in_.size());
  return true;
}

GzipOutputBuffer::int_type GzipOutputBuffer::overflow(int_type c) {
  if (finished_ || !Deflate(Z_NO_FLUSH)) return traits_type::eof();
  if (!traits_type::eq_int_type(c, traits_type::eof())) {
    *pptr() = traits_type::to_char_type(c);
    pbump(1);
  }
  return traits_type::not_eof(c);
}

// Hands zlib what is buffered without forcing a flush point: an ostream flushes on every
// std::endl, and a sync flush each time would cost the compression most of its ratio.
int GzipOutputBuffer::sync() { return !finished_ && Deflate(Z_NO_FLUSH) ? 0 : -1; }

bool GzipOutputBuffer::Finish() {
  if (finished_) return !failed_;
  const bool ok = Deflate(Z_FINISH);
  finished_ = true;
  return ok && sink_->pubsync() == 0;
}

}  // namespace dtsim
