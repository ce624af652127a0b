#include "strategies/launch_arguments.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "strategies/layer_pattern.h"
#include "strategies/time_to_train.h"

namespace dtsim::strategies {
namespace {

// Which layers are MoE (Megatron-Core's --moe-layer-freq: its list form, 1 a MoE layer, where
// not every layer is — DeepSeek-V3's three dense layers first) and the shared experts' width.
void MoeLayerFlags(const models::TransformerSpec& spec, std::vector<std::string>& args,
                   std::vector<std::string>& not_expressed) {
  if (spec.MoeLayerCount() == spec.layers) {
    // Every layer: Megatron-Core's default.
  } else if (spec.layers > kMaxLayerPatternLength) {
    not_expressed.push_back(fmt::format("MoE on {} of {} layers (more layers than dtsim lists)",
                                        spec.MoeLayerCount(), spec.layers));
  } else {
    std::vector<int64_t> moe(static_cast<size_t>(spec.layers));
    for (int i = 0; i < spec.layers; ++i) moe[static_cast<size_t>(i)] = spec.IsMoeLayer(i) ? 1 : 0;
    args.push_back(fmt::format("--moe-layer-freq {}", LayerPatternExpression(moe)));
  }
  if (spec.moe.shared_experts > 0) {
    args.push_back(fmt::format("--moe-shared-expert-intermediate-size {}", spec.SharedFfnHidden()));
  }
}

// The model's shape: what pretrain_gpt.py must be told to build the same network.
void ModelFlags(const models::TransformerSpec& spec, std::vector<std::string>& args,
                std::vector<std::string>& not_expressed) {
  SizeFlags(spec, args);
  if (spec.kv_heads > 0 && spec.kv_heads != spec.heads) {
    args.emplace_back("--group-query-attention");
    args.push_back(fmt::format("--num-query-groups {}", spec.kv_heads));
  }
  if (spec.norm == models::Norm::kRmsNorm) args.emplace_back("--normalization RMSNorm");
  if (spec.activation == models::Activation::kSwiGlu) args.emplace_back("--swiglu");
  if (spec.activation == models::Activation::kSquaredRelu) args.emplace_back("--squared-relu");
  if (spec.activation == models::Activation::kRelu) {
    not_expressed.emplace_back("a ReLU MLP (pretrain_gpt.py has GeLU, SwiGLU and squared ReLU)");
  }
  if (spec.position == models::PositionEmbedding::kRotary) {
    args.emplace_back("--position-embedding-type rope");
  }
  if (!spec.linear_bias) args.emplace_back("--disable-bias-linear");
  if (!spec.tied_embeddings) args.emplace_back("--untie-embeddings-and-output-weights");
  if (spec.qk_norm) args.emplace_back("--qk-layernorm");
  GemmaLayerNotes(spec, not_expressed);
  if (spec.sliding_window > 0 && spec.chunked_attention) {
    not_expressed.push_back(fmt::format(
        "chunked attention of {} tokens on {} of {} layers (Llama 4's: pretrain_gpt.py has no "
        "flag, nor Megatron-Bridge a recipe override)",
        spec.sliding_window, spec.WindowedLayers(), spec.layers));
  } else if (spec.sliding_window > 0) {
    // Megatron-Core's (left, right) keys around a query: Megatron-Bridge's GPT-OSS provider
    // writes Hugging Face's sliding_window 128 as (128, 0).
    args.push_back(fmt::format("--window-size {},0", spec.sliding_window));
    if (!spec.window_layers.empty()) {
      const std::vector<int64_t> flags(spec.window_layers.begin(), spec.window_layers.end());
      args.push_back(fmt::format("--window-attn-skip-freq {}", LayerPatternExpression(flags)));
    } else if (spec.window_full_every > 0) {
      args.push_back(fmt::format("--window-attn-skip-freq {}", spec.window_full_every));
    }
  }
  if (spec.moe.enabled()) {
    args.push_back(fmt::format("--num-experts {}", spec.moe.experts));
    args.push_back(fmt::format("--moe-router-topk {}", spec.moe.top_k));
    if (spec.moe.expert_ffn_hidden > 0) {
      args.push_back(fmt::format("--moe-ffn-hidden-size {}", spec.moe.expert_ffn_hidden));
    }
    if (!spec.moe.dropless) {
      args.push_back(fmt::format("--moe-expert-capacity-factor {}", spec.moe.capacity_factor));
    }
    MoeLayerFlags(spec, args, not_expressed);
    args.emplace_back("--moe-grouped-gemm");
    args.emplace_back("--moe-token-dispatcher-type alltoall");
  }
  if (spec.mla.enabled()) {
    args.emplace_back("--multi-latent-attention");
    if (spec.mla.q_lora_rank > 0) {
      args.push_back(fmt::format("--q-lora-rank {}", spec.mla.q_lora_rank));
    }
    args.push_back(fmt::format("--kv-lora-rank {}", spec.mla.kv_lora_rank));
    args.push_back(fmt::format("--qk-head-dim {}", spec.mla.qk_nope_head_dim));
    args.push_back(fmt::format("--qk-pos-emb-head-dim {}", spec.mla.qk_rope_head_dim));
    args.push_back(fmt::format("--v-head-dim {}", spec.mla.v_head_dim));
  }
  if (spec.mtp_layers > 0) args.push_back(fmt::format("--mtp-num-layers {}", spec.mtp_layers));
  TokenizerNote(spec, not_expressed);
}

// The rank order: Megatron-LM numbers ranks tp-cp-ep-dp-pp (dtsim's tp-dp-pp), or
// tp-cp-ep-pp-dp with --use-tp-pp-dp-mapping (megatron/training/initialize.py), whose
// context-parallel peers sit inside the pipeline where dtsim's tp-pp-dp keeps them just inside
// data parallelism.
void OrderFlags(const ParallelPlan& plan, std::vector<std::string>& args,
                std::vector<std::string>& not_expressed) {
  constexpr std::array<PlanDimension, 3> kPipelineInside = {
      PlanDimension::kTensor, PlanDimension::kPipeline, PlanDimension::kData};
  if (plan.NumbersLike(ParallelPlan{}.order)) return;
  if (plan.NumbersLike(kPipelineInside)) {
    args.emplace_back("--use-tp-pp-dp-mapping");
    if (plan.context > 1 && plan.pipeline > 1) {
      not_expressed.emplace_back(
          "context-parallel peers outside the pipeline (dtsim's tp-pp-dp order; Megatron's "
          "--use-tp-pp-dp-mapping numbers ranks tp-cp-ep-pp-dp)");
    }
    return;
  }
  not_expressed.push_back(fmt::format(
      "the rank order {} (Megatron-LM numbers ranks tp-cp-ep-dp-pp, or tp-cp-ep-pp-dp with "
      "--use-tp-pp-dp-mapping)",
      PlanOrderName(plan)));
}

void ParallelFlags(const SimulationConfig& config, std::vector<std::string>& args,
                   std::vector<std::string>& not_expressed) {
  const ParallelPlan& plan = config.plan;
  if (plan.tensor_layout != models::TensorLayout::k1D) {
    not_expressed.push_back(
        fmt::format("{} tensor parallelism (Megatron-LM splits tensors in 1D only; this plan needs "
                    "Optimus/Tesseract-style SUMMA)",
                    models::TensorLayoutNames()[static_cast<size_t>(plan.tensor_layout)]));
  }
  args.push_back(fmt::format("--tensor-model-parallel-size {}", plan.tensor));
  if (plan.sequence_parallel) args.emplace_back("--sequence-parallel");
  if (SerialTensorCollectives(config)) {
    not_expressed.emplace_back(
        "tensor-parallel collectives without overlap (Megatron-LM overlaps the backward's "
        "input-gradient reduction with the weight-gradient GEMM, and has no flag to stop it "
        "since --no-async-tensor-model-parallel-allreduce was removed)");
  }
  args.push_back(fmt::format("--pipeline-model-parallel-size {}", plan.pipeline));
  if (plan.virtual_stages > 1) {
    args.push_back(fmt::format("--virtual-pipeline-model-parallel-size {}", plan.virtual_stages));
  }
  // Megatron-Core's account_for_embedding/loss_in_pipeline_split: the uniform split counts them.
  if (plan.pipeline > 1 && plan.embedding_as_layer) {
    args.emplace_back("--account-for-embedding-in-pipeline-split");
  }
  if (plan.pipeline > 1 && plan.loss_as_layer) {
    args.emplace_back("--account-for-loss-in-pipeline-split");
  }
  if (plan.ScattersPipelineTransfers()) {
    not_expressed.emplace_back(
        "pipeline transfers scattered over the tensor-parallel peers (Megatron-LM's scatter/"
        "gather of 2021-2023; Megatron-Core sends the whole activation from every peer unless "
        "--sequence-parallel)");
  }
  if (plan.pipeline > 1 && plan.schedule == models::PipelineSchedule::kGpipe) {
    not_expressed.emplace_back("the GPipe schedule (Megatron-LM runs 1F1B or interleaved 1F1B)");
  }
  OrderFlags(plan, args, not_expressed);
  if (plan.context > 1) {
    args.push_back(fmt::format("--context-parallel-size {}", plan.context));
    if (plan.context_comm == models::ContextComm::kAllToAll) {
      args.emplace_back("--cp-comm-type a2a");
    }
  }
  if (plan.expert > 1) {
    args.push_back(fmt::format("--expert-model-parallel-size {}", plan.expert));
    if (plan.expert_tensor > 0 && plan.expert_tensor != plan.tensor) {
      args.push_back(fmt::format("--expert-tensor-parallel-size {}", plan.expert_tensor));
    }
    if (plan.expert_overlap) args.emplace_back("--overlap-moe-expert-parallel-comm");
    if (plan.expert_delay_wgrad) args.emplace_back("--delay-wgrad-compute");
  }
  // ZeRO: the distributed optimizer shards the optimizer state (stage 1); Megatron-FSDP shards
  // gradients too (optim_grads, stage 2) or also the parameters (optim_grads_params, stage 3).
  if (plan.zero_stage >= 1) args.emplace_back("--use-distributed-optimizer");
  if (plan.zero_stage >= 2) {
    args.emplace_back("--use-megatron-fsdp");
    args.push_back(fmt::format("--data-parallel-sharding-strategy {}",
                               plan.zero_stage == 2 ? "optim_grads" : "optim_grads_params"));
  }
  if (plan.overlap_gradient_reduce && plan.data * plan.context > 1) {
    args.emplace_back("--overlap-grad-reduce");
    if (plan.zero_stage >= 1) args.emplace_back("--overlap-param-gather");
  }
}

void TrainingFlags(const SimulationConfig& config, std::vector<std::string>& args,
                   std::vector<std::string>& not_expressed) {
  const TrainingConfig& training = config.training;
  BatchAndRecomputeFlags(training, args, not_expressed);
  RunLengthFlags(config, args, not_expressed);
  if (training.fp8 != models::Fp8Recipe::kNone) {
    args.emplace_back("--bf16");
    args.emplace_back("--fp8-format hybrid");
    // Megatron-LM's names: current scaling is "tensorwise".
    const std::string_view recipe = models::Fp8RecipeNames()[static_cast<size_t>(training.fp8)];
    args.push_back(fmt::format("--fp8-recipe {}", recipe == "current" ? "tensorwise" : recipe));
  } else if (training.dtype == DType::kBf16) {
    args.emplace_back("--bf16");
  } else if (training.dtype == DType::kFp16) {
    args.emplace_back("--fp16");
  }
  // Megatron-Core's attention backend defaults to a fused (flash) kernel: say when it is not.
  args.emplace_back(training.flash_attention ? "--use-flash-attn" : "--attention-backend unfused");
  if (!training.dropout) {
    args.emplace_back("--attention-dropout 0");
    args.emplace_back("--hidden-dropout 0");
  }
  if (config.compression.method != "none") {
    not_expressed.push_back(
        fmt::format("gradient compression \"{}\" (Megatron-LM has none; DeepSpeed runs 1-bit Adam)",
                    config.compression.method));
  }
  if (training.framework != models::Framework::kMegatron) {
    not_expressed.push_back(fmt::format("the simulated framework is {}, not Megatron-LM",
                                        models::FrameworkName(training.framework)));
  }
}

}  // namespace

void SizeFlags(const models::TransformerSpec& spec, std::vector<std::string>& args) {
  args.push_back(fmt::format("--num-layers {}", spec.layers));
  args.push_back(fmt::format("--hidden-size {}", spec.hidden));
  args.push_back(fmt::format("--ffn-hidden-size {}", spec.ffn_hidden));
  args.push_back(fmt::format("--num-attention-heads {}", spec.heads));
  if (spec.head_dim_override > 0) args.push_back(fmt::format("--kv-channels {}", spec.head_dim()));
  args.push_back(fmt::format("--max-position-embeddings {}", spec.max_seq));
  args.push_back(fmt::format("--make-vocab-size-divisible-by {}", spec.vocab_divisible_by));
}

void RunLengthFlags(const SimulationConfig& config, std::vector<std::string>& args,
                    std::vector<std::string>& not_expressed) {
  if (!config.time_to_train || config.training.seq_len <= 0) return;
  const Expected<TokenBudget> budget = TokensToTrain(
      *config.time_to_train, config.model, config.training.global_batch, config.training.seq_len);
  if (!budget.ok()) {
    not_expressed.push_back(
        fmt::format("the run's length (--train-iters): {}", budget.error().ToString()));
    return;
  }
  args.push_back(fmt::format("--train-iters {}", budget->iterations));
}

void BatchAndRecomputeFlags(const TrainingConfig& training, std::vector<std::string>& args,
                            std::vector<std::string>& not_expressed) {
  args.push_back(fmt::format("--micro-batch-size {}", training.micro_batch));
  args.push_back(fmt::format("--global-batch-size {}", training.global_batch));
  args.push_back(fmt::format("--seq-length {}", training.seq_len));
  switch (training.recompute) {
    case models::Recompute::kNone:
      break;
    case models::Recompute::kSelective:
      args.emplace_back("--recompute-granularity selective");
      break;
    case models::Recompute::kFull:
      args.emplace_back("--recompute-granularity full");
      args.emplace_back("--recompute-method uniform");
      args.emplace_back("--recompute-num-layers 1");
      break;
    case models::Recompute::kSelectiveOp:
      not_expressed.emplace_back(
          "PyTorch selective op checkpointing (training.recompute \"selective_op\": a "
          "torchtitan policy)");
      break;
  }
  if (training.recompute_every > 1) {
    not_expressed.push_back(fmt::format(
        "recompute on every {}-th layer only (Megatron's --recompute-method block counts "
        "layers per stage, not a stride)",
        training.recompute_every));
  }
  if (training.activation_offload_layers > 0) {
    args.push_back(
        fmt::format("--cpu-offloading-num-layers {}", training.activation_offload_layers));
    if (training.activation_offload_v1) {
      not_expressed.emplace_back(
          "Transformer Engine's v1 offload handler (training.activation_offload_v1): "
          "NVTE_CPU_OFFLOAD_V1=1 in the environment, or Transformer Engine before 2.10");
    }
  }
}

void GemmaLayerNotes(const models::TransformerSpec& spec, std::vector<std::string>& not_expressed) {
  if (spec.activation == models::Activation::kGeGlu) {
    not_expressed.emplace_back("a GeGLU MLP (the script has GeLU, SwiGLU and squared ReLU)");
  }
  if (spec.post_norms) not_expressed.emplace_back("norms after the attention and the MLP");
}

void TokenizerNote(const models::TransformerSpec& spec, std::vector<std::string>& not_expressed) {
  if (spec.vocab > 0) {
    not_expressed.push_back(fmt::format(
        "the vocabulary ({} tokens) comes from the tokenizer (--tokenizer-type and its files)",
        spec.vocab));
  }
}

std::vector<std::string> LaunchEnvironment(const SimulationConfig& config) {
  std::vector<std::string> environment;
  const int64_t chunk = config.cluster.nccl.p2p_net_chunk_size.count();
  if (chunk != network::NcclSettings{}.p2p_net_chunk_size.count()) {
    environment.push_back(fmt::format("NCCL_P2P_NET_CHUNKSIZE={}", chunk));
  }
  return environment;
}

LaunchArguments MegatronArguments(const SimulationConfig& config) {
  LaunchArguments out{.framework = std::string(kMegatronRelease),
                      .environment = LaunchEnvironment(config)};
  ModelFlags(config.model.transformer, out.arguments, out.not_expressed);
  ParallelFlags(config, out.arguments, out.not_expressed);
  TrainingFlags(config, out.arguments, out.not_expressed);
  return out;
}

}  // namespace dtsim::strategies
