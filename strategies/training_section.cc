#include "strategies/training_section.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "models/memory.h"
#include "sim/base/dtype.h"
#include "sim/base/strings.h"

namespace dtsim::strategies {
namespace {

Status ReadDType(JsonObjectReader& reader, std::string_view key, DType& out) {
  reader.Allow(key);
  if (!reader.Has(key)) return Status::Ok();
  DTSIM_ASSIGN_OR_RETURN(const std::string name, reader.String(key));
  for (std::string_view allowed : {"fp32", "fp16", "bf16"}) {
    if (name == allowed) {
      out = *DTypeFromName(name);
      return Status::Ok();
    }
  }
  return Error(key == "precision" || key == "param_precision"
                   ? "expected \"bf16\", \"fp16\", \"fp32\" or \"fp8\""
                   : "expected \"bf16\", \"fp16\" or \"fp32\"",
               JsonChildPath(reader.path(), key), Quote(name));
}

// "precision": "fp8" trains with BF16 activations and parameters and FP8 GEMMs, as Transformer
// Engine does, scaled by "fp8_recipe" (default "delayed"); any other precision is ReadDType's.
Status ReadPrecision(JsonObjectReader& reader, TrainingConfig& training) {
  const Json* precision = reader.Find("precision");
  const bool fp8 = precision != nullptr && precision->is_string() && *precision == "fp8";
  if (fp8) {
    training.dtype = DType::kBf16;
    training.fp8 = models::Fp8Recipe::kDelayed;
  } else {
    DTSIM_RETURN_IF_ERROR(ReadDType(reader, "precision", training.dtype));
  }
  if (!reader.Has("fp8_recipe")) return Status::Ok();
  if (!fp8) {
    return Error("an FP8 recipe needs \"precision\": \"fp8\"", "training.fp8_recipe",
                 JsonValueForError(*reader.Find("fp8_recipe")));
  }
  // The recipes, without "none".
  const std::span<const std::string_view> recipes = models::Fp8RecipeNames().subspan(1);
  size_t index = 0;
  DTSIM_RETURN_IF_ERROR(reader.ReadOptionalChoice("fp8_recipe", recipes, index));
  training.fp8 = static_cast<models::Fp8Recipe>(index + 1);
  return Status::Ok();
}

// "param_precision": "fp32", "bf16", "fp16" (ReadDType) or "fp8": FP8 parameters, which only
// FP8 training has (its GEMMs' weights quantized; the rest stays in the activations' dtype).
Status ReadParamPrecision(JsonObjectReader& reader, TrainingConfig& training) {
  const Json* value = reader.Find("param_precision");
  if (value == nullptr || !value->is_string() || *value != "fp8") {
    return ReadDType(reader, "param_precision", training.param_dtype);
  }
  reader.Allow("param_precision");
  if (training.fp8 == models::Fp8Recipe::kNone) {
    return Error("FP8 parameters need FP8 training (\"precision\": \"fp8\")",
                 "training.param_precision", "\"fp8\"");
  }
  training.param_dtype = training.dtype;
  training.fp8_params = true;
  return Status::Ok();
}

// "master_precision" and "moment_precision": the dtypes of the optimizer's master copy and
// moments (models::OptimizerState). fp32 parameters have no master copy to store in another.
Status ReadOptimizerState(JsonObjectReader& reader, TrainingConfig& training) {
  DTSIM_RETURN_IF_ERROR(ReadDType(reader, "master_precision", training.optimizer_state.master));
  DTSIM_RETURN_IF_ERROR(ReadDType(reader, "moment_precision", training.optimizer_state.moments));
  if (reader.Has("master_precision") && training.param_dtype == DType::kFp32) {
    return Error(
        "fp32 parameters are their own master copy: master_precision applies to bf16 or fp16 "
        "parameters (training.param_precision)",
        "training.master_precision", Quote(DTypeName(training.optimizer_state.master)));
  }
  return Status::Ok();
}

// "recompute_modules": ["core_attn", "mlp", ...] — what "selective" re-runs (Megatron-Core's
// --recompute-modules; models::RecomputeModule), each named once; only with "selective".
// An array of names from `names` as a mask, bit i for names[i], each named at most once.
// Errors name the element: "expected a {noun} name", "unknown {kind}" with a suggestion.
Expected<uint8_t> ReadNameMask(const Json& value, const std::string& path,
                               std::span<const std::string_view> names, std::string_view kind,
                               std::string_view noun) {
  uint8_t mask = 0;
  for (size_t i = 0; i < value.size(); ++i) {
    const Json& item = value[i];
    const std::string at = JsonIndexPath(path, i);
    if (!item.is_string()) {
      return Error(fmt::format("expected a {} name", noun), at, JsonValueForError(item));
    }
    const std::string name = item.get<std::string>();
    const auto known = std::find(names.begin(), names.end(), name);
    if (known == names.end()) {
      return Error(
          fmt::format("unknown {}{}; known: {}", kind, DidYouMean(name, names), JoinQuoted(names)),
          at, Quote(name));
    }
    const auto bit = static_cast<uint8_t>(1U << (known - names.begin()));
    if ((mask & bit) != 0) return Error("named twice", at, Quote(name));
    mask |= bit;
  }
  return mask;
}

Status ReadRecomputeModules(JsonObjectReader& reader, TrainingConfig& training) {
  reader.Allow("recompute_modules");
  const Json* value = reader.Find("recompute_modules");
  if (value == nullptr) return Status::Ok();
  const std::string path = "training.recompute_modules";
  if (training.recompute != models::Recompute::kSelective) {
    return Error(
        fmt::format("recompute_modules name what \"selective\" recomputes (Megatron-Core's "
                    "--recompute-modules), but training.recompute is \"{}\"",
                    models::RecomputeName(training.recompute)),
        path, JsonValueForError(*value));
  }
  if (!value->is_array() || value->empty()) {
    return Error("expected a non-empty array of module names", path, JsonValueForError(*value));
  }
  DTSIM_ASSIGN_OR_RETURN(
      const uint8_t mask,
      ReadNameMask(*value, path, models::RecomputeModuleNames(), "recompute module", "module"));
  training.recompute_modules = mask;
  return Status::Ok();
}

// "compile": true or false, or the components torch.compile compiles (torchtitan's
// compile.components), for the pytorch framework only.
Status ReadCompile(JsonObjectReader& reader, TrainingConfig& training) {
  reader.Allow("compile");
  const Json* value = reader.Find("compile");
  if (value == nullptr) return Status::Ok();
  const std::string path = "training.compile";
  uint8_t mask = 0;
  if (value->is_boolean()) {
    mask = value->get<bool>() ? kCompileModel | kCompileLoss : 0;
  } else if (value->is_array()) {
    DTSIM_ASSIGN_OR_RETURN(mask, ReadNameMask(*value, path, CompileComponentNames(),
                                              "torch.compile component", "component"));
  } else {
    return Error("expected true, false or an array of components (\"model\", \"loss\")", path,
                 JsonValueForError(*value));
  }
  if (mask != 0 && training.framework != models::Framework::kPyTorch) {
    return Error(fmt::format("torch.compile is modelled for framework \"pytorch\", not \"{}\"",
                             models::FrameworkName(training.framework)),
                 path, JsonValueForError(*value));
  }
  training.compile = mask;
  return Status::Ok();
}

// "framework_version": "MAJOR.MINOR.PATCH", for the deepspeed framework only (the one whose
// releases dtsim tells apart).
Status ReadFrameworkVersion(JsonObjectReader& reader, TrainingConfig& training) {
  if (!reader.Has("framework_version")) return Status::Ok();
  const std::string path = "training.framework_version";
  DTSIM_ASSIGN_OR_RETURN(const std::string text, reader.String("framework_version"));
  if (training.framework == models::Framework::kMegatron) {
    return Error("releases are modelled for \"framework\": \"deepspeed\" and \"pytorch\" only",
                 path, Quote(text));
  }
  std::array<int, 3> release = {0, 0, 0};
  size_t at = 0;
  for (size_t part = 0; part < 3; ++part) {
    size_t end = at;
    while (end < text.size() && end - at < 6 && text[end] >= '0' && text[end] <= '9') ++end;
    const bool last = part == 2;
    if (end == at || (last ? end != text.size() : end >= text.size() || text[end] != '.')) {
      return Error(
          fmt::format("expected a release \"MAJOR.MINOR.PATCH\", such as \"{}\"",
                      training.framework == models::Framework::kPyTorch ? "2.6.0" : "0.3.13"),
          path, Quote(text));
    }
    release[part] = std::stoi(text.substr(at, end - at));
    at = end + 1;
  }
  if (release == std::array<int, 3>{0, 0, 0}) {
    return Error("release 0.0.0 did not exist", path, Quote(text));
  }
  training.framework_release = release;
  return Status::Ok();
}

// "deepspeed": {"reduce_bucket_size": 5e8, "stage3_max_live_parameters": 1e9, …}, the
// zero_optimization keys of a ds_config that size ZeRO's buffers.
Status ReadDeepSpeed(JsonObjectReader& parent, TrainingConfig& training) {
  const Json* value = parent.Find("deepspeed");
  if (value == nullptr) return Status::Ok();
  const std::string path = JsonChildPath(parent.path(), "deepspeed");
  if (training.framework != models::Framework::kDeepSpeed) {
    return Error(fmt::format("DeepSpeed's ZeRO settings need \"framework\": \"deepspeed\", got {}",
                             Quote(models::FrameworkName(training.framework))),
                 path);
  }
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(*value, path));
  constexpr int64_t kMost = models::kMaxDeepSpeedElements;
  models::DeepSpeedZero& zero = training.deepspeed;
  DTSIM_RETURN_IF_ERROR(reader.ReadOptional("contiguous_gradients", zero.contiguous_gradients));
  DTSIM_RETURN_IF_ERROR(
      reader.ReadOptionalInt("reduce_bucket_size", zero.reduce_bucket_size, 1, kMost));
  DTSIM_RETURN_IF_ERROR(
      reader.ReadOptionalInt("stage3_prefetch_bucket_size", zero.prefetch_bucket_size, 0, kMost));
  DTSIM_RETURN_IF_ERROR(
      reader.ReadOptionalInt("stage3_max_live_parameters", zero.max_live_parameters, 0, kMost));
  DTSIM_RETURN_IF_ERROR(
      reader.ReadOptionalInt("stage3_max_reuse_distance", zero.max_reuse_distance, 0, kMost));
  return reader.Finish();
}

}  // namespace

Status ReadTraining(const Json& value, TrainingConfig& training) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, "training"));
  if (!reader.Has("global_batch")) return Error("missing required field", "training.global_batch");
  DTSIM_RETURN_IF_ERROR(
      reader.ReadOptionalInt("global_batch", training.global_batch, 1, kMaxGlobalBatch));
  DTSIM_RETURN_IF_ERROR(
      reader.ReadOptionalInt("micro_batch", training.micro_batch, 1, kMaxGlobalBatch));
  DTSIM_RETURN_IF_ERROR(reader.ReadOptionalInt("seq_len", training.seq_len, 1, kMaxSequenceLength));
  DTSIM_RETURN_IF_ERROR(ReadPrecision(reader, training));
  DTSIM_RETURN_IF_ERROR(
      reader.ReadOptionalEnum("framework", models::FrameworkNames(), training.framework));
  // PyTorch trains fp32 parameters under autocast (FSDP2: fp32 shards); Megatron keeps them in
  // the activations' dtype beside an fp32 master copy.
  training.param_dtype =
      training.framework == models::Framework::kPyTorch ? DType::kFp32 : training.dtype;
  DTSIM_RETURN_IF_ERROR(ReadParamPrecision(reader, training));
  // DeepSpeed's ZeRO reduces gradients in the parameters' dtype (communication_data_type).
  training.grad_dtype = DefaultGradDtype(training);
  DTSIM_RETURN_IF_ERROR(ReadDType(reader, "grad_precision", training.grad_dtype));
  DTSIM_RETURN_IF_ERROR(ReadFrameworkVersion(reader, training));
  DTSIM_RETURN_IF_ERROR(
      reader.ReadOptionalEnum("optimizer", models::OptimizerNames(), training.optimizer));
  DTSIM_RETURN_IF_ERROR(ReadOptimizerState(reader, training));
  DTSIM_RETURN_IF_ERROR(
      reader.ReadOptionalEnum("recompute", models::RecomputeNames(), training.recompute));
  DTSIM_RETURN_IF_ERROR(ReadRecomputeModules(reader, training));
  DTSIM_RETURN_IF_ERROR(
      reader.ReadOptionalInt("recompute_every", training.recompute_every, 1, 1 << 20));
  if (training.recompute_every > 1 && training.recompute == models::Recompute::kNone) {
    return Error(
        fmt::format(
            "recompute_every {} picks the layers training.recompute applies to, "
            "but it is \"none\": name their policy (\"full\", \"selective\" or \"selective_op\")",
            training.recompute_every),
        "training.recompute_every", std::to_string(training.recompute_every));
  }
  DTSIM_RETURN_IF_ERROR(reader.ReadOptional("flash_attention", training.flash_attention));
  DTSIM_RETURN_IF_ERROR(reader.ReadOptional("dropout", training.dropout));
  DTSIM_RETURN_IF_ERROR(ReadCompile(reader, training));
  DTSIM_RETURN_IF_ERROR(reader.ReadOptional("expandable_segments", training.expandable_segments));
  DTSIM_RETURN_IF_ERROR(
      reader.ReadOptional("reshard_after_forward", training.reshard_after_forward));
  DTSIM_RETURN_IF_ERROR(reader.ReadOptionalInt("activation_offload_layers",
                                               training.activation_offload_layers, 0, 1 << 20));
  DTSIM_RETURN_IF_ERROR(
      reader.ReadOptional("activation_offload_v1", training.activation_offload_v1));
  DTSIM_RETURN_IF_ERROR(ReadDeepSpeed(reader, training));
  return reader.Finish();
}

std::span<const std::string_view> CompileComponentNames() {
  static constexpr std::array<std::string_view, 2> kNames = {"model", "loss"};
  return kNames;
}

DType DefaultGradDtype(const TrainingConfig& training) {
  return training.framework == models::Framework::kDeepSpeed ? training.dtype : DType::kFp32;
}

}  // namespace dtsim::strategies
