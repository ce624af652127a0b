// Import statistics of a trace, as the commands that read traces print them (the replay
// result writes them: tools/results/replay_result.h).
#pragma once

#include <ostream>

#include "traces/chakra_trace.h"
#include "traces/trace.h"

namespace dtsim::cli {

void PrintImportStats(std::ostream& out, const traces::Trace& trace);

void PrintChakraImportStats(std::ostream& out, const traces::ChakraTrace& trace);

}  // namespace dtsim::cli
