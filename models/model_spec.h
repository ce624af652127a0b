// Model specs and presets (docs/models.md, "Models"): dense and MoE transformers (GPT, BERT,
// LLaMA, Mixtral), ResNet-50 and a DLRM-style recommender, read strictly from JSON where a
// preset can be overridden field by field.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/json_reader.h"
#include "sim/base/status.h"

namespace dtsim::models {

enum class ModelFamily { kTransformer, kResNet, kDlrm };
enum class Norm { kLayerNorm, kRmsNorm };
// kSquaredRelu: relu(x)², Nemotron-4's ungated MLP (So et al. 2021, Primer). kGeGlu: the gated
// MLP of SwiGLU with GeLU on the gate (Shazeer 2020; Gemma's gelu_pytorch_tanh).
enum class Activation { kGelu, kSwiGlu, kRelu, kSquaredRelu, kGeGlu };
enum class PositionEmbedding { kLearned, kRotary };

std::string_view ModelFamilyName(ModelFamily family);
std::string_view NormName(Norm norm);
std::string_view ActivationName(Activation activation);
std::string_view PositionEmbeddingName(PositionEmbedding position);

// Mixture of experts in place of the MLP of every `every`-th layer (Switch/Mixtral style),
// after `first_dense_layers` dense ones (DeepSeek-V3: 3), or on the layers `layers` flags (one
// 0/1 a decoder layer: Megatron-Core's --moe-layer-freq, Hugging Face's mlp_only_layers), with
// `shared_experts` every token goes through besides its top-k routed ones (DeepSeekMoE).
struct MoeSpec {
  int experts = 0;  // 0: dense model
  int top_k = 1;
  double capacity_factor = 1.0;  // expert capacity = ceil(top_k · tokens · factor / experts)
  // Dropless routing (Megatron's grouped GEMMs, Mixtral): experts process the tokens routed to
  // them, no capacity padding or dropping; balanced, that is the capacity at factor 1.
  bool dropless = false;
  int every = 1;                  // MoE layers: those with (index + 1) % every == 0
  int64_t expert_ffn_hidden = 0;  // 0: the model's ffn_hidden
  int shared_experts = 0;         // each an MLP of expert_ffn_hidden, tensor-parallel
  int first_dense_layers = 0;     // layers 0 … first_dense_layers − 1 keep the dense MLP
  // One flag a decoder layer, 1 MoE; when set it decides alone (every 1, first_dense_layers 0).
  std::vector<uint8_t> layers;

  bool enabled() const { return experts > 0; }
  // Tokens each expert takes from one rank's `tokens` with balanced routing:
  // ceil(top_k · tokens · factor / experts), factor 1 when dropless; 0 for a dense model.
  int64_t Capacity(int64_t tokens) const;
};

// Multi-head latent attention (DeepSeek-V2/V3): queries through a rank-`q_lora_rank`
// bottleneck (0: projected directly), keys and values from one rank-`kv_lora_rank` latent;
// each head's query and key have a `qk_nope_head_dim` part from the latent and a
// `qk_rope_head_dim` rotary part (the key's shared by the heads), its value `v_head_dim`.
struct MlaSpec {
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;  // 0: standard attention
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;

  bool enabled() const { return kv_lora_rank > 0; }
};

struct TransformerSpec {
  int layers = 0;
  int64_t hidden = 0;
  int heads = 0;
  int kv_heads = 0;               // grouped-query attention; == heads for multi-head attention
  int64_t head_dim_override = 0;  // 0: hidden / heads (GPT-3 13B: 40 heads of 128, hidden 5140)
  int64_t ffn_hidden = 0;
  int64_t vocab = 0;
  // Training pads the embedding to a multiple of this × the tensor-parallel size (Megatron's
  // make_vocab_size_divisible_by, 128); parameter counts use the unpadded vocabulary.
  int64_t vocab_divisible_by = 128;
  int64_t max_seq = 0;  // learned position table length; also the default sequence length
  Norm norm = Norm::kLayerNorm;
  Activation activation = Activation::kGelu;
  PositionEmbedding position = PositionEmbedding::kLearned;
  bool linear_bias = true;
  bool tied_embeddings = true;     // the output layer reuses the input embedding
  bool causal = true;              // decoder (causal mask) or encoder (BERT)
  int token_types = 0;             // BERT segment embeddings
  bool embedding_norm = false;     // a norm after the embeddings (BERT)
  bool final_norm = true;          // a norm before the output layer (GPT, LLaMA)
  bool pooler = false;             // BERT pooler (h×h + h)
  bool lm_head_transform = false;  // BERT MLM head: dense h×h + norm + output bias
  // QK norm (Megatron-Core's --qk-layernorm; Qwen3, Gemma 3): the model's norm over
  // each query and key head (head_dim wide, weights shared by the heads) between the QKV
  // projection and the rotary embedding. It saves its input for the backward pass.
  bool qk_norm = false;
  // Norms on the attention's and the MLP's outputs before each residual add, beside the norms on
  // their inputs (Gemma 2 and 3's post_attention_layernorm and post_feedforward_layernorm): two
  // more norms a layer, each saving its input.
  bool post_norms = false;
  MoeSpec moe;
  MlaSpec mla;
  // Sliding-window attention (Mistral, Gemma 2 and 3, GPT-OSS): on a windowed layer a query
  // attends to the last `sliding_window` keys; 0: full attention everywhere. Which layers are
  // windowed: every one; or, with `window_full_every` N, all but every N-th counted from 1
  // (Megatron-Core's window_attn_skip_freq N, Hugging Face's sliding_window_pattern N: GPT-OSS's
  // 2, Gemma 3's 6); or one flag a layer in `window_layers` (1 windowed: Megatron-Core's list
  // form, Hugging Face's layer_types — Qwen2's first max_window_layers full).
  int64_t sliding_window = 0;
  int window_full_every = 0;
  std::vector<uint8_t> window_layers;
  // Chunked attention (Llama 4's attention_chunk_size) on those layers instead: the sequence cut
  // into chunks of `sliding_window` tokens, a query attending causally within its own chunk.
  bool chunked_attention = false;
  // Multi-token prediction (DeepSeek-V3 §2.2; Megatron-Core's MTP block): `mtp_layers` modules
  // after the last layer, module k predicting token i + k + 1. Each embeds the tokens shifted by
  // k (the shared embedding), normalizes them and the previous hidden states (enorm, hnorm),
  // projects their concatenation 2h → h (eh_proj), runs one transformer layer of the last
  // layer's kind, and its own final norm before the shared output layer and a loss. They run on
  // the last pipeline chunk as layer indices layers … layers + mtp_layers − 1; their output
  // heads belong to the output layer's pass.
  int mtp_layers = 0;

  // A query's and key's head dimension (MLA: nope + rope), and a value's.
  int64_t head_dim() const {
    if (mla.enabled()) return mla.qk_nope_head_dim + mla.qk_rope_head_dim;
    return head_dim_override > 0 ? head_dim_override : hidden / heads;
  }
  int64_t v_head_dim() const { return mla.enabled() ? mla.v_head_dim : head_dim(); }
  // Elements per token the attention block's column-parallel inputs take: the hidden size, or
  // under MLA its latents — the query's (the hidden size without one), the KV latent and the
  // keys' shared rotary part — which is what Megatron all-gathers under sequence parallelism
  // (its down-projections run on each rank's sequence shard).
  int64_t AttentionInputColumns() const {
    if (!mla.enabled()) return hidden;
    return (mla.q_lora_rank > 0 ? mla.q_lora_rank : hidden) + mla.kv_lora_rank +
           mla.qk_rope_head_dim;
  }
  // A gated MLP (SwiGLU, GeGLU): gate and up projections h → f, then down f → h.
  bool gated_mlp() const {
    return activation == Activation::kSwiGlu || activation == Activation::kGeGlu;
  }
  int64_t q_dim() const { return head_dim() * heads; }  // attention's inner width
  int64_t kv_dim() const { return head_dim() * kv_heads; }
  int64_t SharedFfnHidden() const { return moe.shared_experts * MoeFfnHidden(); }
  int64_t MoeFfnHidden() const {
    return moe.expert_ffn_hidden > 0 ? moe.expert_ffn_hidden : ffn_hidden;
  }
  int64_t PaddedVocab(int tensor_parallel) const {
    const int64_t multiple = vocab_divisible_by * tensor_parallel;
    return (vocab + multiple - 1) / multiple * multiple;
  }
  // Transformer layers and MTP modules: the layer indices a pipeline holds.
  int AllLayers() const { return layers + mtp_layers; }
  bool IsMtpLayer(int index) const { return index >= layers; }
  // An MTP module's transformer layer is built as the last layer (Megatron-Core's MTP block
  // spec); other indices stand for themselves.
  int BaseLayer(int index) const { return index < layers ? index : layers - 1; }
  bool IsMoeLayer(int index) const {
    if (!moe.enabled()) return false;
    const int base = BaseLayer(index);
    if (!moe.layers.empty()) return moe.layers[static_cast<size_t>(base)] != 0;
    return base >= moe.first_dense_layers && (base + 1) % moe.every == 0;
  }
  int64_t WindowOf(int index) const {
    if (sliding_window == 0) return 0;
    const int base = BaseLayer(index);
    if (!window_layers.empty()) return window_layers[base] != 0 ? sliding_window : 0;
    return window_full_every == 0 || (base + 1) % window_full_every != 0 ? sliding_window : 0;
  }
  // How many of the decoder layers are windowed (counted, not walked: layers may be many).
  int WindowedLayers() const {
    if (sliding_window == 0) return 0;
    if (!window_layers.empty()) {
      return static_cast<int>(std::count(window_layers.begin(), window_layers.end(), 1));
    }
    return window_full_every == 0 ? layers : layers - layers / window_full_every;
  }
  // A MoE block without shared experts: under sequence parallelism it routes the rank's shard
  // and hands back the shard's gradient, so nothing gathers around it — where a dense MLP or
  // shared experts (Megatron-Core's SharedExpertMLP) take the hidden state gathered.
  bool RoutedOnlyMlp(int index) const { return IsMoeLayer(index) && moe.shared_experts == 0; }
  // Whether decoder layer `index` follows such a block (its attention then gathers no output
  // gradient for it in backward).
  bool FollowsRoutedOnlyMlp(int index) const {
    return index > 0 && !IsMtpLayer(index) && RoutedOnlyMlp(index - 1);
  }
  // Layers that price alike share a kind: a MoE or dense MLP, windowed or full attention, after
  // a routed-only MoE block or not; the MTP modules one kind of their own (they all price
  // alike).
  static constexpr int kLayerKinds = 9;
  static constexpr int kMtpKind = 8;
  int LayerKind(int index) const {
    if (IsMtpLayer(index)) return kMtpKind;
    return (IsMoeLayer(index) ? 1 : 0) + (WindowOf(index) > 0 ? 2 : 0) +
           (FollowsRoutedOnlyMlp(index) ? 4 : 0);
  }
  // How many of the decoder layers are MoE (counted, not walked).
  int MoeLayerCount() const {
    if (!moe.enabled()) return 0;
    if (!moe.layers.empty()) {
      return static_cast<int>(std::count(moe.layers.begin(), moe.layers.end(), 1));
    }
    const int from = std::min(moe.first_dense_layers, layers);
    return layers / moe.every - from / moe.every;
  }
};

// A ResNet with bottleneck blocks (ResNet-50: 3, 4, 6, 3).
struct ResNetSpec {
  std::vector<int> blocks;
  int64_t width = 64;  // channels of the stem and of the first stage's bottleneck
  int64_t image_size = 224;
  int64_t in_channels = 3;
  int64_t classes = 1000;
};

// DLRM (Naumov et al. 2019): dense features through a bottom MLP, sparse features through
// embedding tables, pairwise dot-product interaction, top MLP.
struct DlrmSpec {
  int64_t dense_features = 13;
  std::vector<int64_t> table_rows;
  int64_t embedding_dim = 128;
  int64_t lookups_per_table = 1;    // pooling factor: rows summed per sample and table
  std::vector<int64_t> bottom_mlp;  // layer widths after the dense input; last = embedding_dim
  std::vector<int64_t> top_mlp;     // layer widths after the interaction; last = 1

  int64_t InteractionWidth() const;  // the top MLP's input width
};

struct ModelSpec {
  std::string name;  // the preset's name, or "custom"
  ModelFamily family = ModelFamily::kTransformer;
  TransformerSpec transformer;
  ResNetSpec resnet;
  DlrmSpec dlrm;
};

std::span<const std::string_view> ModelPresetNames();
// Errors list the known presets.
Expected<ModelSpec> ModelPreset(std::string_view name);

// {"preset": "gpt3-175b", "layers": 48, ...} (any field overrides the preset's), a bare
// preset name, or a full spec with "family". Every spec is validated (ValidateModel).
Expected<ModelSpec> ModelFromJson(const Json& value, const std::string& path);

// Structural checks: positive sizes, heads dividing hidden, KV heads dividing heads, top-k
// within the experts, an MLP ending where the next part starts. Errors carry `path`.
Status ValidateModel(const ModelSpec& model, const std::string& path);

}  // namespace dtsim::models
