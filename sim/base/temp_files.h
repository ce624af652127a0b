// The temporary files this process is writing, removed when a signal ends it. An output is
// written to "<target>.tmp-<pid>" and renamed into place (sim/base/atomic_file.h); Ctrl-C or a
// kill during a 1 GB timeline used to leave the half-written temporary file behind.
//
// The record is a fixed table the signal handler reads without locks or allocation (unlink(2)
// is async-signal-safe); a path longer than PATH_MAX, or one beyond the table's 256 entries, is
// written but not recorded. Only dtsim's main() installs the handlers: a library user (the
// Python module) keeps its own signal handling, and the files are removed as before whenever
// the writer is destroyed.
#pragma once

#include <string>

namespace dtsim {

// Records `path` for removal on a signal; the returned slot (-1 when not recorded) is given
// back to ForgetTemporaryFile once the file is renamed or removed.
int RecordTemporaryFile(const std::string& path);
void ForgetTemporaryFile(int slot);

// For SIGINT, SIGTERM, SIGHUP and SIGPIPE, unless ignored (as a background job ignores
// SIGINT, or under nohup): removes the recorded files, then ends the process by the same
// signal with its default action, so that the exit status still says which signal it was.
void RemoveTemporaryFilesOnSignals();

}  // namespace dtsim
