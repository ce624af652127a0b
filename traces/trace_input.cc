#include "traces/trace_input.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include <zlib.h>

#include "sim/base/atomic_file.h"
#include "sim/base/input_files.h"

namespace dtsim::traces {
namespace {

constexpr size_t kChunkBytes = size_t{1} << 18;     // 256 KiB: large enough to amortize gzread
constexpr size_t kMinChunkBytes = size_t{1} << 13;  // 8 KiB: zlib's own default buffer

// The chunk a file of `file_bytes` is read in: 256 KiB, or less for a small file — its size
// when plain, 8× it when compressed (traces deflate 10–14×, so a small file takes a few
// chunks), at least 8 KiB. A reader that opens many small files (the fuzzers, a directory of
// rank traces) then does not allocate and clear a megabyte of buffers for each (zlib's input
// buffer, twice that for its output, and the chunk): under ASan that had cost the Kineto
// fuzzer two thirds of its time.
size_t ChunkBytes(uint64_t file_bytes, bool compressed) {
  if (file_bytes >= kChunkBytes) return kChunkBytes;  // also an unknown size (uintmax_t(-1))
  const uint64_t wanted = compressed ? file_bytes * 8 : file_bytes;
  return static_cast<size_t>(std::clamp<uint64_t>(wanted, kMinChunkBytes, kChunkBytes));
}

gzFile AsGz(void* handle) { return static_cast<gzFile>(handle); }

// True when the file starts with the gzip magic bytes.
Expected<bool> StartsWithGzipMagic(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(fmt::format("cannot open: {}", std::strerror(errno))).InFile(path);
  unsigned char magic[2] = {0, 0};
  in.read(reinterpret_cast<char*>(magic), 2);
  return in.gcount() == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

}  // namespace

Expected<std::unique_ptr<TraceInputBuffer>> TraceInputBuffer::Open(const std::string& path) {
  DTSIM_RETURN_IF_ERROR(CheckPathName(path));
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return Error("is a directory, not a trace file").InFile(path);
  }
  DTSIM_ASSIGN_OR_RETURN(const bool compressed, StartsWithGzipMagic(path));
  NoteInputFile(path);
  std::unique_ptr<TraceInputBuffer> buffer(new TraceInputBuffer(path));
  buffer->compressed_ = compressed;
  buffer->file_bytes_ = std::filesystem::file_size(path, ec);
  // "rb": read-only. zlib reads a file without the gzip header as plain bytes ("transparent").
  gzFile gz = gzopen(path.c_str(), "rb");
  if (gz == nullptr) {
    return Error(fmt::format("cannot open: {}", std::strerror(errno))).InFile(path);
  }
  buffer->chunk_bytes_ = ChunkBytes(buffer->file_bytes_, compressed);
  gzbuffer(gz, static_cast<unsigned>(buffer->chunk_bytes_));
  buffer->gz_ = gz;
  buffer->chunk_ = std::make_unique_for_overwrite<char[]>(buffer->chunk_bytes_);  // not zeroed
  return buffer;
}

TraceInputBuffer::~TraceInputBuffer() {
  if (gz_ != nullptr) gzclose(AsGz(gz_));
}

TraceInputBuffer::int_type TraceInputBuffer::underflow() {
  if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
  if (gz_ == nullptr || error_) return traits_type::eof();
  const int got = gzread(AsGz(gz_), chunk_.get(), static_cast<unsigned>(chunk_bytes_));
  if (got <= 0) {
    int code = Z_OK;
    const char* message = gzerror(AsGz(gz_), &code);
    if (got < 0 || (code != Z_OK && code != Z_STREAM_END)) {
      error_ = Error(fmt::format("{} after {} uncompressed bytes (a truncated or corrupt {} file)",
                                 code == Z_BUF_ERROR ? "unexpected end of the gzip stream"
                                                     : std::string(message),
                                 bytes_read_, compressed_ ? "gzip" : "plain"))
                   .InFile(path_);
    }
    return traits_type::eof();
  }
  bytes_read_ += static_cast<uint64_t>(got);
  setg(chunk_.get(), chunk_.get(), chunk_.get() + got);
  return traits_type::to_int_type(*gptr());
}

}  // namespace dtsim::traces
