// The profiler traces of one job, as `dtsim replay` and dtsim.replay take them: files and
// directories, one trace per rank (docs/replay.md, "A whole job").
#pragma once

#include <string>
#include <vector>

#include "sim/base/status.h"
#include "traces/trace.h"

namespace dtsim::api {

// The trace files `arguments` name: a file stands for itself, a directory for its files whose
// names end in .json or .json.gz, in name order. Errors name an argument that is neither, or a
// directory without traces.
Expected<std::vector<std::string>> TraceFiles(const std::vector<std::string>& arguments);

// Reads each file as a Kineto / Chrome trace and orders them by distributedInfo rank (traces
// without one last, in the order given). Errors when two traces claim the same rank or disagree
// on the world size: they are not the ranks of one job.
Expected<std::vector<traces::Trace>> ReadTraceJob(const std::vector<std::string>& files);

}  // namespace dtsim::api
