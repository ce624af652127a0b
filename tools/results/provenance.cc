#include "tools/results/provenance.h"

#include <fmt/format.h>

#include <filesystem>
#include <optional>
#include <utility>

#include "network/cluster.h"
#include "sim/base/input_files.h"
#include "sim/base/sha256.h"
#include "tools/results/build_info.h"

namespace dtsim::results {
void FlattenJson(const Json& value, const std::string& prefix,
                 std::vector<std::pair<std::string, std::string>>& out) {
  if (value.is_object()) {
    for (const auto& [key, child] : value.items()) {
      std::string path = prefix;
      if (!path.empty()) path += '.';
      path += key;
      FlattenJson(child, path, out);
    }
  } else if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) {
      FlattenJson(value[i], fmt::format("{}[{}]", prefix, i), out);
    }
  } else {
    out.emplace_back(prefix, DumpJson(value));
  }
}

Provenance& ProvenanceRecord() {
  static Provenance record;  // NOLINT: one command per process, as the input-file registry
  return record;
}

void ResetProvenance(std::string command, std::vector<std::string> arguments) {
  ProvenanceRecord() = Provenance{.command = std::move(command), .arguments = std::move(arguments)};
}

void RecordConfig(const Json& document, const std::vector<std::string>& overrides,
                  const strategies::SimulationConfig* resolved) {
  Provenance& record = ProvenanceRecord();
  record.overrides = overrides;
  record.config = document;
  if (resolved == nullptr) return;
  const strategies::SimulationConfig& config = *resolved;
  record.resolved = OrderedJson{
      {"cluster_preset", config.cluster.name},
      {"cluster", network::ClusterSpecToJson(config.cluster)},
      {"gpu",
       {{"name", config.gpu.name},
        {"memory_bytes", config.gpu.memory.count()},
        {"memory_bandwidth_bytes_per_s", config.gpu.memory_bandwidth.bytes_per_second()}}},
      {"plan",
       {{"virtual_stages", config.plan.virtual_stages}, {"microbatches", config.Microbatches()}}}};
}

std::string_view DtsimVersion() { return kBuildVersion; }
std::string_view DtsimCommit() { return kBuildCommit; }

OrderedJson ProvenanceJson() {
  const Provenance& record = ProvenanceRecord();
  OrderedJson inputs = OrderedJson::array();
  for (const std::string& path : InputFiles()) {
    OrderedJson file = {{"path", path}};
    std::error_code code;
    if (const std::optional<StreamDigest> stream = InputStreamDigest(path)) {
      // A pipe or device: what was read from it, digested as it was read.
      file["bytes"] = stream->bytes;
      file["sha256"] = stream->sha256;
    } else if (!std::filesystem::is_regular_file(path, code)) {
      // A trace streamed from a pipe: reading it again would digest nothing.
      file["error"] = "not a regular file: read as a stream, not digested";
    } else {
      const auto bytes = std::filesystem::file_size(path, code);
      Expected<std::string> hash = Sha256OfFile(path);
      if (!code) file["bytes"] = bytes;
      if (hash.ok()) {
        file["sha256"] = *hash;
      } else {
        file["error"] = hash.error().ToString();
      }
    }
    inputs.push_back(std::move(file));
  }
  return OrderedJson{{"dtsim", {{"version", DtsimVersion()}, {"commit", DtsimCommit()}}},
                     {"command", record.command},
                     {"arguments", record.arguments},
                     {"overrides", record.overrides},
                     {"inputs", std::move(inputs)},
                     {"config", record.config},
                     {"resolved", record.resolved}};
}

std::vector<std::pair<std::string, std::string>> FlatProvenance(const Json& provenance) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!provenance.is_object()) return out;
  for (const char* key : {"config", "resolved", "overrides"}) {
    if (provenance.contains(key)) FlattenJson(provenance[key], key, out);
  }
  if (provenance.contains("inputs") && provenance["inputs"].is_array()) {
    for (const Json& file : provenance["inputs"]) {
      // A hand-edited or damaged result may hold anything here: only a file's path names one.
      if (!file.is_object() || !file.contains("path") || !file["path"].is_string()) continue;
      const std::string name =
          std::filesystem::path(file["path"].get<std::string>()).filename().string();
      out.emplace_back("inputs." + name + ".sha256",
                       file.contains("sha256") ? DumpJson(file["sha256"]) : "null");
    }
  }
  return out;
}

}  // namespace dtsim::results
