#include "tests/fuzz/fuzz_support.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <zlib.h>

namespace dtsim::fuzz {
namespace {

std::filesystem::path& ScratchDir() {
  static std::filesystem::path dir;  // NOLINT: one per fuzzing process
  return dir;
}

void RemoveScratchDir() {
  std::error_code code;
  std::filesystem::remove_all(ScratchDir(), code);
}

const std::filesystem::path& EnsureScratchDir() {
  std::filesystem::path& dir = ScratchDir();
  if (!dir.empty()) return dir;
  std::error_code code;
  const std::filesystem::path base = ::access("/dev/shm", W_OK) == 0
                                         ? std::filesystem::path("/dev/shm")
                                         : std::filesystem::temp_directory_path(code);
  dir = base / ("dtsim-fuzz-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir, code);
  std::atexit(RemoveScratchDir);
  return dir;
}

std::string Gzip(std::string_view bytes) {
  z_stream stream{};
  deflateInit2(&stream, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&stream, bytes.size()), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  stream.avail_in = static_cast<uInt>(bytes.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  deflate(&stream, Z_FINISH);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

}  // namespace

std::string ScratchFile(std::string_view name, std::string_view bytes, bool gzip) {
  const std::string path = (EnsureScratchDir() / name).string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const std::string content = gzip ? Gzip(bytes) : std::string(bytes);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  return path;
}

void CheckError(const Error& error) {
  if (error.message().empty()) __builtin_trap();
}

}  // namespace dtsim::fuzz
