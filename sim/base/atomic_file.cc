#include "sim/base/atomic_file.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

#include "sim/base/input_files.h"
#include "sim/base/sha256.h"
#include "sim/base/strings.h"
#include "sim/base/temp_files.h"

namespace dtsim {
namespace {

namespace fs = std::filesystem;

// ": <the system's reason>", or nothing when the failing call set no errno (a stream that
// failed at an earlier write may have lost it).
std::string SystemReason() { return errno == 0 ? "" : std::string(": ") + std::strerror(errno); }

// Device and process files (/dev/stdout, /dev/null, /proc/self/fd/N) are written where they
// are: renaming a temporary file over one would replace a device node with a regular file (as
// root, `-o /dev/null` did), and one that does not exist is a typo, not a file to create there.
// (/dev/shm is an ordinary file system.)
bool IsSystemPath(const std::string& path) {
  return (path.starts_with("/dev/") && !path.starts_with("/dev/shm/")) ||
         path.starts_with("/proc/");
}

Error TooLarge(const std::string& path, std::optional<uintmax_t> bytes) {
  return Error(fmt::format(
                   "{}; dtsim reads files of at most {} GiB (no config, table, trace "
                   "index or result is larger)",
                   bytes ? fmt::format("is {:.2f} GiB ({} bytes)",
                                       static_cast<double>(*bytes) / static_cast<double>(1 << 30),
                                       *bytes)
                         : "more than 1 GiB was read and its end not reached",
                   kMaxInputFileBytes >> 30))
      .InFile(path);
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string path, std::string temp_path)
    : path_(std::move(path)), temp_path_(std::move(temp_path)) {}

bool WritesInPlace(const std::string& path) {
  std::error_code code;
  const fs::file_status target = fs::status(path, code);
  return IsSystemPath(path) ||
         (fs::exists(target) && !fs::is_regular_file(target) && !fs::is_directory(target));
}

namespace {

// The first chunk of a stream a text reader reads: what it holds cannot be what the reader
// expects, however much more follows.
Status CheckStreamStart(std::string_view start, FileContent expected) {
  if (const size_t nul = start.find('\0'); nul != std::string_view::npos) {
    return Error(fmt::format("binary data (a NUL byte at offset {}): not a text file", nul));
  }
  if (expected != FileContent::kJsonOrGzip) return Status::Ok();
  const size_t first = start.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return Status::Ok();
  constexpr std::string_view kJsonStarts = "{[\"-0123456789tfn";
  // A UTF-8 byte-order mark is the JSON parser's to judge.
  if (kJsonStarts.find(start[first]) != std::string_view::npos ||
      static_cast<unsigned char>(start[first]) >= 0x80) {
    return Status::Ok();
  }
  return Error(
      fmt::format("not JSON: it starts with {} at offset {}", QuoteChar(start[first]), first));
}

}  // namespace

Status CheckPathName(const std::string& path) {
  std::error_code code;
  if (path == "-" && !fs::exists(path, code)) {
    return Error("no file is named \"-\" (standard input is /dev/stdin)").InFile(path);
  }
  const size_t nul = path.find('\0');
  if (nul == std::string::npos) return Status::Ok();
  return Error(fmt::format("a path with a NUL byte at offset {}: no file is named so", nul), "",
               Quote(path));
}

Status CheckOutputPath(const std::string& path) {
  if (path == "-") {
    return Error(
               "\"-\" is not standard output here: give /dev/stdout for the stream, or ./- for "
               "a file so named")
        .InFile(path);
  }
  DTSIM_RETURN_IF_ERROR(CheckPathName(path));
  // A device or pipe is written in place, never replaced: writing to /dev/stdout after reading
  // /dev/stdin of the same terminal loses nothing.
  if (!WritesInPlace(path)) DTSIM_RETURN_IF_ERROR(CheckNotAnInput(path));
  std::error_code code;
  const fs::file_status target = fs::status(path, code);
  if (fs::is_directory(target)) return Error("is a directory, not a file").InFile(path);
  if (IsSystemPath(path) && !fs::exists(target)) {
    return Error("no such device or file (outputs are not created under /dev or /proc)")
        .InFile(path);
  }
  // Before any work: the system refuses the name only when it is opened, after a long search.
  const size_t name = fs::path(path).filename().native().size();
  if (name > kMaxFileNameBytes) {
    return Error(fmt::format("the file name is {} bytes, past the {} a file system takes", name,
                             kMaxFileNameBytes))
        .InFile(path);
  }
  return Status::Ok();
}

Expected<AtomicFileWriter::Target> AtomicFileWriter::Resolve(const std::string& path) {
  DTSIM_RETURN_IF_ERROR(CheckOutputPath(path));
  if (WritesInPlace(path)) return Target{path, true};
  std::error_code code;
  const fs::file_status target = fs::status(path, code);
  // A symbolic link to a file is followed, as a shell's ">" follows it: the file it names is
  // replaced and the link stays a link. A dangling link is replaced by the file.
  if (fs::is_symlink(fs::symlink_status(path, code)) && fs::exists(target)) {
    const fs::path resolved = fs::canonical(path, code);
    if (!code) return Target{resolved.string(), false};
  }
  return Target{path, false};
}

namespace {

// The temporary file beside `file`: "<file>.tmp-<pid>", or, where that name would be longer
// than a file system takes (a legal 250-byte name plus the suffix), ".dtsim-<pid>-<n>.tmp" in
// the same directory, numbered within the process.
std::string TemporaryPathBeside(const std::string& file) {
  const std::string pid = std::to_string(::getpid());
  const fs::path path(file);
  if (path.filename().native().size() + 5 + pid.size() <= kMaxFileNameBytes) {
    return file + ".tmp-" + pid;
  }
  static std::atomic<uint64_t> next{0};
  return (path.parent_path() / fmt::format(".dtsim-{}-{}.tmp", pid, next++)).string();
}

}  // namespace

Expected<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::Open(const std::string& path) {
  DTSIM_ASSIGN_OR_RETURN(const Target target, Resolve(path));
  std::unique_ptr<AtomicFileWriter> writer(
      new AtomicFileWriter(path, target.in_place ? "" : TemporaryPathBeside(target.file)));
  writer->target_ = target.file;
  if (target.in_place) {
    writer->stream_.open(target.file, std::ios::binary | std::ios::app);
  } else {
    writer->stream_.open(writer->temp_path_, std::ios::binary | std::ios::trunc);
    if (writer->stream_) writer->temp_slot_ = RecordTemporaryFile(writer->temp_path_);
  }
  if (!writer->stream_) {
    return Error("cannot open for writing" + SystemReason()).InFile(path);
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
    if (!temp_path_.empty()) std::remove(temp_path_.c_str());
  }
  ForgetTemporaryFile(temp_slot_);
}

Status AtomicFileWriter::Commit() {
  // A write that already failed (a full device) left its reason in errno; otherwise start
  // clean, so that a reason is never a stale one from an unrelated call.
  if (stream().good() && stream_.good()) errno = 0;
  if (gzip_ && (!compressed_->flush() || !gzip_->Finish())) {
    stream_.close();
    return Error("write failed while compressing" + SystemReason()).InFile(path_);
  }
  stream_.flush();
  const bool written = static_cast<bool>(stream_);
  stream_.close();
  if (!written || stream_.fail()) {
    return Error("write failed" + SystemReason()).InFile(path_);
  }
  if (!temp_path_.empty() && std::rename(temp_path_.c_str(), target_.c_str()) != 0) {
    return Error("cannot replace the file" + SystemReason()).InFile(path_);
  }
  ForgetTemporaryFile(temp_slot_);
  temp_slot_ = -1;
  committed_ = true;
  return Status::Ok();
}

Status WriteFileAtomically(const std::string& path, std::string_view content) {
  DTSIM_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> writer, AtomicFileWriter::Open(path));
  writer->stream().write(content.data(), static_cast<std::streamsize>(content.size()));
  return writer->Commit();
}

Expected<std::string> ReadFile(const std::string& path, FileContent expected) {
  DTSIM_RETURN_IF_ERROR(CheckPathName(path));
  std::error_code code;
  const fs::file_status status = fs::status(path, code);
  if (fs::is_directory(status)) return Error("is a directory, not a file").InFile(path);
  const bool regular = fs::is_regular_file(status);
  const uintmax_t size = regular ? fs::file_size(path, code) : 0;
  if (regular && !code && size > kMaxInputFileBytes) return TooLarge(path, size);
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error("cannot open" + SystemReason()).InFile(path);
  NoteInputFile(path);
  // A regular file at once, at the size it has; what a device or pipe gives (it has no size to
  // check first: /dev/zero grew this process by 150 MB a second until the kernel killed it), or
  // what a file grew by since, in chunks up to the limit. No chunk buffer where nothing is left:
  // a 1 MiB one zeroed for every read cost 7 ms a read under ASan (29 us in all without).
  std::string content;
  bool more = true;
  if (regular && !code) {
    content.resize(static_cast<size_t>(size));
    in.read(content.data(), static_cast<std::streamsize>(size));
    content.resize(static_cast<size_t>(in.gcount()));
    more = in && in.peek() != std::ifstream::traits_type::eof();
  }
  std::vector<char> chunk;
  if (more) chunk.resize(size_t{1} << 20);
  while (more && in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const bool first = content.empty();
    content.append(chunk.data(), static_cast<size_t>(in.gcount()));
    if (first && !regular && expected != FileContent::kAny && !LooksGzipped(content)) {
      if (Status start = CheckStreamStart(content, expected); !start.ok()) {
        return std::move(start).error().InFile(path);
      }
    }
    if (content.size() > kMaxInputFileBytes) return TooLarge(path, std::nullopt);
  }
  if (in.bad()) return Error("read failed" + SystemReason()).InFile(path);
  if (!regular) NoteInputStream(path, {.sha256 = Sha256Hex(content), .bytes = content.size()});
  return content;
}

}  // namespace dtsim
