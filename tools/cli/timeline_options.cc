#include "tools/cli/timeline_options.h"

#include <fmt/format.h>

#include <charconv>
#include <string_view>
#include <utility>

#include "sim/base/quantity.h"
#include "sim/base/strings.h"

namespace dtsim::cli {
namespace {

constexpr int64_t kMostRanks = int64_t{1} << 24;

Expected<int32_t> RankAt(std::string_view text, const std::string& whole) {
  text = Trim(text);
  int64_t value = -1;
  const auto [end, code] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (code != std::errc() || end != text.data() + text.size() || value < 0 || value >= kMostRanks) {
    return Error("expected ranks and ranges of ranks, \"0-7,64\"", "--timeline-ranks",
                 Quote(whole));
  }
  return static_cast<int32_t>(value);
}

Status ParseRanks(const std::string& text, std::vector<int32_t>& ranks) {
  std::string_view rest = text;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t dash = item.find('-');
    DTSIM_ASSIGN_OR_RETURN(const int32_t first, RankAt(item.substr(0, dash), text));
    int32_t last = first;
    if (dash != std::string_view::npos) {
      DTSIM_ASSIGN_OR_RETURN(last, RankAt(item.substr(dash + 1), text));
    }
    if (last < first || static_cast<int64_t>(ranks.size()) + (last - first) >= kMostRanks) {
      return Error("expected ranks and ranges of ranks, \"0-7,64\"", "--timeline-ranks",
                   Quote(text));
    }
    for (int32_t rank = first; rank <= last; ++rank) ranks.push_back(rank);
  }
  if (ranks.empty()) {
    return Error("expected ranks and ranges of ranks, \"0-7,64\"", "--timeline-ranks", "\"\"");
  }
  return Status::Ok();
}

Status ParseWindow(const std::string& text, TimeNs& start, TimeNs& end) {
  const size_t colon = text.find(':');
  const auto bad = [&text](std::string why) {
    return Error(std::move(why), "--timeline-window", Quote(text));
  };
  if (colon == std::string::npos) return bad("expected START:END, \"2 s:2.5 s\"");
  Expected<DurationNs> from = ParseDuration(Trim(std::string_view(text).substr(0, colon)));
  Expected<DurationNs> to = ParseDuration(Trim(std::string_view(text).substr(colon + 1)));
  if (!from.ok()) return bad("START: " + from.error().message());
  if (!to.ok()) return bad("END: " + to.error().message());
  if (*to <= *from) return bad("END must be after START");
  start = TimeNs(0) + *from;
  end = TimeNs(0) + *to;
  return Status::Ok();
}

}  // namespace

void AddTimelineOptions(boost::program_options::options_description& description,
                        TimelineSelection& selection) {
  description.add_options()("timeline-ranks",
                            boost::program_options::value(&selection.ranks)->value_name("LIST"),
                            "put only these ranks in the timeline: \"0-7,64\"")(
      "timeline-window", boost::program_options::value(&selection.window)->value_name("START:END"),
      "put only the tasks that overlap this span of the iteration in the timeline: "
      "\"2 s:2.5 s\"");
}

Status ApplyTimelineSelection(const TimelineSelection& selection, const std::string& timeline_path,
                              traces::TimelineInfo& info) {
  for (const auto& [option, value] : {std::pair{"--timeline-ranks", &selection.ranks},
                                      std::pair{"--timeline-window", &selection.window}}) {
    if (!value->empty() && timeline_path.empty()) {
      return Error(
          "selects what goes into the timeline, and no timeline is written: add "
          "--timeline FILE",
          option, Quote(*value));
    }
  }
  if (!selection.ranks.empty()) DTSIM_RETURN_IF_ERROR(ParseRanks(selection.ranks, info.ranks));
  if (!selection.window.empty()) {
    DTSIM_RETURN_IF_ERROR(ParseWindow(selection.window, info.window_start, info.window_end));
  }
  return Status::Ok();
}

}  // namespace dtsim::cli
