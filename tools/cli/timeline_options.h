// `--timeline-ranks` and `--timeline-window`: what goes into a timeline (docs/cli.md), shared
// by the commands that write one (simulate, run).
#pragma once

#include <boost/program_options.hpp>

#include <string>

#include "sim/base/status.h"
#include "traces/chrome_trace_writer.h"

namespace dtsim::cli {

struct TimelineSelection {
  std::string ranks;   // "0-7,64": ranks and inclusive ranges
  std::string window;  // "START:END" in durations: "2 s:2.5 s"
};

void AddTimelineOptions(boost::program_options::options_description& description,
                        TimelineSelection& selection);

// Sets `info`'s ranks and window from the options; errors name the option and the value. A
// selection without a timeline to select in (`timeline_path` empty) is an error.
Status ApplyTimelineSelection(const TimelineSelection& selection, const std::string& timeline_path,
                              traces::TimelineInfo& info);

}  // namespace dtsim::cli
