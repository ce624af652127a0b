#include "tools/results/run_result.h"

#include <fmt/format.h>

#include <charconv>

#include "sim/base/strings.h"
#include "tools/results/provenance.h"
#include "tools/results/result_file.h"

namespace dtsim::results {
namespace {

OrderedJson TotalsJson(const std::vector<engine::GroupTotal>& totals) {
  OrderedJson list = OrderedJson::array();
  for (const engine::GroupTotal& total : totals) {
    if (total.tasks == 0) continue;
    list.push_back({{"name", total.name}, {"tasks", total.tasks}, {"total_ns", total.total.ns()}});
  }
  return list;
}

}  // namespace

std::string FingerprintText(uint64_t fingerprint) { return fmt::format("0x{:016x}", fingerprint); }

Expected<uint64_t> FingerprintFromText(const std::string& text, const std::string& path) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  const bool prefixed = text.size() > 2 && text[0] == '0' && text[1] == 'x';
  const auto [last, ec] = std::from_chars(text.data() + (prefixed ? 2 : 0), end, value, 16);
  if (!prefixed || ec != std::errc() || last != end) {
    return Error("expected a hexadecimal fingerprint \"0x...\"", path, Quote(text));
  }
  return value;
}

OrderedJson RunResultJson(const engine::RunSummary& summary, const RunContext& context) {
  OrderedJson ranks = OrderedJson::array();
  for (const engine::RankSummary& r : summary.ranks) {
    ranks.push_back({{"rank", r.rank},
                     {"busy_ns", r.busy.ns()},
                     {"idle_ns", r.idle.ns()},
                     {"rendezvous_wait_ns", r.rendezvous_wait.ns()},
                     {"finish_ns", r.finish.ns()}});
  }
  const double rate =
      context.wall_seconds > 0 ? static_cast<double>(summary.events) / context.wall_seconds : 0.0;
  OrderedJson document = FormatHeader(kRunResultFormat);
  document["provenance"] = ProvenanceJson();
  document.update(OrderedJson{
      {"input",
       {{"graph", context.graph_path}, {"communication_model", context.communication_model}}},
      {"makespan_ns", summary.makespan.ns()},
      {"ranks", std::move(ranks)},
      {"categories", TotalsJson(summary.categories)},
      {"kinds", TotalsJson(summary.kinds)},
      {"simulator",
       {{"tasks", summary.tasks},
        {"communications", summary.communications},
        {"streams", context.streams},
        {"events", summary.events},
        {"fingerprint", FingerprintText(summary.fingerprint)},
        {"wall_seconds", context.wall_seconds},
        {"events_per_second", rate}}}});
  return document;
}

Expected<RunResultRecord> RunResultFromJson(const Json& document) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader root, JsonObjectReader::Make(document, ""));
  DTSIM_RETURN_IF_ERROR(CheckFormat(root, kRunResultFormat));
  RunResultRecord record;
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader input, ChildObject(root, "input"));
  DTSIM_ASSIGN_OR_RETURN(record.graph, input.String("graph"));
  DTSIM_ASSIGN_OR_RETURN(const int64_t makespan, root.Int("makespan_ns"));
  record.makespan = DurationNs(makespan);
  DTSIM_ASSIGN_OR_RETURN(const Json* ranks, ChildArray(root, "ranks"));
  record.ranks = static_cast<int64_t>(ranks->size());
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader simulator, ChildObject(root, "simulator"));
  DTSIM_ASSIGN_OR_RETURN(record.tasks, simulator.Int("tasks"));
  DTSIM_ASSIGN_OR_RETURN(record.events, simulator.Int("events"));
  DTSIM_ASSIGN_OR_RETURN(const std::string fingerprint, simulator.String("fingerprint"));
  DTSIM_ASSIGN_OR_RETURN(record.fingerprint,
                         FingerprintFromText(fingerprint, "simulator.fingerprint"));
  return record;
}

}  // namespace dtsim::results
