#include "strategies/plan_config.h"

#include <filesystem>
#include <string>

namespace dtsim::strategies {

Json PlanConfigJson(const Json& base, const PlanChoice& choice, const Json* compression, int nodes,
                    RanksMode ranks) {
  Json config = base;
  config.erase("search");
  const ParallelPlan& plan = choice.plan;
  Json& parallelism = config["parallelism"];
  if (!parallelism.is_object()) parallelism = Json::object();
  parallelism["data"] = plan.data;
  Json tensor = {{"size", plan.tensor},
                 {"mode", models::TensorLayoutNames()[static_cast<size_t>(plan.tensor_layout)]},
                 {"sequence_parallel", plan.sequence_parallel}};
  if (plan.tensor_layout == models::TensorLayout::k2p5D) tensor["depth"] = plan.tensor_depth;
  if (plan.tensor_overlap && !plan.on_grid()) {
    tensor["overlap"] = TensorOverlapNames()[static_cast<size_t>(*plan.tensor_overlap)];
  }
  parallelism["tensor"] = std::move(tensor);
  parallelism["pipeline"] = {{"size", plan.pipeline},
                             {"schedule", models::PipelineScheduleName(plan.schedule)},
                             {"virtual_stages", plan.virtual_stages}};
  if (plan.pipeline_scatter_gather) parallelism["pipeline"]["scatter_gather"] = true;
  if (plan.embedding_as_layer) parallelism["pipeline"]["embedding_as_layer"] = true;
  if (plan.loss_as_layer) parallelism["pipeline"]["loss_as_layer"] = true;
  parallelism["context"] = {
      {"size", plan.context},
      {"comm", models::ContextCommNames()[static_cast<size_t>(plan.context_comm)]}};
  Json expert = {{"size", plan.expert}};
  if (plan.expert_tensor > 0) expert["tensor"] = plan.expert_tensor;
  if (plan.expert_imbalance != 1.0) expert["imbalance"] = plan.expert_imbalance;
  if (plan.expert_overlap) expert["overlap"] = true;
  if (plan.expert_delay_wgrad) expert["delay_wgrad"] = true;
  parallelism["expert"] = std::move(expert);
  parallelism["zero_stage"] = plan.zero_stage;
  parallelism["order"] = PlanOrderName(plan);

  Json& training = config["training"];
  if (choice.global_batch > 0) training["global_batch"] = choice.global_batch;
  training["micro_batch"] = choice.micro_batch;
  training["recompute"] = models::RecomputeName(choice.recompute);
  if (choice.fp8 != models::Fp8Recipe::kNone) {
    training["precision"] = "fp8";
    training["fp8_recipe"] = models::Fp8RecipeNames()[static_cast<size_t>(choice.fp8)];
  } else if (training.value("precision", "") == "fp8") {
    training["precision"] = "bf16";  // the search's "without FP8" of an FP8 config
    training.erase("fp8_recipe");
  }
  if (choice.activation_offload > 0) {
    training["activation_offload_layers"] = choice.activation_offload;
  } else {
    training.erase("activation_offload_layers");
    training.erase("activation_offload_v1");
  }
  if (compression != nullptr && compression->is_array() &&
      static_cast<size_t>(choice.compression) < compression->size()) {
    config["compression"] = (*compression)[static_cast<size_t>(choice.compression)];
  }
  config["cluster"]["nodes"] = nodes;
  config["cluster"].erase("gpus");
  config["simulation"]["ranks"] = ranks == RanksMode::kSymmetric ? "symmetric" : "full";
  // The search ranks by the analytical model's time (its best few re-simulated with the flow
  // model: --set simulation.network_model=flow reproduces that time).
  config["simulation"]["network_model"] = "analytical";
  return config;
}

void AnchorRelativePaths(Json& config, const std::string& source) {
  const std::filesystem::path dir = std::filesystem::path(source).parent_path();
  const auto anchor = [&dir](Json& value) {
    if (!value.is_string()) return;
    const std::filesystem::path file(value.get<std::string>());
    if (file.is_absolute()) return;
    std::error_code code;
    const std::filesystem::path absolute = std::filesystem::absolute(dir / file, code);
    if (!code) value = absolute.lexically_normal().string();
  };
  for (const char* key : {"profile", "calibration"}) {
    if (config.contains(key)) anchor(config[key]);
  }
  if (config.contains("model") && config["model"].is_object() &&
      config["model"].contains("hf_config")) {
    anchor(config["model"]["hf_config"]);
  }
}

}  // namespace dtsim::strategies
