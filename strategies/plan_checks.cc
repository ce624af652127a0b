#include "strategies/plan_checks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/strings.h"
#include "strategies/deepspeed_zero3.h"

namespace dtsim::strategies {
namespace {

// Expert tensor parallelism: the tensor-parallel size, or 1 (MoE parallel folding) for a MoE
// model under 1D tensor parallelism with sequence parallelism, with balanced routing.
Status CheckExpertTensor(const SimulationConfig& config) {
  const ParallelPlan& plan = config.plan;
  if (plan.expert_tensor == 0 || plan.expert_tensor == plan.tensor) return Status::Ok();
  const std::string path = "parallelism.expert.tensor";
  const std::string value = std::to_string(plan.expert_tensor);
  if (!config.model.transformer.moe.enabled()) {
    return Error("expert tensor parallelism needs a mixture-of-experts model (model.moe.experts)",
                 path, value);
  }
  if (plan.on_grid()) {
    return Error("expert tensor parallelism is built under 1D tensor parallelism", path, value);
  }
  Status shard = models::ValidateExpertTensor(ShardOf(config));
  if (!shard.ok()) return std::move(shard).error().Under(path);
  if (plan.expert_imbalance > 1) {
    return Error(
        "skewed routing (parallelism.expert.imbalance) under MoE parallel folding is not built "
        "yet: it places the busiest expert by data index",
        path, value);
  }
  return Status::Ok();
}

// Megatron-Core's all-to-all overlap (transformer_config.py, core_r0.14: overlap_moe_expert_
// parallel_comm needs expert parallelism, no pipeline or a virtual one, no full recompute;
// delay_wgrad_compute needs it), as its schedule is built here: the 1F1B orders, Megatron's
// memory model.
Status CheckExpertOverlap(const SimulationConfig& config) {
  const ParallelPlan& plan = config.plan;
  if (plan.expert_delay_wgrad && !plan.expert_overlap) {
    return Error(
        "delaying the weight gradients behind the all-to-alls needs their overlap "
        "(parallelism.expert.overlap: true), as Megatron-Core's --delay-wgrad-compute "
        "needs --overlap-moe-expert-parallel-comm",
        "parallelism.expert.delay_wgrad", "true");
  }
  if (!plan.expert_overlap) return Status::Ok();
  const std::string path = "parallelism.expert.overlap";
  if (ExpertOverlapAllowed(plan, config.training.recompute, config.training.framework)) {
    return Status::Ok();
  }
  if (plan.expert < 2) {
    return Error(
        "overlapping the expert all-to-alls needs expert parallelism (a size of 2 or "
        "more): there are none to overlap",
        path, "true");
  }
  if (plan.pipeline > 1 && plan.schedule != models::PipelineSchedule::kInterleaved) {
    return Error(fmt::format("overlapping the expert all-to-alls pairs one forward with one "
                             "backward, which Megatron-Core runs under the interleaved schedule "
                             "with a pipeline (the {} schedule is not built): use \"schedule\": "
                             "\"interleaved\" with virtual stages",
                             models::PipelineScheduleName(plan.schedule)),
                 path, "true");
  }
  if (plan.pipeline == 1 && plan.schedule == models::PipelineSchedule::kGpipe) {
    return Error(
        "overlapping the expert all-to-alls pairs one forward with one backward; "
        "the gpipe schedule runs every forward first",
        path, "true");
  }
  if (config.training.recompute == models::Recompute::kFull) {
    return Error(
        "Megatron-Core refuses full recompute with the all-to-all overlap: recompute "
        "\"selective\" modules or none",
        path, "true");
  }
  if (config.training.framework != models::Framework::kMegatron) {
    return Error(
        "the all-to-all overlap is Megatron-Core's: training.framework must be "
        "\"megatron\"",
        path, "true");
  }
  return Status::Ok();
}

}  // namespace

bool ExpertOverlapAllowed(const ParallelPlan& plan, models::Recompute recompute,
                          models::Framework framework) {
  const bool schedule = plan.pipeline > 1 ? plan.schedule == models::PipelineSchedule::kInterleaved
                                          : plan.schedule != models::PipelineSchedule::kGpipe;
  return plan.expert >= 2 && schedule && recompute != models::Recompute::kFull &&
         framework == models::Framework::kMegatron;
}

Status Divisible(int64_t value, std::string_view what, int64_t by, std::string_view by_what,
                 const std::string& path) {
  if (by > 0 && value % by == 0) return Status::Ok();
  return Error(fmt::format("{} ({}) is not divisible by {} ({})", what, value, by_what, by), path,
               std::to_string(value));
}

Status CheckExpertPlan(const SimulationConfig& config) {
  const ParallelPlan& plan = config.plan;
  const models::TransformerSpec& spec = config.model.transformer;
  if (plan.expert > 1) {
    if (!spec.moe.enabled()) {
      return Error("expert parallelism needs a mixture-of-experts model (model.moe.experts)",
                   "parallelism.expert", std::to_string(plan.expert));
    }
    const bool context = plan.context > 1;
    if (plan.folded_experts()) {
      DTSIM_RETURN_IF_ERROR(Divisible(
          int64_t{plan.tensor} * plan.DataIndices(),
          context ? "tensor × data × context parallel size" : "tensor × data parallel size",
          plan.expert, "expert-parallel size (MoE parallel folding carves experts out of them)",
          "parallelism.expert"));
    } else {
      DTSIM_RETURN_IF_ERROR(Divisible(
          plan.DataIndices(), context ? "data × context parallel size" : "data-parallel size",
          plan.expert,
          context ? "expert-parallel size (experts are carved out of data and context parallelism)"
                  : "expert-parallel size (experts are carved out of data parallelism)",
          "parallelism.data"));
    }
    DTSIM_RETURN_IF_ERROR(Divisible(spec.moe.experts, "experts", plan.expert,
                                    "expert-parallel size", "parallelism.expert"));
  }
  DTSIM_RETURN_IF_ERROR(CheckExpertTensor(config));
  DTSIM_RETURN_IF_ERROR(CheckExpertOverlap(config));
  if (plan.expert_imbalance > plan.expert) {
    return Error(fmt::format("the busiest of {} expert-parallel ranks can get at most {}× the "
                             "mean load (all of it)",
                             plan.expert, plan.expert),
                 "parallelism.expert.imbalance", fmt::format("{}", plan.expert_imbalance));
  }
  return Status::Ok();
}

// FP8 training: a GPU with FP8 tensor cores (MXFP8: with microscaling, Blackwell) and the 1D
// tensor layout Transformer Engine's linear layers implement.
Status CheckGpuPrecision(const models::GpuSpec& gpu, DType dtype, models::Fp8Recipe recipe,
                         const std::string& precision_path, const std::string& recipe_path) {
  if (recipe != models::Fp8Recipe::kNone) {
    if (gpu.MatrixPeak(DType::kFp8).flop_per_second() <= 0) {
      return Error(
          fmt::format("the GPU {} has no FP8 tensor cores (no fp8 matrix peak)", Quote(gpu.name)),
          precision_path, Quote("fp8"));
    }
    if (recipe == models::Fp8Recipe::kMxfp8 && !gpu.microscaling) {
      return Error(fmt::format("MXFP8 needs microscaling tensor cores (Blackwell); the GPU {} "
                               "has none: use \"delayed\", \"current\" or \"blockwise\"",
                               Quote(gpu.name)),
                   recipe_path, Quote("mxfp8"));
    }
  }
  if (gpu.MatrixPeak(dtype).flop_per_second() > 0) return Status::Ok();
  std::vector<std::string_view> has;
  for (const DType other : {DType::kFp32, DType::kTf32, DType::kFp16, DType::kBf16}) {
    if (gpu.MatrixPeak(other).flop_per_second() > 0) has.push_back(DTypeName(other));
  }
  return Error(fmt::format("the GPU {} has no {} matrix peak (no {} tensor cores): its GEMMs "
                           "and MFU would have no peak to run at; train in {}",
                           Quote(gpu.name), DTypeName(dtype), DTypeName(dtype),
                           has.empty() ? std::string("a dtype it has a matrix peak for")
                                       : fmt::format("{}", fmt::join(has, " or "))),
               precision_path,
               Quote(recipe != models::Fp8Recipe::kNone ? "fp8" : DTypeName(dtype)));
}

Status CheckLearnedPositions(const models::TransformerSpec& transformer, int64_t seq_len,
                             const std::string& seq_path, std::string_view table,
                             std::string_view remedy) {
  if (transformer.position != models::PositionEmbedding::kLearned ||
      seq_len <= transformer.max_seq) {
    return Status::Ok();
  }
  return Error(fmt::format("longer than the model's learned position table ({} positions, {}){}",
                           transformer.max_seq, table, remedy),
               seq_path, std::to_string(seq_len));
}

Status CheckFp8(const SimulationConfig& config) {
  const models::Fp8Recipe recipe = config.training.fp8;
  if (recipe == models::Fp8Recipe::kNone) return Status::Ok();
  if (config.model.family != models::ModelFamily::kTransformer) {
    return Error(fmt::format("FP8 training is built for transformers (Transformer Engine's "
                             "linear layers), not {} models",
                             models::ModelFamilyName(config.model.family)),
                 "training.precision", Quote("fp8"));
  }
  if (config.plan.tensor_layout != models::TensorLayout::k1D) {
    return Error(
        "FP8 training is built for 1D tensor parallelism (Transformer Engine's linear "
        "layers)",
        "parallelism.tensor.mode",
        Quote(models::TensorLayoutNames()[static_cast<size_t>(config.plan.tensor_layout)]));
  }
  // FP8 parameters are modelled as Megatron-Core keeps them beside its distributed optimizer
  // (--fp8-param-gather): whole on every rank. Sharded ones (ZeRO-3, FSDP) gather and cache
  // their FP8 copies differently (Megatron FSDP's keep_fp8_transpose_cache), not modelled.
  if (config.training.fp8_params && config.plan.zero_stage == 3) {
    return Error(
        "FP8 parameters are modelled with unsharded parameters (zero_stage 0 to 2: Megatron-Core's "
        "--fp8-param-gather with its distributed optimizer), not under ZeRO-3",
        "training.param_precision", Quote("fp8"));
  }
  return Status::Ok();
}

// Selective op checkpointing is PyTorch's (torch.utils.checkpoint), over 1D tensor parallelism:
// the 2D/2.5D layouts are Colossal-AI's, whose GEMMs run as SUMMA steps.
Status CheckRecompute(const SimulationConfig& config) {
  if (config.plan.tensor_layout == models::TensorLayout::k1D) return Status::Ok();
  const std::string layout(
      models::TensorLayoutNames()[static_cast<size_t>(config.plan.tensor_layout)]);
  if (config.training.recompute == models::Recompute::kSelectiveOp) {
    return Error(
        "selective_op recompute (PyTorch's selective activation checkpointing) is built for 1D "
        "tensor parallelism",
        "parallelism.tensor.mode", Quote(layout));
  }
  // Megatron-Core's modules are 1D tensor-parallel modules; the core attention alone is
  // Korthikanti's selective recompute, which the grids run too.
  if (config.training.recompute == models::Recompute::kSelective &&
      config.training.recompute_modules != models::kRecomputeCoreAttn) {
    return Error(
        "recompute_modules other than [\"core_attn\"] (Megatron-Core's module recompute) are "
        "built for 1D tensor parallelism",
        "parallelism.tensor.mode", Quote(layout));
  }
  return Status::Ok();
}

// DeepSpeed's pipeline engine takes ZeRO stage 1 at most (deepspeed/runtime/pipe/engine.py:
// "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism"); its ZeRO-3 before 0.5.5
// (SynchronizedZero3) is built for dense 1D plans and the recompute policies that re-run a
// layer whole or not at all.
Status CheckFsdp(const SimulationConfig& config) {
  if (config.training.reshard_after_forward ||
      (config.training.framework == models::Framework::kPyTorch && config.plan.zero_stage == 3)) {
    return Status::Ok();
  }
  return Error("reshard_after_forward is FSDP2's: it needs framework \"pytorch\" and zero_stage 3",
               "training.reshard_after_forward", "false");
}

Status CheckActivationOffload(const SimulationConfig& config) {
  const int offloaded = config.training.activation_offload_layers;
  if (offloaded == 0) {
    if (!config.training.activation_offload_v1) return Status::Ok();
    return Error("activation_offload_v1 picks the handler of activation_offload_layers, which is 0",
                 "training.activation_offload_v1", "true");
  }
  const std::string path = "training.activation_offload_layers";
  const std::string value = std::to_string(offloaded);
  if (config.training.framework != models::Framework::kMegatron) {
    return Error(
        fmt::format("activation offloading is modelled as Megatron-Core runs it "
                    "(Transformer Engine's, --cpu-offloading-num-layers), not under \"{}\"",
                    models::FrameworkName(config.training.framework)),
        path, value);
  }
  const int layers = config.model.transformer.layers;
  if (offloaded >= layers) {
    return Error(fmt::format("Megatron-Core offloads fewer layers than the model's {} "
                             "(cpu_offloading_num_layers < num_layers)",
                             layers),
                 path, value);
  }
  if (config.plan.pipeline > 1 || config.plan.virtual_stages > 1) {
    return Error(
        "Megatron-Core has no activation offloading under pipeline parallelism "
        "(\"Currently there is no support for Pipeline parallelism with CPU offloading\")",
        path, value);
  }
  if (config.plan.schedule == models::PipelineSchedule::kGpipe) {
    return Error(
        "Megatron-Core without pipelining runs each micro-batch's forward then its backward "
        "(forward_backward_no_pipelining), which the offloading's windows follow: drop "
        "parallelism.schedule \"gpipe\"",
        path, value);
  }
  if (config.training.recompute != models::Recompute::kNone) {
    return Error(fmt::format("Megatron-Core does not offload activations with activation recompute "
                             "(training.recompute \"{}\"): choose one",
                             models::RecomputeName(config.training.recompute)),
                 path, value);
  }
  if (config.gpu.host_bandwidth.bits_per_second() <= 0) {
    return Error(
        "activation offloading copies over the GPU's host link: give the custom GPU a "
        "\"host_bandwidth\" (one direction, e.g. \"55 GB/s\" for PCIe Gen5 x16)",
        "cluster.gpu.host_bandwidth", "missing");
  }
  return Status::Ok();
}

Status CheckDeepSpeed(const SimulationConfig& config) {
  const ParallelPlan& plan = config.plan;
  if (config.training.framework != models::Framework::kDeepSpeed) return Status::Ok();
  if (plan.zero_stage >= 2 && plan.pipeline > 1) {
    return Error(fmt::format("DeepSpeed's pipeline engine runs ZeRO stage 1 at most, not {} "
                             "(deepspeed/runtime/pipe/engine.py)",
                             plan.zero_stage),
                 "parallelism.zero_stage", std::to_string(plan.zero_stage));
  }
  if (!SynchronizedZero3(config)) return Status::Ok();
  if (plan.experts_apart() || plan.on_grid() || plan.context > 1) {
    return Error(
        "DeepSpeed's ZeRO-3 before 0.5.5 is modelled for dense models on 1D tensor and data "
        "parallelism (no expert, context or 2D/2.5D tensor parallelism)",
        "training.framework_version",
        Quote(fmt::format("{}", fmt::join(config.training.framework_release, "."))));
  }
  if (config.training.recompute == models::Recompute::kSelectiveOp) {
    return Error(
        "DeepSpeed's ZeRO-3 before 0.5.5 is modelled with recompute none, selective or "
        "full (activation checkpointing of whole layers)",
        "training.recompute", Quote("selective_op"));
  }
  return Status::Ok();
}

Status CheckSizesFit(const SimulationConfig& config) {
  return CheckSizesFit(config.model.transformer, config.training.micro_batch,
                       config.training.seq_len, config.plan.tensor, config.model.name);
}

Status CheckSizesFit(const models::TransformerSpec& spec, int64_t micro_batch, int64_t seq_len,
                     int tensor, const std::string& model_name) {
  using Real = long double;
  const auto real = [](int64_t value) { return static_cast<Real>(value); };
  const Real batch = real(micro_batch);
  const Real seq = real(seq_len);
  const Real tokens = batch * seq;
  const Real hidden = real(spec.hidden);
  const Real head_dim =
      spec.head_dim_override > 0 ? real(spec.head_dim_override) : hidden / std::max(1, spec.heads);
  const Real attention = std::max(hidden, head_dim * spec.heads);
  const Real ffn = std::max(real(spec.ffn_hidden), real(spec.moe.expert_ffn_hidden));
  const Real vocab = real(spec.vocab) + real(spec.vocab_divisible_by) * tensor;
  const Real experts = std::max(1, spec.moe.experts + spec.moe.shared_experts);
  const Real widest = std::max({attention, ffn, vocab});
  struct Product {
    const char* what;
    Real value;
    const char* fields;
  };
  const Product products[] = {
      {"a micro-batch's activations (micro_batch × seq_len × the widest of hidden, attention, "
       "ffn_hidden and the padded vocabulary)",
       tokens * widest, "training.micro_batch, training.seq_len and the model's widths"},
      {"a micro-batch's attention scores (micro_batch × heads × seq_len²)",
       batch * spec.heads * seq * seq, "training.seq_len, training.micro_batch or model.heads"},
      {"a layer's largest weight (hidden × the widest of hidden, attention, ffn_hidden × experts "
       "and the padded vocabulary)",
       hidden * std::max({attention, ffn * experts, vocab}), "the model's widths"},
      {"the parameters (layers × hidden × (4 × attention + 3 × ffn_hidden × experts))",
       real(spec.layers) * hidden * (4 * attention + 3 * ffn * experts),
       "model.layers or the model's widths"},
  };
  for (const Product& product : products) {
    if (product.value <= kMaxElements) continue;
    return Error(
        fmt::format("{} come to {:.3g} elements, past the 2^56 ({:.3g}) that dtsim's "
                    "64-bit counts of elements, bytes and FLOPs hold; no model trains "
                    "at that size: reduce {}",
                    product.what, static_cast<double>(product.value), kMaxElements, product.fields),
        "model", model_name);
  }
  return Status::Ok();
}

}  // namespace dtsim::strategies
