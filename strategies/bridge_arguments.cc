// A simulated plan as Megatron-Bridge (NeMo's Megatron-Core trainer) runs it: the Megatron-LM
// flags of MegatronArguments rendered as the ConfigContainer overrides that
// scripts/training/run_recipe.py takes, following Megatron-Bridge's own flag-to-override table
// (scripts/translate_mlm_to_bridge.py and docs/megatron-lm-to-megatron-bridge.md at
// kBridgeRelease). One set of decisions, two renderings: a flag the table has no key for is
// listed, never dropped.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <string_view>

#include "strategies/launch_arguments.h"
#include "strategies/layer_pattern.h"

namespace dtsim::strategies {
namespace {

// How a Megatron-LM flag becomes overrides: its value under `key`; true (a switch); false (a
// switch that turns a default off); or nothing (Bridge's default already does it).
enum class Kind : uint8_t { kValue, kTrue, kFalse, kDefault };

struct Mapping {
  std::string_view flag;
  std::string_view key;
  Kind kind;
};

constexpr std::array<Mapping, 55> kMappings = {{
    {"--num-layers", "model.num_layers", Kind::kValue},
    {"--hidden-size", "model.hidden_size", Kind::kValue},
    {"--ffn-hidden-size", "model.ffn_hidden_size", Kind::kValue},
    {"--num-attention-heads", "model.num_attention_heads", Kind::kValue},
    {"--group-query-attention", "", Kind::kDefault},  // implied by num_query_groups
    {"--num-query-groups", "model.num_query_groups", Kind::kValue},
    {"--kv-channels", "model.kv_channels", Kind::kValue},
    {"--max-position-embeddings", "model.max_position_embeddings", Kind::kValue},
    {"--make-vocab-size-divisible-by", "model.make_vocab_size_divisible_by", Kind::kValue},
    {"--normalization", "model.normalization", Kind::kValue},
    {"--position-embedding-type", "model.position_embedding_type", Kind::kValue},
    {"--disable-bias-linear", "model.add_bias_linear", Kind::kFalse},
    {"--untie-embeddings-and-output-weights", "model.share_embeddings_and_output_weights",
     Kind::kFalse},
    {"--qk-layernorm", "model.qk_layernorm", Kind::kTrue},
    {"--num-experts", "model.num_moe_experts", Kind::kValue},
    {"--moe-router-topk", "model.moe_router_topk", Kind::kValue},
    {"--moe-ffn-hidden-size", "model.moe_ffn_hidden_size", Kind::kValue},
    {"--moe-expert-capacity-factor", "model.moe_expert_capacity_factor", Kind::kValue},
    {"--moe-shared-expert-intermediate-size", "model.moe_shared_expert_intermediate_size",
     Kind::kValue},
    {"--moe-grouped-gemm", "model.moe_grouped_gemm", Kind::kTrue},
    {"--multi-latent-attention", "model.multi_latent_attention", Kind::kTrue},
    {"--q-lora-rank", "model.q_lora_rank", Kind::kValue},
    {"--kv-lora-rank", "model.kv_lora_rank", Kind::kValue},
    {"--qk-head-dim", "model.qk_head_dim", Kind::kValue},
    {"--qk-pos-emb-head-dim", "model.qk_pos_emb_head_dim", Kind::kValue},
    {"--v-head-dim", "model.v_head_dim", Kind::kValue},
    {"--mtp-num-layers", "model.mtp_num_layers", Kind::kValue},
    {"--moe-token-dispatcher-type", "model.moe_token_dispatcher_type", Kind::kValue},
    {"--tensor-model-parallel-size", "model.tensor_model_parallel_size", Kind::kValue},
    {"--sequence-parallel", "model.sequence_parallel", Kind::kTrue},
    {"--pipeline-model-parallel-size", "model.pipeline_model_parallel_size", Kind::kValue},
    {"--virtual-pipeline-model-parallel-size", "model.virtual_pipeline_model_parallel_size",
     Kind::kValue},
    {"--use-tp-pp-dp-mapping", "dist.use_tp_pp_dp_mapping", Kind::kTrue},
    {"--account-for-embedding-in-pipeline-split", "model.account_for_embedding_in_pipeline_split",
     Kind::kTrue},
    {"--account-for-loss-in-pipeline-split", "model.account_for_loss_in_pipeline_split",
     Kind::kTrue},
    {"--context-parallel-size", "model.context_parallel_size", Kind::kValue},
    {"--cp-comm-type", "model.cp_comm_type", Kind::kValue},
    {"--expert-model-parallel-size", "model.expert_model_parallel_size", Kind::kValue},
    {"--expert-tensor-parallel-size", "model.expert_tensor_parallel_size", Kind::kValue},
    {"--overlap-moe-expert-parallel-comm", "comm_overlap.overlap_moe_expert_parallel_comm",
     Kind::kTrue},
    {"--delay-wgrad-compute", "comm_overlap.delay_wgrad_compute", Kind::kTrue},
    {"--use-distributed-optimizer", "ddp.use_distributed_optimizer", Kind::kTrue},
    {"--use-megatron-fsdp", "ddp.use_megatron_fsdp", Kind::kTrue},
    {"--data-parallel-sharding-strategy", "ddp.data_parallel_sharding_strategy", Kind::kValue},
    {"--overlap-grad-reduce", "ddp.overlap_grad_reduce", Kind::kTrue},
    {"--overlap-param-gather", "ddp.overlap_param_gather", Kind::kTrue},
    {"--micro-batch-size", "train.micro_batch_size", Kind::kValue},
    {"--global-batch-size", "train.global_batch_size", Kind::kValue},
    {"--train-iters", "train.train_iters", Kind::kValue},
    {"--recompute-granularity", "model.recompute_granularity", Kind::kValue},
    {"--recompute-method", "model.recompute_method", Kind::kValue},
    {"--recompute-num-layers", "model.recompute_num_layers", Kind::kValue},
    {"--attention-backend", "model.attention_backend", Kind::kValue},
    {"--attention-dropout", "model.attention_dropout", Kind::kValue},
    {"--hidden-dropout", "model.hidden_dropout", Kind::kValue},
}};

// Megatron-Bridge's named mixed-precision recipes (training/mixed_precision.py), by Megatron-LM's
// --fp8-recipe under BF16.
std::string_view Fp8MixedPrecision(std::string_view recipe) {
  if (recipe == "delayed") return "bf16_with_fp8_delayed_scaling_mixed";
  if (recipe == "tensorwise") return "bf16_with_fp8_current_scaling_mixed";
  if (recipe == "blockwise") return "bf16_with_fp8_subchannel_scaling_mixed";  // 128×128 blocks
  if (recipe == "mxfp8") return "bf16_with_mxfp8_mixed";
  return {};
}

// The flags that are not one key each: the activation, the sequence length, the precision.
bool Special(std::string_view flag, std::string_view value, std::vector<std::string>& out) {
  if (flag == "--swiglu") {
    out.emplace_back("model.gated_linear_unit=true");
    out.emplace_back("model.activation_func=silu");
  } else if (flag == "--squared-relu") {
    out.emplace_back("model.activation_func=squared_relu");
  } else if (flag == "--cpu-offloading-num-layers") {
    // The model provider takes both: Megatron-LM's arguments.py derives the switch from the
    // count, Megatron-Bridge's CPU offloading guide sets them side by side.
    out.emplace_back("model.cpu_offloading=true");
    out.push_back(fmt::format("model.cpu_offloading_num_layers={}", value));
  } else if (flag == "--window-size") {
    // The table's model.window_size takes the tuple; Hydra writes it as a list.
    out.push_back(fmt::format("model.window_size=[{}]", value));
  } else if (flag == "--window-attn-skip-freq" || flag == "--moe-layer-freq") {
    // Hydra takes a list, not Megatron-LM's Python expression: evaluated here. The window
    // pattern is not in the table (067f987), but a field of the provider's TransformerConfig.
    const auto pattern = EvalLayerPattern(value, flag);
    const std::string_view key =
        flag == "--moe-layer-freq" ? "model.moe_layer_freq" : "model.window_attn_skip_freq";
    if (!pattern.ok()) return false;  // listed as not expressed
    if (const auto* every = std::get_if<int64_t>(&*pattern)) {
      out.push_back(fmt::format("{}={}", key, *every));
    } else {
      out.push_back(
          fmt::format("{}=[{}]", key, fmt::join(std::get<std::vector<int64_t>>(*pattern), ",")));
    }
  } else if (flag == "--seq-length") {
    out.push_back(fmt::format("model.seq_length={}", value));
    out.push_back(fmt::format("dataset.seq_length={}", value));
  } else {
    // The precision is one named recipe (--fp8-recipe's, else plain BF16/FP16), written last;
    // flash attention is Bridge's default (Transformer Engine picks the fused backend).
    return flag == "--bf16" || flag == "--fp16" || flag == "--fp8-format" ||
           flag == "--use-flash-attn";
  }
  return true;
}

}  // namespace

LaunchArguments MegatronBridgeArguments(const SimulationConfig& config) {
  const LaunchArguments megatron = MegatronArguments(config);
  LaunchArguments out{.framework = std::string(kBridgeRelease),
                      .what = "scripts/training/run_recipe.py overrides",
                      .environment = megatron.environment,
                      .not_expressed = megatron.not_expressed};
  for (std::string& note : out.not_expressed) {
    const size_t at = note.find("--tokenizer-type");
    if (at != std::string::npos) note.replace(at, 16, "tokenizer.tokenizer_type");
  }
  std::string_view precision = config.training.dtype == DType::kFp16 ? "fp16_mixed" : "bf16_mixed";
  for (const std::string& line : megatron.arguments) {
    const size_t space = line.find(' ');
    const std::string_view flag = std::string_view(line).substr(0, space);
    const std::string_view value =
        space == std::string::npos ? std::string_view() : std::string_view(line).substr(space + 1);
    if (flag == "--fp8-recipe") {
      precision = Fp8MixedPrecision(value);
      if (precision.empty()) {
        out.not_expressed.push_back(fmt::format("the FP8 recipe {}", value));
        precision = "bf16_mixed";
      }
      continue;
    }
    if (Special(flag, value, out.arguments)) continue;
    const auto* mapping = std::find_if(kMappings.begin(), kMappings.end(),
                                       [flag](const Mapping& m) { return m.flag == flag; });
    if (mapping == kMappings.end()) {
      out.not_expressed.push_back(fmt::format(
          "Megatron-LM's {} (no ConfigContainer key in Megatron-Bridge's table)", line));
      continue;
    }
    switch (mapping->kind) {
      case Kind::kValue:
        out.arguments.push_back(fmt::format("{}={}", mapping->key, value));
        break;
      case Kind::kTrue:
        out.arguments.push_back(fmt::format("{}=true", mapping->key));
        break;
      case Kind::kFalse:
        out.arguments.push_back(fmt::format("{}=false", mapping->key));
        break;
      case Kind::kDefault:
        break;
    }
  }
  out.arguments.push_back(fmt::format("mixed_precision={}", precision));
  return out;
}

}  // namespace dtsim::strategies
