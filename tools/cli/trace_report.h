// Import statistics of a trace, as the commands that read traces print and write them.
#pragma once

#include <ostream>

#include "tools/cli/run_report.h"
#include "traces/trace.h"

namespace dtsim::cli {

void PrintImportStats(std::ostream& out, const traces::Trace& trace);
OrderedJson ImportStatsJson(const traces::Trace& trace);

}  // namespace dtsim::cli
