#include "strategies/launch_import.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <set>
#include <string_view>
#include <utility>

#include "network/cluster.h"
#include "sim/base/strings.h"
#include "strategies/config.h"

namespace dtsim::strategies {
namespace {

// The flags as given: name (without "--") → its values (none for a switch), the last
// occurrence winning; and the order they came in, for the list of those not modelled.
struct Flags {
  std::map<std::string, std::vector<std::string>, std::less<>> values;
  std::vector<std::string> order;
  std::set<std::string, std::less<>> used;

  bool Has(std::string_view name) {
    if (!values.contains(name)) return false;
    used.emplace(name);
    return true;
  }
  // The flag's one value; an error when it has none or several.
  Expected<std::string> Value(std::string_view name) {
    used.emplace(name);
    const std::vector<std::string>& given = values.find(name)->second;
    if (given.size() != 1) {
      return Error(fmt::format("expected one value, got {}", given.size()),
                   fmt::format("--{}", name));
    }
    return given.front();
  }
  // A positive integer, or nothing when the flag is absent.
  Expected<std::optional<int64_t>> Int(std::string_view name) {
    if (!Has(name)) return std::optional<int64_t>();
    DTSIM_ASSIGN_OR_RETURN(const std::string text, Value(name));
    int64_t value = 0;
    const auto [end, code] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (code != std::errc() || end != text.data() + text.size() || value <= 0) {
      return Error("expected a positive integer", fmt::format("--{}", name), Quote(text));
    }
    return std::optional<int64_t>(value);
  }
  Expected<int64_t> RequiredInt(std::string_view name) {
    DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> value, Int(name));
    if (!value) return Error("required: pretrain_gpt.py needs it too", fmt::format("--{}", name));
    return *value;
  }
};

Expected<Flags> Parse(std::span<const std::string> args) {
  Flags flags;
  std::string current;
  for (const std::string& arg : args) {
    if (arg.starts_with("--") && arg.size() > 2) {
      const size_t equals = arg.find('=');
      current = arg.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
      std::vector<std::string>& values = flags.values[current];
      values.clear();
      flags.order.push_back(current);
      if (equals != std::string::npos) {
        values.push_back(arg.substr(equals + 1));
        current.clear();
      }
    } else if (!current.empty()) {
      flags.values[current].push_back(arg);
    } else {
      return Error("an argument outside any flag (pretrain_gpt.py takes flags only)", "",
                   Quote(arg));
    }
  }
  return flags;
}

// Sets json[key] from the flag when given (a positive integer).
Status SetInt(Flags& flags, std::string_view flag, Json& json, const char* key) {
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> value, flags.Int(flag));
  if (value) json[key] = *value;
  return Status::Ok();
}

Status ModelSection(Flags& flags, const ImportTarget& target, Json& model) {
  model = {{"family", "transformer"}};
  DTSIM_ASSIGN_OR_RETURN(model["layers"], flags.RequiredInt("num-layers"));
  DTSIM_ASSIGN_OR_RETURN(model["hidden"], flags.RequiredInt("hidden-size"));
  DTSIM_ASSIGN_OR_RETURN(model["heads"], flags.RequiredInt("num-attention-heads"));
  DTSIM_RETURN_IF_ERROR(SetInt(flags, "ffn-hidden-size", model, "ffn_hidden"));
  flags.Has("group-query-attention");  // the query groups say it
  DTSIM_RETURN_IF_ERROR(SetInt(flags, "num-query-groups", model, "kv_heads"));
  DTSIM_RETURN_IF_ERROR(SetInt(flags, "kv-channels", model, "head_dim"));
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> positions,
                         flags.Int("max-position-embeddings"));
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> sequence, flags.Int("seq-length"));
  if (!positions && !sequence) {
    return Error("required: --max-position-embeddings or --seq-length", "--seq-length");
  }
  model["max_seq"] = positions ? *positions : *sequence;
  DTSIM_RETURN_IF_ERROR(SetInt(flags, "make-vocab-size-divisible-by", model, "vocab_divisible_by"));
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> vocab, flags.Int("vocab-size"));
  if (vocab || target.vocab) {
    model["vocab"] = vocab ? *vocab : *target.vocab;
  } else {
    return Error(
        "the vocabulary comes from the tokenizer, which the flags only name: give its size "
        "(dtsim import … --vocab N)",
        "--vocab-size");
  }
  if (flags.Has("normalization")) {
    DTSIM_ASSIGN_OR_RETURN(const std::string norm, flags.Value("normalization"));
    if (norm != "RMSNorm" && norm != "LayerNorm") {
      return Error("expected RMSNorm or LayerNorm", "--normalization", Quote(norm));
    }
    model["norm"] = norm == "RMSNorm" ? "rmsnorm" : "layernorm";
  }
  if (flags.Has("swiglu")) model["activation"] = "swiglu";
  if (flags.Has("squared-relu")) model["activation"] = "squared_relu";
  if (flags.Has("use-rotary-position-embeddings")) model["position"] = "rotary";  // older name
  if (flags.Has("position-embedding-type")) {
    DTSIM_ASSIGN_OR_RETURN(const std::string type, flags.Value("position-embedding-type"));
    if (type != "rope" && type != "learned_absolute") {
      return Error("expected rope or learned_absolute", "--position-embedding-type", Quote(type));
    }
    model["position"] = type == "rope" ? "rotary" : "learned";
  }
  if (flags.Has("disable-bias-linear")) model["linear_bias"] = false;
  if (flags.Has("untie-embeddings-and-output-weights")) model["tied_embeddings"] = false;
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> experts, flags.Int("num-experts"));
  if (experts) {
    Json moe = {{"experts", *experts}};
    DTSIM_RETURN_IF_ERROR(SetInt(flags, "moe-router-topk", moe, "top_k"));
    DTSIM_RETURN_IF_ERROR(SetInt(flags, "moe-ffn-hidden-size", moe, "expert_ffn_hidden"));
    DTSIM_RETURN_IF_ERROR(SetInt(flags, "moe-layer-freq", moe, "every"));
    if (flags.Has("moe-expert-capacity-factor")) {
      DTSIM_ASSIGN_OR_RETURN(const std::string factor, flags.Value("moe-expert-capacity-factor"));
      double value = 0;
      const auto [end, code] = std::from_chars(factor.data(), factor.data() + factor.size(), value);
      if (code != std::errc() || end != factor.data() + factor.size() || value <= 0) {
        return Error("expected a positive number", "--moe-expert-capacity-factor", Quote(factor));
      }
      moe["capacity_factor"] = value;
    } else {
      moe["dropless"] = true;  // Megatron-Core drops no token without a capacity factor
    }
    model["moe"] = moe;
  }
  if (flags.Has("multi-latent-attention")) {
    Json mla = Json::object();
    DTSIM_RETURN_IF_ERROR(SetInt(flags, "q-lora-rank", mla, "q_lora_rank"));
    DTSIM_RETURN_IF_ERROR(SetInt(flags, "kv-lora-rank", mla, "kv_lora_rank"));
    DTSIM_RETURN_IF_ERROR(SetInt(flags, "qk-head-dim", mla, "qk_nope_head_dim"));
    DTSIM_RETURN_IF_ERROR(SetInt(flags, "qk-pos-emb-head-dim", mla, "qk_rope_head_dim"));
    DTSIM_RETURN_IF_ERROR(SetInt(flags, "v-head-dim", mla, "v_head_dim"));
    model["mla"] = mla;
  }
  return SetInt(flags, "mtp-num-layers", model, "mtp_layers");
}

Status Precision(Flags& flags, Json& training) {
  training["precision"] = flags.Has("bf16") ? "bf16" : flags.Has("fp16") ? "fp16" : "fp32";
  if (!flags.Has("fp8-format")) return Status::Ok();
  // hybrid or e4m3: the GEMMs' formats, priced alike.
  if (Expected<std::string> format = flags.Value("fp8-format"); !format.ok()) {
    return std::move(format).error();
  }
  training["precision"] = "fp8";
  if (flags.Has("fp8-recipe")) {
    DTSIM_ASSIGN_OR_RETURN(const std::string recipe, flags.Value("fp8-recipe"));
    const std::map<std::string, std::string, std::less<>> names = {{"delayed", "delayed"},
                                                                   {"tensorwise", "current"},
                                                                   {"blockwise", "blockwise"},
                                                                   {"mxfp8", "mxfp8"}};
    const auto found = names.find(recipe);
    if (found == names.end()) {
      return Error("expected delayed, tensorwise, blockwise or mxfp8", "--fp8-recipe",
                   Quote(recipe));
    }
    training["fp8_recipe"] = found->second;
  }
  return Status::Ok();
}

Status Recompute(Flags& flags, Json& training, std::vector<std::string>& approximated) {
  std::string granularity;
  if (flags.Has("recompute-activations")) granularity = "selective";  // older spelling
  if (flags.Has("checkpoint-activations")) granularity = "full";      // older still
  if (flags.Has("recompute-granularity")) {
    DTSIM_ASSIGN_OR_RETURN(granularity, flags.Value("recompute-granularity"));
    if (granularity != "full" && granularity != "selective") {
      return Error("expected full or selective", "--recompute-granularity", Quote(granularity));
    }
  }
  if (granularity.empty()) return Status::Ok();
  training["recompute"] = granularity;
  if (flags.Has("recompute-modules")) {
    training["recompute_modules"] = flags.values.find("recompute-modules")->second;
  }
  std::string method = "uniform";
  if (flags.Has("recompute-method")) {
    DTSIM_ASSIGN_OR_RETURN(method, flags.Value("recompute-method"));
  }
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> layers, flags.Int("recompute-num-layers"));
  if (granularity == "full" && (method != "uniform" || layers.value_or(1) != 1)) {
    approximated.push_back(fmt::format(
        "--recompute-method {} --recompute-num-layers {} (dtsim recomputes each layer on its own)",
        method, layers.value_or(1)));
  }
  return Status::Ok();
}

Status TrainingSection(Flags& flags, Json& training, std::vector<std::string>& approximated) {
  training = {{"framework", "megatron"}};
  DTSIM_ASSIGN_OR_RETURN(training["global_batch"], flags.RequiredInt("global-batch-size"));
  DTSIM_RETURN_IF_ERROR(SetInt(flags, "micro-batch-size", training, "micro_batch"));
  DTSIM_RETURN_IF_ERROR(SetInt(flags, "seq-length", training, "seq_len"));
  DTSIM_RETURN_IF_ERROR(Precision(flags, training));
  DTSIM_RETURN_IF_ERROR(Recompute(flags, training, approximated));
  // Megatron-Core with Transformer Engine runs fused (flash) attention unless told otherwise.
  bool flash = true;
  flags.Has("use-flash-attn");
  if (flags.Has("attention-backend")) {
    DTSIM_ASSIGN_OR_RETURN(const std::string backend, flags.Value("attention-backend"));
    flash = backend != "unfused" && backend != "local";
  }
  training["flash_attention"] = flash;
  // Dropout is on (Megatron's 0.1) unless both probabilities are zero.
  bool dropout = true;
  if (flags.Has("attention-dropout") && flags.Has("hidden-dropout")) {
    DTSIM_ASSIGN_OR_RETURN(const std::string attention, flags.Value("attention-dropout"));
    DTSIM_ASSIGN_OR_RETURN(const std::string hidden, flags.Value("hidden-dropout"));
    const auto zero = [](const std::string& p) { return p == "0" || p == "0.0" || p == "0."; };
    dropout = !zero(attention) || !zero(hidden);
    if (zero(attention) != zero(hidden)) {
      approximated.push_back(fmt::format(
          "--attention-dropout {} --hidden-dropout {} (dtsim's dropout is on or off for both)",
          attention, hidden));
    }
  }
  training["dropout"] = dropout;
  return Status::Ok();
}

// ZeRO: 1 the distributed optimizer; Megatron-FSDP's sharding strategies name the rest.
Expected<int> ZeroStage(Flags& flags) {
  int stage = flags.Has("use-distributed-optimizer") ? 1 : 0;
  const bool fsdp = flags.Has("use-megatron-fsdp");
  if (!flags.Has("data-parallel-sharding-strategy")) return fsdp ? std::max(stage, 3) : stage;
  DTSIM_ASSIGN_OR_RETURN(const std::string strategy,
                         flags.Value("data-parallel-sharding-strategy"));
  const std::map<std::string, int, std::less<>> stages = {
      {"no_shard", 0}, {"optim", 1}, {"optim_grads", 2}, {"optim_grads_params", 3}};
  const auto found = stages.find(strategy);
  if (found == stages.end()) {
    return Error("expected no_shard, optim, optim_grads or optim_grads_params",
                 "--data-parallel-sharding-strategy", Quote(strategy));
  }
  return std::max(stage, found->second);
}

Status ParallelismSection(Flags& flags, Json& parallelism) {
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> tensor,
                         flags.Int("tensor-model-parallel-size"));
  parallelism["tensor"] = {{"size", tensor.value_or(1)},
                           {"sequence_parallel", flags.Has("sequence-parallel")}};
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> pipeline,
                         flags.Int("pipeline-model-parallel-size"));
  Json stages = {{"size", pipeline.value_or(1)}};
  DTSIM_ASSIGN_OR_RETURN(std::optional<int64_t> virtual_stages,
                         flags.Int("virtual-pipeline-model-parallel-size"));
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> per_virtual,
                         flags.Int("num-layers-per-virtual-pipeline-stage"));
  if (!virtual_stages && per_virtual) {
    // Megatron-LM requires the layers per stage to be a multiple of it, as here.
    DTSIM_ASSIGN_OR_RETURN(const int64_t layers, flags.RequiredInt("num-layers"));
    const int64_t per_stage = layers / pipeline.value_or(1);
    if (per_stage % *per_virtual != 0 || layers % pipeline.value_or(1) != 0) {
      return Error(fmt::format("must divide the {} layers per pipeline stage", per_stage),
                   "--num-layers-per-virtual-pipeline-stage", std::to_string(*per_virtual));
    }
    virtual_stages = per_stage / *per_virtual;
  }
  if (virtual_stages && *virtual_stages > 1) {
    stages["schedule"] = "interleaved";
    stages["virtual_stages"] = *virtual_stages;
  }
  parallelism["pipeline"] = stages;
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> context, flags.Int("context-parallel-size"));
  if (context) {
    Json cp = {{"size", *context}};
    if (flags.Has("cp-comm-type")) {
      DTSIM_ASSIGN_OR_RETURN(const std::string comm, flags.Value("cp-comm-type"));
      if (comm != "p2p" && comm != "a2a") {
        return Error("dtsim models p2p and a2a", "--cp-comm-type", Quote(comm));
      }
      cp["comm"] = comm;
    }
    parallelism["context"] = cp;
  }
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> expert,
                         flags.Int("expert-model-parallel-size"));
  if (expert) {
    Json ep = {{"size", *expert}};
    DTSIM_RETURN_IF_ERROR(SetInt(flags, "expert-tensor-parallel-size", ep, "tensor"));
    parallelism["expert"] = ep;
  }
  DTSIM_ASSIGN_OR_RETURN(parallelism["zero_stage"], ZeroStage(flags));
  // Megatron reduces gradients after the backward pass unless told to overlap.
  parallelism["overlap_gradient_reduce"] = flags.Has("overlap-grad-reduce");
  return Status::Ok();
}

// Data parallelism fills the job: the cluster's GPUs over TP·PP·CP.
Status SizeDataParallelism(Json& config) {
  const Json& cluster = config["cluster"];
  if (!cluster.contains("nodes") || !cluster["nodes"].is_number_integer()) {
    return Error("the job's size: give the cluster's nodes", "cluster.nodes");
  }
  Json network = cluster;
  network.erase("gpu");
  DTSIM_ASSIGN_OR_RETURN(const network::ClusterSpec spec,
                         network::ClusterFromJson(network, "cluster"));
  const Json& parallelism = config["parallelism"];
  const auto size = [&parallelism](const char* key) -> int64_t {
    if (!parallelism.contains(key)) return 1;
    const Json& value = parallelism[key];
    return value.is_object() ? value["size"].get<int64_t>() : value.get<int64_t>();
  };
  const int64_t model_parallel = size("tensor") * size("pipeline") * size("context");
  const int64_t gpus = int64_t{spec.nodes} * spec.gpus_per_node;
  if (gpus % model_parallel != 0) {
    return Error(fmt::format("{} nodes × {} GPUs are not a multiple of TP × PP × CP = {}",
                             spec.nodes, spec.gpus_per_node, model_parallel),
                 "cluster.nodes", std::to_string(spec.nodes));
  }
  config["parallelism"]["data"] = gpus / model_parallel;
  return Status::Ok();
}

}  // namespace

std::vector<std::string> SplitLaunchArguments(std::string_view text) {
  std::vector<std::string> words;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find('\n', at), text.size());
    std::string_view line = text.substr(at, end - at);
    line = line.substr(0, std::min(line.find('#'), line.size()));
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
      const size_t start = i;
      while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
      const std::string_view word = line.substr(start, i - start);
      if (!word.empty() && word != "\\") words.emplace_back(word);
    }
    at = end + 1;
  }
  return words;
}

Expected<ImportedConfig> ImportMegatronArguments(std::span<const std::string> args,
                                                 const ImportTarget& target) {
  DTSIM_ASSIGN_OR_RETURN(Flags flags, Parse(args));
  ImportedConfig out;
  Json& config = out.config;
  config = Json::object();
  std::vector<std::string> approximated;
  DTSIM_RETURN_IF_ERROR(ModelSection(flags, target, config["model"]));
  DTSIM_RETURN_IF_ERROR(TrainingSection(flags, config["training"], approximated));
  config["cluster"] = target.cluster;
  config["parallelism"] = Json::object();
  DTSIM_RETURN_IF_ERROR(ParallelismSection(flags, config["parallelism"]));
  DTSIM_RETURN_IF_ERROR(SizeDataParallelism(config));
  if (Expected<ResolvedConfig> checked = ConfigFromJson(config, ""); !checked.ok()) {
    return std::move(checked).error();
  }
  std::set<std::string, std::less<>> listed;
  for (const std::string& name : flags.order) {
    if (flags.used.contains(name) || !listed.insert(name).second) continue;
    const std::vector<std::string>& values = flags.values.find(name)->second;
    out.not_modelled.push_back(
        values.empty() ? "--" + name : fmt::format("--{} {}", name, fmt::join(values, " ")));
  }
  for (std::string& note : approximated) out.not_modelled.push_back(std::move(note));
  return out;
}

}  // namespace dtsim::strategies
