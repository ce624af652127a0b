// The model presets. Every architecture number comes from the source named beside it (full
// citations in docs/models.md, "Model presets"); tests/models/parameters_test.cc checks each
// preset's parameter count against its published figure.
#include <fmt/format.h>

#include <vector>

#include "models/model_spec.h"
#include "sim/base/strings.h"

namespace dtsim::models {
namespace {

TransformerSpec Gpt(int layers, int64_t hidden, int heads, int64_t vocab, int64_t max_seq) {
  TransformerSpec t;
  t.layers = layers;
  t.hidden = hidden;
  t.heads = heads;
  t.kv_heads = heads;
  t.ffn_hidden = 4 * hidden;
  t.vocab = vocab;
  t.max_seq = max_seq;
  return t;  // LayerNorm, GeLU, learned positions, biases, tied embeddings, final norm
}

TransformerSpec WithHeadDim(TransformerSpec t, int64_t head_dim) {
  t.head_dim_override = head_dim;
  return t;
}

TransformerSpec Llama(int layers, int64_t hidden, int heads, int kv_heads, int64_t ffn,
                      int64_t vocab, int64_t max_seq) {
  TransformerSpec t = Gpt(layers, hidden, heads, vocab, max_seq);
  t.kv_heads = kv_heads;
  t.ffn_hidden = ffn;
  t.norm = Norm::kRmsNorm;
  t.activation = Activation::kSwiGlu;
  t.position = PositionEmbedding::kRotary;
  t.linear_bias = false;
  t.tied_embeddings = false;
  return t;
}

// Gemma 3 (Gemma Team 2025, the technical report's Table 1 and the released Hugging Face
// configs): a Llama-style decoder with GeGLU, a QK norm, norms after the attention and the MLP
// too, tied embeddings, and windows on five layers of six (every sixth from layer 5 full).
TransformerSpec Gemma3(int layers, int64_t hidden, int heads, int kv_heads, int64_t head_dim,
                       int64_t ffn, int64_t vocab, int64_t max_seq, int64_t window) {
  TransformerSpec t =
      WithHeadDim(Llama(layers, hidden, heads, kv_heads, ffn, vocab, max_seq), head_dim);
  t.activation = Activation::kGeGlu;
  t.tied_embeddings = true;
  t.qk_norm = true;
  t.post_norms = true;
  t.sliding_window = window;
  t.window_full_every = 6;
  return t;
}

TransformerSpec Bert(int layers, int64_t hidden, int heads) {
  TransformerSpec t = Gpt(layers, hidden, heads, 30522, 512);
  t.causal = false;
  t.token_types = 2;
  t.embedding_norm = true;
  t.final_norm = false;
  t.pooler = true;
  t.lm_head_transform = true;
  return t;
}

TransformerSpec Mixtral() {
  TransformerSpec t = Llama(32, 4096, 32, 8, 14336, 32000, 32768);
  // Dropless top-2 routing (no capacity in the reference implementation or Megatron's recipe).
  t.moe = {.experts = 8,
           .top_k = 2,
           .capacity_factor = 1.0,
           .dropless = true,
           .every = 1,
           .expert_ffn_hidden = 0};
  return t;
}

// Top-k routed experts on every layer, dropless (Megatron-Core's default) with balanced routing.
TransformerSpec WithExperts(TransformerSpec t, int experts, int top_k, int64_t expert_ffn) {
  t.moe = {.experts = experts,
           .top_k = top_k,
           .capacity_factor = 1.0,
           .dropless = true,
           .every = 1,
           .expert_ffn_hidden = expert_ffn};
  return t;
}

// Llama 4 (Meta 2025, the released Hugging Face configs' text models; the vision encoder left
// out): 48 layers, hidden 5,120, 40 heads of 128 (8 KV), vocabulary 202,048, untied; MoE of
// `experts` routed experts (top-1) and one shared expert, 8,192 wide, on every `moe_every`-th
// layer (dense MLPs of 16,384 between); chunked attention of 8,192 tokens on three layers of
// four (every fourth from layer 3 attends the whole sequence: iRoPE); Scout's QK norm
// (use_qk_norm: Maverick's config has none).
TransformerSpec Llama4(int experts, int moe_every, int64_t max_seq, bool qk_norm) {
  TransformerSpec t = WithHeadDim(
      WithExperts(Llama(48, 5120, 40, 8, 16384, 202048, max_seq), experts, 1, 8192), 128);
  t.moe.every = moe_every;
  t.moe.shared_experts = 1;
  t.qk_norm = qk_norm;
  t.sliding_window = 8192;
  t.chunked_attention = true;
  t.window_full_every = 4;
  return t;
}

// Nemotron-4 340B (NVIDIA 2024, Table 1 and the released config): GQA, rotary, LayerNorm,
// squared-ReLU MLP, no biases, untied output layer, vocabulary 256,000, sequence 4,096.
TransformerSpec Nemotron4() {
  TransformerSpec t = Llama(96, 18432, 96, 8, 73728, 256000, 4096);
  t.norm = Norm::kLayerNorm;
  t.activation = Activation::kSquaredRelu;
  return t;
}

// Grok-1 (xai-org/grok-1 model.py): 8 experts, top-2; its gated GeLU MLP (GeGLU); tied input and
// output embeddings.
TransformerSpec Grok1() {
  TransformerSpec t = WithExperts(Llama(64, 6144, 48, 8, 32768, 131072, 8192), 8, 2, 0);
  t.activation = Activation::kGeGlu;
  t.tied_embeddings = true;
  return t;
}

// Qwen3 (Qwen team 2025, the released configs): 128 experts, top-8, head dimension 128
// (wider than hidden / heads), untied, and a QK RMSNorm over each head (2 × 128 weights a
// layer).
TransformerSpec Qwen3Moe(int layers, int64_t hidden, int heads, int kv_heads, int64_t expert_ffn) {
  TransformerSpec t = WithHeadDim(
      WithExperts(Llama(layers, hidden, heads, kv_heads, expert_ffn, 151936, 40960), 128, 8, 0),
      128);
  t.qk_norm = true;
  return t;
}

// DeepSeek-V3 (DeepSeek-AI 2024, §2 and the released config): MLA with a 1,536-wide query
// latent, a 512-wide KV latent, heads of 128 + 64 rotary and values of 128; 3 dense layers of
// FFN 18,432, then 58 MoE layers of 256 routed experts (top-8, FFN 2,048) and one shared;
// vocabulary 129,280, untied; one multi-token-prediction module (a MoE layer, eh_proj and three
// norms: 11.7B more, sharing the embedding and output layer; the released checkpoint's 14B
// counts its own copies of those).
TransformerSpec DeepSeekV3() {
  TransformerSpec t = Llama(61, 7168, 128, 128, 18432, 129280, 4096);
  t.mla = {.q_lora_rank = 1536,
           .kv_lora_rank = 512,
           .qk_nope_head_dim = 128,
           .qk_rope_head_dim = 64,
           .v_head_dim = 128};
  t.moe = {.experts = 256,
           .top_k = 8,
           .capacity_factor = 1.0,
           .dropless = true,
           .every = 1,
           .expert_ffn_hidden = 2048,
           .shared_experts = 1,
           .first_dense_layers = 3};
  t.mtp_layers = 1;  // trained with one multi-token-prediction module (§2.2, D = 1)
  return t;
}

// GPT-OSS-120B (OpenAI 2025 model card and the released config): 36 layers of hidden 2,880,
// 64 query heads and 8 KV heads of 64; 128 experts top-4 of FFN 2,880 with biases, as the
// attention has; sliding windows of 128 tokens on every second layer from layer 0 (pattern 2);
// vocabulary 201,088, untied. Its per-head attention sinks (64 scalars a layer) and the router's
// bias are not modelled; its clamped SwiGLU is priced as SwiGLU.
TransformerSpec GptOss120b() {
  TransformerSpec t =
      WithHeadDim(WithExperts(Llama(36, 2880, 64, 8, 2880, 201088, 131072), 128, 4, 0), 64);
  t.linear_bias = true;
  t.sliding_window = 128;
  t.window_full_every = 2;
  return t;
}

ModelSpec Transformer(std::string name, TransformerSpec spec) {
  return {
      .name = std::move(name), .family = ModelFamily::kTransformer, .transformer = std::move(spec)};
}

// Megatron-LM GPT: SC'21 Table 1 and Korthikanti et al. Table 3 (vocabulary 51,200, sequence
// 2,048).
ModelSpec Megatron(std::string name, int layers, int64_t hidden, int heads) {
  return Transformer(std::move(name), Gpt(layers, hidden, heads, 51200, 2048));
}

ModelSpec ResNet50() {
  ModelSpec model{.name = "resnet-50", .family = ModelFamily::kResNet};
  model.resnet.blocks = {3, 4, 6, 3};
  return model;
}

// MLPerf Training DLRM on Criteo Terabyte with rows capped at 40M (the reference
// implementation's --max-ind-range=40000000 configuration).
ModelSpec DlrmMlperf() {
  ModelSpec model{.name = "dlrm-mlperf", .family = ModelFamily::kDlrm};
  model.dlrm.table_rows = {39884406, 39043,    17289,    7420,     20263,  3,     7120, 1543, 63,
                           38532951, 2953546,  403346,   10,       2208,   11938, 155,  4,    976,
                           14,       39979771, 25641295, 39664984, 585935, 12972, 108,  36};
  model.dlrm.bottom_mlp = {512, 256, 128};
  model.dlrm.top_mlp = {1024, 1024, 512, 256, 1};
  return model;
}

const std::vector<ModelSpec>& ModelTable() {
  static const std::vector<ModelSpec> kPresets = {
      // GPT-2 (Radford et al. 2019; the released checkpoints' configs).
      Transformer("gpt2-124m", Gpt(12, 768, 12, 50257, 1024)),
      Transformer("gpt2-355m", Gpt(24, 1024, 16, 50257, 1024)),
      Transformer("gpt2-774m", Gpt(36, 1280, 20, 50257, 1024)),
      Transformer("gpt2-1.5b", Gpt(48, 1600, 25, 50257, 1024)),
      // GPT-3 (Brown et al. 2020, Table 2.1). 13B has d_model 5140 with 40 heads of 128 (an
      // attention width of 5120). 1.3B lists 24 heads of 128, which would give 1.52B
      // parameters, not the table's 1.3B; we use 16 heads of 128 (= d_model 2048).
      Transformer("gpt3-125m", Gpt(12, 768, 12, 50257, 2048)),
      Transformer("gpt3-350m", Gpt(24, 1024, 16, 50257, 2048)),
      Transformer("gpt3-760m", Gpt(24, 1536, 16, 50257, 2048)),
      Transformer("gpt3-1.3b", Gpt(24, 2048, 16, 50257, 2048)),
      Transformer("gpt3-2.7b", Gpt(32, 2560, 32, 50257, 2048)),
      Transformer("gpt3-6.7b", Gpt(32, 4096, 32, 50257, 2048)),
      Transformer("gpt3-13b", WithHeadDim(Gpt(40, 5140, 40, 50257, 2048), 128)),
      Transformer("gpt3-175b", Gpt(96, 12288, 96, 50257, 2048)),
      Megatron("megatron-1.7b", 24, 2304, 24),
      Megatron("megatron-3.6b", 30, 3072, 32),
      Megatron("megatron-7.5b", 36, 4096, 32),
      Megatron("megatron-18.4b", 40, 6144, 48),
      Megatron("megatron-22b", 48, 6144, 64),
      Megatron("megatron-39.1b", 48, 8192, 64),
      Megatron("megatron-76.1b", 60, 10240, 80),
      Megatron("megatron-145.6b", 80, 12288, 96),
      Megatron("megatron-310.1b", 96, 16384, 128),
      Megatron("megatron-529.6b", 105, 20480, 128),
      Megatron("megatron-1t", 128, 25600, 160),
      // LLaMA-2 (Touvron et al. 2023) and LLaMA-3 (Grattafiori et al. 2024): the released
      // configs (RMSNorm, SwiGLU, rotary, no biases, untied output layer).
      Transformer("llama2-7b", Llama(32, 4096, 32, 32, 11008, 32000, 4096)),
      Transformer("llama2-13b", Llama(40, 5120, 40, 40, 13824, 32000, 4096)),
      Transformer("llama2-70b", Llama(80, 8192, 64, 8, 28672, 32000, 4096)),
      Transformer("llama3-8b", Llama(32, 4096, 32, 8, 14336, 128256, 8192)),
      Transformer("llama3-70b", Llama(80, 8192, 64, 8, 28672, 128256, 8192)),
      Transformer("llama3.1-405b", Llama(126, 16384, 128, 8, 53248, 128256, 8192)),
      // BERT (Devlin et al. 2019) with its pre-training heads.
      Transformer("bert-base", Bert(12, 768, 12)),
      Transformer("bert-large", Bert(24, 1024, 16)),
      // Mixtral 8x7B (Jiang et al. 2024): 8 experts, top-2, on every layer.
      Transformer("mixtral-8x7b", Mixtral()),
      // Mixtral 8x22B (Mistral AI 2024, the released config): 8 experts, top-2.
      Transformer("mixtral-8x22b",
                  WithExperts(Llama(56, 6144, 48, 8, 16384, 32768, 65536), 8, 2, 0)),
      Transformer("nemotron-4-340b", Nemotron4()),
      Transformer("grok-1", Grok1()),
      Transformer("qwen3-30b-a3b", Qwen3Moe(48, 2048, 32, 4, 768)),
      Transformer("qwen3-235b-a22b", Qwen3Moe(94, 4096, 64, 4, 1536)),
      Transformer("deepseek-v3", DeepSeekV3()),
      Transformer("gpt-oss-120b", GptOss120b()),
      // Gemma 3's text models (the 4B, 12B and 27B without their 417M-parameter vision tower).
      Transformer("gemma3-1b", Gemma3(26, 1152, 4, 1, 256, 6912, 262144, 32768, 512)),
      Transformer("gemma3-4b", Gemma3(34, 2560, 8, 4, 256, 10240, 262208, 131072, 1024)),
      Transformer("gemma3-12b", Gemma3(48, 3840, 16, 8, 256, 15360, 262208, 131072, 1024)),
      Transformer("gemma3-27b", Gemma3(62, 5376, 32, 16, 128, 21504, 262208, 131072, 1024)),
      // Llama 4 Scout (16 experts on every layer, 10M positions) and Maverick (128 experts on
      // every second layer, 1M positions): 17B active parameters each.
      Transformer("llama4-scout-17b-16e", Llama4(16, 1, 10485760, true)),
      Transformer("llama4-maverick-17b-128e", Llama4(128, 2, 1048576, false)),
      ResNet50(),
      DlrmMlperf(),
  };
  return kPresets;
}

std::vector<std::string_view> ModelNameList() {
  std::vector<std::string_view> names;
  for (const ModelSpec& model : ModelTable()) names.push_back(model.name);
  return names;
}

}  // namespace

std::span<const std::string_view> ModelPresetNames() {
  static const std::vector<std::string_view> kNames = ModelNameList();
  return kNames;
}

Expected<ModelSpec> ModelPreset(std::string_view name) {
  for (const ModelSpec& model : ModelTable()) {
    if (model.name == name) return model;
  }
  return Error(fmt::format("unknown model preset{}; presets: {}",
                           DidYouMean(name, ModelPresetNames()), JoinQuoted(ModelPresetNames())),
               "", Quote(name));
}

}  // namespace dtsim::models
