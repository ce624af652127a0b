#include "tools/cli/trace_report.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

namespace dtsim::cli {

void PrintImportStats(std::ostream& out, const traces::Trace& trace) {
  const traces::ImportStats& s = trace.stats;
  std::string who = trace.rank >= 0 ? fmt::format("rank {}", trace.rank) : "no rank";
  if (trace.world_size > 0) who += fmt::format(" of {}", trace.world_size);
  if (!trace.backend.empty()) who += fmt::format(" ({})", trace.backend);
  fmt::print(out, "  trace      {} format, {}{}\n", trace.format, who,
             trace.gpu_name.empty() ? "" : fmt::format(", {}", trace.gpu_name));
  fmt::print(out,
             "  imported   {} events ({:.1f} MB of JSON{}): {} host ops, {} annotations, {} API "
             "calls\n",
             s.events, static_cast<double>(s.bytes) / 1e6,
             s.gzip ? fmt::format(", {:.2f} MB gzip", static_cast<double>(s.file_bytes) / 1e6) : "",
             s.host_ops, s.annotations, s.api_calls);
  fmt::print(out,
             "  GPU        {} kernels, {} copies, {} sets on {} streams; {} sync records; "
             "{} collectives ({} with kind or size inferred)\n",
             s.kernels, s.memcpys, s.memsets, trace.StreamCount(), s.syncs, s.collectives,
             s.collectives_inferred);
  fmt::print(out,
             "  linking    {} launches without a GPU op, {} GPU ops without a launch; {} flow "
             "events; {} ProfilerSteps\n",
             s.launches_without_gpu_op, s.gpu_ops_without_launch, s.flows, trace.steps.size());
  if (!s.dropped.empty()) {
    std::string dropped;
    for (const auto& [reason, count] : s.dropped) {
      dropped += fmt::format("{}{} {}", dropped.empty() ? "" : "; ", count, reason);
    }
    fmt::print(out, "  dropped    {}\n", dropped);
  }
}

OrderedJson ImportStatsJson(const traces::Trace& trace) {
  const traces::ImportStats& s = trace.stats;
  OrderedJson categories = OrderedJson::object();
  for (const auto& [category, count] : s.categories) categories[category] = count;
  OrderedJson dropped = OrderedJson::object();
  for (const auto& [reason, count] : s.dropped) dropped[reason] = count;
  return {{"file", trace.file},
          {"format", trace.format},
          {"rank", trace.rank},
          {"world_size", trace.world_size},
          {"gpu", trace.gpu_name},
          {"bytes", s.bytes},
          {"file_bytes", s.file_bytes},
          {"gzip", s.gzip},
          {"events", s.events},
          {"host_ops", s.host_ops},
          {"annotations", s.annotations},
          {"api_calls", s.api_calls},
          {"kernels", s.kernels},
          {"memcpys", s.memcpys},
          {"memsets", s.memsets},
          {"streams", trace.StreamCount()},
          {"sync_records", s.syncs},
          {"collectives", s.collectives},
          {"collectives_inferred", s.collectives_inferred},
          {"flows", s.flows},
          {"profiler_steps", trace.steps.size()},
          {"launches_without_gpu_op", s.launches_without_gpu_op},
          {"gpu_ops_without_launch", s.gpu_ops_without_launch},
          {"dropped", std::move(dropped)},
          {"categories", std::move(categories)}};
}

}  // namespace dtsim::cli
