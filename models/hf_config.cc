#include "models/hf_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <functional>
#include <string_view>
#include <vector>

#include "sim/base/strings.h"

namespace dtsim::models {
namespace {

// Windows and MoE layers are listed one flag a layer, for at most this many layers.
constexpr int64_t kMaxListedLayers = 1 << 16;

constexpr std::array<std::string_view, 15> kModelTypes = {
    "llama",     "mistral",     "mixtral", "qwen2",  "qwen3",
    "qwen3_moe", "deepseek_v3", "gpt_oss", "gemma3", "gemma3_text",
    "llama4",    "llama4_text", "gpt2",    "bert",   "qwen2_moe"};

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
  // Gemma's gelu_pytorch_tanh (priced as GeLU: an elementwise op either way).
  if (gated && (act == "gelu" || act == "gelu_new" || act == "gelu_pytorch_tanh")) {
    return std::string("geglu");
  }
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

// The local (windowed or chunked) layers' pattern as dtsim's sliding_window_pattern: nothing
// when every layer is local, N when every N-th layer from 1 is full and the rest local (GPT-OSS's
// 2, Gemma 3's 6, Llama 4's 4), else one flag a layer.
void WriteLocalPattern(const std::vector<uint8_t>& windowed, Json& spec) {
  const auto full = std::find(windowed.begin(), windowed.end(), uint8_t{0});
  if (full == windowed.end()) return;
  const size_t every = static_cast<size_t>(full - windowed.begin()) + 1;
  bool periodic = every >= 2;
  for (size_t i = 0; periodic && i < windowed.size(); ++i) {
    periodic = (windowed[i] != 0) == ((i + 1) % every != 0);
  }
  spec["sliding_window_pattern"] = periodic ? Json(every) : Json(windowed);
}

// Per-layer windows: sliding_window and its pattern; nothing when no layer is windowed.
Status WriteWindows(const HfReader& in, const std::vector<uint8_t>& windowed, Json& spec) {
  if (std::none_of(windowed.begin(), windowed.end(), [](uint8_t w) { return w != 0; })) {
    return Status::Ok();
  }
  DTSIM_ASSIGN_OR_RETURN(spec["sliding_window"], in.Int("sliding_window"));
  WriteLocalPattern(windowed, spec);
  return Status::Ok();
}

// transformers' layer_types: `local` ("sliding_attention", Llama 4's "chunked_attention") or
// "full_attention" for each layer.
Expected<std::vector<uint8_t>> LayerTypes(const HfReader& in, int64_t layers,
                                          std::string_view local = "sliding_attention") {
  const Json& types = in.Raw("layer_types");
  if (!types.is_array() || std::ssize(types) != layers) {
    return Error(fmt::format("expected a list of {} attention kinds, one a layer", layers),
                 "layer_types");
  }
  std::vector<uint8_t> windowed;
  for (size_t i = 0; i < types.size(); ++i) {
    const bool sliding = types[i] == local;
    if (!sliding && types[i] != "full_attention") {
      return Error(
          fmt::format("an attention kind dtsim does not model here ({}, full_attention)", local),
          JsonIndexPath("layer_types", i), JsonValueForError(types[i]));
    }
    windowed.push_back(sliding ? 1 : 0);
  }
  return windowed;
}

// Each layer windowed but every `full_every`-th from 1 (0: none), for at most kMaxListedLayers.
Expected<std::vector<uint8_t>> EveryNthFull(int64_t layers, int64_t full_every) {
  if (layers > kMaxListedLayers) {
    return Error(fmt::format("more layers than dtsim lists windows for ({})", kMaxListedLayers),
                 "num_hidden_layers", std::to_string(layers));
  }
  std::vector<uint8_t> windowed(static_cast<size_t>(layers), 1);
  for (int64_t i = full_every - 1; full_every > 0 && i < layers; i += full_every) windowed[i] = 0;
  return windowed;
}

// A decoder's windowed layers: its layer_types when it has them, else all but every
// `full_every`-th layer from 1 (0: every layer; Mistral's, and transformers' GptOssConfig
// default of 2).
Status SlidingWindow(const HfReader& in, int64_t full_every, Json& spec) {
  if (!in.Has("sliding_window")) return Status::Ok();
  const int64_t layers = spec["layers"].get<int64_t>();
  Expected<std::vector<uint8_t>> windowed =
      in.Has("layer_types") ? LayerTypes(in, layers) : EveryNthFull(layers, full_every);
  if (!windowed.ok()) return std::move(windowed).error();
  return WriteWindows(in, *windowed, spec);
}

// Qwen2/3 window with use_sliding_window (default false) the layers layer_types names, else
// those from max_window_layers on (default 28; transformers' Qwen2Config and Qwen3Config).
Status QwenSlidingWindow(const HfReader& in, Json& spec) {
  if (!in.Has("sliding_window")) return Status::Ok();
  DTSIM_ASSIGN_OR_RETURN(const bool used, in.BoolOr("use_sliding_window", false));
  if (!used) return Status::Ok();
  if (in.Has("layer_types")) return SlidingWindow(in, 0, spec);
  DTSIM_ASSIGN_OR_RETURN(const int64_t first, in.IntOr("max_window_layers", 28, 0));
  const int64_t layers = spec["layers"].get<int64_t>();
  DTSIM_ASSIGN_OR_RETURN(std::vector<uint8_t> windowed, EveryNthFull(layers, 0));
  std::fill_n(windowed.begin(), std::min(first, layers), uint8_t{0});
  return WriteWindows(in, windowed, spec);
}

Status Experts(const HfReader& in, std::string_view experts_key, std::string_view top_k_key,
               Json& spec) {
  Json moe = {{"dropless", true}};
  DTSIM_ASSIGN_OR_RETURN(moe["experts"], in.Int(experts_key));
  DTSIM_ASSIGN_OR_RETURN(moe["top_k"], in.Int(top_k_key));
  spec["moe"] = std::move(moe);
  return Status::Ok();
}

// MoE layers listed one flag a layer (1 MoE), for a placement `every` and `first_dense_layers`
// cannot say: moe.layers.
Status WriteMoeLayers(int64_t layers, const std::string& key,
                      const std::function<bool(int64_t)>& is_moe, Json& spec) {
  if (layers > kMaxListedLayers) {
    return Error(fmt::format("more layers than dtsim lists MoE layers for ({})", kMaxListedLayers),
                 key, std::to_string(layers));
  }
  std::vector<uint8_t> flags(static_cast<size_t>(layers));
  for (int64_t i = 0; i < layers; ++i) flags[static_cast<size_t>(i)] = is_moe(i) ? 1 : 0;
  if (std::find(flags.begin(), flags.end(), 1) == flags.end()) {
    return Error("no layer is MoE", key);
  }
  spec["moe"]["layers"] = flags;
  return Status::Ok();
}

// The layer indices a config lists under `key` (mlp_only_layers, moe_layers), as one flag a layer.
Expected<std::vector<bool>> ListedLayers(const HfReader& in, const std::string& key,
                                         int64_t layers) {
  const Json& listed = in.Raw(key);
  if (!listed.is_array()) {
    return Error("expected a list of layer indices", key, JsonValueForError(listed));
  }
  std::vector<bool> flags(static_cast<size_t>(std::min(layers, kMaxListedLayers + 1)));
  for (size_t j = 0; j < listed.size(); ++j) {
    DTSIM_ASSIGN_OR_RETURN(const int64_t index,
                           JsonToInt(listed[j], JsonIndexPath(key, j), 0, std::ssize(flags) - 1));
    flags[static_cast<size_t>(index)] = true;
  }
  return flags;
}

// transformers' Qwen2MoeDecoderLayer (and Qwen3's): MoE on the layers with (i + 1) %
// decoder_sparse_step == 0 that mlp_only_layers does not list.
Status QwenMoeLayers(const HfReader& in, Json& spec) {
  DTSIM_ASSIGN_OR_RETURN(const int64_t step, in.IntOr("decoder_sparse_step", 1));
  if (!in.Has("mlp_only_layers") ||
      (in.Raw("mlp_only_layers").is_array() && in.Raw("mlp_only_layers").empty())) {
    spec["moe"]["every"] = step;
    return Status::Ok();
  }
  const int64_t layers = spec["layers"].get<int64_t>();
  DTSIM_ASSIGN_OR_RETURN(const std::vector<bool> dense,
                         ListedLayers(in, "mlp_only_layers", layers));
  return WriteMoeLayers(
      layers, "mlp_only_layers",
      [&](int64_t i) { return !dense[static_cast<size_t>(i)] && (i + 1) % step == 0; }, spec);
}

Expected<Json> QwenMoe(const HfReader& in) {
  DTSIM_ASSIGN_OR_RETURN(Json spec, Decoder(in));
  if (in.StringOr("model_type", "") == "qwen3_moe") spec["qk_norm"] = true;  // as Qwen3's
  DTSIM_RETURN_IF_ERROR(Experts(in, "num_experts", "num_experts_per_tok", spec));
  DTSIM_ASSIGN_OR_RETURN(spec["moe"]["expert_ffn_hidden"], in.Int("moe_intermediate_size"));
  DTSIM_RETURN_IF_ERROR(QwenMoeLayers(in, spec));
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
  DTSIM_RETURN_IF_ERROR(QwenSlidingWindow(in, spec));
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
  // transformers' DeepseekV3DecoderLayer: MoE on layer i >= first_k_dense_replace with
  // i % moe_layer_freq == 0, counted from 0 (every layer at the default 1).
  DTSIM_ASSIGN_OR_RETURN(const int64_t frequency, in.IntOr("moe_layer_freq", 1));
  if (frequency != 1) {
    const int64_t dense = spec["moe"]["first_dense_layers"].get<int64_t>();
    spec["moe"].erase("first_dense_layers");
    DTSIM_RETURN_IF_ERROR(WriteMoeLayers(
        spec["layers"].get<int64_t>(), "moe_layer_freq",
        [&](int64_t i) { return i >= dense && i % frequency == 0; }, spec));
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
  DTSIM_RETURN_IF_ERROR(SlidingWindow(in, 2, spec));
  return spec;
}

// Gemma 3's text model (transformers' Gemma3TextConfig, 4.50+): a decoder with GeGLU, a QK norm,
// norms after the attention and the MLP as well as before, tied embeddings, and windows on five
// layers of six. Its config.json leaves out the class's defaults, which fill them here; a
// multimodal config ("gemma3") gives its text_config, the SigLIP vision tower left out. Not
// modelled: the embeddings' scaling by √hidden (one elementwise op) and logit soft-capping,
// which Gemma 3 does not use (an error when a config sets it).
Expected<Json> Gemma3(const Json& text) {
  Json merged = {{"vocab_size", 262208},
                 {"hidden_size", 2304},
                 {"intermediate_size", 9216},
                 {"num_hidden_layers", 26},
                 {"num_attention_heads", 8},
                 {"num_key_value_heads", 4},
                 {"head_dim", 256},
                 {"max_position_embeddings", 131072},
                 {"hidden_activation", "gelu_pytorch_tanh"},
                 {"sliding_window", 4096},
                 {"sliding_window_pattern", 6},
                 {"tie_word_embeddings", true}};
  for (const auto& [key, value] : text.items()) {
    if (!value.is_null()) merged[key] = value;
  }
  merged["hidden_act"] = merged["hidden_activation"];
  const HfReader in(merged);
  for (const char* cap : {"attn_logit_softcapping", "final_logit_softcapping"}) {
    if (in.Has(cap)) {
      return Error("logit soft-capping is not modelled", cap, JsonValueForError(in.Raw(cap)));
    }
  }
  DTSIM_ASSIGN_OR_RETURN(Json spec, Decoder(in));
  spec["qk_norm"] = true;
  spec["post_norms"] = true;
  DTSIM_ASSIGN_OR_RETURN(const int64_t every, in.IntOr("sliding_window_pattern", 6));
  DTSIM_RETURN_IF_ERROR(SlidingWindow(in, every, spec));
  return spec;
}

// Llama 4's chunked layers (1 chunked): those layer_types names chunked_attention, else those
// no_rope_layers flags (transformers' name: 1 a layer that uses RoPE, which is chunked), else all
// but every no_rope_layer_interval-th from 1 (4).
Expected<std::vector<uint8_t>> Llama4ChunkedLayers(const HfReader& in, int64_t layers) {
  if (in.Has("layer_types")) return LayerTypes(in, layers, "chunked_attention");
  if (!in.Has("no_rope_layers") ||
      (in.Raw("no_rope_layers").is_array() && in.Raw("no_rope_layers").empty())) {
    DTSIM_ASSIGN_OR_RETURN(const int64_t interval, in.IntOr("no_rope_layer_interval", 4));
    return EveryNthFull(layers, interval);
  }
  const Json& rope = in.Raw("no_rope_layers");
  if (!rope.is_array() || std::ssize(rope) != layers) {
    return Error(fmt::format("expected one flag a layer: {} layers", layers), "no_rope_layers",
                 JsonValueForError(rope));
  }
  std::vector<uint8_t> chunked;
  for (size_t i = 0; i < rope.size(); ++i) {
    DTSIM_ASSIGN_OR_RETURN(const int64_t flag,
                           JsonToInt(rope[i], JsonIndexPath("no_rope_layers", i), 0, 1));
    chunked.push_back(static_cast<uint8_t>(flag));
  }
  return chunked;
}

// Llama 4's text model (transformers' Llama4TextConfig; a multimodal "llama4" config gives its
// text_config, the vision encoder left out): a Llama decoder with MoE layers of routed experts
// and one shared expert (intermediate_size each) — every layer (Scout), or interleaved with
// dense MLPs of intermediate_size_mlp (Maverick's step 2; moe_layers when listed) — a QK norm,
// and chunked attention (attention_chunk_size) on the RoPE layers, full attention on every
// no_rope_layer_interval-th (4: iRoPE), or as no_rope_layers or layer_types list them. Its QK
// norm is a weightless L2 norm on the chunked layers only, priced as the model's norm on every
// layer (2·head_dim weights a layer too many). Omitted fields take the class's defaults.
Expected<Json> Llama4(const Json& text) {
  Json merged = {{"vocab_size", 202048},
                 {"hidden_size", 5120},
                 {"intermediate_size", 8192},
                 {"intermediate_size_mlp", 16384},
                 {"num_hidden_layers", 48},
                 {"num_attention_heads", 40},
                 {"num_key_value_heads", 8},
                 {"head_dim", 128},
                 {"max_position_embeddings", 131072},
                 {"hidden_act", "silu"},
                 {"tie_word_embeddings", false},
                 {"num_local_experts", 16},
                 {"num_experts_per_tok", 1},
                 {"use_qk_norm", true}};
  for (const auto& [key, value] : text.items()) {
    if (!value.is_null() || key == "attention_chunk_size") merged[key] = value;
  }
  const HfReader in(merged);
  DTSIM_ASSIGN_OR_RETURN(Json spec, Decoder(in));
  DTSIM_ASSIGN_OR_RETURN(spec["ffn_hidden"], in.Int("intermediate_size_mlp"));
  DTSIM_RETURN_IF_ERROR(Experts(in, "num_local_experts", "num_experts_per_tok", spec));
  DTSIM_ASSIGN_OR_RETURN(spec["moe"]["expert_ffn_hidden"], in.Int("intermediate_size"));
  spec["moe"]["shared_experts"] = 1;
  const int64_t layers = spec["layers"].get<int64_t>();
  if (in.Has("moe_layers")) {
    DTSIM_ASSIGN_OR_RETURN(const std::vector<bool> moe, ListedLayers(in, "moe_layers", layers));
    DTSIM_RETURN_IF_ERROR(WriteMoeLayers(
        layers, "moe_layers", [&](int64_t i) { return moe[static_cast<size_t>(i)]; }, spec));
  } else {
    DTSIM_ASSIGN_OR_RETURN(spec["moe"]["every"], in.IntOr("interleave_moe_layer_step", 1));
  }
  DTSIM_ASSIGN_OR_RETURN(spec["qk_norm"], in.BoolOr("use_qk_norm", true));
  // attention_chunk_size null: full attention on every layer.
  if (merged.contains("attention_chunk_size") && merged["attention_chunk_size"].is_null()) {
    return spec;
  }
  DTSIM_ASSIGN_OR_RETURN(const int64_t chunk, in.IntOr("attention_chunk_size", 8192));
  DTSIM_ASSIGN_OR_RETURN(const std::vector<uint8_t> chunked, Llama4ChunkedLayers(in, layers));
  if (std::none_of(chunked.begin(), chunked.end(), [](uint8_t c) { return c != 0; })) return spec;
  spec["attention_chunk"] = chunk;
  WriteLocalPattern(chunked, spec);
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

// A multimodal config's text model, read from its text_config (errors under that key).
Expected<Json> TextModel(const Json& hf, std::string_view family,
                         Expected<Json> (*read)(const Json& text)) {
  if (!hf.contains("text_config") || !hf["text_config"].is_object()) {
    return Error(fmt::format("a {} config without its text model", family), "text_config");
  }
  Expected<Json> spec = read(hf["text_config"]);
  if (!spec.ok()) return std::move(spec).error().Under("text_config");
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
    DTSIM_RETURN_IF_ERROR(QwenSlidingWindow(in, spec));
    return spec;
  }
  if (type == "mistral" || type == "mixtral") {
    DTSIM_ASSIGN_OR_RETURN(Json spec, Decoder(in));
    DTSIM_RETURN_IF_ERROR(SlidingWindow(in, 0, spec));
    if (type == "mixtral") {
      DTSIM_RETURN_IF_ERROR(Experts(in, "num_local_experts", "num_experts_per_tok", spec));
    }
    return spec;
  }
  if (type == "qwen3_moe" || type == "qwen2_moe") return QwenMoe(in);
  if (type == "deepseek_v3") return DeepSeekV3(in);
  if (type == "gpt_oss") return GptOss(in);
  if (type == "gemma3_text") return Gemma3(hf);
  if (type == "gemma3") return TextModel(hf, "Gemma 3", Gemma3);
  if (type == "llama4_text") return Llama4(hf);
  if (type == "llama4") return TextModel(hf, "Llama 4", Llama4);
  if (type == "gpt2") return Gpt2(in);
  if (type == "bert") return Bert(in);
  return Error(fmt::format("a model type dtsim does not read; known: {}", JoinQuoted(kModelTypes)),
               "model_type", Quote(type));
}

}  // namespace dtsim::models
