#include "models/hf_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string_view>

#include "sim/base/strings.h"

namespace dtsim::models {
namespace {

constexpr std::array<std::string_view, 11> kModelTypes = {
    "llama",       "mistral", "mixtral", "qwen2", "qwen3",    "qwen3_moe",
    "deepseek_v3", "gpt_oss", "gpt2",    "bert",  "qwen2_moe"};

// Reads a Hugging Face config's fields, each error naming the field.
class HfReader {
 public:
  explicit HfReader(const Json& hf) : hf_(hf) {}

  bool Has(std::string_view key) const {
    return hf_.contains(key) && !hf_[std::string(key)].is_null();
  }
  Expected<int64_t> Int(std::string_view key, int64_t min = 1) const {
    if (!Has(key)) return Error("missing required field", std::string(key));
    return JsonToInt(hf_[std::string(key)], std::string(key), min, int64_t{1} << 40);
  }
  Expected<int64_t> IntOr(std::string_view key, int64_t fallback, int64_t min = 1) const {
    if (!Has(key)) return fallback;
    return Int(key, min);
  }
  Expected<bool> BoolOr(std::string_view key, bool fallback) const {
    if (!Has(key)) return fallback;
    const Json& value = hf_[std::string(key)];
    if (!value.is_boolean()) return Error("expected true or false", std::string(key));
    return value.get<bool>();
  }
  std::string StringOr(std::string_view key, std::string fallback) const {
    if (!Has(key) || !hf_[std::string(key)].is_string()) return fallback;
    return hf_[std::string(key)].get<std::string>();
  }
  const Json& Raw(std::string_view key) const { return hf_[std::string(key)]; }

 private:
  const Json& hf_;
};

// hidden_act of a gated MLP ("silu": SwiGLU) or of GPT-2's and BERT's ungated one.
Expected<std::string> ReadActivation(const HfReader& in, std::string_view key, bool gated) {
  const std::string act = in.StringOr(key, gated ? "silu" : "gelu");
  if (gated && (act == "silu" || act == "swiglu")) return std::string("swiglu");
  if (!gated && (act == "gelu" || act == "gelu_new" || act == "gelu_pytorch_tanh")) {
    return std::string("gelu");
  }
  if (!gated && act == "relu") return std::string("relu");
  return Error(
      fmt::format("an activation dtsim does not model with {} MLPs", gated ? "gated" : "ungated"),
      std::string(key), Quote(act));
}

// Llama-family decoders: Llama, Mistral, Mixtral, Qwen2/3 (and their MoE), DeepSeek-V3,
// GPT-OSS share these names.
Expected<Json> Decoder(const HfReader& in) {
  Json spec = {{"family", "transformer"}, {"norm", "rmsnorm"}, {"position", "rotary"}};
  DTSIM_ASSIGN_OR_RETURN(spec["layers"], in.Int("num_hidden_layers"));
  DTSIM_ASSIGN_OR_RETURN(spec["hidden"], in.Int("hidden_size"));
  DTSIM_ASSIGN_OR_RETURN(spec["heads"], in.Int("num_attention_heads"));
  DTSIM_ASSIGN_OR_RETURN(spec["kv_heads"],
                         in.IntOr("num_key_value_heads", spec["heads"].get<int64_t>()));
  DTSIM_ASSIGN_OR_RETURN(spec["vocab"], in.Int("vocab_size"));
  DTSIM_ASSIGN_OR_RETURN(spec["max_seq"], in.Int("max_position_embeddings"));
  DTSIM_ASSIGN_OR_RETURN(spec["ffn_hidden"], in.Int("intermediate_size"));
  if (in.Has("head_dim")) {
    DTSIM_ASSIGN_OR_RETURN(spec["head_dim"], in.Int("head_dim"));
  }
  DTSIM_ASSIGN_OR_RETURN(spec["activation"], ReadActivation(in, "hidden_act", true));
  DTSIM_ASSIGN_OR_RETURN(spec["tied_embeddings"], in.BoolOr("tie_word_embeddings", false));
  // dtsim's linear_bias covers every linear layer: the attention's and the MLP's together.
  DTSIM_ASSIGN_OR_RETURN(const bool attention_bias, in.BoolOr("attention_bias", false));
  DTSIM_ASSIGN_OR_RETURN(const bool mlp_bias, in.BoolOr("mlp_bias", attention_bias));
  if (attention_bias != mlp_bias) {
    return Error("biases on the attention but not the MLP (or the reverse) are not modelled",
                 "mlp_bias", mlp_bias ? "true" : "false");
  }
  spec["linear_bias"] = attention_bias;
  return spec;
}

// Mistral's (every layer) or Qwen2/3's (use_sliding_window) sliding window.
Status SlidingWindow(const HfReader& in, bool every_layer, Json& spec) {
  if (!in.Has("sliding_window")) return Status::Ok();
  DTSIM_ASSIGN_OR_RETURN(const bool used, in.BoolOr("use_sliding_window", every_layer));
  if (!used) return Status::Ok();
  DTSIM_ASSIGN_OR_RETURN(spec["sliding_window"], in.Int("sliding_window"));
  if (in.Has("max_window_layers") && !every_layer) {
    return Error("a sliding window on some layers only (max_window_layers) is not modelled",
                 "max_window_layers");
  }
  return Status::Ok();
}

Status Experts(const HfReader& in, std::string_view experts_key, std::string_view top_k_key,
               Json& spec) {
  Json moe = {{"dropless", true}};
  DTSIM_ASSIGN_OR_RETURN(moe["experts"], in.Int(experts_key));
  DTSIM_ASSIGN_OR_RETURN(moe["top_k"], in.Int(top_k_key));
  spec["moe"] = std::move(moe);
  return Status::Ok();
}

Expected<Json> QwenMoe(const HfReader& in) {
  DTSIM_ASSIGN_OR_RETURN(Json spec, Decoder(in));
  if (in.StringOr("model_type", "") == "qwen3_moe") spec["qk_norm"] = true;  // as Qwen3's
  DTSIM_RETURN_IF_ERROR(Experts(in, "num_experts", "num_experts_per_tok", spec));
  DTSIM_ASSIGN_OR_RETURN(spec["moe"]["expert_ffn_hidden"], in.Int("moe_intermediate_size"));
  DTSIM_ASSIGN_OR_RETURN(spec["moe"]["every"], in.IntOr("decoder_sparse_step", 1));
  if (in.Has("mlp_only_layers") &&
      (!in.Raw("mlp_only_layers").is_array() || !in.Raw("mlp_only_layers").empty())) {
    return Error("dense layers at chosen places (mlp_only_layers) are not modelled",
                 "mlp_only_layers");
  }
  if (in.Has("shared_expert_intermediate_size")) {
    DTSIM_ASSIGN_OR_RETURN(const int64_t shared, in.Int("shared_expert_intermediate_size", 0));
    const int64_t expert = spec["moe"]["expert_ffn_hidden"].get<int64_t>();
    if (shared % expert != 0) {
      return Error(fmt::format("a shared expert width that is not a multiple of the expert "
                               "width ({}) is not modelled",
                               expert),
                   "shared_expert_intermediate_size", std::to_string(shared));
    }
    spec["moe"]["shared_experts"] = shared / expert;
  }
  return spec;
}

Expected<Json> DeepSeekV3(const HfReader& in) {
  DTSIM_ASSIGN_OR_RETURN(Json spec, Decoder(in));
  spec["kv_heads"] = spec["heads"];
  Json mla;
  DTSIM_ASSIGN_OR_RETURN(mla["q_lora_rank"], in.IntOr("q_lora_rank", 0, 0));
  for (const char* key : {"kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"}) {
    DTSIM_ASSIGN_OR_RETURN(mla[key], in.Int(key));
  }
  spec["mla"] = std::move(mla);
  spec.erase("head_dim");
  DTSIM_RETURN_IF_ERROR(Experts(in, "n_routed_experts", "num_experts_per_tok", spec));
  DTSIM_ASSIGN_OR_RETURN(spec["moe"]["expert_ffn_hidden"], in.Int("moe_intermediate_size"));
  DTSIM_ASSIGN_OR_RETURN(spec["moe"]["shared_experts"], in.IntOr("n_shared_experts", 0, 0));
  DTSIM_ASSIGN_OR_RETURN(spec["moe"]["first_dense_layers"],
                         in.IntOr("first_k_dense_replace", 0, 0));
  DTSIM_ASSIGN_OR_RETURN(const int64_t frequency, in.IntOr("moe_layer_freq", 1));
  if (frequency != 1) {
    return Error("MoE on every n-th layer after the dense ones is not modelled", "moe_layer_freq",
                 std::to_string(frequency));
  }
  // The multi-token-prediction modules the model was trained with (the checkpoint's layers
  // after num_hidden_layers).
  DTSIM_ASSIGN_OR_RETURN(const int64_t mtp, in.IntOr("num_nextn_predict_layers", 0, 0));
  if (mtp > 0) spec["mtp_layers"] = mtp;
  return spec;
}

Expected<Json> GptOss(const HfReader& in) {
  DTSIM_ASSIGN_OR_RETURN(Json spec, Decoder(in));
  DTSIM_RETURN_IF_ERROR(Experts(in, "num_local_experts", "num_experts_per_tok", spec));
  spec["moe"]["expert_ffn_hidden"] = spec["ffn_hidden"];
  if (!in.Has("layer_types")) return spec;
  const Json& types = in.Raw("layer_types");
  if (!types.is_array()) return Error("expected a list of attention kinds", "layer_types");
  // Windows on every layer, or on every second from layer 0 (the released models').
  bool every = true;
  bool alternate = true;
  for (size_t i = 0; i < types.size(); ++i) {
    const bool sliding = types[i] == "sliding_attention";
    if (!sliding && types[i] != "full_attention") {
      return Error("an attention kind dtsim does not model", JsonIndexPath("layer_types", i),
                   JsonValueForError(types[i]));
    }
    every = every && sliding;
    alternate = alternate && sliding == (i % 2 == 0);
  }
  if (every || alternate) {
    DTSIM_ASSIGN_OR_RETURN(spec["sliding_window"], in.Int("sliding_window"));
    spec["sliding_window_every"] = every ? 1 : 2;
  } else if (std::any_of(types.begin(), types.end(),
                         [](const Json& t) { return t == "sliding_attention"; })) {
    return Error(
        "sliding windows on layers other than all or every second from the first are "
        "not modelled",
        "layer_types");
  }
  return spec;
}

Expected<Json> Gpt2(const HfReader& in) {
  Json spec = {{"family", "transformer"}, {"norm", "layernorm"}, {"position", "learned"}};
  DTSIM_ASSIGN_OR_RETURN(spec["layers"], in.Int("n_layer"));
  DTSIM_ASSIGN_OR_RETURN(spec["hidden"], in.Int("n_embd"));
  DTSIM_ASSIGN_OR_RETURN(spec["heads"], in.Int("n_head"));
  DTSIM_ASSIGN_OR_RETURN(spec["vocab"], in.Int("vocab_size"));
  DTSIM_ASSIGN_OR_RETURN(spec["max_seq"], in.Int("n_positions"));
  DTSIM_ASSIGN_OR_RETURN(spec["ffn_hidden"],
                         in.IntOr("n_inner", 4 * spec["hidden"].get<int64_t>()));
  DTSIM_ASSIGN_OR_RETURN(spec["activation"], ReadActivation(in, "activation_function", false));
  DTSIM_ASSIGN_OR_RETURN(spec["tied_embeddings"], in.BoolOr("tie_word_embeddings", true));
  return spec;
}

Expected<Json> Bert(const HfReader& in) {
  Json spec = {{"family", "transformer"}, {"norm", "layernorm"},      {"position", "learned"},
               {"causal", false},         {"embedding_norm", true},   {"final_norm", false},
               {"pooler", true},          {"lm_head_transform", true}};
  DTSIM_ASSIGN_OR_RETURN(spec["layers"], in.Int("num_hidden_layers"));
  DTSIM_ASSIGN_OR_RETURN(spec["hidden"], in.Int("hidden_size"));
  DTSIM_ASSIGN_OR_RETURN(spec["heads"], in.Int("num_attention_heads"));
  DTSIM_ASSIGN_OR_RETURN(spec["ffn_hidden"], in.Int("intermediate_size"));
  DTSIM_ASSIGN_OR_RETURN(spec["vocab"], in.Int("vocab_size"));
  DTSIM_ASSIGN_OR_RETURN(spec["max_seq"], in.Int("max_position_embeddings"));
  DTSIM_ASSIGN_OR_RETURN(spec["token_types"], in.IntOr("type_vocab_size", 2, 0));
  DTSIM_ASSIGN_OR_RETURN(spec["activation"], ReadActivation(in, "hidden_act", false));
  return spec;
}

}  // namespace

Expected<Json> ModelJsonFromHfConfig(const Json& hf) {
  if (!hf.is_object()) return Error("expected a Hugging Face config object");
  const HfReader in(hf);
  const std::string type = in.StringOr("model_type", "");
  if (type == "llama" || type == "qwen2" || type == "qwen3") {
    DTSIM_ASSIGN_OR_RETURN(Json spec, Decoder(in));
    // Qwen3's attention normalizes each query and key head (q_norm, k_norm in
    // transformers' modeling_qwen3.py); its config has no key for it.
    if (type == "qwen3") spec["qk_norm"] = true;
    // Qwen2's QKV biases (q + 2·kv a layer; its config names none) are not counted.
    DTSIM_RETURN_IF_ERROR(SlidingWindow(in, false, spec));
    return spec;
  }
  if (type == "mistral" || type == "mixtral") {
    DTSIM_ASSIGN_OR_RETURN(Json spec, Decoder(in));
    DTSIM_RETURN_IF_ERROR(SlidingWindow(in, true, spec));
    if (type == "mixtral") {
      DTSIM_RETURN_IF_ERROR(Experts(in, "num_local_experts", "num_experts_per_tok", spec));
    }
    return spec;
  }
  if (type == "qwen3_moe" || type == "qwen2_moe") return QwenMoe(in);
  if (type == "deepseek_v3") return DeepSeekV3(in);
  if (type == "gpt_oss") return GptOss(in);
  if (type == "gpt2") return Gpt2(in);
  if (type == "bert") return Bert(in);
  return Error(fmt::format("a model type dtsim does not read; known: {}", JoinQuoted(kModelTypes)),
               "model_type", Quote(type));
}

}  // namespace dtsim::models
