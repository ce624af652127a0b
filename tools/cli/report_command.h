// `dtsim report RESULT... -o DIR [--timeline TIMELINE]`: a static HTML page comparing simulate,
// sweep and search results, with matplotlib figures (tools/report/report.py; docs/report.md).
#pragma once

#include <ostream>
#include <span>
#include <string>

#include "tools/cli/command.h"

namespace dtsim::cli {

CommandOutcome ReportCommand(std::span<const std::string> args, std::ostream& out);

}  // namespace dtsim::cli
