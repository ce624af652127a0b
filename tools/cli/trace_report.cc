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

namespace {

// "3643 COMP_NODE, 21 COMM_COLL_NODE": the node types present.
std::string NodeTypeCounts(const traces::ChakraImportStats& s) {
  std::string text;
  for (int type = 0; type < traces::kChakraNodeTypeCount; ++type) {
    if (s.nodes_by_type[type] == 0) continue;
    text += fmt::format("{}{} {}", text.empty() ? "" : ", ", s.nodes_by_type[type],
                        traces::ChakraNodeTypeName(static_cast<traces::ChakraNodeType>(type)));
  }
  return text.empty() ? "none" : text;
}

std::string MetadataString(const traces::ChakraTrace& trace, std::string_view name) {
  const traces::ChakraAttribute* attr = trace.MetadataAttr(name);
  return attr != nullptr ? std::string(attr->AsString().value_or("")) : "";
}

}  // namespace

void PrintChakraImportStats(std::ostream& out, const traces::ChakraTrace& trace) {
  const traces::ChakraImportStats& s = trace.stats;
  const std::string schema = MetadataString(trace, "schema");
  fmt::print(out, "  trace      Chakra ET, {} form; schema version {}{}\n", s.form,
             trace.version.empty() ? "(none)" : trace.version,
             schema.empty() ? "" : fmt::format(", PyTorch ET schema {}", schema));
  fmt::print(out, "  imported   {} nodes ({:.1f} MB{}): {}; {} CPU ops; {} attributes\n", s.nodes,
             static_cast<double>(s.bytes) / 1e6,
             s.gzip ? fmt::format(", {:.2f} MB gzip", static_cast<double>(s.file_bytes) / 1e6) : "",
             NodeTypeCounts(s), s.cpu_ops, s.attributes);
  std::string collectives;
  for (const auto& [kind, count] : s.collectives) {
    collectives += fmt::format("{}{} {}", collectives.empty() ? "" : ", ", count, kind);
  }
  fmt::print(out, "  collectives {}\n", collectives.empty() ? "none" : collectives);
  fmt::print(out,
             "  links      {} data deps ({} naming no node), {} ctrl deps; {} duplicate ids; {} "
             "nodes without a duration; {} unknown fields skipped\n",
             s.data_deps, s.dangling_data_deps, s.ctrl_deps, s.duplicate_ids,
             s.nodes_without_duration, s.unknown_fields);
}

}  // namespace dtsim::cli
