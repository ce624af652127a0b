#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <span>

#include "models/cost_model.h"
#include "models/gpu.h"
#include "models/memory.h"
#include "sim/base/strings.h"
#include "strategies/config.h"
#include "strategies/plan_checks.h"
#include "tools/api/api.h"

namespace dtsim::api {
namespace {

Expected<models::ModelSpec> LoadModel(const ModelInput& input) {
  if (input.document) return models::ModelFromJson(*input.document, "");
  const std::string& name = input.name;
  if (!name.ends_with(".json") && !std::filesystem::exists(name)) {
    return models::ModelPreset(name);
  }
  DTSIM_ASSIGN_OR_RETURN(const Json json, ReadJsonFile(name));
  Expected<models::ModelSpec> model = models::ModelFromJson(json, "");
  if (!model.ok()) return std::move(model).error().InFile(name);
  return model;
}

Expected<models::Recompute> ParseRecompute(const std::string& text) {
  const auto names = models::RecomputeNames();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == text) return static_cast<models::Recompute>(i);
  }
  return Error("expected " + JoinQuoted(names), "recompute", Quote(text));
}

// "mla_up_proj,mlp" → the modules' bits (models::RecomputeModule); empty: the core attention.
Expected<uint8_t> ParseRecomputeModules(const std::string& text, models::Recompute recompute) {
  if (text.empty()) return static_cast<uint8_t>(models::kRecomputeCoreAttn);
  if (recompute != models::Recompute::kSelective) {
    return Error("the modules name what selective recompute re-runs", "recompute_modules",
                 Quote(text));
  }
  uint8_t mask = 0;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t end = std::min(text.find(',', at), text.size());
    const std::string name = text.substr(at, end - at);
    const std::optional<uint8_t> bit = models::RecomputeModuleBit(name);
    if (!bit) {
      return Error("unknown recompute module" + DidYouMean(name, models::RecomputeModuleNames()) +
                       "; known: " + JoinQuoted(models::RecomputeModuleNames()),
                   "recompute_modules", Quote(name));
    }
    mask |= *bit;
    at = end + 1;
  }
  return mask;
}

// FP8 training keeps BF16 activations; its recipe says how the FP8 GEMMs' inputs are scaled.
// A recipe given with another dtype is an error, as a config's training.fp8_recipe without
// "precision": "fp8" is: it would be ignored.
Expected<models::Fp8Recipe> ParseFp8(const ModelQuery& query) {
  if (query.dtype != "fp8") {
    if (query.fp8_recipe.empty()) return models::Fp8Recipe::kNone;
    return Error(
        fmt::format("an FP8 recipe needs dtype \"fp8\" (the dtype is {})", Quote(query.dtype)),
        "fp8_recipe", Quote(query.fp8_recipe));
  }
  const std::string recipe = query.fp8_recipe.empty() ? "delayed" : query.fp8_recipe;
  const std::span<const std::string_view> names = models::Fp8RecipeNames().subspan(1);
  const auto it = std::find(names.begin(), names.end(), recipe);
  if (it == names.end()) {
    return Error(
        "unknown FP8 recipe" + DidYouMean(recipe, names) + "; recipes: " + JoinQuoted(names),
        "fp8_recipe", Quote(recipe));
  }
  return static_cast<models::Fp8Recipe>(it - names.begin() + 1);
}

std::vector<results::PricedOp> Priced(const std::vector<models::Op>& ops,
                                      const models::OpCostModel& cost,
                                      results::PassTotals& totals) {
  std::vector<results::PricedOp> priced;
  priced.reserve(ops.size());
  for (const models::Op& op : ops) {
    const double seconds = cost.Price(op)->duration.ToSecondsDouble();
    totals.flops += op.flops;
    totals.model_flops += op.model_flops;
    totals.bytes += op.bytes;
    totals.seconds += seconds;
    priced.push_back({.op = op, .seconds = seconds});
  }
  return priced;
}

Expected<results::LayerReport> DescribeLayer(const models::ModelSpec& model,
                                             const ModelQuery& query) {
  const models::TransformerSpec& spec = model.transformer;
  const bool fp8 = query.dtype == "fp8";
  const std::optional<DType> dtype = fp8 ? DType::kBf16 : DTypeFromName(query.dtype);
  if (!dtype) return Error("unknown dtype", "dtype", Quote(query.dtype));
  DTSIM_ASSIGN_OR_RETURN(const models::Fp8Recipe recipe, ParseFp8(query));
  DTSIM_ASSIGN_OR_RETURN(const models::Recompute recompute, ParseRecompute(query.recompute));
  DTSIM_ASSIGN_OR_RETURN(const uint8_t modules,
                         ParseRecomputeModules(query.recompute_modules, recompute));
  if (query.layer < 0 || query.layer >= spec.layers) {
    return Error(fmt::format("the model has layers 0 to {}", spec.layers - 1), "layer",
                 std::to_string(query.layer));
  }
  if (query.seq_len < 0) {
    return Error("must be positive (0: the model's max_seq)", "seq_len",
                 std::to_string(query.seq_len));
  }
  // A config's bounds (strategies/config.h), which keep every product of them inside 64-bit
  // integers: past them the printed bytes and times were overflowed nonsense.
  if (query.seq_len > strategies::kMaxSequenceLength) {
    return Error(fmt::format("at most {} (2^24), as in a config", strategies::kMaxSequenceLength),
                 "seq_len", std::to_string(query.seq_len));
  }
  DTSIM_RETURN_IF_ERROR(
      strategies::CheckLearnedPositions(spec, query.seq_len, "seq_len", "its max_seq", ""));
  if (query.micro_batch > strategies::kMaxGlobalBatch) {
    return Error(fmt::format("at most {} (2^36), as in a config", strategies::kMaxGlobalBatch),
                 "micro_batch", std::to_string(query.micro_batch));
  }
  Expected<models::GpuSpec> preset = models::GpuPreset(query.gpu);
  if (!preset.ok()) return Error(preset.error().message(), "gpu", preset.error().value());
  const models::GpuSpec& gpu = *preset;
  DTSIM_RETURN_IF_ERROR(strategies::CheckGpuPrecision(gpu, *dtype, recipe, "dtype", "fp8_recipe"));
  results::LayerReport report{
      .layer = query.layer,
      .shard = {.micro_batch = query.micro_batch,
                .seq_len = query.seq_len > 0 ? query.seq_len : spec.max_seq,
                .dtype = *dtype,
                .tensor_parallel = query.tensor_parallel,
                .sequence_parallel = query.sequence_parallel,
                .flash_attention = query.flash_attention,
                .dropout = query.dropout,
                .fp8 = recipe,
                .recompute_modules = modules},
      .dtype = query.dtype,
      .gpu = gpu.name,
      .recompute = query.recompute,
      .recompute_policy =
          modules == models::kRecomputeCoreAttn
              ? query.recompute
              : fmt::format("{} of {}", query.recompute, models::RecomputeModulesText(modules))};
  DTSIM_RETURN_IF_ERROR(models::ValidateShard(spec, report.shard));
  // Each size within its bound can still multiply past 64-bit counts (2^36 sequences of 2^24
  // tokens printed 0 MB of activations): a config's check of the products.
  DTSIM_RETURN_IF_ERROR(strategies::CheckSizesFit(spec, report.shard.micro_batch,
                                                  report.shard.seq_len,
                                                  report.shard.tensor_parallel, model.name));
  const models::RooflineCostModel roofline(gpu);
  const models::LayerOps layer = models::TransformerLayerOps(spec, query.layer, report.shard);
  report.forward = Priced(layer.forward, roofline, report.forward_totals);
  report.backward = Priced(layer.backward, roofline, report.backward_totals);
  report.recompute_ops =
      Priced(models::RecomputeOps(layer, recompute), roofline, report.recompute_totals);
  report.activation_bytes =
      models::LayerActivationBytes(layer, recompute, report.shard, spec.hidden);
  return report;
}

}  // namespace

Expected<results::ModelReport> DescribeModel(const ModelInput& input, const ModelQuery& query) {
  DTSIM_ASSIGN_OR_RETURN(models::ModelSpec model, LoadModel(input));
  results::ModelReport report{.model = std::move(model)};
  report.parameters = models::CountParameters(report.model);
  if (report.model.family != models::ModelFamily::kTransformer) return report;
  report.kv_cache_bytes_per_token =
      models::KvCacheBytesPerToken(report.model.transformer, DType::kBf16);
  DTSIM_ASSIGN_OR_RETURN(report.layer, DescribeLayer(report.model, query));
  return report;
}

}  // namespace dtsim::api
