#include "strategies/launch_import.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <set>
#include <string_view>
#include <utility>

#include "models/memory.h"
#include "network/cluster.h"
#include "sim/base/strings.h"
#include "strategies/config.h"
#include "strategies/launch_flags.h"
#include "strategies/layer_pattern.h"

namespace dtsim::strategies {
namespace {

using Flags = LaunchFlags;

// The launch's environment: NCCL_P2P_NET_CHUNKSIZE (bytes, as NCCL reads it) sets
// cluster.nccl.p2p_net_chunk_size; every other assignment is listed as not modelled.
Status ApplyEnvironment(const Flags& flags, Json& cluster, std::vector<std::string>& not_modelled) {
  for (const auto& [name, value] : flags.environment) {
    if (name != "NCCL_P2P_NET_CHUNKSIZE") {
      not_modelled.push_back(fmt::format("{}={} (environment)", name, value));
      continue;
    }
    int64_t bytes = 0;
    const auto [end, code] = std::from_chars(value.data(), value.data() + value.size(), bytes);
    if (code != std::errc() || end != value.data() + value.size() || bytes <= 0) {
      return Error("expected a positive integer: the bytes NCCL reads", name, Quote(value));
    }
    if (!cluster.is_object()) cluster = Json::object();
    cluster["nccl"]["p2p_net_chunk_size"] = fmt::format("{} B", bytes);
  }
  return Status::Ok();
}

// Sets json[key] from the flag when given (a positive integer).
Status SetInt(Flags& flags, std::string_view flag, Json& json, const char* key) {
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> value, flags.Int(flag));
  if (value) json[key] = *value;
  return Status::Ok();
}

// Whose pretrain_gpt.py the flags are for: Megatron-LM's, or Megatron-DeepSpeed's (its MoE
// flags, DeepSpeed's engine beside it).
enum class Dialect : uint8_t { kMegatronLm, kMegatronDeepSpeed };

// Megatron-DeepSpeed's MoE (megatron/arguments.py, DeepSpeed's MoE layer): top-1 by default,
// experts on every second layer, tokens dropped at a capacity factor of 1 unless told not to.
Status DeepSpeedMoe(Flags& flags, Json& moe) {
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> top_k, flags.Int("topk"));
  moe["top_k"] = top_k.value_or(1);
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> interval, flags.Int("expert-interval"));
  moe["every"] = interval.value_or(2);
  if (flags.Has("disable-moe-token-dropping")) {
    moe["dropless"] = true;
    return Status::Ok();
  }
  DTSIM_ASSIGN_OR_RETURN(const std::optional<double> factor,
                         flags.Number("moe-train-capacity-factor"));
  moe["capacity_factor"] = factor.value_or(1.0);
  return Status::Ok();
}

// Megatron-Core's sliding windows: --window-size and --window-attn-skip-freq.
Status SlidingWindow(Flags& flags, Json& model) {
  if (!flags.Has("window-size")) {
    if (!flags.Has("window-attn-skip-freq")) return Status::Ok();
    return Error("places windows, but --window-size gives none", "--window-attn-skip-freq");
  }
  DTSIM_ASSIGN_OR_RETURN(const std::string size, flags.Value("window-size"));
  std::optional<std::string> skip;
  if (flags.Has("window-attn-skip-freq")) {
    DTSIM_ASSIGN_OR_RETURN(skip, flags.Value("window-attn-skip-freq"));
  }
  return ReadMegatronWindows(size, skip, model);
}

// Which layers are MoE (--moe-layer-freq) and the shared experts' width, a multiple of the
// experts' (--moe-shared-expert-intermediate-size).
Status MoeLayers(Flags& flags, int64_t layers, Json& moe) {
  if (flags.Has("moe-layer-freq")) {
    DTSIM_ASSIGN_OR_RETURN(const std::string text, flags.Value("moe-layer-freq"));
    DTSIM_RETURN_IF_ERROR(ReadMegatronMoeLayers(text, layers, moe));
  }
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> shared,
                         flags.Int("moe-shared-expert-intermediate-size"));
  if (!shared) return Status::Ok();
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> ffn, flags.Int("ffn-hidden-size"));
  const int64_t expert =
      moe.contains("expert_ffn_hidden") ? moe["expert_ffn_hidden"].get<int64_t>() : ffn.value_or(0);
  if (expert <= 0 || *shared % expert != 0) {
    return Error(fmt::format("expected a multiple of the experts' width ({})", expert),
                 "--moe-shared-expert-intermediate-size", std::to_string(*shared));
  }
  moe["shared_experts"] = *shared / expert;
  return Status::Ok();
}

Status ModelSection(Flags& flags, const ImportTarget& target, Dialect dialect, Json& model) {
  model = {{"family", "transformer"}};
  DTSIM_ASSIGN_OR_RETURN(model["layers"], flags.RequiredInt("num-layers"));
  DTSIM_ASSIGN_OR_RETURN(model["hidden"], flags.RequiredInt("hidden-size"));
  DTSIM_ASSIGN_OR_RETURN(model["heads"], flags.RequiredInt("num-attention-heads"));
  DTSIM_RETURN_IF_ERROR(SetInt(flags, "ffn-hidden-size", model, "ffn_hidden"));
  flags.Has("group-query-attention");  // the query groups say it
  DTSIM_RETURN_IF_ERROR(SetInt(flags, "num-query-groups", model, "kv_heads"));
  if (dialect == Dialect::kMegatronDeepSpeed) {
    DTSIM_RETURN_IF_ERROR(SetInt(flags, "num-key-value-heads", model, "kv_heads"));
  }
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
    // Megatron-LM spells them RMSNorm and LayerNorm, Megatron-DeepSpeed rmsnorm and layernorm.
    const bool rms = norm == "RMSNorm" || norm == "rmsnorm";
    if (!rms && norm != "LayerNorm" && norm != "layernorm") {
      return Error("expected RMSNorm or LayerNorm", "--normalization", Quote(norm));
    }
    model["norm"] = rms ? "rmsnorm" : "layernorm";
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
  if (flags.Has("qk-layernorm")) model["qk_norm"] = true;
  DTSIM_RETURN_IF_ERROR(SlidingWindow(flags, model));
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> experts, flags.Int("num-experts"));
  if (experts && dialect == Dialect::kMegatronDeepSpeed) {
    Json moe = {{"experts", *experts}};
    DTSIM_RETURN_IF_ERROR(DeepSpeedMoe(flags, moe));
    model["moe"] = moe;
  } else if (experts) {
    Json moe = {{"experts", *experts}};
    DTSIM_RETURN_IF_ERROR(SetInt(flags, "moe-router-topk", moe, "top_k"));
    DTSIM_RETURN_IF_ERROR(SetInt(flags, "moe-ffn-hidden-size", moe, "expert_ffn_hidden"));
    DTSIM_RETURN_IF_ERROR(MoeLayers(flags, model["layers"].get<int64_t>(), moe));
    DTSIM_ASSIGN_OR_RETURN(const std::optional<double> factor,
                           flags.Number("moe-expert-capacity-factor"));
    if (factor) {
      moe["capacity_factor"] = *factor;
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
  // Megatron-LM's arguments.py asserts not both (args.fp16 and args.bf16).
  if (flags.Has("bf16") && flags.Has("fp16")) {
    return Error("--bf16 and --fp16 both given: pretrain_gpt.py refuses the pair", "--fp16");
  }
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

// Dropout is on (Megatron's 0.1) unless both probabilities are zero.
Status Dropout(Flags& flags, Json& training, std::vector<std::string>& approximated) {
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
  // Transformer Engine's activation offloading of the first N layers (Megatron-LM sets
  // cpu_offloading when N > 0: megatron/training/arguments.py).
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> offloaded,
                         flags.Int("cpu-offloading-num-layers"));
  if (offloaded.value_or(0) > 0) training["activation_offload_layers"] = *offloaded;
  return Dropout(flags, training, approximated);
}

// The run's length (docs/time_to_train.md): pretrain_gpt.py trains for --train-iters
// iterations of the global batch or --train-samples sequences, one or the other (Megatron-LM's
// validate_args; Megatron-DeepSpeed also stops at --train-tokens), as time_to_train.tokens.
Status RunLength(Flags& flags, Json& config) {
  const Json& training = config["training"];
  const int64_t sequence =
      training.value("seq_len", config["model"].value("max_seq", static_cast<int64_t>(0)));
  const int64_t batch = training.value("global_batch", static_cast<int64_t>(0));
  std::vector<std::pair<const char*, double>> given;
  for (const auto& [flag, tokens_each] :
       {std::pair{"train-iters", static_cast<double>(batch) * static_cast<double>(sequence)},
        std::pair{"train-samples", static_cast<double>(sequence)},
        std::pair{"train-tokens", 1.0}}) {
    DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> count, flags.Int(flag));
    if (count) given.emplace_back(flag, static_cast<double>(*count) * tokens_each);
  }
  if (given.empty()) return Status::Ok();
  if (given.size() > 1) {
    return Error(
        fmt::format("give one run length: --{} or --{}, not both", given[0].first, given[1].first),
        fmt::format("--{}", given[1].first));
  }
  config["time_to_train"] = {{"tokens", given[0].second}};
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

// Tensor parallelism and sequence parallelism, both dialects' spelling; the pipeline's size.
Expected<std::optional<int64_t>> TensorAndPipeline(Flags& flags, Json& parallelism) {
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> tensor,
                         flags.Int("tensor-model-parallel-size"));
  parallelism["tensor"] = {{"size", tensor.value_or(1)},
                           {"sequence_parallel", flags.Has("sequence-parallel")}};
  // Megatron-LM's switch (2021–2024) for its async input-gradient all-reduce; under sequence
  // parallelism the reduce-scatter in its place stayed async whatever the flag said.
  if (flags.Has("no-async-tensor-model-parallel-allreduce") && !flags.Has("sequence-parallel")) {
    parallelism["tensor"]["overlap"] = "none";
  }
  return flags.Int("pipeline-model-parallel-size");
}

Status ParallelismSection(Flags& flags, Json& parallelism, std::vector<std::string>& approximated) {
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> pipeline,
                         TensorAndPipeline(flags, parallelism));
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
  if (flags.Has("account-for-embedding-in-pipeline-split")) stages["embedding_as_layer"] = true;
  if (flags.Has("account-for-loss-in-pipeline-split")) stages["loss_as_layer"] = true;
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
    if (flags.Has("overlap-moe-expert-parallel-comm")) ep["overlap"] = true;
    if (flags.Has("delay-wgrad-compute")) ep["delay_wgrad"] = true;
    parallelism["expert"] = ep;
  }
  DTSIM_ASSIGN_OR_RETURN(parallelism["zero_stage"], ZeroStage(flags));
  // Megatron-LM's rank order: tp-cp-ep-dp-pp, dtsim's default; tp-cp-ep-pp-dp with the mapping
  // flag (megatron/training/initialize.py), dtsim's tp-pp-dp but for context parallelism.
  if (flags.Has("use-tp-pp-dp-mapping")) {
    parallelism["order"] = "tp-pp-dp";
    if (context.value_or(1) > 1 && pipeline.value_or(1) > 1) {
      approximated.emplace_back(
          "--use-tp-pp-dp-mapping with context parallelism: Megatron numbers ranks "
          "tp-cp-ep-pp-dp; dtsim's tp-pp-dp keeps the context-parallel peers just inside data "
          "parallelism");
    }
  }
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

// DeepSpeed's configuration JSON (deepspeed.ai/docs/config-json) as read: each key path read is
// remembered, so the others can be listed. Errors name the key path and its value.
struct DsConfig {
  const Json& json;
  const std::string& file;  // for errors
  std::set<std::string, std::less<>> used;

  Error Fail(std::string message, std::string key, std::string value = {}) const {
    return Error(std::move(message), std::move(key), std::move(value)).InFile(file);
  }

  // The value at `section`.`key` (section empty: top level), or null when absent.
  const Json* Find(std::string_view section, std::string_view key) {
    const Json* parent = &json;
    if (!section.empty()) {
      const auto it = json.find(section);
      if (it == json.end() || !it->is_object()) return nullptr;
      parent = &*it;
    }
    const auto it = parent->find(key);
    if (it == parent->end()) return nullptr;
    used.insert(Path(section, key));
    return &*it;
  }
  static std::string Path(std::string_view section, std::string_view key) {
    return section.empty() ? std::string(key) : fmt::format("{}.{}", section, key);
  }
  Expected<std::optional<int64_t>> Int(std::string_view section, std::string_view key) {
    const Json* value = Find(section, key);
    if (value == nullptr) return std::optional<int64_t>();
    if (!value->is_number_integer() || value->get<int64_t>() < 1) {
      return Fail("expected a positive integer", Path(section, key), value->dump());
    }
    return std::optional<int64_t>(value->get<int64_t>());
  }
  Expected<std::optional<bool>> Bool(std::string_view section, std::string_view key) {
    const Json* value = Find(section, key);
    if (value == nullptr) return std::optional<bool>();
    if (!value->is_boolean())
      return Fail("expected true or false", Path(section, key), value->dump());
    return std::optional<bool>(value->get<bool>());
  }
  // The keys (one level into sections) not read.
  std::vector<std::string> Unused() const {
    std::vector<std::string> unused;
    for (const auto& [key, value] : json.items()) {
      if (value.is_object() && !value.empty()) {
        for (const auto& [inner, leaf] : value.items()) {
          if (!used.contains(Path(key, inner))) {
            unused.push_back(fmt::format("ds_config {}: {}", Path(key, inner), leaf.dump()));
          }
        }
      } else if (!used.contains(key)) {
        unused.push_back(fmt::format("ds_config {}: {}", key, value.dump()));
      }
    }
    return unused;
  }
};

// A setting both the flags and the JSON may give: they must agree.
Expected<std::optional<int64_t>> FlagOrKey(Flags& flags, std::string_view flag, DsConfig& ds,
                                           std::string_view section, std::string_view key) {
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> from_flag, flags.Int(flag));
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> from_json, ds.Int(section, key));
  if (from_flag && from_json && *from_flag != *from_json) {
    return ds.Fail(fmt::format("disagrees with --{} {}", flag, *from_flag),
                   DsConfig::Path(section, key), std::to_string(*from_json));
  }
  return from_json ? from_json : from_flag;
}

// Batch, sequence, precision, recompute, attention and dropout: Megatron-DeepSpeed's flags, the
// batch and precision from DeepSpeed's JSON where it gives them.
Status DeepSpeedTraining(Flags& flags, DsConfig& ds, Json& training,
                         std::vector<std::string>& approximated) {
  training = {{"framework", "deepspeed"}};
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> global,
                         FlagOrKey(flags, "global-batch-size", ds, "", "train_batch_size"));
  if (!global) return ds.Fail("required: the global batch", "train_batch_size");
  training["global_batch"] = *global;
  DTSIM_ASSIGN_OR_RETURN(
      const std::optional<int64_t> micro,
      FlagOrKey(flags, "micro-batch-size", ds, "", "train_micro_batch_size_per_gpu"));
  if (micro) training["micro_batch"] = *micro;
  DTSIM_RETURN_IF_ERROR(SetInt(flags, "seq-length", training, "seq_len"));
  DTSIM_RETURN_IF_ERROR(Precision(flags, training));
  DTSIM_ASSIGN_OR_RETURN(const std::optional<bool> bf16, ds.Bool("bf16", "enabled"));
  DTSIM_ASSIGN_OR_RETURN(const std::optional<bool> fp16, ds.Bool("fp16", "enabled"));
  if (bf16.value_or(false) && fp16.value_or(false)) {
    return ds.Fail("bf16 and fp16 both enabled", "fp16.enabled", "true");
  }
  if (bf16.value_or(false)) training["precision"] = "bf16";
  if (fp16.value_or(false)) training["precision"] = "fp16";
  DTSIM_RETURN_IF_ERROR(Recompute(flags, training, approximated));
  // Megatron-DeepSpeed runs flash attention only when asked (--use-flash-attn-v2 and kin).
  training["flash_attention"] = flags.Has("use-flash-attn-v2") || flags.Has("use-flash-attn") ||
                                flags.Has("use-flash-attn-triton");
  return Dropout(flags, training, approximated);
}

// ZeRO's stage (the flag and the JSON must agree) and whether the reduction overlaps the
// backward pass (zero_optimization.overlap_comm; DeepSpeed's default: on for stage 3 only).
Status DeepSpeedZero(Flags& flags, DsConfig& ds, Json& parallelism) {
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> flag, flags.Int("zero-stage", true));
  const Json* given = ds.Find("zero_optimization", "stage");
  std::optional<int64_t> stage = flag;
  if (given != nullptr) {
    if (!given->is_number_integer() || given->get<int64_t>() < 0 || given->get<int64_t>() > 3) {
      return ds.Fail("expected 0, 1, 2 or 3", "zero_optimization.stage", given->dump());
    }
    if (flag && *flag != given->get<int64_t>()) {
      return ds.Fail(fmt::format("disagrees with --zero-stage {}", *flag),
                     "zero_optimization.stage", given->dump());
    }
    stage = given->get<int64_t>();
  }
  parallelism["zero_stage"] = stage.value_or(0);
  DTSIM_ASSIGN_OR_RETURN(const std::optional<bool> overlap,
                         ds.Bool("zero_optimization", "overlap_comm"));
  parallelism["overlap_gradient_reduce"] = overlap.value_or(stage.value_or(0) == 3);
  return Status::Ok();
}

Status DeepSpeedParallelism(Flags& flags, DsConfig& ds, Json& parallelism) {
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> pipeline,
                         TensorAndPipeline(flags, parallelism));
  if (flags.Has("no-pipeline-parallel") && pipeline.value_or(1) > 1) {
    return Error("a pipeline of more than one stage with --no-pipeline-parallel",
                 "--pipeline-model-parallel-size", std::to_string(*pipeline));
  }
  parallelism["pipeline"] = pipeline.value_or(1);
  // DeepSpeed-Ulysses: the sequence split over all-to-alls around the attention.
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> ulysses,
                         flags.Int("ds-sequence-parallel-size"));
  if (ulysses && *ulysses > 1) parallelism["context"] = {{"size", *ulysses}, {"comm", "a2a"}};
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> expert,
                         flags.Int("moe-expert-parallel-size"));
  if (expert) parallelism["expert"] = *expert;
  return DeepSpeedZero(flags, ds, parallelism);
}

// ZeRO's gradient bucket and ZeRO-3's coordinator limits (zero_optimization's keys, into
// training.deepspeed: models::DeepSpeedZero). "auto" is resolved as Hugging Face's DeepSpeed
// integration fills it in from the hidden size h: h² for the bucket, 0.9·h² for the prefetch.
Status DeepSpeedZeroBuffers(DsConfig& ds, Json& config) {
  const int64_t stage = config["parallelism"].value("zero_stage", int64_t{0});
  if (stage == 0) return Status::Ok();
  // h is capped where h² reaches the largest count training.deepspeed takes (2^50): a hidden
  // size the model's reader will refuse must not overflow on the way there.
  const int64_t hidden =
      std::clamp(config["model"].value("hidden", int64_t{0}), int64_t{0}, int64_t{1} << 25);
  static_assert((int64_t{1} << 50) == models::kMaxDeepSpeedElements);
  Json zero = Json::object();
  for (const auto& [key, automatic] :
       {std::pair<std::string_view, int64_t>{"reduce_bucket_size", hidden * hidden},
        {"stage3_prefetch_bucket_size", hidden * hidden * 9 / 10},
        {"stage3_max_live_parameters", 0},
        {"stage3_max_reuse_distance", 0}}) {
    if (stage < 3 && key.starts_with("stage3_")) continue;
    const Json* value = ds.Find("zero_optimization", key);
    if (value == nullptr) continue;
    const std::string path = DsConfig::Path("zero_optimization", key);
    if (value->is_string() && *value == "auto" && automatic > 0) {
      zero[std::string(key)] = automatic;
      continue;
    }
    const Expected<int64_t> elements = JsonToInt(*value, path, 0, models::kMaxDeepSpeedElements);
    if (!elements.ok()) {
      return ds.Fail(automatic > 0 ? "expected a non-negative integer or \"auto\""
                                   : "expected a non-negative integer",
                     path, value->dump());
    }
    zero[std::string(key)] = *elements;
  }
  DTSIM_ASSIGN_OR_RETURN(const std::optional<bool> contiguous,
                         ds.Bool("zero_optimization", "contiguous_gradients"));
  if (contiguous) zero["contiguous_gradients"] = *contiguous;
  if (!zero.empty()) config["training"]["deepspeed"] = std::move(zero);
  return Status::Ok();
}

// The data-parallel reduction's dtype (communication_data_type) or DeepSpeed's 1-bit
// optimizers (optimizer.type, warm-up from params.freeze_step).
Status DeepSpeedCompression(DsConfig& ds, Json& config) {
  if (const Json* dtype = ds.Find("", "communication_data_type"); dtype != nullptr) {
    if (!dtype->is_string() || (*dtype != "fp16" && *dtype != "bf16" && *dtype != "fp32")) {
      return ds.Fail("expected fp16, bf16 or fp32", "communication_data_type", dtype->dump());
    }
    if (*dtype != "fp32") config["compression"] = {{"method", dtype->get<std::string>()}};
  }
  const Json* type = ds.Find("optimizer", "type");
  if (type == nullptr) return Status::Ok();
  if (!type->is_string())
    return ds.Fail("expected an optimizer's name", "optimizer.type", type->dump());
  const std::string name = type->get<std::string>();
  if (name != "OneBitAdam" && name != "OneBitLamb") {
    ds.used.erase("optimizer.type");  // listed: dtsim prices Adam's step whatever it is
    return Status::Ok();
  }
  Json compression = {{"method", name == "OneBitAdam" ? "onebit_adam" : "onebit_lamb"}};
  const Json& optimizer = ds.json.at("optimizer");
  const auto params = optimizer.find("params");
  if (params != optimizer.end() && params->is_object() && params->contains("freeze_step")) {
    const Json& freeze = params->at("freeze_step");
    if (!freeze.is_number_integer() || freeze.get<int64_t>() < 0) {
      return ds.Fail("expected a non-negative integer", "optimizer.params.freeze_step",
                     freeze.dump());
    }
    compression["warmup_steps"] = freeze;
  }
  ds.used.insert("optimizer.params");
  config["compression"] = compression;
  return Status::Ok();
}

// DeepSpeed requires train_batch_size = micro-batch × accumulation steps × data parallelism.
Status CheckAccumulation(DsConfig& ds, const Json& config) {
  DTSIM_ASSIGN_OR_RETURN(const std::optional<int64_t> steps,
                         ds.Int("", "gradient_accumulation_steps"));
  if (!steps) return Status::Ok();
  const Json& training = config["training"];
  const int64_t global = training["global_batch"].get<int64_t>();
  const int64_t micro = training.value("micro_batch", int64_t{1});    // positive: read so
  const int64_t data = config["parallelism"]["data"].get<int64_t>();  // SizeDataParallelism's
  // Divisions only: the product of three given integers can overflow.
  const bool divides =
      global % micro == 0 && (global / micro) % data == 0 && global / micro / data == *steps;
  if (!divides) {
    return ds.Fail(fmt::format("train_batch_size {} is not micro-batch {} × {} steps × data "
                               "parallelism {}",
                               global, micro, *steps, data),
                   "gradient_accumulation_steps", std::to_string(*steps));
  }
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
  DTSIM_ASSIGN_OR_RETURN(Flags flags, ParseLaunchFlags(args));
  ImportedConfig out;
  Json& config = out.config;
  config = Json::object();
  std::vector<std::string> approximated;
  DTSIM_RETURN_IF_ERROR(ModelSection(flags, target, Dialect::kMegatronLm, config["model"]));
  DTSIM_RETURN_IF_ERROR(TrainingSection(flags, config["training"], approximated));
  DTSIM_RETURN_IF_ERROR(RunLength(flags, config));
  config["cluster"] = target.cluster;
  config["parallelism"] = Json::object();
  DTSIM_RETURN_IF_ERROR(ParallelismSection(flags, config["parallelism"], approximated));
  DTSIM_RETURN_IF_ERROR(SizeDataParallelism(config));
  DTSIM_RETURN_IF_ERROR(ApplyEnvironment(flags, config["cluster"], approximated));
  if (Expected<ResolvedConfig> checked = ConfigFromJson(config, ""); !checked.ok()) {
    return std::move(checked).error();
  }
  out.not_modelled = UnusedFlags(flags);
  for (std::string& note : approximated) out.not_modelled.push_back(std::move(note));
  return out;
}

Expected<ImportedConfig> ImportDeepSpeedArguments(std::span<const std::string> args,
                                                  const Json& ds_config,
                                                  const std::string& ds_config_file,
                                                  const ImportTarget& target) {
  if (!ds_config.is_object()) {
    return Error("expected DeepSpeed's config object", "", "").InFile(ds_config_file);
  }
  DTSIM_ASSIGN_OR_RETURN(Flags flags, ParseLaunchFlags(args));
  // The engine's switches; the config file is the one given.
  flags.Has("deepspeed");
  flags.Has("deepspeed_config");
  flags.Has("deepspeed-activation-checkpointing");  // with a recompute granularity, below
  ImportedConfig out;
  Json& config = out.config;
  config = Json::object();
  std::vector<std::string> approximated;
  DsConfig ds{.json = ds_config, .file = ds_config_file};
  DTSIM_RETURN_IF_ERROR(ModelSection(flags, target, Dialect::kMegatronDeepSpeed, config["model"]));
  DTSIM_RETURN_IF_ERROR(DeepSpeedTraining(flags, ds, config["training"], approximated));
  DTSIM_RETURN_IF_ERROR(RunLength(flags, config));
  config["cluster"] = target.cluster;
  config["parallelism"] = Json::object();
  DTSIM_RETURN_IF_ERROR(DeepSpeedParallelism(flags, ds, config["parallelism"]));
  DTSIM_RETURN_IF_ERROR(DeepSpeedCompression(ds, config));
  DTSIM_RETURN_IF_ERROR(DeepSpeedZeroBuffers(ds, config));
  DTSIM_RETURN_IF_ERROR(SizeDataParallelism(config));
  DTSIM_RETURN_IF_ERROR(CheckAccumulation(ds, config));
  DTSIM_RETURN_IF_ERROR(ApplyEnvironment(flags, config["cluster"], approximated));
  if (Expected<ResolvedConfig> checked = ConfigFromJson(config, ""); !checked.ok()) {
    return std::move(checked).error();
  }
  out.not_modelled = UnusedFlags(flags);
  for (std::string& key : ds.Unused()) out.not_modelled.push_back(std::move(key));
  for (std::string& note : approximated) out.not_modelled.push_back(std::move(note));
  return out;
}

}  // namespace dtsim::strategies
