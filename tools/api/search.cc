#include "strategies/search.h"

#include <fmt/format.h>

#include <array>
#include <optional>

#include "sim/base/strings.h"
#include "strategies/config.h"
#include "tools/api/api.h"
#include "tools/results/provenance.h"

namespace dtsim::api {
namespace {

// What the command line checks before it calls: a caller of the API gets the same errors,
// named after the SearchCall field.
Status CheckCall(const SearchCall& call) {
  if (call.top < 1) return Error("must be at least 1", "top", std::to_string(call.top));
  if (call.rerank < 0) return Error("must be at least 0", "rerank", std::to_string(call.rerank));
  if (call.threads < 0) return Error("must be at least 0", "threads", std::to_string(call.threads));
  if (call.gpus < 0) return Error("must be at least 0", "gpus", std::to_string(call.gpus));
  if (call.ranks != "symmetric" && call.ranks != "full") {
    return Error("expected \"symmetric\" or \"full\"", "ranks", Quote(call.ranks));
  }
  if (call.shards < 1 || call.shard < 1 || call.shard > call.shards) {
    return Error("expected 1 ≤ shard ≤ shards", "shard",
                 fmt::format("{}/{}", call.shard, call.shards));
  }
  return Status::Ok();
}

}  // namespace

Expected<results::SearchFile> RunSearch(const ConfigInput& input, const SearchCall& call,
                                        const ProgressCallback& progress) {
  DTSIM_RETURN_IF_ERROR(CheckCall(call));
  DTSIM_ASSIGN_OR_RETURN(Json json, ReadConfigInput(input));
  results::RecordConfig(json, input.overrides, nullptr);
  const std::string& source = input.Source();
  const auto in_file = [&source](Error error) { return std::move(error).InFile(source); };
  constexpr std::array<std::string_view, 1> kSearchKey = {"search"};
  Expected<strategies::SimulationConfig> base =
      strategies::ReadConfigSections(json, source, kSearchKey);
  if (!base.ok()) return in_file(std::move(base).error());
  if (call.gpus > 0) {
    const int per_node = base->cluster.gpus_per_node;
    if (call.gpus % per_node != 0) {
      return Error(fmt::format("not a multiple of the cluster's {} GPUs per node", per_node),
                   "--gpus", std::to_string(call.gpus));
    }
    base->cluster.nodes = call.gpus / per_node;
  }
  // A copy: the section leaves `json` before the settings are recorded.
  const std::optional<Json> section =
      json.contains("search") ? std::optional<Json>(json["search"]) : std::nullopt;
  Expected<strategies::SearchSpace> space =
      strategies::SearchSpaceFromJson(section ? &*section : nullptr, *base);
  if (!space.ok()) return in_file(std::move(space).error());

  strategies::SearchOptions search{.top = call.top,
                                   .rerank = call.rerank,
                                   .threads = call.threads,
                                   .shard = call.shard,
                                   .shards = call.shards,
                                   .ranks = call.ranks == "full"
                                                ? strategies::RanksMode::kFull
                                                : strategies::RanksMode::kSymmetric,
                                   .progress = progress};
  Expected<strategies::SearchResult> result = strategies::Search(*base, *space, search);
  if (!result.ok()) return in_file(std::move(result).error());
  OrderedJson compression = OrderedJson::array();
  for (const strategies::CompressionConfig& method : space->compression)
    compression.push_back(method.method);
  json.erase("search");
  results::SearchFile file;
  file.settings = {{"config", source},
                   {"simulation_config", json},
                   {"model", base->model.name},
                   {"gpu", base->gpu.name},
                   {"gpu_memory_bytes", base->gpu.memory.count()},
                   {"cluster", base->cluster.name},
                   {"gpus", base->cluster.gpu_count()},
                   {"space",
                    {{"search", section.value_or(Json::object())},
                     {"compression", std::move(compression)},
                     {"global_batches", space->global_batches}}},
                   {"top", call.top},
                   {"rerank", call.rerank},
                   {"ranks", call.ranks}};
  file.shard = call.shard;
  file.shards = call.shards;
  file.space = std::move(space).value();
  file.result = std::move(result).value();
  // An empty shard is no error: other shards may hold the plans.
  if (call.shards == 1) {
    if (Status explained = ExplainEmptySearch(file.result, *base); !explained.ok()) {
      return in_file(explained.error());
    }
  }
  return file;
}

}  // namespace dtsim::api
