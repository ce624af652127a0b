#include "tools/cli/run_report.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <cmath>

#include "sim/base/quantity.h"

namespace dtsim::cli {
namespace {

std::string Percent(DurationNs part, DurationNs whole) {
  if (whole.ns() == 0) return "-";
  return fmt::format("{:.1f}%",
                     100.0 * static_cast<double>(part.ns()) / static_cast<double>(whole.ns()));
}

void PrintRanks(std::ostream& out, const engine::RunSummary& summary, DurationNs makespan) {
  const auto& ranks = summary.ranks;
  if (ranks.empty()) return;
  constexpr size_t kMaxRankRows = 16;
  fmt::print(out, "\n  {:<8} {:>14} {:>8} {:>14} {:>16}\n", "rank", "busy", "busy %", "idle",
             "rendezvous wait");
  auto row = [&](const std::string& label, DurationNs busy, DurationNs idle, DurationNs wait) {
    fmt::print(out, "  {:<8} {:>14} {:>8} {:>14} {:>16}\n", label, FormatDuration(busy),
               Percent(busy, makespan), FormatDuration(idle), FormatDuration(wait));
  };
  if (ranks.size() <= kMaxRankRows) {
    for (const auto& r : ranks) row(std::to_string(r.rank), r.busy, r.idle, r.rendezvous_wait);
    return;
  }
  const auto by_busy = [](const auto& a, const auto& b) { return a.busy < b.busy; };
  const auto& least = *std::min_element(ranks.begin(), ranks.end(), by_busy);
  const auto& most = *std::max_element(ranks.begin(), ranks.end(), by_busy);
  // Summed in long double: millions of ranks times a long iteration pass int64, and its
  // 64-bit significand keeps every nanosecond below 2^64.
  long double busy_sum = 0, idle_sum = 0, wait_sum = 0;
  for (const auto& r : ranks) {
    busy_sum += static_cast<long double>(r.busy.ns());
    idle_sum += static_cast<long double>(r.idle.ns());
    wait_sum += static_cast<long double>(r.rendezvous_wait.ns());
  }
  const auto n = static_cast<long double>(ranks.size());
  const auto mean = [n](long double sum) {
    return DurationNs(static_cast<int64_t>(std::trunc(sum / n)));  // a mean of int64s fits one
  };
  row(fmt::format("min ({})", least.rank), least.busy, least.idle, least.rendezvous_wait);
  row("mean", mean(busy_sum), mean(idle_sum), mean(wait_sum));
  row(fmt::format("max ({})", most.rank), most.busy, most.idle, most.rendezvous_wait);
}

void PrintTotals(std::ostream& out, std::string_view title,
                 const std::vector<engine::GroupTotal>& totals) {
  fmt::print(out, "\n  {:<24} {:>10} {:>14}\n", title, "tasks", "total time");
  for (const engine::GroupTotal& total : totals) {
    if (total.tasks == 0) continue;
    fmt::print(out, "  {:<24} {:>10} {:>14}\n", total.name.empty() ? "(none)" : total.name,
               total.tasks, FormatDuration(total.total));
  }
}

}  // namespace

void PrintRunSummary(std::ostream& out, const engine::RunSummary& summary,
                     const results::RunContext& context) {
  const DurationNs makespan = summary.makespan - TimeNs::Zero();
  fmt::print(out, "dtsim run {}\n", context.graph_path);
  fmt::print(out, "  makespan       {}\n", FormatDuration(makespan));
  fmt::print(out, "  graph          {} tasks, {} communications, {} ranks, {} streams\n",
             summary.tasks, summary.communications, summary.ranks.size(), context.streams);
  fmt::print(out, "  simulator      {} events in {} (wall clock), fingerprint {}\n", summary.events,
             FormatDuration(DurationNs(static_cast<int64_t>(context.wall_seconds * 1e9))),
             results::FingerprintText(summary.fingerprint));
  PrintRanks(out, summary, makespan);
  PrintTotals(out, "category", summary.categories);
  PrintTotals(out, "kind", summary.kinds);
}

}  // namespace dtsim::cli
