// What `dtsim run` prints: the human summary of a run (its result file is
// tools/results/run_result.h).
#pragma once

#include <ostream>
#include <string>

#include "sim/engine/simulator.h"
#include "tools/results/run_result.h"

namespace dtsim::cli {

// The summary table: totals, then per rank (every rank up to 16, else min / mean / max), then
// per category and per kind.
void PrintRunSummary(std::ostream& out, const engine::RunSummary& summary,
                     const results::RunContext& context);

}  // namespace dtsim::cli
