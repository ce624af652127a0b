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

// Whether `text` contains one of `words`, separated by '|' (any text contains "").
bool HasAny(std::string_view text, std::string_view words) {
  while (true) {
    const size_t bar = words.find('|');
    if (Has(text, words.substr(0, bar))) return true;
    if (bar == std::string_view::npos) return false;
    words.remove_prefix(bar + 1);
  }
}

// One recipe's settings: the points it covers (the release in the source's location, a word
// of the model's name, the framework the point names, FP8 only), and what it sets.
struct RecipeSetting {
  std::string_view paper;    // in the point's source paper, lower case: "narayanan et al."
  std::string_view release;  // in the point's source location, lower case: "nemo 24.07"
  // In the model's name, lower case, or one of several separated by '|'; empty: every model.
  std::string_view model;
  std::string_view framework;  // in the point's parallel.framework, lower case; empty: any
  bool fp8_only = false;
  bool unsharded_only = false;  // not under FSDP ("parallel.fsdp": true)
  bool unstated_recompute_only = false;
  bool pipelined_only = false;        // the point's PP is above 1
  bool tensor_parallel_only = false;  // the point's TP is above 1
  // The training key set; with the prefix "expert." (or "tensor.", "pipeline.") the key of
  // parallelism.expert (parallelism.tensor, parallelism.pipeline), with "nccl." the key of
  // cluster.nccl.
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
// src/megatron/bridge/training/mixed_precision.py sets fp8_param_gather; the YAML overrides
// scripts/performance/setup_experiment.py hands run_script.py for every model
// (scripts/performance/configs/*/*_llm_pretrain.yaml) set mixed_precision.grad_reduce_in_fp32
// false: bf16 gradient buffers and reductions (the recipes' own default is True, and only
// recipes/deepseek/deepseek_v3.py sets it False); recipes/qwen/qwen3_30b_a3b.py recomputes every
// layer in full (granularity full, method uniform, 1 layer), which scripts/performance does not
// override on H100; run_script.py recomputes DeepSeek-V3's modules mla_up_proj and mlp on H100
// (recompute_modules) and, there (A2A_1F1B), overlaps its expert all-to-alls
// (comm_overlap.overlap_moe_expert_parallel_comm) with delay_wgrad_compute. Its
// scripts/performance/setup_experiment.py passes nccl_pp_comm_chunksize=2097152 to NeMo-Run's
// PerfEnvPlugin for the 70B and 405B models, which exports NCCL_P2P_NET_CHUNKSIZE=2097152 when the
// run is pipelined (nemo/lightning/run/plugins.py).
// Megatron-LM at commit 8aa4619f (March 2021, DLPerf's V100 runs): megatron/model/
// distributed.py's local DDP all-reduces each dtype's gradients coalesced, in that dtype (the
// parameters': fp16 under --fp16) unless --fp32-allreduce, which defaults off
// (megatron/arguments.py). Neither it nor the Megatron-LM of Narayanan et al. (SC'21, submitted
// April 2021) had the async input-gradient all-reduce beside the weight-gradient GEMM, which
// came with commit cf7efd4 ("allreduce overlap with wgrad gemm", August 2021): every
// tensor-parallel collective on the compute stream.
constexpr std::string_view kNoAsyncNote =
    "tensor-parallel collectives not overlapped (Megatron-LM before commit cf7efd4, August 2021: "
    "no async input-gradient all-reduce beside the weight-gradient GEMM)";
// Megatron-LM scattered pipeline transfers over the tensor-parallel peers and all-gathered them
// from commit 72e4230 ("Turn scatter-gather optimization on by default", February 2021) — the
// optimization Narayanan et al. describe (SC'21, §4.1) — until Megatron-Core's
// p2p_communication.py (2023), which sends the whole tensor from every peer unless sequence
// parallel; Korthikanti et al. (2022) ran the same legacy code. Megatron-LM 8aa4619f, which
// DLPerf ran, is not a descendant of 72e4230: its training.py communicate() sends seq ×
// micro-batch × hidden from every peer.
constexpr std::string_view kScatterGatherNote =
    "pipeline transfers scattered over the tensor-parallel peers and all-gathered (Megatron-LM's "
    "scatter/gather, on by default from commit 72e4230, February 2021, until Megatron-Core)";
constexpr std::array kRecipes = {
    RecipeSetting{.paper = "narayanan et al.",
                  .pipelined_only = true,
                  .tensor_parallel_only = true,
                  .key = "pipeline.scatter_gather",
                  .value = "true",
                  .note = kScatterGatherNote},
    RecipeSetting{.paper = "korthikanti et al.",
                  .pipelined_only = true,
                  .tensor_parallel_only = true,
                  .key = "pipeline.scatter_gather",
                  .value = "true",
                  .note = kScatterGatherNote},
    RecipeSetting{.framework = "megatron-lm commit 8aa4619f",
                  .tensor_parallel_only = true,
                  .key = "tensor.overlap",
                  .value = R"("none")",
                  .note = kNoAsyncNote},
    RecipeSetting{.paper = "narayanan et al.",
                  .tensor_parallel_only = true,
                  .key = "tensor.overlap",
                  .value = R"("none")",
                  .note = kNoAsyncNote},
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
                  .key = "grad_precision",
                  .value = R"("bf16")",
                  .note = "bf16 gradients (Megatron-Bridge 25.09's scripts/performance/configs/"
                          "*_llm_pretrain.yaml: mixed_precision.grad_reduce_in_fp32 false)"},
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
                  .model = "70b|405b",
                  .pipelined_only = true,
                  .key = "nccl.p2p_net_chunk_size",
                  .value = R"("2 MiB")",
                  .note = "NCCL_P2P_NET_CHUNKSIZE=2097152 (Megatron-Bridge 25.09's "
                          "scripts/performance/setup_experiment.py for 70B and 405B: "
                          "nccl_pp_comm_chunksize; NCCL 2.19+ runs 512 KiB steps)"},
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
  if (!Has(ToLower(TextField(source, "paper")), recipe.paper)) return false;
  if (!Has(ToLower(TextField(source, "location")), recipe.release)) return false;
  if (!HasAny(ToLower(TextField(model, "name")), recipe.model)) return false;
  if (!Has(ToLower(TextField(parallel, "framework")), recipe.framework)) return false;
  if (recipe.fp8_only && training.value("precision", "") != "fp8") return false;
  if (recipe.unsharded_only && parallel.contains("fsdp") && parallel["fsdp"] == true) return false;
  const auto above_one = [&parallel](std::string_view key) {
    const auto found = parallel.find(key);
    return found != parallel.end() && found->is_number_integer() && found->get<int64_t>() > 1;
  };
  if (recipe.pipelined_only && !above_one("pp")) return false;
  if (recipe.tensor_parallel_only && !above_one("tp")) return false;
  return !recipe.unstated_recompute_only || TextField(parallel, "recompute").empty();
}

// The option `key` of the sized parallelism section `section` ("tensor": 8 or {"size": 8, …}),
// made an object first.
Json& SizedOption(Json& parallelism, const std::string& section, std::string_view key) {
  Json& sized = parallelism[section];
  if (!sized.is_object()) sized = Json{{"size", sized.is_null() ? Json(1) : sized}};
  return sized[std::string(key)];
}

}  // namespace

void ApplyPublishedRecipe(const Json& point, RecipeSections sections,
                          std::vector<std::string>& notes) {
  constexpr std::string_view kNccl = "nccl.";
  for (const RecipeSetting& recipe : kRecipes) {
    if (!Covers(recipe, point, sections.training)) continue;
    const size_t dot = recipe.key.find('.');
    const std::string prefix(recipe.key.substr(0, dot));
    if (prefix == "tensor" || prefix == "expert" || prefix == "pipeline") {
      SizedOption(sections.parallelism, prefix, recipe.key.substr(dot + 1)) =
          Json::parse(recipe.value);
    } else if (recipe.key.starts_with(kNccl)) {
      sections.cluster["nccl"][std::string(recipe.key.substr(kNccl.size()))] =
          Json::parse(recipe.value);
    } else {
      sections.training[std::string(recipe.key)] = Json::parse(recipe.value);
    }
    if (recipe.key == "recompute") {
      // The recipe states what the table did not: no longer an assumption.
      std::erase_if(notes, [](const std::string& note) { return note.starts_with("recompute "); });
    }
    if (!recipe.note.empty()) notes.emplace_back(recipe.note);
  }
}

}  // namespace dtsim::strategies
