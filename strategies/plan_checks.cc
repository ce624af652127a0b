#include "strategies/plan_checks.h"

#include <fmt/format.h>

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

}  // namespace

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
  if (plan.expert_imbalance > plan.expert) {
    return Error(fmt::format("the busiest of {} expert-parallel ranks can get at most {}× the "
                             "mean load (all of it)",
                             plan.expert, plan.expert),
                 "parallelism.expert.imbalance", fmt::format("{}", plan.expert_imbalance));
  }
  return Status::Ok();
}

}  // namespace dtsim::strategies
