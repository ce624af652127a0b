#include "strategies/published_recipes.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "sim/base/strings.h"
#include "strategies/validation.h"

namespace dtsim::strategies {
namespace {

bool Has(std::string_view text, std::string_view word) {
  return text.find(word) != std::string_view::npos;
}

// One recipe's settings: the points it covers (the release in the source's location, a word
// of the model's name, the framework the point names, FP8 only), and what it sets.
struct RecipeSetting {
  std::string_view release;    // in the point's source location, lower case: "nemo 24.07"
  std::string_view model;      // in the model's name, lower case; empty: every model
  std::string_view framework;  // in the point's parallel.framework, lower case; empty: any
  bool fp8_only = false;
  bool unsharded_only = false;  // not under FSDP ("parallel.fsdp": true)
  bool unstated_recompute_only = false;
  // The training key set, or with the prefix "expert." the key of parallelism.expert.
  std::string_view key;
  std::string_view value;  // its value, as JSON text
  std::string_view note;   // what the notes say, with the source
};

// NeMo 24.07: NeMo-Framework-Launcher at tag 24.07 (the container the table names). Its H100
// FP8 examples (examples/training/gpt/h100/*_fp8.sh, examples/training/llama/h100/*_fp8.sh)
// pass +training.model.optim.grad_sync_dtype=bf16 to Apex's DistributedFusedAdam (whose
// contiguous gradient buffer then holds bf16); the Nemotron 8B/22B examples do not (fp32, Apex's
// default); conf/training/nemotron/nemotron_340b.yaml sets optim.grad_sync_dtype and optim.dtype
// (the optimizer state's) bf16. Megatron-Bridge 25.09 (the NeMo 25.09 container;
// NVIDIA-NeMo/Megatron-Bridge a73c1be): every bf16_with_fp8_* config of
// src/megatron/bridge/training/mixed_precision.py sets fp8_param_gather; recipes/deepseek/
// deepseek_v3.py sets grad_reduce_in_fp32=False (the others True, the default modelled);
// recipes/qwen/qwen3_30b_a3b.py recomputes every layer in full (granularity full, method
// uniform, 1 layer), which scripts/performance does not override on H100; run_script.py
// recomputes DeepSeek-V3's modules mla_up_proj and mlp on H100 (recompute_modules) and, there
// (A2A_1F1B), overlaps its expert all-to-alls (comm_overlap.overlap_moe_expert_parallel_comm)
// with delay_wgrad_compute.
// Megatron-LM at commit 8aa4619f (March 2021, DLPerf's V100 runs): megatron/model/
// distributed.py's local DDP all-reduces each dtype's gradients coalesced, in that dtype (the
// parameters': fp16 under --fp16) unless --fp32-allreduce, which defaults off
// (megatron/arguments.py).
constexpr std::array kRecipes = {
    RecipeSetting{.framework = "megatron-lm commit 8aa4619f",
                  .key = "grad_precision",
                  .value = R"("fp16")",
                  .note = "fp16 gradients (Megatron-LM 8aa4619f's megatron/model/distributed.py: "
                          "the local DDP all-reduces them in the parameters' dtype without "
                          "--fp32-allreduce)"},
    RecipeSetting{.release = "nemo 24.07",
                  .model = "gpt",
                  .key = "grad_precision",
                  .value = R"("bf16")",
                  .note = "bf16 gradients (NeMo 24.07's examples/training/gpt/h100/*_fp8.sh: "
                          "optim.grad_sync_dtype=bf16)"},
    RecipeSetting{.release = "nemo 24.07",
                  .model = "llama",
                  .key = "grad_precision",
                  .value = R"("bf16")",
                  .note = "bf16 gradients (NeMo 24.07's examples/training/llama/h100/*_fp8.sh: "
                          "optim.grad_sync_dtype=bf16)"},
    RecipeSetting{.release = "nemo 24.07",
                  .model = "340b",
                  .key = "grad_precision",
                  .value = R"("bf16")",
                  .note = "bf16 gradients (NeMo 24.07's conf/training/nemotron/"
                          "nemotron_340b.yaml: optim.grad_sync_dtype bf16)"},
    RecipeSetting{.release = "nemo 24.07",
                  .model = "340b",
                  .key = "master_precision",
                  .value = R"("bf16")",
                  .note = "bf16 optimizer state (nemotron_340b.yaml: optim.dtype bf16)"},
    RecipeSetting{.release = "nemo 24.07",
                  .model = "340b",
                  .key = "moment_precision",
                  .value = R"("bf16")",
                  .note = ""},
    RecipeSetting{.release = "nemo 25.09",
                  .fp8_only = true,
                  .unsharded_only = true,
                  .key = "param_precision",
                  .value = R"("fp8")",
                  .note = "FP8 parameters (Megatron-Bridge 25.09's mixed_precision.py: "
                          "fp8_param_gather)"},
    RecipeSetting{.release = "nemo 25.09",
                  .model = "deepseek-v3",
                  .key = "grad_precision",
                  .value = R"("bf16")",
                  .note = "bf16 gradients (Megatron-Bridge 25.09's recipes/deepseek/"
                          "deepseek_v3.py: grad_reduce_in_fp32=False)"},
    RecipeSetting{.release = "nemo 25.09",
                  .model = "deepseek-v3",
                  .unstated_recompute_only = true,
                  .key = "recompute",
                  .value = R"("selective")",
                  .note = "selective recompute of the modules mla_up_proj and mlp "
                          "(Megatron-Bridge 25.09's scripts/performance/run_script.py on H100: "
                          "recompute_modules)"},
    RecipeSetting{.release = "nemo 25.09",
                  .model = "deepseek-v3",
                  .unstated_recompute_only = true,
                  .key = "recompute_modules",
                  .value = R"(["mla_up_proj", "mlp"])",
                  .note = ""},
    RecipeSetting{.release = "nemo 25.09",
                  .model = "deepseek-v3",
                  .key = "expert.overlap",
                  .value = "true",
                  .note =
                      "expert all-to-alls overlapped, weight gradients delayed (Megatron-Bridge "
                      "25.09's scripts/performance/run_script.py on H100: A2A_1F1B sets "
                      "overlap_moe_expert_parallel_comm and delay_wgrad_compute)"},
    RecipeSetting{.release = "nemo 25.09",
                  .model = "deepseek-v3",
                  .key = "expert.delay_wgrad",
                  .value = "true",
                  .note = ""},
    RecipeSetting{.release = "nemo 25.09",
                  .model = "qwen3-30b-a3b",
                  .unstated_recompute_only = true,
                  .key = "recompute",
                  .value = R"("full")",
                  .note = "full recompute of every layer (Megatron-Bridge 25.09's recipes/qwen/"
                          "qwen3_30b_a3b.py)"},
};

bool Covers(const RecipeSetting& recipe, const Json& point, const Json& training) {
  const Json empty = Json::object();
  const Json& source =
      point.contains("source") && point["source"].is_object() ? point["source"] : empty;
  const Json& parallel =
      point.contains("parallel") && point["parallel"].is_object() ? point["parallel"] : empty;
  const Json& model =
      point.contains("model") && point["model"].is_object() ? point["model"] : empty;
  if (!Has(ToLower(TextField(source, "location")), recipe.release)) return false;
  if (!Has(ToLower(TextField(model, "name")), recipe.model)) return false;
  if (!Has(ToLower(TextField(parallel, "framework")), recipe.framework)) return false;
  if (recipe.fp8_only && training.value("precision", "") != "fp8") return false;
  if (recipe.unsharded_only && parallel.contains("fsdp") && parallel["fsdp"] == true) return false;
  return !recipe.unstated_recompute_only || TextField(parallel, "recompute").empty();
}

}  // namespace

void ApplyPublishedRecipe(const Json& point, Json& training, Json& parallelism,
                          std::vector<std::string>& notes) {
  constexpr std::string_view kExpert = "expert.";
  for (const RecipeSetting& recipe : kRecipes) {
    if (!Covers(recipe, point, training)) continue;
    if (recipe.key.starts_with(kExpert)) {
      Json& expert = parallelism["expert"];
      if (!expert.is_object()) expert = Json{{"size", expert.is_null() ? Json(1) : expert}};
      expert[std::string(recipe.key.substr(kExpert.size()))] = Json::parse(recipe.value);
    } else {
      training[std::string(recipe.key)] = Json::parse(recipe.value);
    }
    if (recipe.key == "recompute") {
      // The recipe states what the table did not: no longer an assumption.
      std::erase_if(notes, [](const std::string& note) { return note.starts_with("recompute "); });
    }
    if (!recipe.note.empty()) notes.emplace_back(recipe.note);
  }
}

}  // namespace dtsim::strategies
