#include "strategies/config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <functional>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/hf_config.h"
#include "sim/base/strings.h"
#include "strategies/diloco_sync.h"
#include "strategies/embedding_sharding.h"
#include "strategies/plan_checks.h"
#include "strategies/training_section.h"

namespace dtsim::strategies {
namespace {

constexpr std::array<std::string_view, 2> kGradientSyncNames = {"all_reduce", "parameter_server"};
constexpr std::array<std::string_view, 2> kTensorOverlapNames = {"none", "async"};
constexpr std::array<std::string_view, 2> kRanksNames = {"full", "symmetric"};

// "tensor": 8 or {"size": 8, "sequence_parallel": true}; "pipeline": 16 or {"size": 16,
// "schedule": "1f1b", "virtual_stages": 1}.
Status ReadSized(JsonObjectReader& parent, std::string_view key, int& size,
                 const std::function<Status(JsonObjectReader&)>& more) {
  const Json* value = parent.Find(key);
  if (value == nullptr) return Status::Ok();
  const std::string path = JsonChildPath(parent.path(), key);
  if (!value->is_object()) {
    DTSIM_ASSIGN_OR_RETURN(const int64_t result, JsonToInt(*value, path, 1, 1 << 20));
    size = static_cast<int>(result);
    return Status::Ok();
  }
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(*value, path));
  DTSIM_RETURN_IF_ERROR(reader.ReadOptionalInt("size", size));
  DTSIM_RETURN_IF_ERROR(more(reader));
  return reader.Finish();
}

// "layers": "uniform" | "balanced" | [n_0, …]: one count per stage, or per model chunk with
// virtual stages (in model order).
Status ReadStageLayers(JsonObjectReader& reader, ParallelPlan& plan) {
  reader.Allow("layers");
  const Json* value = reader.Find("layers");
  if (value == nullptr) return Status::Ok();
  const std::string path = JsonChildPath(reader.path(), "layers");
  if (value->is_string()) {
    const std::string name = value->get<std::string>();
    if (name == "uniform") {
      plan.layer_split = ParallelPlan::LayerSplit::kUniform;
    } else if (name == "balanced") {
      plan.layer_split = ParallelPlan::LayerSplit::kBalanced;
    } else {
      return Error(
          "must be \"uniform\", \"balanced\" or a list of layer counts, one per stage (per model "
          "chunk with virtual stages)",
          path, JsonValueForError(*value));
    }
    return Status::Ok();
  }
  if (!value->is_array()) {
    return Error(
        "must be \"uniform\", \"balanced\" or a list of layer counts, one per stage (per model "
        "chunk with virtual stages)",
        path, JsonValueForError(*value));
  }
  plan.layer_split = ParallelPlan::LayerSplit::kGiven;
  plan.chunk_layers.clear();
  for (size_t i = 0; i < value->size(); ++i) {
    DTSIM_ASSIGN_OR_RETURN(const int64_t count,
                           JsonToInt((*value)[i], fmt::format("{}[{}]", path, i), 0, 1 << 20));
    plan.chunk_layers.push_back(static_cast<int>(count));
  }
  return Status::Ok();
}

// "data × tensor × pipeline = 2 × 8 × 4" (with context parallelism, its size after data).
std::string PlanProduct(const ParallelPlan& plan) {
  if (plan.context == 1) {
    return fmt::format("data × tensor × pipeline = {} × {} × {}", plan.data, plan.tensor,
                       plan.pipeline);
  }
  return fmt::format("data × context × tensor × pipeline = {} × {} × {} × {}", plan.data,
                     plan.context, plan.tensor, plan.pipeline);
}

// What would make a plan of the wrong size fit the cluster: the data-parallel size the GPUs
// leave for the other dimensions, and the node count the plan needs (or none, which sizes the
// cluster to the plan).
std::string RankMismatchHint(const network::ClusterSpec& cluster, const ParallelPlan& plan) {
  std::vector<std::string> fixes;
  const int64_t others = plan.world() / std::max(1, plan.data);
  const int64_t gpus = cluster.gpu_count();
  if (others > 0 && gpus > 0 && gpus % others == 0 && gpus / others != plan.data) {
    fixes.push_back(fmt::format("parallelism.data={}", gpus / others));
  }
  if (cluster.nodes > 0 && cluster.gpus_per_node > 0 && plan.world() % cluster.gpus_per_node == 0) {
    fixes.push_back(fmt::format("cluster.nodes={}", plan.world() / cluster.gpus_per_node));
  }
  if (cluster.nodes > 0) fixes.emplace_back("cluster.nodes=null (sized to the plan)");
  if (fixes.empty()) return {};
  std::string hint = fmt::format(" ({} nodes × {}); set ", cluster.nodes, cluster.gpus_per_node);
  for (size_t i = 0; i < fixes.size(); ++i) {
    hint += (i == 0 ? "" : i + 1 == fixes.size() ? " or " : ", ") + fixes[i];
  }
  return hint;
}

Status ReadParallelism(const Json& value, ParallelPlan& plan) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, "parallelism"));
  DTSIM_RETURN_IF_ERROR(reader.ReadOptionalInt("data", plan.data));
  const auto tensor_options = [&plan](JsonObjectReader& r) -> Status {
    DTSIM_RETURN_IF_ERROR(
        r.ReadOptionalEnum("mode", models::TensorLayoutNames(), plan.tensor_layout));
    if (r.Has("depth") && plan.tensor_layout != models::TensorLayout::k2p5D) {
      return Error("depth is a 2.5D setting (\"mode\": \"2.5d\")", JsonChildPath(r.path(), "depth"),
                   JsonValueForError(*r.Find("depth")));
    }
    DTSIM_RETURN_IF_ERROR(r.ReadOptionalInt("depth", plan.tensor_depth));
    if (r.Has("overlap") && plan.tensor_layout != models::TensorLayout::k1D) {
      return Error("overlap is a 1D setting: a 2D/2.5D grid's SUMMA steps overlap on their own",
                   JsonChildPath(r.path(), "overlap"), JsonValueForError(*r.Find("overlap")));
    }
    if (r.Has("overlap")) {
      TensorOverlap overlap = TensorOverlap::kAsync;
      DTSIM_RETURN_IF_ERROR(r.ReadOptionalEnum("overlap", kTensorOverlapNames, overlap));
      plan.tensor_overlap = overlap;
    }
    return r.ReadOptional("sequence_parallel", plan.sequence_parallel);
  };
  const auto pipeline_options = [&plan](JsonObjectReader& r) -> Status {
    DTSIM_RETURN_IF_ERROR(
        r.ReadOptionalEnum("schedule", models::PipelineScheduleNames(), plan.schedule));
    DTSIM_RETURN_IF_ERROR(r.ReadOptionalInt("virtual_stages", plan.virtual_stages));
    DTSIM_RETURN_IF_ERROR(r.ReadOptional("embedding_as_layer", plan.embedding_as_layer));
    DTSIM_RETURN_IF_ERROR(r.ReadOptional("loss_as_layer", plan.loss_as_layer));
    DTSIM_RETURN_IF_ERROR(r.ReadOptional("scatter_gather", plan.pipeline_scatter_gather));
    return ReadStageLayers(r, plan);
  };
  DTSIM_RETURN_IF_ERROR(ReadSized(reader, "tensor", plan.tensor, tensor_options));
  DTSIM_RETURN_IF_ERROR(ReadSized(reader, "pipeline", plan.pipeline, pipeline_options));
  const auto context_options = [&plan](JsonObjectReader& r) -> Status {
    return r.ReadOptionalEnum("comm", models::ContextCommNames(), plan.context_comm);
  };
  DTSIM_RETURN_IF_ERROR(ReadSized(reader, "context", plan.context, context_options));
  const auto expert_options = [&plan](JsonObjectReader& r) -> Status {
    DTSIM_RETURN_IF_ERROR(r.ReadOptionalInt("tensor", plan.expert_tensor, 1));
    DTSIM_RETURN_IF_ERROR(r.ReadOptional("overlap", plan.expert_overlap));
    DTSIM_RETURN_IF_ERROR(r.ReadOptional("delay_wgrad", plan.expert_delay_wgrad));
    r.Allow("imbalance");
    if (!r.Has("imbalance")) return Status::Ok();
    DTSIM_ASSIGN_OR_RETURN(plan.expert_imbalance, r.Number("imbalance"));
    if (!(plan.expert_imbalance >= 1)) {
      return Error("must be at least 1 (the busiest expert's load over the mean)",
                   JsonChildPath(r.path(), "imbalance"), fmt::format("{}", plan.expert_imbalance));
    }
    return Status::Ok();
  };
  DTSIM_RETURN_IF_ERROR(ReadSized(reader, "expert", plan.expert, expert_options));
  DTSIM_RETURN_IF_ERROR(reader.ReadOptionalInt("zero_stage", plan.zero_stage, 0));
  if (plan.zero_stage > 3) {
    return Error("ZeRO stage must be 0, 1, 2 or 3", "parallelism.zero_stage",
                 std::to_string(plan.zero_stage));
  }
  if (reader.Has("gradient_bucket")) {
    DTSIM_ASSIGN_OR_RETURN(plan.gradient_bucket, reader.Size("gradient_bucket"));
    if (plan.gradient_bucket.count() <= 0) {
      return Error("must be positive", "parallelism.gradient_bucket",
                   JsonValueForError(*reader.Find("gradient_bucket")));
    }
  }
  reader.Allow("gradient_bucket");
  DTSIM_RETURN_IF_ERROR(
      reader.ReadOptional("overlap_gradient_reduce", plan.overlap_gradient_reduce));
  DTSIM_RETURN_IF_ERROR(
      reader.ReadOptionalEnum("gradient_sync", kGradientSyncNames, plan.gradient_sync));
  if (reader.Has("order")) {
    const Json& order = *reader.Find("order");
    if (!order.is_string()) {
      return Error("expected a string such as \"tp-dp-pp\"", "parallelism.order",
                   JsonValueForError(order));
    }
    DTSIM_ASSIGN_OR_RETURN(plan.order,
                           ParsePlanOrder(order.get<std::string>(), "parallelism.order"));
  }
  reader.Allow("order");
  DTSIM_RETURN_IF_ERROR(ReadEmbeddingSharding(reader, plan));
  return reader.Finish();
}

// The cluster section: the GPU and the network.
Status ReadCluster(const Json& value, std::span<const models::GpuCalibration> calibrations,
                   models::GpuSpec& gpu, network::ClusterSpec& cluster) {
  if (!value.is_object()) return Error("expected an object", "cluster", JsonValueForError(value));
  if (!value.contains("gpu")) return Error("missing required field", "cluster.gpu");
  DTSIM_ASSIGN_OR_RETURN(gpu, models::GpuFromJson(value["gpu"], "cluster.gpu", calibrations));
  Json network = value;
  network.erase("gpu");
  DTSIM_ASSIGN_OR_RETURN(cluster, network::ClusterFromJson(network, "cluster"));
  // A training step: every GPU runs its own groups' communication at the same time.
  cluster.gpus_share_nics = true;
  return Status::Ok();
}

// The simulation section: how the config is simulated, not what.
struct SimulationSection {
  const network::NetworkModelEntry* network_model = &network::DefaultNetworkModel();
  const models::CostModelEntry* cost_model = &models::DefaultCostModel();
  RanksMode ranks = RanksMode::kFull;
  int64_t max_memory = 0;
};

Expected<SimulationSection> ReadSimulation(const Json& value) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, "simulation"));
  SimulationSection section;
  auto network = static_cast<size_t>(section.network_model - network::NetworkModels().data());
  DTSIM_RETURN_IF_ERROR(
      reader.ReadOptionalChoice("network_model", network::NetworkModelNames(), network));
  section.network_model = &network::NetworkModels()[network];
  DTSIM_RETURN_IF_ERROR(reader.ReadOptionalEnum("ranks", kRanksNames, section.ranks));
  auto cost_model = static_cast<size_t>(section.cost_model - models::CostModels().data());
  DTSIM_RETURN_IF_ERROR(
      reader.ReadOptionalChoice("cost_model", models::CostModelNames(), cost_model));
  section.cost_model = &models::CostModels()[cost_model];
  if (reader.Has("max_memory")) {
    DTSIM_ASSIGN_OR_RETURN(const Bytes max_memory, reader.Size("max_memory"));
    if (max_memory.count() <= 0) {
      return Error("must be more than zero", "simulation.max_memory",
                   JsonValueForError(value["max_memory"]));
    }
    section.max_memory = max_memory.count();
  }
  reader.Allow("max_memory");
  DTSIM_RETURN_IF_ERROR(reader.Finish());
  return section;
}

// A ResNet is trained data parallel: no tensor, pipeline or expert parallelism, no ZeRO-3
// (whose per-layer gathers are built for transformer layers).
Status CheckDataParallelPlan(const SimulationConfig& config) {
  const ParallelPlan& plan = config.plan;
  for (const auto& [key, size] :
       {std::pair{"tensor", plan.tensor}, std::pair{"pipeline", plan.pipeline},
        std::pair{"context", plan.context}, std::pair{"expert", plan.expert}}) {
    if (size != 1) {
      return Error(fmt::format("{} plans are data parallel only ({} parallelism is built for "
                               "transformers)",
                               models::ModelFamilyName(config.model.family), key),
                   fmt::format("parallelism.{}", key), std::to_string(size));
    }
  }
  if (plan.zero_stage == 3) {
    return Error("ZeRO-3 is built for transformers (per-layer parameter gathers); use 0, 1 or 2",
                 "parallelism.zero_stage", "3");
  }
  if (config.training.seq_len != 0) {
    return Error(fmt::format("{} models take no sequence length",
                             models::ModelFamilyName(config.model.family)),
                 "training.seq_len", std::to_string(config.training.seq_len));
  }
  return Status::Ok();
}

// A DLRM: its dense part replicated as TorchRec's DDP runs it (no ZeRO, no compression), its
// tables sharded one way for all or one way each.
Status CheckDlrmPlan(const SimulationConfig& config) {
  if (config.plan.zero_stage != 0) {
    return Error(
        "a DLRM's dense part is replicated (TorchRec wraps it in DDP): ZeRO is not built "
        "for it; its tables are sharded by parallelism.embedding_sharding",
        "parallelism.zero_stage", std::to_string(config.plan.zero_stage));
  }
  if (config.compression.method != "none") {
    return Error("gradient compression of a DLRM's dense gradients is not built",
                 "compression.method", Quote(config.compression.method));
  }
  return CheckEmbeddingSharding(config.model.dlrm, config.plan.embedding_sharding,
                                "parallelism.embedding_sharding");
}

// Uniform: pipeline stages × virtual stages divide the layers (with the embedding and loss
// counted as layers when asked). Balanced: one chunk per stage. Given: one count per model
// chunk (per stage without virtual stages), adding up to the layers.
Status CheckStageLayers(const models::TransformerSpec& spec, const ParallelPlan& plan) {
  const std::string path = "parallelism.pipeline.layers";
  const int64_t chunks = int64_t{plan.pipeline} * plan.virtual_stages;
  const int counted = (plan.embedding_as_layer ? 1 : 0) + (plan.loss_as_layer ? 1 : 0);
  if (counted > 0 && plan.layer_split != ParallelPlan::LayerSplit::kUniform) {
    return Error(
        "the embedding and loss count as layers of the uniform split; a given or balanced "
        "split places the layers itself",
        plan.embedding_as_layer ? "parallelism.pipeline.embedding_as_layer"
                                : "parallelism.pipeline.loss_as_layer",
        "true");
  }
  if (plan.layer_split == ParallelPlan::LayerSplit::kUniform) {
    if (counted == 0) {
      return Divisible(spec.layers, "layers", chunks, "pipeline stages × virtual stages",
                       "parallelism.pipeline");
    }
    return Divisible(spec.layers + counted, "layers + the embedding and loss counted as layers",
                     chunks, "pipeline stages × virtual stages", "parallelism.pipeline");
  }
  if (plan.layer_split == ParallelPlan::LayerSplit::kBalanced) {
    if (plan.virtual_stages > 1) {
      return Error("balanced stages are for one model chunk per stage: give the counts per chunk",
                   path, std::to_string(plan.virtual_stages));
    }
    if (spec.layers < plan.pipeline) {
      return Error(fmt::format("{} pipeline stages need at least as many layers ({})",
                               plan.pipeline, spec.layers),
                   path, "balanced");
    }
    return Status::Ok();
  }
  if (std::ssize(plan.chunk_layers) != chunks) {
    return Error(
        plan.virtual_stages > 1
            ? fmt::format("needs one layer count per model chunk (pipeline stages × virtual "
                          "stages = {}, in model order: chunk k on stage k mod {}), got {}",
                          chunks, plan.pipeline, plan.chunk_layers.size())
            : fmt::format("needs one layer count per pipeline stage ({}), got {}", plan.pipeline,
                          plan.chunk_layers.size()),
        path, fmt::format("{}", fmt::join(plan.chunk_layers, ", ")));
  }
  for (int stage = 0; stage < plan.pipeline; ++stage) {
    int held = 0;
    for (int chunk = 0; chunk < plan.virtual_stages; ++chunk) {
      held += plan.chunk_layers[static_cast<size_t>(chunk) * static_cast<size_t>(plan.pipeline) +
                                static_cast<size_t>(stage)];
    }
    if (held == 0) {
      return Error(
          fmt::format("pipeline stage {} holds no layer", stage),
          plan.virtual_stages == 1 ? JsonIndexPath(path, static_cast<size_t>(stage)) : path,
          fmt::format("{}", fmt::join(plan.chunk_layers, ", ")));
    }
  }
  const int total = std::accumulate(plan.chunk_layers.begin(), plan.chunk_layers.end(), 0);
  if (total != spec.layers) {
    return Error(
        fmt::format("the layer counts add up to {}, the model has {} layers", total, spec.layers),
        path, fmt::format("{}", fmt::join(plan.chunk_layers, ", ")));
  }
  return Status::Ok();
}

// The uniform split with the embedding (loss) counted as a layer: (L + e + l)/(p·v) slots per
// model chunk, the first chunk's first slot the embedding's, the last chunk's last the loss's
// (Megatron-Core's account_for_embedding/loss_in_pipeline_split). Checked by CheckStageLayers.
void CountEmbeddingAndLossAsLayers(const models::TransformerSpec& spec, ParallelPlan& plan) {
  if (plan.layer_split != ParallelPlan::LayerSplit::kUniform ||
      !(plan.embedding_as_layer || plan.loss_as_layer)) {
    return;
  }
  const int embedding = plan.embedding_as_layer ? 1 : 0;
  const int loss = plan.loss_as_layer ? 1 : 0;
  const int chunks = plan.pipeline * plan.virtual_stages;
  plan.chunk_layers.assign(static_cast<size_t>(chunks), (spec.layers + embedding + loss) / chunks);
  plan.chunk_layers.front() -= embedding;
  plan.chunk_layers.back() -= loss;
}

// A transformer's plan (its sequence length resolved): expert parallelism against the MoE
// model, the shard against the model, the pipeline against the layers and the schedule.
Status CheckTransformerPlan(const SimulationConfig& config) {
  const ParallelPlan& plan = config.plan;
  const models::TransformerSpec& spec = config.model.transformer;
  DTSIM_RETURN_IF_ERROR(CheckExpertPlan(config));
  DTSIM_RETURN_IF_ERROR(CheckDeepSpeed(config));
  DTSIM_RETURN_IF_ERROR(CheckFsdp(config));
  DTSIM_RETURN_IF_ERROR(CheckActivationOffload(config));
  DTSIM_RETURN_IF_ERROR(CheckStageLayers(spec, plan));
  Status context = models::ValidateContext(spec, ShardOf(config));
  if (!context.ok()) return std::move(context).error().Under("parallelism.context");
  Status valid = models::ValidateShard(spec, ShardOf(config));
  if (!valid.ok()) return std::move(valid).error().Under("parallelism.tensor");
  const models::PipelineScheduleEntry& schedule = models::PipelineScheduleOf(plan.schedule);
  if (plan.virtual_stages > 1 && !schedule.virtual_stages) {
    return Error(fmt::format("virtual stages need a schedule that interleaves model chunks (the "
                             "{} schedule runs one chunk per stage)",
                             Quote(schedule.name)),
                 "parallelism.pipeline.virtual_stages", std::to_string(plan.virtual_stages));
  }
  if (schedule.virtual_stages && plan.virtual_stages < 2) {
    return Error(fmt::format("the {} schedule interleaves model chunks, so it needs "
                             "virtual_stages of at least 2 (one chunk per stage is the \"1f1b\" "
                             "schedule, which holds less memory)",
                             Quote(schedule.name)),
                 "parallelism.pipeline.virtual_stages", std::to_string(plan.virtual_stages));
  }
  if (schedule.virtual_stages) {
    if (plan.pipeline < 2) {
      return Error(fmt::format("the {} schedule needs at least 2 pipeline stages", schedule.name),
                   "parallelism.pipeline.size", std::to_string(plan.pipeline));
    }
    DTSIM_RETURN_IF_ERROR(Divisible(config.Microbatches(), "micro-batches per replica",
                                    plan.pipeline, "pipeline stages (interleaving)",
                                    "parallelism.pipeline"));
  }
  return Status::Ok();
}

// Parameter servers sum what the workers push: they take the data-parallel all-reduces (of
// plain, cast or PowerSGD-compressed gradients), not ZeRO's reduce-scatters or a compression
// method's all-gathers and all-to-alls.
Status CheckParameterServers(const SimulationConfig& config) {
  const ParallelPlan& plan = config.plan;
  if (plan.gradient_sync != GradientSync::kParameterServer) return Status::Ok();
  const std::string path = "parallelism.gradient_sync";
  if (config.cluster.servers.count == 0) {
    return Error(
        "parameter servers are needed: give cluster.servers {\"count\", \"placement\", "
        "…} (docs/network.md)",
        path, "\"parameter_server\"");
  }
  if (plan.zero_stage >= 1) {
    return Error(fmt::format("ZeRO stage {} reduce-scatters gradients among the replicas; "
                             "parameter servers need zero_stage 0",
                             plan.zero_stage),
                 path, "\"parameter_server\"");
  }
  const std::unique_ptr<GradientCompression> method = MakeCompression(config.compression);
  if (method != nullptr && method->Compresses()) {
    // Which collectives a method runs does not depend on the bucket's size: ask it about one
    // bucket holding a matrix and a vector, as a layer's gradients do.
    const GradientTensors sample{.matrices = {{1024, 1024}}, .vector_elements = 1024};
    for (const ReductionStep& step :
         method->Reduce(sample, plan.DataIndices(), config.training.grad_dtype)) {
      if (step.collective && *step.collective != graph::CommKind::kAllReduce) {
        return Error(fmt::format("compression method \"{}\" reduces with the collective {}, "
                                 "which parameter servers do not run (they sum pushed "
                                 "gradients: use none, a cast or powersgd)",
                                 config.compression.method, graph::CommKindName(*step.collective)),
                     path, "\"parameter_server\"");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Expected<ResolvedConfig> Resolve(const SimulationConfig& input) {
  SimulationConfig config = input;
  const ParallelPlan& plan = config.plan;
  TrainingConfig& training = config.training;
  // First, so that the products below (and ParallelPlan::world()) cannot overflow.
  const double ranks = static_cast<double>(plan.data) * plan.context * plan.tensor * plan.pipeline;
  if (ranks > static_cast<double>(kMaxPlanRanks)) {
    return Error(fmt::format("{} is more than the {} ranks dtsim simulates", PlanProduct(plan),
                             kMaxPlanRanks),
                 "parallelism", fmt::format("{:.0f}", ranks));
  }
  DTSIM_RETURN_IF_ERROR(Divisible(training.global_batch, "global batch",
                                  training.micro_batch * plan.data,
                                  "micro-batch × data-parallel size", "training.global_batch"));
  // A cluster without a node count is sized to the plan; one with a node count must match it.
  const bool sized = config.cluster.nodes > 0;
  Status fits = network::FitCluster(config.cluster, plan.world());
  if (!fits.ok() && config.cluster.gpu_count() >= plan.world()) {
    return std::move(fits).error().Under("cluster");  // the ranks fit; the servers do not
  }
  if (!fits.ok() || (sized && config.cluster.gpu_count() != plan.world())) {
    return Error(
        fmt::format("{} = {} ranks, but the cluster has {} GPUs{}", PlanProduct(plan), plan.world(),
                    config.cluster.gpu_count(), RankMismatchHint(config.cluster, plan)),
        "parallelism", std::to_string(plan.world()));
  }
  if (!plan.embedding_sharding.empty() && config.model.family != models::ModelFamily::kDlrm) {
    return Error("a DLRM's setting: this model has no embedding tables to shard",
                 "parallelism.embedding_sharding",
                 Quote(EmbeddingShardingNames()[static_cast<size_t>(plan.embedding_sharding[0])]));
  }
  if (config.model.family == models::ModelFamily::kDlrm) {
    DTSIM_RETURN_IF_ERROR(CheckDataParallelPlan(config));
    DTSIM_RETURN_IF_ERROR(CheckDlrmPlan(config));
  } else if (config.model.family == models::ModelFamily::kResNet) {
    DTSIM_RETURN_IF_ERROR(CheckDataParallelPlan(config));
  } else {
    if (training.seq_len == 0) {
      // The model's max_seq has no bound of its own (a position table may be long); as the
      // sequence length it takes training.seq_len's.
      const int64_t max_seq = config.model.transformer.max_seq;
      if (max_seq > kMaxSequenceLength) {
        return Error(fmt::format("without training.seq_len the sequence is the model's max_seq, "
                                 "past the longest dtsim simulates ({} tokens); give "
                                 "training.seq_len",
                                 kMaxSequenceLength),
                     "model.max_seq", std::to_string(max_seq));
      }
      training.seq_len = max_seq;
    }
    const std::span<const std::string_view> presets = models::ModelPresetNames();
    const bool preset =
        std::find(presets.begin(), presets.end(), config.model.name) != presets.end();
    DTSIM_RETURN_IF_ERROR(CheckLearnedPositions(
        config.model.transformer, training.seq_len, "training.seq_len", "model.max_seq",
        fmt::format(": give the model a longer one{}",
                    preset ? fmt::format(" (\"model\": {{\"preset\": {}, \"max_seq\": {}}})",
                                         Quote(config.model.name), training.seq_len)
                           : std::string())));
    DTSIM_RETURN_IF_ERROR(CheckSizesFit(config));
    DTSIM_RETURN_IF_ERROR(CheckTransformerPlan(config));
    CountEmbeddingAndLossAsLayers(config.model.transformer, config.plan);
  }
  const std::string& method = config.compression.method;
  const std::unique_ptr<GradientCompression> compression = MakeCompression(config.compression);
  if (compression->Compresses() && plan.zero_stage >= 1) {
    return Error(fmt::format("gradient compression replaces the all-reduce of gradients; ZeRO "
                             "stage {} reduce-scatters them instead (use zero_stage 0)",
                             plan.zero_stage),
                 "compression.method", Quote(method));
  }
  if (compression->ReplacesAdam() && training.optimizer != models::Optimizer::kAdam) {
    return Error("the 1-bit optimizers replace Adam (or LAMB); training.optimizer must be \"adam\"",
                 "compression.method", Quote(method));
  }
  DTSIM_RETURN_IF_ERROR(CheckParameterServers(config));
  DTSIM_RETURN_IF_ERROR(CheckDiloco(config));
  DTSIM_RETURN_IF_ERROR(CheckGpuPrecision(config.gpu, config.training.dtype, config.training.fp8,
                                          "training.precision", "training.fp8_recipe"));
  DTSIM_RETURN_IF_ERROR(CheckFp8(config));
  DTSIM_RETURN_IF_ERROR(CheckRecompute(config));
  return ResolvedConfig(std::move(config));
}

models::TransformerShard ShardOf(const SimulationConfig& config) {
  const TrainingConfig& training = config.training;
  const ParallelPlan& plan = config.plan;
  return {.micro_batch = training.micro_batch,
          .seq_len = training.seq_len,
          .dtype = training.dtype,
          .tensor_parallel = plan.tensor,
          .tensor_layout = plan.tensor_layout,
          .tensor_depth = plan.tensor_depth,
          .sequence_parallel = plan.sequence_parallel,
          .expert_parallel = plan.expert,
          .expert_tensor_parallel = plan.expert_tensor,
          .context_parallel = plan.context,
          .context_comm = plan.context_comm,
          .flash_attention = training.flash_attention,
          .dropout = training.dropout,
          .fp8 = training.fp8,
          .autocast =
              models::Autocasts(training.framework, training.param_dtype, training.dtype,
                                plan.zero_stage == 3 && plan.DataIndices() * plan.tensor_depth > 1),
          .recompute_modules = training.recompute_modules,
          .saves_gathered_inputs = training.framework == models::Framework::kPyTorch,
          .eager_modules = training.framework == models::Framework::kPyTorch,
          .compiled_loss = CompilesLoss(config),
          .compiled_blocks = (training.compile & kCompileModel) != 0};
}

bool CompilesLoss(const SimulationConfig& config) {
  return (config.training.compile & kCompileLoss) != 0 &&
         config.model.family == models::ModelFamily::kTransformer &&
         !models::LossParallel(config.training.framework, config.plan.tensor,
                               config.plan.tensor_layout);
}

std::vector<std::string> UnmodelledCompile(const SimulationConfig& config) {
  std::vector<std::string> unmodelled;
  if ((config.training.compile & kCompileModel) != 0) {
    unmodelled.emplace_back(
        "torch.compile of the model (training.compile \"model\") is modelled in the blocks' "
        "fused norms, SwiGLU and rotary embeddings and in what torchtitan's op checkpointing "
        "policy keeps (a block's last matmul output, which no backward reads, is not saved): "
        "the rest of the blocks' fusions and of their memory are eager PyTorch's here");
  }
  if ((config.training.compile & kCompileLoss) != 0 && !CompilesLoss(config)) {
    unmodelled.emplace_back(
        config.model.family == models::ModelFamily::kTransformer
            ? "training.compile \"loss\" under tensor parallelism is priced eager: the loss is "
              "PyTorch's loss_parallel over vocabulary shards, whose compiled form dtsim does not "
              "model"
            : "training.compile \"loss\" is modelled for transformers' cross-entropy over a "
              "vocabulary: this model's loss is priced eager");
  }
  return unmodelled;
}

bool SkewedRouting(const SimulationConfig& config) {
  return config.model.transformer.moe.dropless && config.plan.expert > 1 &&
         config.plan.expert_imbalance > 1;
}

std::span<const std::string_view> TensorOverlapNames() { return kTensorOverlapNames; }

TensorOverlap TensorOverlapOf(const SimulationConfig& config) {
  if (config.plan.tensor_overlap) return *config.plan.tensor_overlap;
  return config.training.framework == models::Framework::kPyTorch ? TensorOverlap::kNone
                                                                  : TensorOverlap::kAsync;
}

bool SerialTensorCollectives(const SimulationConfig& config) {
  return config.plan.tensor > 1 && !config.plan.on_grid() &&
         TensorOverlapOf(config) == TensorOverlap::kNone;
}

std::string_view GradientSyncName(GradientSync sync) {
  return kGradientSyncNames[static_cast<size_t>(sync)];
}

// "model": {"hf_config": "config.json", …}: the Hugging Face config's model spec (relative to
// the config file), the section's other keys overriding its fields.
Expected<Json> ExpandHfConfig(const Json& model, const std::string& source) {
  if (!model.is_object() || !model.contains("hf_config")) return model;
  const std::string path = "model.hf_config";
  if (!model["hf_config"].is_string()) {
    return Error("expected the path of a Hugging Face config.json", path,
                 JsonValueForError(model["hf_config"]));
  }
  std::filesystem::path file(model["hf_config"].get<std::string>());
  if (file.is_relative() && !source.empty()) {
    file = std::filesystem::path(source).parent_path() / file;
  }
  std::error_code code;
  if (!std::filesystem::is_regular_file(file, code)) {
    // Not a device or a pipe that would never end: a config.json.
    return Error("not a regular file", path, Quote(file.string()));
  }
  Expected<Json> hf = ReadJsonFile(file.string());
  if (!hf.ok()) return std::move(hf).error().Under(path);
  Expected<Json> spec = models::ModelJsonFromHfConfig(*hf);
  if (!spec.ok()) return std::move(spec).error().InFile(file.string());
  for (const auto& [key, value] : model.items()) {
    if (key == "hf_config") continue;
    if (key == "preset" || key == "family") {
      return Error("a model from a Hugging Face config takes no preset or family", "model." + key);
    }
    (*spec)[key] = value;
  }
  return spec;
}

// "calibration": a calibration file (relative to the config) or the same object inline.
Expected<Calibration> ReadCalibrationSection(const Json& value, const std::string& source) {
  if (value.is_object()) return CalibrationFromJson(value, "calibration");
  if (!value.is_string()) {
    return Error("expected a calibration file or object", "calibration", JsonValueForError(value));
  }
  std::filesystem::path file(value.get<std::string>());
  if (file.is_relative() && !source.empty()) {
    file = std::filesystem::path(source).parent_path() / file;
  }
  Expected<Calibration> calibration = ReadCalibrationFile(file.string());
  if (!calibration.ok()) return std::move(calibration).error().Under("calibration");
  return calibration;
}

namespace {

// A file dtsim wrote (a result: "format": "dtsim.simulate_result", ...) handed back as a config.
Status RefuseResult(const Json& value) {
  const auto format = value.find("format");
  if (format == value.end() || !format->is_string()) return Status::Ok();
  const auto& name = format->get_ref<const std::string&>();
  if (!name.starts_with("dtsim.")) return Status::Ok();
  std::string origin;
  const auto input = value.find("input");
  if (input != value.end() && input->is_object()) {
    const auto config = input->find("config");
    if (config != input->end() && config->is_string()) {
      origin = fmt::format("; it came from the config {}", Quote(config->get<std::string>()));
    }
  }
  return Error(fmt::format("this is a file dtsim wrote, not a config{}", origin), "format",
               Quote(name));
}

}  // namespace

Expected<SimulationConfig> ReadConfigSections(const Json& value, const std::string& source,
                                              std::span<const std::string_view> also_allowed) {
  DTSIM_ASSIGN_OR_RETURN(JsonObjectReader reader, JsonObjectReader::Make(value, ""));
  for (std::string_view key : also_allowed) reader.Allow(key);
  SimulationConfig config;
  config.source = source;
  DTSIM_RETURN_IF_ERROR(RefuseResult(value));
  for (std::string_view key : {"model", "training", "cluster"}) {
    if (!reader.Has(key)) return Error("missing required section", std::string(key));
  }
  DTSIM_ASSIGN_OR_RETURN(const Json model, ExpandHfConfig(*reader.Find("model"), source));
  DTSIM_ASSIGN_OR_RETURN(config.model, models::ModelFromJson(model, "model"));
  DTSIM_RETURN_IF_ERROR(ReadTraining(*reader.Find("training"), config.training));
  Calibration calibration;
  if (const Json* section = reader.Find("calibration")) {
    DTSIM_ASSIGN_OR_RETURN(calibration, ReadCalibrationSection(*section, source));
    config.calibration_source = calibration.source.empty() ? "inline" : calibration.source;
  }
  DTSIM_RETURN_IF_ERROR(ReadCluster(*reader.Find("cluster"), calibration.GpuCalibrations(),
                                    config.gpu, config.cluster));
  config.calibration = calibration.AppliedTo(config.gpu.name);
  config.error_band =
      calibration.BandFor(config.gpu.name, models::FrameworkName(config.training.framework));
  if (const Json* parallelism = reader.Find("parallelism")) {
    DTSIM_RETURN_IF_ERROR(ReadParallelism(*parallelism, config.plan));
  }
  if (reader.Has("profile")) {
    DTSIM_ASSIGN_OR_RETURN(config.profile, reader.String("profile"));
    // Relative to the config file.
    const std::filesystem::path profile(config.profile);
    if (profile.is_relative() && !source.empty()) {
      config.profile = (std::filesystem::path(source).parent_path() / profile).string();
    }
  }
  reader.Allow("profile");
  if (const Json* compression = reader.Find("compression")) {
    DTSIM_ASSIGN_OR_RETURN(config.compression, CompressionFromJson(*compression, "compression"));
  }
  if (const Json* time_to_train = reader.Find("time_to_train")) {
    DTSIM_ASSIGN_OR_RETURN(config.time_to_train,
                           TimeToTrainFromJson(*time_to_train, "time_to_train"));
  }
  if (const Json* diloco = reader.Find("diloco")) {
    DTSIM_ASSIGN_OR_RETURN(config.diloco, DilocoFromJson(*diloco, "diloco"));
  }
  if (const Json* simulation = reader.Find("simulation")) {
    DTSIM_ASSIGN_OR_RETURN(const SimulationSection section, ReadSimulation(*simulation));
    config.network_model = section.network_model;
    config.cost_model = section.cost_model;
    config.ranks = section.ranks;
    config.max_memory = section.max_memory;
  }
  DTSIM_RETURN_IF_ERROR(reader.Finish());
  return config;
}

Expected<ResolvedConfig> ConfigFromJson(const Json& value, const std::string& source) {
  // The search section is `dtsim search`'s (SearchSpaceFromJson): one file serves both.
  constexpr std::array<std::string_view, 1> kSearch = {"search"};
  DTSIM_ASSIGN_OR_RETURN(const SimulationConfig config, ReadConfigSections(value, source, kSearch));
  return Resolve(config);
}

Expected<ResolvedConfig> LoadConfig(const std::string& path,
                                    const std::vector<std::string>& overrides, Json* document) {
  DTSIM_ASSIGN_OR_RETURN(Json json, ReadJsonFile(path));
  for (const std::string& assignment : overrides) {
    DTSIM_RETURN_IF_ERROR(ApplyOverride(json, assignment));
  }
  if (document != nullptr) *document = json;
  Expected<ResolvedConfig> config = ConfigFromJson(json, path);
  if (!config.ok()) return std::move(config).error().InFile(path);
  return config;
}

}  // namespace dtsim::strategies
