#include "strategies/training_run_point.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <functional>
#include <optional>

#include "models/model_spec.h"
#include "sim/base/strings.h"
#include "strategies/published_recipes.h"
#include "strategies/simulate.h"
#include "strategies/stage_memory.h"

namespace dtsim::strategies {
namespace {

bool Has(std::string_view text, std::string_view word) {
  return text.find(word) != std::string_view::npos;
}

// The first decimal integer in `text` at or after `from`, if any.
std::optional<int64_t> FirstInteger(std::string_view text, size_t from = 0) {
  const size_t start = text.find_first_of("0123456789", from);
  if (start == std::string_view::npos) return std::nullopt;
  int64_t value = 0;
  for (size_t i = start; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]));
       ++i) {
    if (value > (int64_t{1} << 40)) return std::nullopt;
    value = value * 10 + (text[i] - '0');
  }
  return value;
}

// The last decimal integer in `text`, if any ("interleaved 1F1B, 6 " → 6).
std::optional<int64_t> LastInteger(std::string_view text) {
  const size_t end = text.find_last_of("0123456789");
  if (end == std::string_view::npos) return std::nullopt;
  size_t start = end;
  while (start > 0 && std::isdigit(static_cast<unsigned char>(text[start - 1]))) --start;
  return FirstInteger(text, start);
}

class PointReader {
 public:
  PointReader(const Json& point, std::string path) : point_(point), path_(std::move(path)) {}

  Expected<const Json*> Object(std::string_view key) const {
    if (!point_.contains(key) || !point_[std::string(key)].is_object()) {
      return Error("missing required object", JsonChildPath(path_, key));
    }
    return &point_[std::string(key)];
  }
  static bool Present(const Json& object, std::string_view key) {
    return object.contains(key) && !object[std::string(key)].is_null();
  }
  Expected<int64_t> Int(const Json& object, std::string_view section, std::string_view key) const {
    const std::string path = JsonChildPath(JsonChildPath(path_, section), key);
    if (!Present(object, key)) return Error("missing required field", path);
    return JsonToInt(object[std::string(key)], path, 1, int64_t{1} << 40);
  }
  Expected<int64_t> IntOr(const Json& object, std::string_view section, std::string_view key,
                          int64_t fallback) const {
    if (!Present(object, key)) return fallback;
    return Int(object, section, key);
  }
  static std::string Text(const Json& object, std::string_view key) {
    return ToLower(TextField(object, key));
  }
  std::string Field(std::string_view key) const { return JsonChildPath(path_, key); }
  std::string Path(std::string_view section, std::string_view key) const {
    return JsonChildPath(JsonChildPath(path_, section), key);
  }
  const Json& point() const { return point_; }

 private:
  const Json& point_;
  std::string path_;
};

struct ArchStyle {
  const char* name;
  const char* norm;
  const char* activation;
  const char* position;
  bool linear_bias;
  bool tied_embeddings;
  bool dropout;
};

constexpr ArchStyle kGpt{"GPT", "layernorm", "gelu", "learned", true, true, true};
constexpr ArchStyle kLlama{"Llama", "rmsnorm", "swiglu", "rotary", false, false, false};
constexpr ArchStyle kNemotron{"Nemotron-4", "layernorm", "squared_relu", "rotary",
                              false,        false,       false};

Expected<ArchStyle> StyleOf(const PointReader& in, const Json& model) {
  const std::string arch = PointReader::Text(model, "arch");
  const std::string path = in.Path("model", "arch");
  if (Has(arch, "bert")) {
    return Error("encoder (BERT) runs are not read from a measurements file", path, Quote(arch));
  }
  if (Has(arch, "squared-relu") || Has(arch, "squared relu")) return kNemotron;
  if (Has(arch, "gpt")) return kGpt;
  if (Has(arch, "llama") || Has(arch, "gqa") || Has(arch, "swiglu") || Has(arch, "moe")) {
    return kLlama;
  }
  return Error("unknown architecture: expected one naming GPT, Llama, GQA, MoE or squared-ReLU",
               path, Quote(arch));
}

// Routed experts, top-k, the expert FFN and shared experts; the dense layers before the first
// MoE one from the architecture's text ("3 dense + 58 MoE layers").
Expected<Json> MoeJson(const PointReader& in, const Json& moe, const std::string& arch) {
  const std::string section = "model.moe";
  DTSIM_ASSIGN_OR_RETURN(const int64_t experts, in.Int(moe, section, "routed_experts"));
  DTSIM_ASSIGN_OR_RETURN(const int64_t top_k, in.Int(moe, section, "top_k"));
  Json out = {{"experts", experts}, {"top_k", top_k}, {"dropless", true}};
  if (PointReader::Present(moe, "expert_ffn_hidden")) {
    DTSIM_ASSIGN_OR_RETURN(out["expert_ffn_hidden"], in.Int(moe, section, "expert_ffn_hidden"));
  }
  if (PointReader::Present(moe, "shared_experts")) {
    DTSIM_ASSIGN_OR_RETURN(
        const int64_t shared,
        JsonToInt(moe["shared_experts"], in.Path(section, "shared_experts"), 0, int64_t{1} << 20));
    out["shared_experts"] = shared;
  }
  if (const size_t at = arch.find(" dense"); at != std::string::npos) {
    if (std::optional<int64_t> dense = LastInteger(arch.substr(0, at)); dense && *dense > 0) {
      out["first_dense_layers"] = *dense;
    }
  }
  return out;
}

// Multi-head latent attention's sizes: the point's `model.mla`, else the deepseek-v3 preset's
// (its released config; DeepSeek-V2 has the same).
Expected<Json> MlaJson(const PointReader& in, const Json& model,
                       std::vector<std::string>& assumed) {
  if (PointReader::Present(model, "mla")) {
    if (!model["mla"].is_object()) return Error("expected an object", in.Path("model", "mla"));
    return model["mla"];
  }
  DTSIM_ASSIGN_OR_RETURN(const models::ModelSpec preset, models::ModelPreset("deepseek-v3"));
  const models::MlaSpec& mla = preset.transformer.mla;
  assumed.push_back(fmt::format(
      "DeepSeek-V3's MLA sizes (query latent {}, KV latent {}, heads {} + {} rotary, values {})",
      mla.q_lora_rank, mla.kv_lora_rank, mla.qk_nope_head_dim, mla.qk_rope_head_dim,
      mla.v_head_dim));
  return Json{{"q_lora_rank", mla.q_lora_rank},
              {"kv_lora_rank", mla.kv_lora_rank},
              {"qk_nope_head_dim", mla.qk_nope_head_dim},
              {"qk_rope_head_dim", mla.qk_rope_head_dim},
              {"v_head_dim", mla.v_head_dim}};
}

Expected<Json> ModelJson(const PointReader& in, const Json& model, const ArchStyle& style,
                         std::vector<std::string>& assumed) {
  Json spec = {{"family", "transformer"},          {"norm", style.norm},
               {"activation", style.activation},   {"position", style.position},
               {"linear_bias", style.linear_bias}, {"tied_embeddings", style.tied_embeddings}};
  for (std::string_view key : {"layers", "hidden", "heads", "seq_len"}) {
    DTSIM_ASSIGN_OR_RETURN(const int64_t value, in.Int(model, "model", key));
    spec[key == "seq_len" ? "max_seq" : std::string(key)] = value;
  }
  if (PointReader::Present(model, "kv_heads")) {
    DTSIM_ASSIGN_OR_RETURN(spec["kv_heads"], in.Int(model, "model", "kv_heads"));
  }
  const bool qwen3 = Has(PointReader::Text(model, "name"), "qwen3");
  if (PointReader::Present(model, "head_dim")) {
    DTSIM_ASSIGN_OR_RETURN(spec["head_dim"], in.Int(model, "model", "head_dim"));
  } else if (qwen3) {
    spec["head_dim"] = 128;  // every Qwen3 model's (its released configs), not hidden / heads
    assumed.emplace_back("head dimension 128 (Qwen3's)");
  }
  if (qwen3) {
    spec["qk_norm"] = true;  // every Qwen3 model's (Megatron-Bridge's providers: qk_layernorm)
    assumed.emplace_back("a QK norm over each head (Qwen3's)");
  }
  const std::string arch = PointReader::Text(model, "arch");
  if (Has(arch, "mla") || Has(arch, "latent")) {
    DTSIM_ASSIGN_OR_RETURN(spec["mla"], MlaJson(in, model, assumed));
    spec["kv_heads"] = spec["heads"];
    // DeepSeek-V3 trains with one multi-token-prediction module, and NVIDIA's recipes run it
    // (Megatron-Bridge: --mtp-num-layers 1, layout "Et|(tt|)*30mL", the module on the last
    // pipeline chunk with the loss).
    const std::string name = PointReader::Text(model, "name");
    if (Has(name, "deepseek-v3") || Has(name, "deepseekv3")) {
      spec["mtp_layers"] = 1;
      assumed.emplace_back("one multi-token-prediction module (DeepSeek-V3's)");
    } else {
      assumed.emplace_back("no multi-token prediction");
    }
  }
  if (PointReader::Present(model, "moe")) {
    if (!model["moe"].is_object()) return Error("expected an object", in.Path("model", "moe"));
    DTSIM_ASSIGN_OR_RETURN(spec["moe"], MoeJson(in, model["moe"], arch));
    assumed.emplace_back("dropless MoE, balanced routing");
  }
  if (PointReader::Present(model, "ffn_hidden")) {
    DTSIM_ASSIGN_OR_RETURN(spec["ffn_hidden"], in.Int(model, "model", "ffn_hidden"));
  } else if (PointReader::Present(model, "moe") &&
             PointReader::Present(model["moe"], "dense_ffn_hidden")) {
    DTSIM_ASSIGN_OR_RETURN(spec["ffn_hidden"],
                           in.Int(model["moe"], "model.moe", "dense_ffn_hidden"));
  } else if (spec.contains("moe") && spec["moe"].contains("expert_ffn_hidden")) {
    spec["ffn_hidden"] = spec["moe"]["expert_ffn_hidden"];
  } else {
    return Error("missing required field", in.Path("model", "ffn_hidden"));
  }
  // A vocabulary given as text ("50257 GPT-2 BPE, padded by Megatron") counts its first number.
  const Json* vocab = model.contains("vocab") ? &model["vocab"] : nullptr;
  if (vocab != nullptr && vocab->is_string()) {
    const std::optional<int64_t> size = FirstInteger(vocab->get<std::string>());
    if (!size || *size < 1) {
      return Error("expected a vocabulary size", in.Path("model", "vocab"),
                   Quote(vocab->get<std::string>()));
    }
    spec["vocab"] = *size;
    assumed.push_back(fmt::format("vocabulary {} (from \"{}\")", *size, vocab->get<std::string>()));
  } else {
    DTSIM_ASSIGN_OR_RETURN(spec["vocab"], in.Int(model, "model", "vocab"));
  }
  return spec;
}

// Whether the point's inferences say its expert-parallel groups are carved from DP × TP
// ("EP carved from DP*TP"), as MoE parallel folding forms them.
bool EpCarvedFromTp(const Json& point) {
  const auto inferred = point.find("inferred");
  if (inferred == point.end() || !inferred->is_array()) return false;
  return std::any_of(inferred->begin(), inferred->end(), [](const Json& note) {
    return note.is_string() && Has(ToLower(note.get<std::string>()), "ep carved from dp*tp");
  });
}

// "FP8 (Transformer Engine, delayed scaling) with BF16 master" → fp8 delayed; "fp16 mixed
// (Apex)" → fp16; "mixed precision (bf16 assumed)" → bf16.
Expected<Json> PrecisionJson(const PointReader& in, std::vector<std::string>& assumed) {
  const std::string text = PointReader::Text(in.point(), "precision");
  if (Has(text, "inferred") || Has(text, "assumed")) assumed.emplace_back("precision");
  if (Has(text, "fp8")) {
    const char* recipe = Has(text, "blockwise") ? "blockwise"
                         : Has(text, "mxfp8")   ? "mxfp8"
                         : Has(text, "current") ? "current"
                                                : "delayed";
    if (!Has(text, "delayed") && std::string_view(recipe) == "delayed") {
      assumed.emplace_back("FP8 delayed scaling (Transformer Engine's default)");
    }
    return Json{{"precision", "fp8"}, {"fp8_recipe", recipe}};
  }
  if (Has(text, "bf16")) return Json{{"precision", "bf16"}};
  if (Has(text, "fp16")) return Json{{"precision", "fp16"}};
  return Error("unknown precision: expected one naming FP8, BF16 or FP16", in.Field("precision"),
               Quote(text));
}

// "full" / "likely full activation checkpointing" → full; "selective (attention core only)" →
// selective; "none/selective per NeMo recipe (not stated)" → selective (assumed).
std::string RecomputeOf(const std::string& text, std::vector<std::string>& assumed) {
  const bool unsure = text.empty() || Has(text, "likely") || Has(text, "not stated") ||
                      Has(text, "inferred") || Has(text, "assumed");
  std::string mode = Has(text, "full") ? "full" : Has(text, "selective") ? "selective" : "none";
  if (unsure) assumed.push_back(fmt::format("recompute {}", mode));
  return mode;
}

// Virtual stages: `vp`, or "v=12" / "6 interleaving stages" in the schedule's text.
Expected<int64_t> VirtualStages(const PointReader& in, const Json& parallel) {
  if (PointReader::Present(parallel, "vp")) return in.Int(parallel, "parallel", "vp");
  const std::string schedule = PointReader::Text(parallel, "schedule");
  if (const size_t at = schedule.find("v="); at != std::string::npos) {
    if (std::optional<int64_t> v = FirstInteger(schedule, at); v && *v >= 1) return *v;
  }
  if (const size_t at = schedule.find("interleaving stages"); at != std::string::npos) {
    if (std::optional<int64_t> v = LastInteger(schedule.substr(0, at)); v && *v >= 1) return *v;
  }
  return 1;
}

// Layers per model chunk when the chunks do not divide them, as Megatron-Bridge's recipes split
// them: the embedding and the loss take a layer's place each — evenly when the chunks divide
// L + 2 (Llama 3.1 405B: 126 layers on 8 × 8 chunks), else ⌈(L + 2)/chunks⌉ slots a chunk with
// the last chunk taking what is left (DeepSeek-V3's 61 on 8 × 4: 1, 2, …, 2, 0 — the loss alone).
Json UnevenChunks(int64_t layers, int64_t chunks, std::vector<std::string>& assumed) {
  if (chunks == 1) return Json::array({layers});
  const int64_t per = (layers + 2 + chunks - 1) / chunks;
  std::vector<int64_t> counts(static_cast<size_t>(chunks), per);
  counts.front() = per - 1;
  // What is left for the last chunk (at most per − 1: the loss takes a slot); negative only for
  // far more chunks than layers, which the config then refuses by the counts' sum.
  counts.back() = layers - (per - 1) - per * (chunks - 2);
  assumed.push_back(
      fmt::format("the embedding and loss counted as pipeline layers: {} + {} × {} "
                  "+ {} per chunk",
                  counts.front(), chunks - 2, per, counts.back()));
  return counts;
}

struct Hardware {
  const char* cluster;
  Json gpu;
  bool hopper;
};

Expected<Hardware> HardwareOf(const PointReader& in, const Json& hardware) {
  const std::string gpu = PointReader::Text(hardware, "gpu");
  if (Has(gpu, "h100")) return Hardware{"dgx-h100", "h100-sxm5-80gb", true};
  if (Has(gpu, "h200")) return Hardware{"dgx-h200", "h200-sxm-141gb", true};
  if (Has(gpu, "b200")) return Hardware{"dgx-b200", "b200-sxm-180gb", false};
  if (Has(gpu, "a100") || Has(gpu, "ampere")) {
    return Hardware{"dgx-a100", Has(gpu, "40gb") ? "a100-sxm4-40gb" : "a100-sxm4-80gb", false};
  }
  if (Has(gpu, "v100")) {
    return Hardware{"dgx1-v100",
                    Has(gpu, "16gb") ? Json{{"preset", "v100-sxm2-32gb"}, {"memory", "16 GiB"}}
                                     : Json("v100-sxm2-32gb"),
                    false};
  }
  return Error("unknown GPU: expected one naming H100, H200, B200, A100 (Ampere) or V100",
               in.Path("hardware", "gpu"), Quote(gpu));
}

// The cluster: the GPU's DGX preset, with the point's GPUs per node and its NICs when the
// inter-node text starts "8x 400 Gb/s" (count × rate per direction).
Expected<Json> ClusterJson(const PointReader& in, const Json& hardware, const Hardware& kind) {
  Json cluster = {{"preset", kind.cluster}, {"gpu", kind.gpu}};
  if (PointReader::Present(hardware, "gpus_per_node")) {
    DTSIM_ASSIGN_OR_RETURN(const int64_t per_node, in.Int(hardware, "hardware", "gpus_per_node"));
    if (per_node != 8) cluster["gpus_per_node"] = per_node;
  }
  const std::string inter = PointReader::Text(hardware, "inter_node");
  const size_t times = inter.find("x ");
  const std::optional<int64_t> nics = FirstInteger(inter);
  if (times != std::string::npos && nics && inter.find_first_of("0123456789") < times) {
    const std::optional<int64_t> rate = FirstInteger(inter, times);
    const size_t unit = inter.find("gb/s", times);
    if (rate && unit != std::string::npos && unit < times + 12) {
      cluster["inter_node"] = {{"nics_per_node", *nics},
                               {"nic_bandwidth", fmt::format("{} Gbps", *rate)}};
    }
  }
  return cluster;
}

struct RunParallelism {
  int64_t tp, pp, cp, ep, dp, vp;
  bool sequence_parallel;
  int64_t zero_stage;
  bool overlap;
  // Unsaid by the point and assumed off (CheapestSettingsThatFit may turn them on).
  bool sp_assumed = false;
  bool zero_assumed = false;
};

Expected<RunParallelism> ParallelOf(const PointReader& in, const Json& parallel, bool nvidia_recipe,
                                    std::vector<std::string>& assumed) {
  RunParallelism plan{};
  DTSIM_ASSIGN_OR_RETURN(plan.tp, in.Int(parallel, "parallel", "tp"));
  DTSIM_ASSIGN_OR_RETURN(plan.pp, in.Int(parallel, "parallel", "pp"));
  DTSIM_ASSIGN_OR_RETURN(plan.dp, in.Int(parallel, "parallel", "dp"));
  DTSIM_ASSIGN_OR_RETURN(plan.cp, in.IntOr(parallel, "parallel", "cp", 1));
  DTSIM_ASSIGN_OR_RETURN(plan.ep, in.IntOr(parallel, "parallel", "ep", 1));
  DTSIM_ASSIGN_OR_RETURN(plan.vp, VirtualStages(in, parallel));
  if (PointReader::Present(parallel, "sequence_parallel")) {
    if (!parallel["sequence_parallel"].is_boolean()) {
      return Error("expected true or false", in.Path("parallel", "sequence_parallel"));
    }
    plan.sequence_parallel = parallel["sequence_parallel"].get<bool>();
  } else {
    // Megatron-Bridge and NeMo recipes turn sequence parallelism on with tensor parallelism.
    plan.sequence_parallel = nvidia_recipe && plan.tp > 1;
    if (plan.tp > 1) assumed.emplace_back(plan.sequence_parallel ? "SP" : "no SP");
    plan.sp_assumed = plan.tp > 1 && !plan.sequence_parallel;
  }
  const bool fsdp = PointReader::Present(parallel, "fsdp") && parallel["fsdp"] == true;
  if (fsdp) {
    plan.zero_stage = 3;
  } else if (PointReader::Present(parallel, "zero_stage")) {
    DTSIM_ASSIGN_OR_RETURN(plan.zero_stage, JsonToInt(parallel["zero_stage"],
                                                      in.Path("parallel", "zero_stage"), 0, 3));
  } else {
    // NeMo and Megatron-Bridge recipes run Megatron-Core's distributed optimizer.
    plan.zero_stage = nvidia_recipe ? 1 : 0;
    if (nvidia_recipe) assumed.emplace_back("distributed optimizer (ZeRO-1)");
    plan.zero_assumed = !nvidia_recipe;
  }
  const std::string framework = PointReader::Text(parallel, "framework");
  // Megatron-Core recipes overlap the gradient reduction with the backward; Megatron-LM
  // reduces after it (--overlap-grad-reduce is opt-in); DeepSpeed overlaps.
  plan.overlap = nvidia_recipe || Has(framework, "deepspeed");
  return plan;
}

std::string Summary(const RunParallelism& p, bool folded, const Json& training) {
  std::string text = fmt::format("TP {}{}", p.tp, p.sequence_parallel ? " SP" : "");
  if (p.pp > 1) {
    text += p.vp > 1 ? fmt::format(", PP {} interleaved v={}", p.pp, p.vp)
                     : fmt::format(", PP {} 1F1B", p.pp);
  }
  if (p.cp > 1) text += fmt::format(", CP {}", p.cp);
  if (p.ep > 1) text += fmt::format(", EP {}{}", p.ep, folded ? " (folded)" : "");
  text += fmt::format(", DP {}", p.dp);
  if (p.zero_stage > 0) text += fmt::format(", ZeRO-{}", p.zero_stage);
  text += fmt::format(", {}", training["precision"].get<std::string>());
  if (training.contains("fp8_recipe")) {
    text += fmt::format(" ({})", training["fp8_recipe"].get<std::string>());
  }
  text += fmt::format(", recompute {}, micro-batch {}", training["recompute"].get<std::string>(),
                      training["micro_batch"].get<int64_t>());
  if (training["flash_attention"].get<bool>()) text += ", flash attention";
  if (!p.overlap && p.dp * p.cp > 1) text += ", gradients reduced after the backward";
  return text;
}

enum class MetricKind { kTime, kTokensPerGpu, kTokens, kSequences, kHardwareTflops };

struct MeasuredMetric {
  std::string name;
  std::string unit;
  double value = 0;
  MetricKind kind = MetricKind::kTime;
};

// The first absolute measured metric, in order of preference.
Expected<MeasuredMetric> ChooseMetric(const Json& point, const std::string& path) {
  std::optional<MeasuredMetric> best;
  int best_rank = 99;
  const Json empty = Json::array();
  const Json& metrics =
      point.contains("metrics") && point["metrics"].is_array() ? point["metrics"] : empty;
  for (const Json& metric : metrics) {
    if (!metric.is_object() || TextField(metric, "kind") != "measured" ||
        !metric.contains("value") || !metric["value"].is_number() ||
        metric["value"].get<double>() <= 0) {
      continue;
    }
    const std::string name = TextField(metric, "name");
    const std::string unit = ToLower(TextField(metric, "unit"));
    int rank = 99;
    MetricKind kind = MetricKind::kTime;
    if (name == "iteration_time" && (unit == "s" || unit == "ms")) {
      rank = 0;
    } else if (name == "tokens_per_sec_per_gpu") {
      rank = 1, kind = MetricKind::kTokensPerGpu;
    } else if (name == "tokens_per_sec" || (name == "throughput" && unit == "tokens/s")) {
      rank = 2, kind = MetricKind::kTokens;
    } else if (name == "throughput" && unit == "sequences/s") {
      rank = 3, kind = MetricKind::kSequences;
    } else if (name == "achieved_tflops_per_gpu") {
      rank = 4, kind = MetricKind::kHardwareTflops;
    }
    if (rank < best_rank) {
      best_rank = rank;
      best = MeasuredMetric{name, TextField(metric, "unit"), metric["value"].get<double>(), kind};
    }
  }
  if (!best) {
    return Error(
        "no absolute measured metric to compare (iteration_time, tokens_per_sec_per_gpu, "
        "tokens_per_sec, throughput, achieved_tflops_per_gpu): the point gives only relative "
        "or partial figures",
        JsonChildPath(path, "metrics"));
  }
  return *best;
}

double Predicted(const MeasuredMetric& metric, const SimulationResult& result, int64_t gpus) {
  switch (metric.kind) {
    case MetricKind::kTime:
      return result.iteration_time.ToSecondsDouble() * (ToLower(metric.unit) == "ms" ? 1e3 : 1);
    case MetricKind::kTokensPerGpu:
      return result.tokens_per_second / static_cast<double>(gpus);
    case MetricKind::kTokens:
      return result.tokens_per_second;
    case MetricKind::kSequences:
      return result.samples_per_second;
    case MetricKind::kHardwareTflops:
      return result.hardware_tflops_per_gpu;
  }
  return 0;
}

// A DeepSpeed run: the deepspeed framework at the point's release ("framework_version"), or,
// for a run published in 2021 that names none, 0.3.13 — every release before 0.5.5 (October
// 2021) ran ZeRO-3's synchronized per-parameter collectives (strategies/deepspeed_zero3.h).
void DeepSpeedOf(const Json& point, const Json& parallel, Json& training,
                 std::vector<std::string>& assumed) {
  if (!Has(PointReader::Text(parallel, "framework"), "deepspeed")) return;
  training["framework"] = "deepspeed";
  const std::string version = PointReader::Text(parallel, "framework_version");
  if (!version.empty()) {
    training["framework_version"] = version;
    return;
  }
  const std::string source = point.contains("source") ? point["source"].dump() : "";
  if (source.find("2021") != std::string::npos || source.find("SC'21") != std::string::npos) {
    training["framework_version"] = "0.3.13";
    assumed.emplace_back("DeepSpeed 0.3.13 (a 2021 run, before 0.5.5's coalesced gathers)");
  } else {
    assumed.emplace_back("DeepSpeed's latest modelled release");
  }
}

// The largest stage's memory (models::MemoryBreakdown::total) of `config`.
Expected<int64_t> PeakMemory(const ResolvedConfig& config) {
  DTSIM_ASSIGN_OR_RETURN(const std::vector<models::MemoryBreakdown> stages,
                         EstimateStageMemory(config));
  int64_t peak = 0;
  for (const models::MemoryBreakdown& stage : stages) peak = std::max(peak, stage.total());
  return peak;
}

// A measured run ran, so the settings its point leaves unsaid are ones that fit. When dtsim's
// assumptions do not fit its memory model, the cheapest of the memory savers the point does
// not rule out are added, one after another, until the plan fits: sequence parallelism (free:
// the same communication volume), the distributed optimizer (ZeRO-1), then selective and full
// recompute; the notes say which. When none fits the config is left as assumed, and
// TrainingRunPoint's row says by how much it does not fit; a config dtsim cannot read or size
// is left for it to report.
void CheapestSettingsThatFit(TrainingRunConfig& run, const std::string& id) {
  const auto fits = [&](const Json& config) {
    const Expected<ResolvedConfig> resolved = ConfigFromJson(config, id);
    if (!resolved.ok()) return true;
    const Expected<int64_t> peak = PeakMemory(*resolved);
    return !peak.ok() || *peak <= resolved->gpu.memory.count();
  };
  if (fits(run.config)) return;
  struct Saver {
    bool applies;
    std::function<void(Json&)> apply;
    std::string note;
  };
  const Json& parallelism = run.config["parallelism"];
  const std::string recompute = run.config["training"].value("recompute", "none");
  const bool multi_replica = parallelism.value("data", 1) * parallelism.value("context", 1) > 1;
  const std::vector<Saver> savers = {
      {run.sp_assumed, [](Json& c) { c["parallelism"]["tensor"]["sequence_parallel"] = true; },
       "SP"},
      {run.zero_assumed && multi_replica && parallelism.value("zero_stage", 0) == 0,
       [](Json& c) { c["parallelism"]["zero_stage"] = 1; }, "distributed optimizer (ZeRO-1)"},
      {run.recompute_assumed && recompute == "none",
       [](Json& c) { c["training"]["recompute"] = "selective"; }, "recompute selective"},
      {run.recompute_assumed && recompute != "full",
       [](Json& c) { c["training"]["recompute"] = "full"; }, "recompute full"}};
  Json trial = run.config;
  std::vector<std::string> added;
  for (const Saver& saver : savers) {
    if (!saver.applies) continue;
    saver.apply(trial);
    // Full recompute supersedes selective.
    if (!added.empty() && added.back().starts_with("recompute ")) added.pop_back();
    added.push_back(saver.note);
    if (!fits(trial)) continue;
    run.config = std::move(trial);
    // The notes of what the savers replace ("no SP", "recompute none") give way to theirs.
    const bool recomputes = added.back().starts_with("recompute ");
    std::erase_if(run.assumed, [&](const std::string& note) {
      return (note == "no SP" && added.front() == "SP") ||
             (recomputes && note.starts_with("recompute "));
    });
    run.assumed.push_back(fmt::format("{} (the least that fits dtsim's memory model: the run ran)",
                                      fmt::join(added, ", ")));
    run.summary += fmt::format(" (to fit: {})", fmt::join(added, ", "));
    return;
  }
}

}  // namespace

Expected<TrainingRunConfig> TrainingRunConfigOf(const Json& point, const std::string& path) {
  if (!point.is_object()) return Error("expected an object", path);
  const PointReader in(point, path);
  TrainingRunConfig out;
  DTSIM_ASSIGN_OR_RETURN(const Json* model, in.Object("model"));
  DTSIM_ASSIGN_OR_RETURN(const Json* parallel, in.Object("parallel"));
  DTSIM_ASSIGN_OR_RETURN(const Json* hardware, in.Object("hardware"));
  DTSIM_ASSIGN_OR_RETURN(const ArchStyle style, StyleOf(in, *model));
  DTSIM_ASSIGN_OR_RETURN(Json model_json, ModelJson(in, *model, style, out.assumed));
  DTSIM_ASSIGN_OR_RETURN(const Hardware kind, HardwareOf(in, *hardware));
  const bool nvidia_recipe = TextField(point, "category").starts_with("nvidia_");
  DTSIM_ASSIGN_OR_RETURN(const RunParallelism p,
                         ParallelOf(in, *parallel, nvidia_recipe, out.assumed));
  DTSIM_ASSIGN_OR_RETURN(const int64_t gpus, in.Int(*hardware, "hardware", "gpu_count"));
  if (p.tp * p.pp * p.cp * p.dp != gpus) {
    return Error(fmt::format("tp × pp × cp × dp = {} is not the point's GPU count {}",
                             p.tp * p.pp * p.cp * p.dp, gpus),
                 in.Path("parallel", "dp"), std::to_string(p.dp));
  }
  // EP beyond DP × CP spans tensor-parallel ranks too: Megatron-Core's MoE parallel folding,
  // with whole experts on each rank (expert tensor parallel size 1) as the recipes that fold
  // (Qwen3-235B-A22B, DeepSeek-V3) set it. A point whose EP is "carved from DP*TP" folds at any
  // size (with TP > 1; under TP 1 folding changes nothing): Megatron-Bridge's DeepSeek-V3
  // recipes set expert_tensor_parallel_size 1 with EP 64 over TP 2 × DP 64.
  const bool folded = p.ep > p.dp * p.cp || (p.ep > 1 && p.tp > 1 && EpCarvedFromTp(point));
  if (folded) {
    if ((p.tp * p.dp * p.cp) % p.ep != 0) {
      return Error(fmt::format("expert parallelism {} divides neither DP × CP {} nor TP × DP × CP "
                               "{} (MoE parallel folding)",
                               p.ep, p.dp * p.cp, p.tp * p.dp * p.cp),
                   in.Path("parallel", "ep"), std::to_string(p.ep));
    }
    out.assumed.emplace_back("expert TP 1 (MoE parallel folding)");
  }
  DTSIM_ASSIGN_OR_RETURN(Json training, PrecisionJson(in, out.assumed));
  Expected<int64_t> batch = in.Int(*parallel, "parallel", "global_batch");
  if (!batch.ok()) return std::move(batch).error();
  training["global_batch"] = *batch;
  if (PointReader::Present(*parallel, "micro_batch")) {
    DTSIM_ASSIGN_OR_RETURN(training["micro_batch"], in.Int(*parallel, "parallel", "micro_batch"));
  } else {
    training["micro_batch"] = 1;
    out.assumed.emplace_back("micro-batch 1");
  }
  training["recompute"] = RecomputeOf(PointReader::Text(*parallel, "recompute"), out.assumed);
  DeepSpeedOf(point, *parallel, training, out.assumed);
  // Megatron-Core on Hopper runs Transformer Engine's fused (flash) attention, which context
  // parallelism needs; the A100 and V100 runs predate it.
  training["flash_attention"] = kind.hopper || p.cp > 1;
  training["dropout"] = style.dropout;
  Json parallelism = {{"data", p.dp},
                      {"tensor", {{"size", p.tp}, {"sequence_parallel", p.sequence_parallel}}},
                      {"zero_stage", p.zero_stage},
                      {"overlap_gradient_reduce", p.overlap}};
  if (p.pp > 1) {
    parallelism["pipeline"] = {
        {"size", p.pp}, {"schedule", p.vp > 1 ? "interleaved" : "1f1b"}, {"virtual_stages", p.vp}};
    const int64_t layers = model_json["layers"].get<int64_t>();
    const int64_t chunks = p.pp * p.vp;
    if (layers % chunks != 0) {
      parallelism["pipeline"]["layers"] = UnevenChunks(layers, chunks, out.assumed);
    }
  }
  if (p.cp > 1) parallelism["context"] = p.cp;
  if (folded) {
    parallelism["expert"] = {{"size", p.ep}, {"tensor", 1}};
  } else if (p.ep > 1) {
    parallelism["expert"] = p.ep;
  }
  DTSIM_ASSIGN_OR_RETURN(Json cluster, ClusterJson(in, *hardware, kind));
  ApplyPublishedRecipe(point, {training, parallelism, cluster}, out.assumed);
  out.sp_assumed = p.sp_assumed;
  out.zero_assumed = p.zero_assumed && !training.contains("framework");
  out.recompute_assumed =
      std::any_of(out.assumed.begin(), out.assumed.end(),
                  [](const std::string& note) { return note.starts_with("recompute "); });
  out.summary = fmt::format("{} ({}), {}",
                            TextField(*model, "name").empty() ? "model" : TextField(*model, "name"),
                            style.name, Summary(p, folded, training));
  out.config = {{"model", std::move(model_json)},
                {"training", std::move(training)},
                {"cluster", std::move(cluster)},
                {"parallelism", std::move(parallelism)},
                {"simulation", {{"ranks", "symmetric"}, {"network_model", "analytical"}}}};
  CheapestSettingsThatFit(out, path);
  return out;
}

Expected<ValidationRow> TrainingRunPoint(const Json& point, const std::string& path,
                                         const std::string& id, const Calibration* calibration) {
  DTSIM_ASSIGN_OR_RETURN(const MeasuredMetric metric, ChooseMetric(point, path));
  DTSIM_ASSIGN_OR_RETURN(TrainingRunConfig run, TrainingRunConfigOf(point, path));
  if (calibration != nullptr) run.config["calibration"] = Json(CalibrationToJson(*calibration));
  Expected<ResolvedConfig> config = ConfigFromJson(run.config, id);
  if (!config.ok()) return std::move(config).error().Under(path);
  DTSIM_ASSIGN_OR_RETURN(const int64_t peak, PeakMemory(*config));
  // A plan the memory model does not fit is still timed: the row says by how much.
  std::string memory_note;
  if (peak > config->gpu.memory.count()) {
    constexpr double kGiB = 1 << 30;
    memory_note =
        fmt::format("; dtsim's memory model does not fit it: {:.3f} GiB on {} of {:.3f} GiB",
                    static_cast<double>(peak) / kGiB, config->gpu.name,
                    static_cast<double>(config->gpu.memory.count()) / kGiB);
    config->gpu.memory = Bytes(peak);
  }
  Expected<SimulationResult> result = Simulate(*config);
  if (!result.ok()) return std::move(result).error().Under(path);
  const int64_t gpus = point["hardware"]["gpu_count"].get<int64_t>();
  std::string how = run.summary;
  if (!run.assumed.empty()) how += fmt::format("; assumed: {}", fmt::join(run.assumed, ", "));
  return ValidationRow{.id = id,
                       .category = TextField(point, "category"),
                       .metric = metric.name,
                       .unit = metric.unit,
                       .measured = metric.value,
                       .predicted = Predicted(metric, *result, gpus),
                       .is_time = metric.kind == MetricKind::kTime,
                       .how = how + memory_note,
                       .gpu = config->gpu.name,
                       .framework = std::string(models::FrameworkName(config->training.framework))};
}

}  // namespace dtsim::strategies
