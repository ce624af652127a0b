#include "sim/base/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "sim/base/input_files.h"

namespace dtsim {
namespace {
std::string SystemReason() { return std::strerror(errno); }
}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string path, std::string temp_path)
    : path_(std::move(path)), temp_path_(std::move(temp_path)) {}

Expected<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::Open(const std::string& path) {
  DTSIM_RETURN_IF_ERROR(CheckNotAnInput(path));
  std::string temp_path = path + ".tmp-" + std::to_string(::getpid());
  std::unique_ptr<AtomicFileWriter> writer(new AtomicFileWriter(path, temp_path));
  writer->stream_.open(temp_path, std::ios::binary | std::ios::trunc);
  if (!writer->stream_) {
    return Error("cannot open for writing: " + SystemReason()).InFile(path);
  }
  if (WantsGzip(path)) {
    writer->gzip_ = std::make_unique<GzipOutputBuffer>(writer->stream_.rdbuf());
    writer->compressed_ = std::make_unique<std::ostream>(writer->gzip_.get());
  }
  return writer;
}

AtomicFileWriter::~AtomicFileWriter() {
  if (!committed_) {
    stream_.close();
    std::remove(temp_path_.c_str());
  }
}

Status AtomicFileWriter::Commit() {
  if (gzip_ && (!compressed_->flush() || !gzip_->Finish())) {
    stream_.close();
    return Error("write failed while compressing: " + SystemReason()).InFile(path_);
  }
  stream_.flush();
  const bool written = static_cast<bool>(stream_);
  stream_.close();
  if (!written || stream_.fail()) {
    return Error("write failed: " + SystemReason()).InFile(path_);
  }
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    return Error("cannot replace the file: " + SystemReason()).InFile(path_);
  }
  committed_ = true;
  return Status::Ok();
}

Status WriteFileAtomically(const std::string& path, std::string_view content) {
  DTSIM_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> writer, AtomicFileWriter::Open(path));
  writer->stream().write(content.data(), static_cast<std::streamsize>(content.size()));
  return writer->Commit();
}

Expected<std::string> ReadFile(const std::string& path) {
  std::error_code code;
  if (std::filesystem::is_directory(path, code))
    return Error("is a directory, not a file").InFile(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error("cannot open: " + SystemReason()).InFile(path);
  NoteInputFile(path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return Error("read failed: " + SystemReason()).InFile(path);
  return std::move(buffer).str();
}

}  // namespace dtsim
