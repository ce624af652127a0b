// A simulated plan as DeepSpeed runs it through Megatron-DeepSpeed (launch_arguments.h): the
// flag names are those of megatron/arguments.py at kDeepSpeedRelease, the config keys those of
// DeepSpeed's configuration JSON (deepspeed.ai/docs/config-json).
#include <fmt/format.h>

#include "strategies/compression.h"
#include "strategies/launch_arguments.h"
#include "strategies/layer_pattern.h"

namespace dtsim::strategies {
namespace {

using Lines = std::vector<std::string>;

void DeepSpeedMoeFlags(const models::MoeSpec& moe, int64_t ffn_hidden, Lines& args,
                       Lines& not_expressed) {
  args.push_back(fmt::format("--num-experts {}", moe.experts));
  args.push_back(fmt::format("--topk {}", moe.top_k));
  // MoE on every `every`-th layer, 1-based (its default is 2, so always written); a placement
  // listed one flag a layer is written so where it is one.
  EveryPlacement placement{.first_dense = moe.first_dense_layers, .every = moe.every};
  if (!moe.layers.empty()) {
    const std::vector<int64_t> flags(moe.layers.begin(), moe.layers.end());
    if (const std::optional<EveryPlacement> every = PlacementAsEvery(flags)) {
      placement = *every;
    } else {
      not_expressed.push_back(
          fmt::format("MoE on the layers {} (Megatron-DeepSpeed puts experts on every "
                      "--expert-interval-th layer)",
                      LayerPatternExpression(flags)));
    }
  }
  args.push_back(fmt::format("--expert-interval {}", placement.every));
  if (moe.dropless) {
    args.emplace_back("--disable-moe-token-dropping");
  } else {
    args.push_back(fmt::format("--moe-train-capacity-factor {}", moe.capacity_factor));
  }
  if (moe.expert_ffn_hidden > 0 && moe.expert_ffn_hidden != ffn_hidden) {
    not_expressed.push_back(fmt::format(
        "experts of ffn hidden {} (Megatron-DeepSpeed's experts take --ffn-hidden-size)",
        moe.expert_ffn_hidden));
  }
  if (moe.shared_experts > 0) {
    not_expressed.push_back(fmt::format("{} shared experts", moe.shared_experts));
  }
  if (placement.first_dense > 0) {
    not_expressed.push_back(
        fmt::format("dense MLPs in the first {} layers", placement.first_dense));
  }
}

void DeepSpeedModelFlags(const models::TransformerSpec& spec, Lines& args, Lines& not_expressed) {
  SizeFlags(spec, args);
  if (spec.kv_heads > 0 && spec.kv_heads != spec.heads) {
    args.push_back(fmt::format("--num-key-value-heads {}", spec.kv_heads));
  }
  if (spec.norm == models::Norm::kRmsNorm) args.emplace_back("--normalization rmsnorm");
  if (spec.activation == models::Activation::kSwiGlu) args.emplace_back("--swiglu");
  if (spec.activation == models::Activation::kSquaredRelu) args.emplace_back("--squared-relu");
  if (spec.activation == models::Activation::kRelu) {
    not_expressed.emplace_back("a ReLU MLP (GeLU, SwiGLU and squared ReLU have flags)");
  }
  if (spec.position == models::PositionEmbedding::kRotary) {
    args.emplace_back("--use-rotary-position-embeddings");
  }
  if (!spec.linear_bias) args.emplace_back("--disable-bias-linear");
  if (!spec.tied_embeddings) args.emplace_back("--untie-embeddings-and-output-weights");
  if (spec.moe.enabled()) DeepSpeedMoeFlags(spec.moe, spec.ffn_hidden, args, not_expressed);
  if (spec.mla.enabled()) not_expressed.emplace_back("multi-latent attention");
  if (spec.qk_norm) not_expressed.emplace_back("a QK norm over each query and key head");
  GemmaLayerNotes(spec, not_expressed);
  if (spec.sliding_window > 0) {
    not_expressed.push_back(fmt::format(
        "{} ({} tokens)", spec.chunked_attention ? "chunked attention" : "sliding-window attention",
        spec.sliding_window));
  }
  if (spec.mtp_layers > 0) {
    not_expressed.push_back(fmt::format("{} multi-token-prediction modules", spec.mtp_layers));
  }
  TokenizerNote(spec, not_expressed);
}

void DeepSpeedParallelFlags(const SimulationConfig& config, Lines& args, Lines& not_expressed) {
  const ParallelPlan& plan = config.plan;
  if (plan.tensor_layout != models::TensorLayout::k1D) {
    not_expressed.push_back(
        fmt::format("{} tensor parallelism (Megatron-DeepSpeed splits tensors in 1D only)",
                    models::TensorLayoutNames()[static_cast<size_t>(plan.tensor_layout)]));
  }
  args.push_back(fmt::format("--tensor-model-parallel-size {}", plan.tensor));
  if (plan.sequence_parallel) args.emplace_back("--sequence-parallel");
  if (SerialTensorCollectives(config)) {
    // Megatron-DeepSpeed keeps Megatron-LM's 2021 switch; under sequence parallelism the
    // reduce-scatter stays async whatever it says.
    if (plan.sequence_parallel) {
      not_expressed.emplace_back(
          "tensor-parallel collectives without overlap (the sequence-parallel reduce-scatter "
          "runs beside the weight-gradient GEMM whatever the flags say)");
    } else {
      args.emplace_back("--no-async-tensor-model-parallel-allreduce");
    }
  }
  if (!plan.NumbersLike(ParallelPlan{}.order)) {
    not_expressed.push_back(
        fmt::format("the rank order {} (Megatron-DeepSpeed numbers ranks tp-dp-pp: DeepSpeed's "
                    "PipeModelDataParallelTopology, model innermost, then data, then pipe)",
                    PlanOrderName(plan)));
  }
  args.push_back(fmt::format("--pipeline-model-parallel-size {}", plan.pipeline));
  if (plan.pipeline > 1 && (plan.embedding_as_layer || plan.loss_as_layer)) {
    not_expressed.emplace_back(
        "the embedding or loss counted as a layer of the pipeline split (Megatron-DeepSpeed "
        "splits the transformer layers alone)");
  }
  // Without a pipeline, DeepSpeed's plain engine (ZeRO-2 and -3 need it), not PipelineEngine.
  if (plan.pipeline == 1) args.emplace_back("--no-pipeline-parallel");
  if (plan.pipeline > 1 && plan.virtual_stages > 1) {
    not_expressed.push_back(fmt::format(
        "{} virtual stages per pipeline stage (DeepSpeed's PipelineEngine does not interleave)",
        plan.virtual_stages));
  }
  if (plan.pipeline > 1 && plan.schedule == models::PipelineSchedule::kGpipe) {
    not_expressed.emplace_back("the GPipe schedule (DeepSpeed's PipelineEngine runs 1F1B)");
  }
  if (plan.pipeline > 1 && plan.zero_stage >= 2) {
    not_expressed.push_back(
        fmt::format("ZeRO-{} with a pipeline (DeepSpeed's PipelineEngine runs ZeRO-1 at most)",
                    plan.zero_stage));
  }
  if (plan.context > 1) {
    if (plan.context_comm == models::ContextComm::kAllToAll) {
      // DeepSpeed-Ulysses: the sequence split c ways, all-to-alls around the attention.
      args.push_back(fmt::format("--ds-sequence-parallel-size {}", plan.context));
      if (plan.sequence_parallel) {
        not_expressed.emplace_back(
            "Megatron's sequence parallelism together with DeepSpeed-Ulysses (the two flags "
            "exclude each other)");
      }
    } else {
      not_expressed.push_back(
          fmt::format("ring context parallelism over {} ranks (DeepSpeed-Ulysses is all-to-all)",
                      plan.context));
    }
  }
  if (plan.expert > 1) {
    args.push_back(fmt::format("--moe-expert-parallel-size {}", plan.expert));
    if (plan.expert_tensor > 0 && plan.expert_tensor != plan.tensor) {
      not_expressed.push_back(fmt::format("expert tensor parallelism of {}", plan.expert_tensor));
    }
    if (plan.expert_overlap) {
      not_expressed.emplace_back(
          "the expert all-to-alls' overlap (Megatron-Core's --overlap-moe-expert-parallel-comm)");
    }
  }
  args.push_back(fmt::format("--zero-stage {}", plan.zero_stage));
}

void DeepSpeedTrainingFlags(const SimulationConfig& config, Lines& args, Lines& not_expressed) {
  const TrainingConfig& training = config.training;
  BatchAndRecomputeFlags(training, args, not_expressed);
  RunLengthFlags(config, args, not_expressed);
  // Full recompute through DeepSpeed's activation checkpointing (its examples' pairing).
  if (training.recompute == models::Recompute::kFull) {
    args.emplace_back("--deepspeed-activation-checkpointing");
  }
  if (training.fp8 != models::Fp8Recipe::kNone) {
    not_expressed.emplace_back("FP8 training (written as BF16)");
  }
  if (training.dtype == DType::kFp16) {
    args.emplace_back("--fp16");
  } else if (training.dtype == DType::kBf16 || training.fp8 != models::Fp8Recipe::kNone) {
    args.emplace_back("--bf16");
  }
  if (training.flash_attention) args.emplace_back("--use-flash-attn-v2");
  if (!training.dropout) {
    args.emplace_back("--attention-dropout 0");
    args.emplace_back("--hidden-dropout 0");
  }
  if (training.framework != models::Framework::kDeepSpeed) {
    not_expressed.push_back(fmt::format("the simulated framework is {}, not DeepSpeed",
                                        models::FrameworkName(training.framework)));
  }
}

// ds_config.json: the batch, ZeRO, precision, and the communication dtype or 1-bit optimizer
// of gradient compression.
Json DeepSpeedConfig(const SimulationConfig& config, Lines& not_expressed) {
  const TrainingConfig& training = config.training;
  Json ds = {{"train_batch_size", training.global_batch},
             {"train_micro_batch_size_per_gpu", training.micro_batch},
             {"steps_per_print", 10}};
  Json zero = {{"stage", config.plan.zero_stage}};
  const models::DeepSpeedZero& buffers = training.deepspeed;  // what ZeRO holds besides
  if (config.plan.zero_stage >= 1) {
    zero["overlap_comm"] = config.plan.overlap_gradient_reduce;
    zero["contiguous_gradients"] = buffers.contiguous_gradients;
    zero["reduce_bucket_size"] = buffers.reduce_bucket_size;
  } else if (config.plan.overlap_gradient_reduce && config.plan.data > 1) {
    not_expressed.emplace_back(
        "the gradient reduction overlapped with the backward pass (without ZeRO DeepSpeed "
        "all-reduces the gradients after it; zero_optimization.overlap_comm needs a stage)");
  }
  if (config.plan.zero_stage == 3) {
    zero["stage3_prefetch_bucket_size"] = buffers.prefetch_bucket_size;
    zero["stage3_max_live_parameters"] = buffers.max_live_parameters;
    zero["stage3_max_reuse_distance"] = buffers.max_reuse_distance;
  }
  ds["zero_optimization"] = zero;
  if (training.dtype == DType::kFp16) {
    ds["fp16"] = {{"enabled", true}};
  } else if (training.dtype == DType::kBf16 || training.fp8 != models::Fp8Recipe::kNone) {
    ds["bf16"] = {{"enabled", true}};
  }
  const std::string& method = config.compression.method;
  if (method == "fp16" || method == "bf16") {
    ds["communication_data_type"] = method;
  } else if (method == "onebit_adam" || method == "onebit_lamb") {
    const int64_t warmup = MakeCompression(config.compression)->warmup_steps();
    ds["optimizer"] = {{"type", method == "onebit_adam" ? "OneBitAdam" : "OneBitLamb"},
                       {"params", {{"freeze_step", warmup}, {"comm_backend_name", "nccl"}}}};
    not_expressed.push_back(fmt::format(
        "{}: ds_config.json names it (freeze_step {}, dtsim's warm-up), but Megatron-DeepSpeed's "
        "pretrain_gpt.py hands DeepSpeed its own optimizer; the 1-bit optimizer needs a script "
        "that lets DeepSpeed build it from the config (as DeepSpeed's BERT example does)",
        method == "onebit_adam" ? "1-bit Adam" : "1-bit LAMB", warmup));
  } else if (method != "none") {
    not_expressed.push_back(
        fmt::format("gradient compression \"{}\" (DeepSpeed has 1-bit Adam and LAMB)", method));
  }
  return ds;
}

}  // namespace

LaunchArguments DeepSpeedArguments(const SimulationConfig& config, std::string_view config_path) {
  LaunchArguments out{.framework = std::string(kDeepSpeedRelease),
                      .environment = LaunchEnvironment(config)};
  DeepSpeedModelFlags(config.model.transformer, out.arguments, out.not_expressed);
  DeepSpeedParallelFlags(config, out.arguments, out.not_expressed);
  DeepSpeedTrainingFlags(config, out.arguments, out.not_expressed);
  out.config_file = DeepSpeedConfig(config, out.not_expressed);
  out.arguments.emplace_back("--deepspeed");
  out.arguments.push_back(fmt::format("--deepspeed_config {}", config_path));
  return out;
}

}  // namespace dtsim::strategies
