// Writing outputs without ever leaving a half-written file in place of a good one: the data
// goes to a temporary file beside the target, which replaces the target only on Commit(). A
// symbolic link to a file is followed (the file is replaced, the link stays). What is not a
// regular file (a device, a pipe, /dev/stdout, anything under /dev or /proc) is written in
// place, appended to, never replaced. A target whose name ends in ".gz" is written
// gzip-compressed (sim/base/gzip.h).
#pragma once

#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include "sim/base/gzip.h"
#include "sim/base/status.h"

namespace dtsim {

class AtomicFileWriter {
 public:
  // Opens "<path>.tmp-<pid>" for writing (or the device or pipe itself). Errors name the path
  // and the system's reason, and refuse a directory and a path that is one of this process's
  // inputs (sim/base/input_files.h).
  static Expected<std::unique_ptr<AtomicFileWriter>> Open(const std::string& path);
  ~AtomicFileWriter();  // removes the temporary file unless committed
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  std::ostream& stream() { return gzip_ ? *compressed_ : stream_; }
  // Flushes, closes and renames over the target. After an error the target is untouched
  // (a device or pipe keeps what was written to it).
  Status Commit();

 private:
  struct Target {
    std::string file;  // the file to replace: the path, or the file a symbolic link names
    bool in_place;     // a device, pipe or /dev, /proc path: written directly
  };
  static Expected<Target> Resolve(const std::string& path);
  AtomicFileWriter(std::string path, std::string temp_path);
  std::string path_;       // as the user named it, for messages
  std::string target_;     // what Commit() renames the temporary file over
  std::string temp_path_;  // empty when written in place
  int temp_slot_ = -1;     // its record for removal on a signal (sim/base/temp_files.h)
  std::ofstream stream_;
  std::unique_ptr<GzipOutputBuffer> gzip_;  // set for a *.gz target: deflates into stream_
  std::unique_ptr<std::ostream> compressed_;
  bool committed_ = false;
};

// An error for a path no file can have: one holding a NUL byte (a JSON string's "\u0000", a
// Python str), which the system would read only up to the NUL, opening another file. Every
// open of a file by its path (ReadFile, AtomicFileWriter::Open, the trace reader) checks it.
// And "-" where no file is so named: other tools read it as standard input, dtsim as a file
// name, so the error says which path is the stream (/dev/stdin).
Status CheckPathName(const std::string& path);

// The longest file name (one path component) the common Linux file systems take (NAME_MAX).
inline constexpr size_t kMaxFileNameBytes = 255;

// True when an output at `path` is written in place rather than replaced: a device, a pipe,
// a socket, or any path under /dev or /proc.
bool WritesInPlace(const std::string& path);

// The errors Open() would give `path` before writing anything: an input of this process, a
// directory, a /dev or /proc path that does not exist, a name longer than kMaxFileNameBytes,
// and "-", which other tools take for standard output (dtsim would write a file named "-";
// /dev/stdout and ./- say which is meant).
// Commands check their outputs with it before they work, so that a long search does not fail at its
// last step.
Status CheckOutputPath(const std::string& path);

// Writes `content` to `path` atomically.
Status WriteFileAtomically(const std::string& path, std::string_view content);

// The largest file ReadFile reads: 1 GiB, as much as a gzip input may inflate to.
inline constexpr size_t kMaxInputFileBytes = size_t{1} << 30;

// What a reader expects a file to hold. kTextOrGzip (YAML, a launch script) refuses a pipe or
// device whose first megabyte holds a NUL byte and is not gzip, at once (/dev/zero,
// /dev/urandom), instead of reading it to the size limit. kJsonOrGzip also refuses one whose
// first character cannot begin JSON (`yes | dtsim simulate /dev/stdin` read 1 GiB of "y").
enum class FileContent { kAny, kTextOrGzip, kJsonOrGzip };

// Reads a whole file (at most kMaxInputFileBytes; a pipe or device is read in chunks up to it)
// and records it as an input, with the digest of what a pipe or device held; the error names
// the path and the system's reason.
Expected<std::string> ReadFile(const std::string& path, FileContent expected = FileContent::kAny);

}  // namespace dtsim
