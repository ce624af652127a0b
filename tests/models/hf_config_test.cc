// Models from Hugging Face config.json files: each released config below (abridged to the
// fields dtsim reads, values as published) gives exactly the parameters of dtsim's preset of
// the same model; a field dtsim cannot model is an error naming it.
#include "models/hf_config.h"

#include <gtest/gtest.h>

#include "models/model_spec.h"
#include "models/parameters.h"

namespace dtsim::models {
namespace {

struct Released {
  const char* preset;
  const char* config;
};

const Released kReleased[] = {
    {"llama3-8b", R"({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
      "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
      "vocab_size": 128256, "max_position_embeddings": 8192, "hidden_act": "silu",
      "attention_bias": false, "tie_word_embeddings": false, "rope_theta": 500000.0})"},
    {"mixtral-8x7b", R"({"model_type": "mixtral", "hidden_size": 4096,
      "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
      "num_key_value_heads": 8, "num_local_experts": 8, "num_experts_per_tok": 2,
      "vocab_size": 32000, "max_position_embeddings": 32768, "sliding_window": null,
      "tie_word_embeddings": false, "hidden_act": "silu"})"},
    {"qwen3-30b-a3b", R"({"model_type": "qwen3_moe", "hidden_size": 2048,
      "intermediate_size": 6144, "moe_intermediate_size": 768, "num_hidden_layers": 48,
      "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
      "num_experts": 128, "num_experts_per_tok": 8, "decoder_sparse_step": 1,
      "mlp_only_layers": [], "vocab_size": 151936, "max_position_embeddings": 40960,
      "use_sliding_window": false, "sliding_window": null, "max_window_layers": 48,
      "tie_word_embeddings": false, "attention_bias": false, "hidden_act": "silu"})"},
    {"deepseek-v3", R"({"model_type": "deepseek_v3", "hidden_size": 7168,
      "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_hidden_layers": 61,
      "num_attention_heads": 128, "num_key_value_heads": 128, "n_shared_experts": 1,
      "n_routed_experts": 256, "num_experts_per_tok": 8, "first_k_dense_replace": 3,
      "moe_layer_freq": 1, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
      "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 129280,
      "max_position_embeddings": 163840, "num_nextn_predict_layers": 1,
      "tie_word_embeddings": false, "attention_bias": false, "hidden_act": "silu"})"},
    {"gpt-oss-120b", R"({"model_type": "gpt_oss", "hidden_size": 2880,
      "intermediate_size": 2880, "num_hidden_layers": 36, "num_attention_heads": 64,
      "num_key_value_heads": 8, "head_dim": 64, "num_local_experts": 128,
      "num_experts_per_tok": 4, "vocab_size": 201088, "max_position_embeddings": 131072,
      "sliding_window": 128, "attention_bias": true, "tie_word_embeddings": false,
      "hidden_act": "silu", "layer_types": ["sliding_attention", "full_attention",
      "sliding_attention", "full_attention", "sliding_attention", "full_attention",
      "sliding_attention", "full_attention", "sliding_attention", "full_attention",
      "sliding_attention", "full_attention", "sliding_attention", "full_attention",
      "sliding_attention", "full_attention", "sliding_attention", "full_attention",
      "sliding_attention", "full_attention", "sliding_attention", "full_attention",
      "sliding_attention", "full_attention", "sliding_attention", "full_attention",
      "sliding_attention", "full_attention", "sliding_attention", "full_attention",
      "sliding_attention", "full_attention", "sliding_attention", "full_attention",
      "sliding_attention", "full_attention"]})"},
    // Gemma 3: the 1B's text-only config whole, the 12B's and 27B's multimodal ones with the
    // sparse text_config transformers writes (Gemma3TextConfig's defaults left out).
    {"gemma3-1b", R"({"model_type": "gemma3_text", "attention_bias": false,
      "attn_logit_softcapping": null, "final_logit_softcapping": null, "head_dim": 256,
      "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152, "intermediate_size": 6912,
      "max_position_embeddings": 32768, "num_attention_heads": 4, "num_hidden_layers": 26,
      "num_key_value_heads": 1, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06,
      "rope_local_base_freq": 10000, "rope_scaling": null, "rope_theta": 1000000,
      "sliding_window": 512, "sliding_window_pattern": 6, "vocab_size": 262144})"},
    {"gemma3-12b", R"({"model_type": "gemma3", "mm_tokens_per_image": 256,
      "text_config": {"hidden_size": 3840, "intermediate_size": 15360,
      "model_type": "gemma3_text", "num_attention_heads": 16, "num_hidden_layers": 48,
      "num_key_value_heads": 8, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
      "sliding_window": 1024},
      "vision_config": {"hidden_size": 1152, "model_type": "siglip_vision_model"}})"},
    {"gemma3-27b", R"({"model_type": "gemma3", "text_config": {"head_dim": 128,
      "hidden_size": 5376, "intermediate_size": 21504, "model_type": "gemma3_text",
      "num_attention_heads": 32, "num_hidden_layers": 62, "num_key_value_heads": 16,
      "query_pre_attn_scalar": 168, "sliding_window": 1024}})"},
    // Llama 4's multimodal configs (the vision_config left out): Scout's text model as released,
    // Maverick's with the fields transformers' defaults fill left out of it.
    {"llama4-scout-17b-16e", R"({"model_type": "llama4", "text_config": {
      "attention_bias": false, "attention_chunk_size": 8192, "head_dim": 128,
      "hidden_act": "silu", "hidden_size": 5120, "interleave_moe_layer_step": 1,
      "intermediate_size": 8192, "intermediate_size_mlp": 16384,
      "max_position_embeddings": 10485760, "model_type": "llama4_text", "no_rope_layers": [],
      "num_attention_heads": 40, "num_experts_per_tok": 1, "num_hidden_layers": 48,
      "num_key_value_heads": 8, "num_local_experts": 16, "rope_theta": 500000.0,
      "use_qk_norm": true, "vocab_size": 202048}, "tie_word_embeddings": false})"},
    {"llama4-maverick-17b-128e", R"({"model_type": "llama4", "text_config": {
      "interleave_moe_layer_step": 2, "max_position_embeddings": 1048576,
      "model_type": "llama4_text", "num_local_experts": 128, "use_qk_norm": false,
      "rope_scaling": null}})"},
    {"gpt2-124m", R"({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12,
      "n_positions": 1024, "vocab_size": 50257, "n_inner": null,
      "activation_function": "gelu_new"})"},
    {"bert-base", R"({"model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12,
      "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 30522,
      "max_position_embeddings": 512, "type_vocab_size": 2, "hidden_act": "gelu"})"},
};

TEST(HfConfigTest, ReleasedConfigsGiveThePresetsParameters) {
  for (const Released& released : kReleased) {
    Expected<Json> spec = ModelJsonFromHfConfig(Json::parse(released.config));
    ASSERT_TRUE(spec.ok()) << released.preset << ": " << spec.error().ToString();
    Expected<ModelSpec> model = ModelFromJson(*spec, "model");
    ASSERT_TRUE(model.ok()) << released.preset << ": " << model.error().ToString();
    Expected<ModelSpec> preset = ModelPreset(released.preset);
    ASSERT_TRUE(preset.ok());
    const ParameterCount from_hf = CountParameters(*model);
    const ParameterCount expected = CountParameters(*preset);
    EXPECT_EQ(from_hf.total, expected.total) << released.preset;
    EXPECT_EQ(from_hf.active, expected.active) << released.preset;
    EXPECT_EQ(model->transformer.sliding_window, preset->transformer.sliding_window);
    EXPECT_EQ(model->transformer.window_full_every, preset->transformer.window_full_every);
    EXPECT_EQ(model->transformer.chunked_attention, preset->transformer.chunked_attention)
        << released.preset;
    EXPECT_EQ(model->transformer.MoeLayerCount(), preset->transformer.MoeLayerCount())
        << released.preset;
    EXPECT_EQ(model->transformer.activation, preset->transformer.activation) << released.preset;
    EXPECT_EQ(model->transformer.qk_norm, preset->transformer.qk_norm) << released.preset;
    EXPECT_EQ(model->transformer.post_norms, preset->transformer.post_norms) << released.preset;
    // num_nextn_predict_layers (DeepSeek-V3's 1): the multi-token-prediction modules.
    EXPECT_EQ(model->transformer.mtp_layers, preset->transformer.mtp_layers) << released.preset;
    EXPECT_EQ(from_hf.mtp, expected.mtp) << released.preset;
  }
}

std::string HfError(const char* config) {
  Expected<Json> spec = ModelJsonFromHfConfig(Json::parse(config));
  return spec.ok() ? "" : spec.error().ToString();
}

TEST(HfConfigTest, WhatDtsimCannotModelIsAnErrorNamingTheField) {
  EXPECT_EQ(HfError(R"({"model_type": "mamba"})").substr(0, 49),
            "model_type: a model type dtsim does not read; kno");
  EXPECT_EQ(HfError(R"({"model_type": "llama", "num_hidden_layers": 2})"),
            "hidden_size: missing required field");
  EXPECT_EQ(HfError(R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,
      "num_attention_heads": 4, "vocab_size": 10, "max_position_embeddings": 8,
      "intermediate_size": 128, "hidden_act": "relu2"})"),
            "hidden_act: an activation dtsim does not model with gated MLPs, got \"relu2\"");
  EXPECT_EQ(HfError(R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,
      "num_attention_heads": 4, "vocab_size": 10, "max_position_embeddings": 8,
      "intermediate_size": 128, "attention_bias": true, "mlp_bias": false})"),
            "mlp_bias: biases on the attention but not the MLP (or the reverse) are not "
            "modelled, got false");
  EXPECT_EQ(HfError(R"({"model_type": "qwen3_moe", "num_hidden_layers": 2, "hidden_size": 64,
      "num_attention_heads": 4, "vocab_size": 10, "max_position_embeddings": 8,
      "intermediate_size": 128, "moe_intermediate_size": 32, "num_experts": 4,
      "num_experts_per_tok": 2, "mlp_only_layers": [0, 2]})"),
            "mlp_only_layers[1]: must be in [0, 1], got 2");
  EXPECT_EQ(HfError(R"({"model_type": "qwen3_moe", "num_hidden_layers": 2, "hidden_size": 64,
      "num_attention_heads": 4, "vocab_size": 10, "max_position_embeddings": 8,
      "intermediate_size": 128, "moe_intermediate_size": 32, "num_experts": 4,
      "num_experts_per_tok": 2, "mlp_only_layers": [0, 1]})"),
            "mlp_only_layers: no layer is MoE");
  EXPECT_EQ(HfError(R"({"model_type": "gemma3", "text_config": {"final_logit_softcapping": 30}})"),
            "text_config.final_logit_softcapping: logit soft-capping is not modelled, got 30");
  EXPECT_EQ(HfError(R"({"model_type": "gemma3"})"),
            "text_config: a Gemma 3 config without its text model");
}

std::vector<uint8_t> MoeLayersOf(const char* config) {
  Expected<Json> spec = ModelJsonFromHfConfig(Json::parse(config));
  if (!spec.ok()) {
    ADD_FAILURE() << spec.error().ToString();
    return {};
  }
  Expected<ModelSpec> model = ModelFromJson(*spec, "model");
  if (!model.ok()) {
    ADD_FAILURE() << model.error().ToString();
    return {};
  }
  std::vector<uint8_t> flags;
  for (int i = 0; i < model->transformer.layers; ++i) {
    flags.push_back(model->transformer.IsMoeLayer(i) ? 1 : 0);
  }
  return flags;
}

// MoE layers as transformers places them: Qwen2MoeDecoderLayer's (i + 1) % decoder_sparse_step
// == 0 unless mlp_only_layers lists i; DeepseekV3DecoderLayer's i >= first_k_dense_replace with
// i % moe_layer_freq == 0 (counted from 0).
TEST(HfConfigTest, MoeLayersFollowTheConfig) {
  constexpr const char* kQwen = R"({"model_type": "qwen2_moe", "num_hidden_layers": 6,
      "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 10,
      "max_position_embeddings": 8, "intermediate_size": 128, "moe_intermediate_size": 32,
      "num_experts": 4, "num_experts_per_tok": 2, "decoder_sparse_step": 2,
      "mlp_only_layers": [3]})";
  EXPECT_EQ(MoeLayersOf(kQwen), (std::vector<uint8_t>{0, 1, 0, 0, 0, 1}));
  constexpr const char* kDeepSeek = R"({"model_type": "deepseek_v3", "num_hidden_layers": 7,
      "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 10,
      "max_position_embeddings": 8, "intermediate_size": 128, "moe_intermediate_size": 32,
      "n_routed_experts": 4, "num_experts_per_tok": 2, "kv_lora_rank": 16,
      "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 8,
      "first_k_dense_replace": 1, "moe_layer_freq": 2})";
  EXPECT_EQ(MoeLayersOf(kDeepSeek), (std::vector<uint8_t>{0, 0, 1, 0, 1, 0, 1}));
}

// Llama 4's chunked layers: layer_types, else no_rope_layers (1: RoPE, chunked), else every
// no_rope_layer_interval-th full; attention_chunk_size null turns chunks off.
TEST(HfConfigTest, LlamaFourChunksFollowTheConfig) {
  const auto chunks = [](const std::string& extra) -> std::string {
    Expected<Json> spec = ModelJsonFromHfConfig(Json::parse(
        R"({"model_type": "llama4_text", "num_hidden_layers": 4, "hidden_size": 64,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
            "vocab_size": 10, "num_local_experts": 2, "intermediate_size": 32,
            "intermediate_size_mlp": 64)" +
        extra + "}"));
    if (!spec.ok()) return spec.error().ToString();
    return spec->value("attention_chunk", Json(0)).dump() + " " +
           spec->value("sliding_window_pattern", Json(0)).dump();
  };
  EXPECT_EQ(chunks(""), "8192 4");  // every fourth layer full
  EXPECT_EQ(chunks(R"(, "no_rope_layer_interval": 2, "attention_chunk_size": 16)"), "16 2");
  EXPECT_EQ(chunks(R"(, "no_rope_layers": [1, 0, 0, 1])"), "8192 [1,0,0,1]");
  EXPECT_EQ(chunks(R"(, "layer_types": ["chunked_attention", "full_attention",
      "chunked_attention", "chunked_attention"])"),
            "8192 [1,0,1,1]");
  EXPECT_EQ(chunks(R"(, "attention_chunk_size": null)"), "0 0");
  EXPECT_EQ(chunks(R"(, "no_rope_layers": [1, 0])"),
            "no_rope_layers: expected one flag a layer: 4 layers, got [1,0]");
  EXPECT_EQ(chunks(R"(, "moe_layers": [1, 9])"), "moe_layers[1]: must be in [0, 3], got 9");
}

// Windows per layer: transformers' layer_types (GPT-OSS, Gemma), else its configs' defaults —
// GptOssConfig every second layer from the first, Qwen2Config the layers from max_window_layers
// on under use_sliding_window, Mistral every layer.
TEST(HfConfigTest, SlidingWindowsFollowTheLayers) {
  const auto window = [](const std::string& extra) {
    const std::string base = R"({"num_hidden_layers": 6, "hidden_size": 64,
        "num_attention_heads": 4, "vocab_size": 10, "max_position_embeddings": 8,
        "intermediate_size": 128, "sliding_window": 32, )";
    Expected<Json> spec = ModelJsonFromHfConfig(Json::parse(base + extra + "}"));
    if (!spec.ok()) return spec.error().ToString();
    return spec->contains("sliding_window")
               ? DumpJson(
                     Json{(*spec)["sliding_window"], spec->value("sliding_window_pattern", Json())})
               : std::string("none");
  };
  EXPECT_EQ(window(R"("model_type": "mistral")"), "[32,null]");
  EXPECT_EQ(window(R"("model_type": "qwen2")"), "none");  // use_sliding_window false
  EXPECT_EQ(window(R"("model_type": "qwen2", "use_sliding_window": true, "max_window_layers": 4)"),
            "[32,[0,0,0,0,1,1]]");
  EXPECT_EQ(window(R"("model_type": "qwen2", "use_sliding_window": true, "max_window_layers": 6)"),
            "none");
  EXPECT_EQ(window(R"("model_type": "qwen2", "use_sliding_window": true, "max_window_layers": 0)"),
            "[32,null]");
  const std::string gpt_oss = R"("model_type": "gpt_oss", "num_local_experts": 4,
      "num_experts_per_tok": 2)";
  EXPECT_EQ(window(gpt_oss), "[32,2]");
  EXPECT_EQ(window(gpt_oss + R"(, "layer_types": ["sliding_attention", "sliding_attention",
      "full_attention", "sliding_attention", "sliding_attention", "full_attention"])"),
            "[32,3]");
  EXPECT_EQ(window(gpt_oss + R"(, "layer_types": ["full_attention", "sliding_attention",
      "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention"])"),
            "[32,[0,1,1,1,1,1]]");
  EXPECT_EQ(window(gpt_oss + R"(, "layer_types": ["full_attention", "full_attention",
      "full_attention", "full_attention", "full_attention", "full_attention"])"),
            "none");
  EXPECT_EQ(window(gpt_oss + R"(, "layer_types": ["sliding_attention"])"),
            "layer_types: expected a list of 6 attention kinds, one a layer");
  EXPECT_EQ(window(gpt_oss + R"(, "layer_types": ["chunked_attention", "full_attention",
      "full_attention", "full_attention", "full_attention", "full_attention"])"),
            "layer_types[0]: an attention kind dtsim does not model here (sliding_attention, "
            "full_attention), got \"chunked_attention\"");
}

}  // namespace
}  // namespace dtsim::models
