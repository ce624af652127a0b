// Import statistics of a trace, as the commands that read traces print and write them.
#pragma once

#include <ostream>

#include "tools/cli/run_report.h"
#include "traces/chakra_trace.h"
#include "traces/trace.h"

namespace dtsim::cli {

void PrintImportStats(std::ostream& out, const traces::Trace& trace);
OrderedJson ImportStatsJson(const traces::Trace& trace);

void PrintChakraImportStats(std::ostream& out, const traces::ChakraTrace& trace);
OrderedJson ChakraImportStatsJson(const traces::ChakraTrace& trace);

}  // namespace dtsim::cli
