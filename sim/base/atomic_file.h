// Writing outputs without ever leaving a half-written file in place of a good one: the data
// goes to a temporary file beside the target, which replaces the target only on Commit(). A
// target whose name ends in ".gz" is written gzip-compressed (sim/base/gzip.h).
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
  // Opens "<path>.tmp-<pid>" for writing. Errors name the path and the system's reason, and
  // refuse a path that is one of this process's inputs (sim/base/input_files.h).
  static Expected<std::unique_ptr<AtomicFileWriter>> Open(const std::string& path);
  ~AtomicFileWriter();  // removes the temporary file unless committed
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  std::ostream& stream() { return gzip_ ? *compressed_ : stream_; }
  // Flushes, closes and renames over the target. After an error the target is untouched.
  Status Commit();

 private:
  AtomicFileWriter(std::string path, std::string temp_path);
  std::string path_;
  std::string temp_path_;
  std::ofstream stream_;
  std::unique_ptr<GzipOutputBuffer> gzip_;  // set for a *.gz target: deflates into stream_
  std::unique_ptr<std::ostream> compressed_;
  bool committed_ = false;
};

// Writes `content` to `path` atomically.
Status WriteFileAtomically(const std::string& path, std::string_view content);

// Reads a whole file and records it as an input; the error names the path and the system's
// reason.
Expected<std::string> ReadFile(const std::string& path);

}  // namespace dtsim
