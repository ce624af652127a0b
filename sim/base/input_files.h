// The files this process has read, so that no output ever replaces one of them: `dtsim
// simulate a.json -o a.json` must not turn the user's config into a result.
//
// Every reader of a user's file records it here when it opens it (ReadFile, the trace input
// buffer, ...), and AtomicFileWriter refuses a target that is one of them. Files are compared
// by identity (device and inode), so another spelling of the same path, a symbolic link or a
// hard link to an input is refused too. The record is process-wide on purpose: an input can be
// named deep inside another (a config's "profile"), and the writer that would clobber it is in
// another layer; both only need to agree on this list. It is thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/base/status.h"

namespace dtsim {

// Records `path` as an input of this process. A path that does not exist is ignored.
void NoteInputFile(const std::string& path);

// The input that `path` would replace (as it was first named), if any.
std::optional<std::string> InputAt(const std::string& path);

// An error naming `output_path` and the input it resolves to, when it resolves to one.
Status CheckNotAnInput(const std::string& output_path);

// A pipe or device read whole (`dtsim simulate <(jq ... c.json)`): what it held cannot be read
// again for a result's provenance (the pipe is at its end), so the reader records its digest.
struct StreamDigest {
  std::string sha256;  // hex
  uint64_t bytes = 0;
};
void NoteInputStream(const std::string& path, const StreamDigest& digest);
// The digest recorded for `path` (as NoteInputStream named it), if any.
std::optional<StreamDigest> InputStreamDigest(const std::string& path);

// The inputs recorded so far, as first named, sorted (a result's provenance lists them).
std::vector<std::string> InputFiles();

// Forgets every recorded input (for tests that run several commands in one process).
void ForgetInputFiles();

}  // namespace dtsim
