#include "models/model_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "sim/base/strings.h"

namespace dtsim::models {
namespace {

constexpr std::array<std::string_view, 3> kFamilyNames = {"transformer", "resnet", "dlrm"};
constexpr std::array<std::string_view, 2> kNormNames = {"layernorm", "rmsnorm"};
constexpr std::array<std::string_view, 5> kActivationNames = {"gelu", "swiglu", "relu",
                                                              "squared_relu", "geglu"};
constexpr std::array<std::string_view, 2> kPositionNames = {"learned", "rotary"};
constexpr int64_t kMaxSize = std::numeric_limits<int64_t>::max() / 1024;

// Multi-token-prediction depth: DeepSeek-V3 trains with 1, Gloeckle et al. 2024 with up to 8.
constexpr int kMaxMtpLayers = 64;

// An optional positive size (or >= min), capped so that products of sizes cannot overflow.

template <typename Int>
Status ReadInt(JsonObjectReader& reader, std::string_view key, Int& out, int64_t min = 1) {
  return reader.ReadOptionalInt(key, out, min, kMaxSize);
}

template <typename Int>
Status ReadIntList(JsonObjectReader& reader, std::string_view key, std::vector<Int>& out) {
  const Json* value = reader.Find(key);
  if (value == nullptr) return Status::Ok();
  const std::string path = JsonChildPath(reader.path(), key);
  if (!value->is_array() || value->empty()) {
    return Error("expected a non-empty array of positive integers", path,
                 JsonValueForError(*value));
  }
  out.clear();
  for (size_t i = 0; i < value->size(); ++i) {
    DTSIM_ASSIGN_OR_RETURN(const int64_t item, JsonToInt((*value)[i], JsonIndexPath(path, i), 1,
                                                         std::numeric_limits<int64_t>::max()));
    if (item > kMaxSize) return Error("too large", JsonIndexPath(path, i), std::to_string(item));
    out.push_back(static_cast<Int>(item));
  }
  return Status::Ok();
}

Status RequireUnlessPreset(const JsonObjectReader& reader, bool preset,
                           std::initializer_list<std::string_view> keys) {
  if (preset) return Status::Ok();
  for (std::string_view key : keys) {
    if (!reader.Has(key)) {
      return Error("missing required field (or give a \"preset\")",
                   JsonChildPath(reader.path(), key));
    }
  }
  return Status::Ok();
}

// A JSON array of one 0/1 a layer (`meaning` says what 1 and 0 are), not empty.
Expected<std::vector<uint8_t>> ReadLayerFlags(const Json& value, const std::string& path,
                                              std::string_view meaning) {
  if (value.empty()) {
    return Error(fmt::format("expected one flag a layer ({})", meaning), path, "[]");
  }
  std::vector<uint8_t> layers;
  layers.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    DTSIM_ASSIGN_OR_RETURN(const int64_t flag, JsonToInt(value[i], JsonIndexPath(path, i), 0, 1));
    layers.push_back(static_cast<uint8_t>(flag));
  }
  return layers;
}

// Which layers are MoE: `every` and `first_dense_layers`, or `layers`, one 0/1 a decoder layer
// (1 MoE), which replaces them — a preset's placement gives way to either.
Status ReadMoeLayers(JsonObjectReader& reader, MoeSpec& moe) {
  const Json* value = reader.Find("layers");
  if (value == nullptr) {
    if (reader.Has("every") || reader.Has("first_dense_layers")) moe.layers.clear();
    DTSIM_RETURN_IF_ERROR(ReadInt(reader, "every", moe.every));
    return ReadInt(reader, "first_dense_layers", moe.first_dense_layers, 0);
  }
  const std::string path = JsonChildPath(reader.path(), "layers");
  for (std::string_view key : {"every", "first_dense_layers"}) {
    if (reader.Has(key)) {
      reader.Allow(key);
      return Error(fmt::format("places MoE layers beside {}: give one or the other", key), path);
    }
  }
  if (!value->is_array()) {
    return Error("expected one flag a layer (1 MoE, 0 dense MLP)", path, JsonValueForError(*value));
  }
  DTSIM_ASSIGN_OR_RETURN(moe.layers, ReadLayerFlags(*value, path, "1 MoE, 0 dense MLP"));
  moe.every = 1;
  moe.first_dense_layers = 0;
  return Status::Ok();
}

Status ReadMoe(JsonObjectReader& parent, MoeSpec& moe) {
  const Json* value = parent.Find("moe");
  if (value == nullptr) return Status::Ok();
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader,
                         JsonObjectReader::Make(*value, JsonChildPath(parent.path(), "moe")));
  DTSIM_RETURN_IF_ERROR(ReadInt(reader, "experts", moe.experts, 0));
  DTSIM_RETURN_IF_ERROR(ReadInt(reader, "top_k", moe.top_k));
  DTSIM_RETURN_IF_ERROR(ReadMoeLayers(reader, moe));
  DTSIM_RETURN_IF_ERROR(ReadInt(reader, "expert_ffn_hidden", moe.expert_ffn_hidden));
  DTSIM_RETURN_IF_ERROR(ReadInt(reader, "shared_experts", moe.shared_experts, 0));
  if (reader.Has("capacity_factor")) {
    DTSIM_ASSIGN_OR_RETURN(moe.capacity_factor, reader.Number("capacity_factor"));
  }
  reader.Allow("capacity_factor");
  DTSIM_RETURN_IF_ERROR(reader.ReadOptional("dropless", moe.dropless));
  return reader.Finish();
}

// "mla": {"q_lora_rank" (0: none), "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
// "v_head_dim"}; a preset's values stay for what is not given.
Status ReadMla(JsonObjectReader& parent, MlaSpec& mla) {
  const Json* value = parent.Find("mla");
  if (value == nullptr) return Status::Ok();
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader,
                         JsonObjectReader::Make(*value, JsonChildPath(parent.path(), "mla")));
  if (!mla.enabled()) {
    for (std::string_view key :
         {"kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"}) {
      if (!reader.Has(key))
        return Error("missing required field", JsonChildPath(reader.path(), key));
    }
  }
  DTSIM_RETURN_IF_ERROR(ReadInt(reader, "q_lora_rank", mla.q_lora_rank, 0));
  DTSIM_RETURN_IF_ERROR(ReadInt(reader, "kv_lora_rank", mla.kv_lora_rank));
  DTSIM_RETURN_IF_ERROR(ReadInt(reader, "qk_nope_head_dim", mla.qk_nope_head_dim));
  DTSIM_RETURN_IF_ERROR(ReadInt(reader, "qk_rope_head_dim", mla.qk_rope_head_dim));
  DTSIM_RETURN_IF_ERROR(ReadInt(reader, "v_head_dim", mla.v_head_dim));
  return reader.Finish();
}

// Local attention: `sliding_window` W (a query's last W keys) or `attention_chunk` C (chunks of
// C tokens, causal within each), one or the other; either replaces a preset's.
Status ReadLocalAttention(JsonObjectReader& reader, TransformerSpec& t) {
  if (!reader.Has("attention_chunk")) {
    if (reader.Has("sliding_window")) t.chunked_attention = false;
    return ReadInt(reader, "sliding_window", t.sliding_window, 0);
  }
  if (reader.Has("sliding_window")) {
    reader.Allow("sliding_window");
    return Error("a model has sliding windows or attention chunks: give one or the other",
                 JsonChildPath(reader.path(), "attention_chunk"));
  }
  DTSIM_RETURN_IF_ERROR(ReadInt(reader, "attention_chunk", t.sliding_window, 0));
  t.chunked_attention = t.sliding_window > 0;
  return Status::Ok();
}

// Which layers are windowed: `sliding_window_pattern` N (every N-th layer from 1 keeps full
// attention, Megatron-Core's window_attn_skip_freq) or a list of 0/1 a layer (1 windowed).
Status ReadWindowPattern(JsonObjectReader& reader, TransformerSpec& t) {
  if (reader.Has("sliding_window_every")) {
    reader.Allow("sliding_window_every");
    return Error(
        "replaced by sliding_window_pattern, whose N keeps full attention on every N-th layer "
        "(Megatron-Core's --window-attn-skip-freq, Hugging Face's sliding_window_pattern): "
        "\"sliding_window_every\": 2 is \"sliding_window_pattern\": 2; 1 is no pattern (every "
        "layer windowed)",
        JsonChildPath(reader.path(), "sliding_window_every"));
  }
  const Json* value = reader.Find("sliding_window_pattern");
  if (value == nullptr) return Status::Ok();
  const std::string path = JsonChildPath(reader.path(), "sliding_window_pattern");
  if (t.sliding_window == 0) {
    return Error(
        "places windows, but the model has none: give sliding_window (or "
        "attention_chunk) too",
        path, JsonValueForError(*value));
  }
  if (value->is_array()) {
    DTSIM_ASSIGN_OR_RETURN(t.window_layers, ReadLayerFlags(*value, path, "1 windowed, 0 full"));
    t.window_full_every = 0;
    return Status::Ok();
  }
  DTSIM_ASSIGN_OR_RETURN(const int64_t every, JsonToInt(*value, path, 1, kMaxSize));
  if (every == 1) {
    return Error(
        "1 would keep every layer full: give N of at least 2 (every N-th layer keeps full "
        "attention), or leave it out to window every layer",
        path, "1");
  }
  t.window_full_every = static_cast<int>(std::min<int64_t>(every, std::numeric_limits<int>::max()));
  t.window_layers.clear();
  return Status::Ok();
}

// Fields derived from others in a preset (kv_heads == heads for multi-head attention,
// ffn_hidden == 4·hidden) follow an override of their source unless given themselves.
void FollowDerived(const TransformerSpec& before, const JsonObjectReader& reader,
                   TransformerSpec& t) {
  if (!reader.Has("kv_heads") && before.kv_heads == before.heads) t.kv_heads = t.heads;
  if (!reader.Has("ffn_hidden") && before.ffn_hidden == 4 * before.hidden) {
    t.ffn_hidden = 4 * t.hidden;
  }
}

Status ReadTransformer(JsonObjectReader& reader, bool preset, TransformerSpec& t) {
  DTSIM_RETURN_IF_ERROR(
      RequireUnlessPreset(reader, preset, {"layers", "hidden", "heads", "vocab", "max_seq"}));
  const TransformerSpec before = preset ? t : TransformerSpec{.kv_heads = 0, .ffn_hidden = 0};
  DTSIM_RETURN_IF_ERROR(ReadInt(reader, "layers", t.layers));
  DTSIM_RETURN_IF_ERROR(ReadInt(reader, "hidden", t.hidden));
  DTSIM_RETURN_IF_ERROR(ReadInt(reader, "heads", t.heads));
  DTSIM_RETURN_IF_ERROR(ReadInt(reader, "kv_heads", t.kv_heads));
  DTSIM_RETURN_IF_ERROR(ReadInt(reader, "head_dim", t.head_dim_override));
  DTSIM_RETURN_IF_ERROR(ReadInt(reader, "ffn_hidden", t.ffn_hidden));
  DTSIM_RETURN_IF_ERROR(ReadInt(reader, "vocab", t.vocab));
  DTSIM_RETURN_IF_ERROR(ReadInt(reader, "vocab_divisible_by", t.vocab_divisible_by));
  DTSIM_RETURN_IF_ERROR(ReadInt(reader, "max_seq", t.max_seq));
  DTSIM_RETURN_IF_ERROR(ReadInt(reader, "token_types", t.token_types, 0));
  DTSIM_RETURN_IF_ERROR(ReadLocalAttention(reader, t));
  DTSIM_RETURN_IF_ERROR(ReadWindowPattern(reader, t));
  DTSIM_RETURN_IF_ERROR(reader.ReadOptionalInt("mtp_layers", t.mtp_layers, 0, kMaxMtpLayers));
  FollowDerived(before, reader, t);
  DTSIM_RETURN_IF_ERROR(reader.ReadOptionalEnum("norm", kNormNames, t.norm));
  DTSIM_RETURN_IF_ERROR(reader.ReadOptionalEnum("activation", kActivationNames, t.activation));
  DTSIM_RETURN_IF_ERROR(reader.ReadOptionalEnum("position", kPositionNames, t.position));
  for (auto [key, field] : {std::pair{"linear_bias", &t.linear_bias},
                            {"tied_embeddings", &t.tied_embeddings},
                            {"causal", &t.causal},
                            {"embedding_norm", &t.embedding_norm},
                            {"final_norm", &t.final_norm},
                            {"pooler", &t.pooler},
                            {"lm_head_transform", &t.lm_head_transform},
                            {"qk_norm", &t.qk_norm},
                            {"post_norms", &t.post_norms}}) {
    DTSIM_RETURN_IF_ERROR(reader.ReadOptional(key, *field));
  }
  DTSIM_RETURN_IF_ERROR(ReadMla(reader, t.mla));
  return ReadMoe(reader, t.moe);
}

Status ReadResNet(JsonObjectReader& reader, bool preset, ResNetSpec& r) {
  DTSIM_RETURN_IF_ERROR(RequireUnlessPreset(reader, preset, {"blocks"}));
  DTSIM_RETURN_IF_ERROR(ReadIntList(reader, "blocks", r.blocks));
  DTSIM_RETURN_IF_ERROR(ReadInt(reader, "width", r.width));
  DTSIM_RETURN_IF_ERROR(ReadInt(reader, "image_size", r.image_size));
  DTSIM_RETURN_IF_ERROR(ReadInt(reader, "in_channels", r.in_channels));
  return ReadInt(reader, "classes", r.classes);
}

Status ReadDlrm(JsonObjectReader& reader, bool preset, DlrmSpec& d) {
  DTSIM_RETURN_IF_ERROR(
      RequireUnlessPreset(reader, preset, {"table_rows", "bottom_mlp", "top_mlp"}));
  DTSIM_RETURN_IF_ERROR(ReadInt(reader, "dense_features", d.dense_features));
  DTSIM_RETURN_IF_ERROR(ReadIntList(reader, "table_rows", d.table_rows));
  DTSIM_RETURN_IF_ERROR(ReadInt(reader, "embedding_dim", d.embedding_dim));
  DTSIM_RETURN_IF_ERROR(ReadInt(reader, "lookups_per_table", d.lookups_per_table));
  DTSIM_RETURN_IF_ERROR(ReadIntList(reader, "bottom_mlp", d.bottom_mlp));
  return ReadIntList(reader, "top_mlp", d.top_mlp);
}

Status Require(bool condition, const std::string& message, const std::string& path,
               std::string_view key, int64_t value) {
  if (condition) return Status::Ok();
  return Error(message, JsonChildPath(path, key), std::to_string(value));
}

Status ValidateTransformer(const TransformerSpec& t, const std::string& path) {
  for (auto [key, value] : {std::pair<std::string_view, int64_t>{"layers", t.layers},
                            {"hidden", t.hidden},
                            {"heads", t.heads},
                            {"kv_heads", t.kv_heads},
                            {"ffn_hidden", t.ffn_hidden},
                            {"vocab", t.vocab},
                            {"max_seq", t.max_seq}}) {
    DTSIM_RETURN_IF_ERROR(Require(value >= 1, "must be a positive integer", path, key, value));
  }
  DTSIM_RETURN_IF_ERROR(
      Require(t.head_dim_override > 0 || t.hidden % t.heads == 0,
              fmt::format("heads must divide hidden ({} % {} = {}), or give head_dim", t.hidden,
                          t.heads, t.hidden % t.heads),
              path, "heads", t.heads));
  DTSIM_RETURN_IF_ERROR(Require(t.heads % t.kv_heads == 0,
                                fmt::format("kv_heads must divide heads ({} % {} = {})", t.heads,
                                            t.kv_heads, t.heads % t.kv_heads),
                                path, "kv_heads", t.kv_heads));
  if (t.sliding_window > 0) {
    DTSIM_RETURN_IF_ERROR(Require(
        t.causal,
        t.chunked_attention ? "chunked attention is built for causal (decoder) models"
                            : "sliding-window attention is built for causal (decoder) models",
        path, t.chunked_attention ? "attention_chunk" : "sliding_window", t.sliding_window));
  }
  if (!t.window_layers.empty() && std::ssize(t.window_layers) != t.layers) {
    return Error(fmt::format("expected one flag a layer (1 windowed, 0 full): {} layers, {} flags",
                             t.layers, t.window_layers.size()),
                 JsonChildPath(path, "sliding_window_pattern"));
  }
  if (t.mtp_layers > 0) {
    DTSIM_RETURN_IF_ERROR(Require(t.causal,
                                  "multi-token prediction is built for causal (decoder) models",
                                  path, "mtp_layers", t.mtp_layers));
  }
  if (t.mla.enabled()) {
    // MLA normalizes its latents instead (counted with them).
    DTSIM_RETURN_IF_ERROR(Require(!t.qk_norm,
                                  "multi-head latent attention normalizes its latents, not "
                                  "its heads (\"qk_norm\": false)",
                                  path, "qk_norm", 1));
    DTSIM_RETURN_IF_ERROR(Require(t.kv_heads == t.heads,
                                  "multi-head latent attention has a key and value per head "
                                  "(kv_heads = heads)",
                                  path, "kv_heads", t.kv_heads));
    DTSIM_RETURN_IF_ERROR(Require(!t.linear_bias,
                                  "multi-head latent attention is built without linear biases "
                                  "(\"linear_bias\": false)",
                                  path, "linear_bias", 1));
  }
  const MoeSpec& moe = t.moe;
  if (!moe.enabled()) return Status::Ok();
  if (!moe.layers.empty()) {
    const std::string layers_path = JsonChildPath(JsonChildPath(path, "moe"), "layers");
    if (std::ssize(moe.layers) != t.layers) {
      return Error(
          fmt::format("expected one flag a layer (1 MoE, 0 dense MLP): {} layers, {} flags",
                      t.layers, moe.layers.size()),
          layers_path);
    }
    if (t.MoeLayerCount() == 0) {
      return Error("no layer is MoE: flag one, or make the model dense (experts 0)", layers_path);
    }
  }
  DTSIM_RETURN_IF_ERROR(
      Require(moe.first_dense_layers < t.layers,
              fmt::format("first_dense_layers must be below layers = {}", t.layers),
              JsonChildPath(path, "moe"), "first_dense_layers", moe.first_dense_layers));
  const std::string moe_path = JsonChildPath(path, "moe");
  DTSIM_RETURN_IF_ERROR(Require(moe.top_k >= 1 && moe.top_k <= moe.experts,
                                fmt::format("top_k must be in [1, experts = {}]", moe.experts),
                                moe_path, "top_k", moe.top_k));
  DTSIM_RETURN_IF_ERROR(Require(moe.every >= 1 && moe.every <= t.layers,
                                fmt::format("every must be in [1, layers = {}]", t.layers),
                                moe_path, "every", moe.every));
  if (!(moe.capacity_factor > 0)) {
    return Error("capacity_factor must be positive", JsonChildPath(moe_path, "capacity_factor"),
                 fmt::format("{}", moe.capacity_factor));
  }
  return Status::Ok();
}

Status ValidateDlrm(const DlrmSpec& d, const std::string& path) {
  if (d.table_rows.empty() || d.bottom_mlp.empty() || d.top_mlp.empty()) {
    return Error("a DLRM needs table_rows, bottom_mlp and top_mlp", path);
  }
  DTSIM_RETURN_IF_ERROR(Require(
      d.bottom_mlp.back() == d.embedding_dim,
      fmt::format("the bottom MLP must end at embedding_dim ({}) for the dot-product interaction",
                  d.embedding_dim),
      path, "bottom_mlp", d.bottom_mlp.back()));
  return Status::Ok();
}

Status ReadFamilyFields(JsonObjectReader& reader, bool preset, ModelSpec& model) {
  switch (model.family) {
    case ModelFamily::kTransformer:
      return ReadTransformer(reader, preset, model.transformer);
    case ModelFamily::kResNet:
      return ReadResNet(reader, preset, model.resnet);
    case ModelFamily::kDlrm:
      return ReadDlrm(reader, preset, model.dlrm);
  }
  return Status::Ok();
}

}  // namespace

int64_t MoeSpec::Capacity(int64_t tokens) const {
  if (!enabled()) return 0;  // a dense model: no experts to route to (k·T/0 would be inf)
  const double factor = dropless ? 1.0 : capacity_factor;
  return static_cast<int64_t>(
      std::ceil(static_cast<double>(top_k) * static_cast<double>(tokens) * factor / experts));
}

std::string_view ModelFamilyName(ModelFamily family) {
  return kFamilyNames[static_cast<size_t>(family)];
}
std::string_view NormName(Norm norm) { return kNormNames[static_cast<size_t>(norm)]; }
std::string_view ActivationName(Activation activation) {
  return kActivationNames[static_cast<size_t>(activation)];
}
std::string_view PositionEmbeddingName(PositionEmbedding position) {
  return kPositionNames[static_cast<size_t>(position)];
}

int64_t DlrmSpec::InteractionWidth() const {
  const int64_t vectors = static_cast<int64_t>(table_rows.size()) + 1;
  return embedding_dim + vectors * (vectors - 1) / 2;
}

Expected<ModelSpec> ModelFromJson(const Json& value, const std::string& path) {
  if (value.is_string()) {
    Expected<ModelSpec> preset = ModelPreset(value.get<std::string>());
    if (!preset.ok()) return std::move(preset).error().Under(path);
    return preset;
  }
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, path));
  ModelSpec model{.name = "custom"};
  const bool preset = reader.Has("preset");
  if (preset) {
    DTSIM_ASSIGN_OR_RETURN(const std::string name, reader.String("preset"));
    Expected<ModelSpec> base = ModelPreset(name);
    if (!base.ok()) return std::move(base).error().Under(JsonChildPath(path, "preset"));
    model = *std::move(base);
  }
  reader.Allow("preset");
  const ModelFamily preset_family = model.family;
  if (!preset && !reader.Has("family")) {
    return Error("missing required field (or give a \"preset\")", JsonChildPath(path, "family"));
  }
  DTSIM_RETURN_IF_ERROR(reader.ReadOptionalEnum("family", kFamilyNames, model.family));
  if (preset && model.family != preset_family) {
    return Error(fmt::format("the preset is a {} model", ModelFamilyName(preset_family)),
                 JsonChildPath(path, "family"), Quote(ModelFamilyName(model.family)));
  }
  DTSIM_RETURN_IF_ERROR(ReadFamilyFields(reader, preset, model));
  DTSIM_RETURN_IF_ERROR(reader.Finish());
  DTSIM_RETURN_IF_ERROR(ValidateModel(model, path));
  return model;
}

Status ValidateModel(const ModelSpec& model, const std::string& path) {
  switch (model.family) {
    case ModelFamily::kTransformer:
      return ValidateTransformer(model.transformer, path);
    case ModelFamily::kResNet:
      if (model.resnet.blocks.empty())
        return Error("a ResNet needs blocks", JsonChildPath(path, "blocks"));
      return Status::Ok();
    case ModelFamily::kDlrm:
      return ValidateDlrm(model.dlrm, path);
  }
  return Status::Ok();
}

}  // namespace dtsim::models
