// Reading a search space: the config's "search" section (docs/search.md).
#include <fmt/format.h>

#include <algorithm>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/quantity.h"
#include "sim/base/strings.h"
#include "strategies/embedding_sharding.h"
#include "strategies/search.h"

namespace dtsim::strategies {
namespace {

// A non-empty array at `key` of `reader`, each element read by `element(value, path)`.
template <typename T, typename ReadElement>
Status ReadList(JsonObjectReader& reader, std::string_view key, std::vector<T>& out,
                ReadElement element) {
  reader.Allow(key);
  const Json* list = reader.Find(key);
  if (list == nullptr) return Status::Ok();
  const std::string path = JsonChildPath(reader.path(), key);
  if (!list->is_array() || list->empty()) {
    return Error("expected a non-empty array", path, JsonValueForError(*list));
  }
  out.clear();
  for (size_t i = 0; i < list->size(); ++i) {
    DTSIM_ASSIGN_OR_RETURN(T value, element((*list)[i], JsonIndexPath(path, i)));
    out.push_back(std::move(value));
  }
  return Status::Ok();
}

// One of `names` at `path`, as its index.
template <typename Enum>
Expected<Enum> EnumAt(const Json& value, const std::string& path,
                      std::span<const std::string_view> names) {
  if (value.is_string()) {
    const std::string name = value.get<std::string>();
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == name) return static_cast<Enum>(i);
    }
    return Error(
        fmt::format("unknown value{}; known: {}", DidYouMean(name, names), JoinQuoted(names)), path,
        Quote(name));
  }
  return Error(fmt::format("expected one of {}", JoinQuoted(names)), path,
               JsonValueForError(value));
}

Expected<bool> BoolAt(const Json& v, const std::string& path) {
  if (!v.is_boolean()) return Error("expected true or false", path, JsonValueForError(v));
  return v.get<bool>();
}

// "global_batches": distinct sizes in sequences; several only with a time_to_train section, by
// which the search then ranks (a larger batch's faster iterations are fewer samples' worth of
// progress each only if the run's tokens hold: time to train says).
Status ReadGlobalBatches(JsonObjectReader& reader, const SimulationConfig& base,
                         std::vector<int64_t>& batches) {
  DTSIM_RETURN_IF_ERROR(
      ReadList(reader, "global_batches", batches, [](const Json& v, const std::string& path) {
        return JsonToInt(v, path, 1, int64_t{1} << 40);
      }));
  const std::string path = JsonChildPath(reader.path(), "global_batches");
  for (size_t i = 0; i < batches.size(); ++i) {
    if (std::find(batches.begin(), batches.begin() + static_cast<std::ptrdiff_t>(i), batches[i]) !=
        batches.begin() + static_cast<std::ptrdiff_t>(i)) {
      return Error("listed twice", JsonIndexPath(path, i), std::to_string(batches[i]));
    }
  }
  if (batches.size() > 1 && !base.time_to_train) {
    return Error(
        "plans of different global batches are ranked by time to train: give a "
        "\"time_to_train\" section (the tokens the run needs and, with critical_batch_tokens, how "
        "a larger batch raises them; docs/time_to_train.md). A faster iteration of a larger "
        "batch is not a faster run",
        path, fmt::format("{} batches", batches.size()));
  }
  return Status::Ok();
}

// "embedding_sharding": a DLRM's placements to try, each as parallelism.embedding_sharding takes.
Status ReadEmbeddingShardings(JsonObjectReader& reader, const SimulationConfig& base,
                              std::vector<std::vector<EmbeddingSharding>>& shardings) {
  if (reader.Has("embedding_sharding") && base.model.family != models::ModelFamily::kDlrm) {
    return Error("a DLRM's dimension: this model has no embedding tables",
                 JsonChildPath(reader.path(), "embedding_sharding"));
  }
  const auto placement =
      [&base](const Json& v, const std::string& path) -> Expected<std::vector<EmbeddingSharding>> {
    DTSIM_ASSIGN_OR_RETURN(std::vector<EmbeddingSharding> sharding,
                           EmbeddingShardingFromJson(v, path));
    DTSIM_RETURN_IF_ERROR(CheckEmbeddingSharding(base.model.dlrm, sharding, path));
    return sharding;
  };
  return ReadList(reader, "embedding_sharding", shardings, placement);
}

}  // namespace

Expected<SearchSpace> SearchSpaceFromJson(const Json* value, const SimulationConfig& base) {
  SearchSpace space;
  space.compression = {base.compression};
  space.fp8 = {base.training.fp8};
  space.context = {base.plan.context};
  space.context_comm = {base.plan.context_comm};
  space.activation_offload = {base.training.activation_offload_layers};
  space.global_batches = {base.training.global_batch};
  space.embedding_shardings = {base.plan.embedding_sharding};
  space.orders = {base.plan.order};
  if (base.model.family == models::ModelFamily::kDlrm) {
    // A DLRM step is one pass over the rank's samples (TorchRec's loop accumulates nothing) and
    // its replicated dense part is never ZeRO-sharded: the config's micro-batch, ZeRO 0.
    space.micro_batches = {base.training.micro_batch};
    space.zero_stages = {0};
  }
  if (value == nullptr) return space;
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(*value, "search"));
  const auto integer = [](int64_t min, int64_t max) {
    return
        [min, max](const Json& v, const std::string& path) { return JsonToInt(v, path, min, max); };
  };
  DTSIM_RETURN_IF_ERROR(
      ReadList(reader, "micro_batches", space.micro_batches, integer(1, 1 << 20)));
  std::vector<int64_t> zero;
  DTSIM_RETURN_IF_ERROR(ReadList(reader, "zero_stages", zero, integer(0, 3)));
  if (!zero.empty()) space.zero_stages.assign(zero.begin(), zero.end());
  DTSIM_RETURN_IF_ERROR(
      ReadList(reader, "recompute", space.recompute, [](const Json& v, const std::string& path) {
        return EnumAt<models::Recompute>(v, path, models::RecomputeNames());
      }));
  DTSIM_RETURN_IF_ERROR(
      ReadList(reader, "schedules", space.schedules, [](const Json& v, const std::string& path) {
        return EnumAt<models::PipelineSchedule>(v, path, models::PipelineScheduleNames());
      }));
  DTSIM_RETURN_IF_ERROR(ReadList(
      reader, "tensor_modes", space.tensor_modes, [](const Json& v, const std::string& path) {
        return EnumAt<models::TensorLayout>(v, path, models::TensorLayoutNames());
      }));
  DTSIM_RETURN_IF_ERROR(ReadList(reader, "sequence_parallel", space.sequence_parallel, BoolAt));
  DTSIM_RETURN_IF_ERROR(ReadList(reader, "compression", space.compression, CompressionFromJson));
  const models::Fp8Recipe recipe = base.training.fp8 != models::Fp8Recipe::kNone
                                       ? base.training.fp8
                                       : models::Fp8Recipe::kDelayed;
  const auto fp8 = [recipe](const Json& v, const std::string& path) -> Expected<models::Fp8Recipe> {
    DTSIM_ASSIGN_OR_RETURN(const bool on, BoolAt(v, path));
    return on ? recipe : models::Fp8Recipe::kNone;
  };
  DTSIM_RETURN_IF_ERROR(ReadList(reader, "fp8", space.fp8, fp8));
  std::vector<int64_t> context;
  DTSIM_RETURN_IF_ERROR(ReadList(reader, "context", context, integer(1, 1 << 20)));
  if (!context.empty()) space.context.assign(context.begin(), context.end());
  DTSIM_RETURN_IF_ERROR(ReadList(
      reader, "context_comm", space.context_comm, [](const Json& v, const std::string& path) {
        return EnumAt<models::ContextComm>(v, path, models::ContextCommNames());
      }));
  std::vector<int64_t> offload;
  DTSIM_RETURN_IF_ERROR(
      ReadList(reader, "activation_offload_layers", offload, integer(0, 1 << 20)));
  if (!offload.empty()) space.activation_offload.assign(offload.begin(), offload.end());
  DTSIM_RETURN_IF_ERROR(ReadGlobalBatches(reader, base, space.global_batches));
  DTSIM_RETURN_IF_ERROR(ReadEmbeddingShardings(reader, base, space.embedding_shardings));
  DTSIM_RETURN_IF_ERROR(
      ReadList(reader, "orders", space.orders, [](const Json& v, const std::string& path) {
        if (!v.is_string()) {
          return Expected<std::array<PlanDimension, 3>>(
              Error("expected a string such as \"tp-pp-dp\"", path, JsonValueForError(v)));
        }
        return ParsePlanOrder(v.get<std::string>(), path);
      }));
  DTSIM_RETURN_IF_ERROR(reader.ReadOptionalInt("max_virtual_stages", space.max_virtual_stages));
  reader.Allow("memory_headroom");
  if (reader.Has("memory_headroom")) {
    DTSIM_ASSIGN_OR_RETURN(space.memory_headroom, reader.Size("memory_headroom"));
  }
  DTSIM_RETURN_IF_ERROR(reader.Finish());
  return space;
}

}  // namespace dtsim::strategies
