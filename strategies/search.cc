#include "strategies/search.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <tuple>

#include "sim/base/parallel.h"
#include "sim/base/quantity.h"
#include "sim/base/strings.h"
#include "strategies/embedding_sharding.h"
#include "strategies/plan_checks.h"
#include "strategies/search_bound.h"
#include "strategies/stage_memory.h"
#include "strategies/time_to_train.h"

namespace dtsim::strategies {
namespace {

constexpr std::array<std::string_view, 5> kStatusNames = {"simulated", "bounded", "out_of_memory",
                                                          "invalid", "failed"};

std::vector<int> Divisors(int n) {
  std::vector<int> divisors;
  for (int d = 1; d <= n; ++d) {
    if (n % d == 0) divisors.push_back(d);
  }
  return divisors;
}

// The (layout, depth) pairs a tensor-parallel group of `size` ranks can take among `modes`:
// 1D; a q×q grid (size q², q ≥ 2); q×q×d (size q²·d, q ≥ 2, d ≥ 2).
std::vector<std::pair<models::TensorLayout, int>> TensorShapes(
    int size, const std::vector<models::TensorLayout>& modes) {
  std::vector<std::pair<models::TensorLayout, int>> shapes;
  for (models::TensorLayout mode : modes) {
    if (mode == models::TensorLayout::k1D) shapes.emplace_back(mode, 1);
    for (int q = 2; q * q <= size; ++q) {
      if (size % (q * q) != 0) continue;
      const int depth = size / (q * q);
      if (mode == models::TensorLayout::k2D && depth == 1) shapes.emplace_back(mode, 1);
      if (mode == models::TensorLayout::k2p5D && depth >= 2) shapes.emplace_back(mode, depth);
    }
  }
  return shapes;
}

// The training variants of a plan: each of `methods` compression methods, with and without FP8
// as the space asks (FP8 only on 1D tensor layouts, Transformer Engine's).
std::vector<std::pair<int, models::Fp8Recipe>> Variants(int methods, models::TensorLayout layout,
                                                        const SearchSpace& space) {
  std::vector<std::pair<int, models::Fp8Recipe>> variants;
  for (int method = 0; method < methods; ++method) {
    for (models::Fp8Recipe fp8 : space.fp8) {
      if (fp8 != models::Fp8Recipe::kNone && layout != models::TensorLayout::k1D) continue;
      variants.emplace_back(method, fp8);
    }
  }
  return variants;
}

// What the uniform split divides: the layers, and the embedding and loss where they count as
// layers (parallelism.pipeline.embedding_as_layer, loss_as_layer).
int PipelineUnits(const ParallelPlan& plan, const models::TransformerSpec& spec) {
  return spec.layers + (plan.embedding_as_layer ? 1 : 0) + (plan.loss_as_layer ? 1 : 0);
}

// The schedules and virtual stages of `pipeline` stages over `layers` layers.
std::vector<std::pair<models::PipelineSchedule, int>> Schedules(int pipeline, int layers,
                                                                const SearchSpace& space) {
  if (pipeline == 1) return {{models::PipelineSchedule::kOneForwardOneBackward, 1}};
  std::vector<std::pair<models::PipelineSchedule, int>> schedules;
  for (models::PipelineSchedule schedule : space.schedules) {
    if (!models::PipelineScheduleOf(schedule).virtual_stages) {
      schedules.emplace_back(schedule, 1);
      continue;
    }
    const int per_stage = layers % pipeline == 0 ? layers / pipeline : 0;
    for (int v = 2; v <= std::min(per_stage, space.max_virtual_stages); ++v) {
      if (per_stage % v == 0) schedules.emplace_back(schedule, v);
    }
  }
  return schedules;
}

// The piece of the plan that prices a transformer's passes (PricePassTimes): configs that
// agree on it have the same pass times. The tensor- and context-parallel groups are priced
// where the rank order puts them: their strides (the ranks of tensor index 1 and of data
// index 1) are part of it.
using ShardKey =
    std::tuple<int64_t, int32_t, int32_t, int, int, int, bool, int, int, int, int, int>;
ShardKey KeyOf(const SimulationConfig& config) {
  const ParallelPlan& plan = config.plan;
  return {config.training.micro_batch,
          plan.Rank(0, 0, 1),
          plan.Rank(1, 0, 0),
          plan.tensor,
          static_cast<int>(plan.tensor_layout),
          plan.tensor_depth,
          plan.sequence_parallel,
          plan.expert,
          static_cast<int>(config.training.recompute),
          static_cast<int>(config.training.fp8),
          plan.context,
          static_cast<int>(plan.context_comm)};
}

// Pass times per ShardKey, priced once and shared by the threads.
class PassTimesCache {
 public:
  explicit PassTimesCache(const models::OpCostModel& cost) : cost_(cost) {}

  Expected<PassTimes> Get(const ResolvedConfig& config) {
    const ShardKey key = KeyOf(config);
    {
      const std::lock_guard lock(mutex_);
      if (const auto found = cache_.find(key); found != cache_.end()) return found->second;
    }
    DTSIM_ASSIGN_OR_RETURN(PassTimes times, PricePassTimes(config, cost_));
    const std::lock_guard lock(mutex_);
    cache_.emplace(key, times);
    return times;
  }

 private:
  const models::OpCostModel& cost_;
  std::mutex mutex_;
  std::map<ShardKey, PassTimes> cache_;
};

// The plan's memory per GPU (its largest stage's) and whether it fits with the space's
// headroom; false (`evaluated` invalid or out of memory, and why) where not.
bool CheckMemory(const ResolvedConfig& config, const SearchSpace& space, MemoryReplay replay,
                 EvaluatedPlan& evaluated) {
  Expected<std::vector<models::MemoryBreakdown>> memory = EstimateStageMemory(config, replay);
  if (!memory.ok()) {
    evaluated.status = PlanStatus::kInvalid;
    evaluated.reason = memory.error().location();
    evaluated.detail = memory.error().message();
    return false;
  }
  size_t largest = 0;
  for (size_t stage = 0; stage < memory->size(); ++stage) {
    if ((*memory)[stage].total() > (*memory)[largest].total()) largest = stage;
  }
  evaluated.memory_bytes = (*memory)[largest].total();
  evaluated.allocator_reserve.reset();
  if ((*memory)[largest].reserve_modelled) {
    evaluated.allocator_reserve = (*memory)[largest].allocator_reserve;
  }
  const int64_t headroom = space.memory_headroom.count();
  if (evaluated.memory_bytes + headroom <= config.gpu.memory.count()) return true;
  evaluated.status = PlanStatus::kOutOfMemory;
  evaluated.reason = "memory";
  evaluated.detail = fmt::format(
      "pipeline stage {} needs {} per GPU{}, {} has {}", largest, FormatGiB(evaluated.memory_bytes),
      headroom > 0 ? fmt::format(" and the search keeps {} free", FormatGiB(headroom)) : "",
      config.gpu.name, FormatGiB(config.gpu.memory.count()));
  return false;
}

// A plan EvaluatedPlan::memory_replay_pending marks, about to be simulated: its replayed
// memory, and whether it fits.
bool FitsReplayed(const SimulationConfig& base, const SearchSpace& space, EvaluatedPlan& plan) {
  plan.memory_replay_pending = false;
  Expected<ResolvedConfig> config = Resolve(ConfigFor(base, space, plan.choice));
  return config.ok() && CheckMemory(*config, space, MemoryReplay::kAll, plan);
}

// Checks, memory and lower bound of one plan: everything short of simulating it.
EvaluatedPlan Check(const SimulationConfig& base, const SearchSpace& space, size_t index,
                    const PlanChoice& choice, PassTimesCache& passes) {
  EvaluatedPlan evaluated{.index = index, .choice = choice};
  Expected<ResolvedConfig> resolved = Resolve(ConfigFor(base, space, choice));
  if (!resolved.ok()) {
    evaluated.status = PlanStatus::kInvalid;
    evaluated.reason = resolved.error().location();
    evaluated.detail = resolved.error().message();
    return evaluated;
  }
  const ResolvedConfig& config = *resolved;
  if (!CheckMemory(config, space, MemoryReplay::kUnpipelined, evaluated)) return evaluated;
  evaluated.memory_replay_pending = ReplaysPipelinedLoop(config);
  evaluated.status = PlanStatus::kBounded;  // until simulated
  if (config.model.family != models::ModelFamily::kTransformer) return evaluated;
  Expected<PassTimes> times = passes.Get(config);
  if (!times.ok()) {
    evaluated.status = PlanStatus::kFailed;
    evaluated.reason = "cost model";
    evaluated.detail = times.error().ToString();
    return evaluated;
  }
  evaluated.lower_bound = IterationLowerBound(config, *times);
  return evaluated;
}

// Simulates `plan` with `network_model` and records the figures: the ranking's, or with the
// link-sharing model, the re-ranking's.
Status SimulatePlan(const SimulationConfig& base, const SearchSpace& space,
                    const SearchOptions& options, const models::OpCostModel& cost,
                    const network::NetworkModelEntry& network_model, EvaluatedPlan& plan) {
  DTSIM_ASSIGN_OR_RETURN(ResolvedConfig config, Resolve(ConfigFor(base, space, plan.choice)));
  config.ranks = options.ranks;
  config.network_model = &network_model;
  DTSIM_ASSIGN_OR_RETURN(const SimulationResult result, Simulate(config, cost));
  if (network_model.shares_links) {
    plan.figures->flow_iteration_time = result.iteration_time;
    plan.figures->flow_average_iteration_time = result.average_iteration_time;
    plan.figures->flow_breakdown = FiguresOf(result).breakdown;
    if (result.time_to_train) plan.figures->flow_time_to_train_s = result.time_to_train->wall_s;
  } else {
    plan.figures = FiguresOf(result);
  }
  return Status::Ok();
}

void Fail(EvaluatedPlan& plan, const Status& status) {
  plan.status = PlanStatus::kFailed;
  plan.reason = "simulation";
  plan.detail = status.error().ToString();
}

}  // namespace

PlanFigures FiguresOf(const SimulationResult& result) {
  PlanFigures figures{.iteration_time = result.iteration_time,
                      .average_iteration_time = result.average_iteration_time,
                      .samples_per_second = result.samples_per_second,
                      .tokens_per_second = result.tokens_per_second,
                      .mfu = result.mfu};
  if (result.time_to_train) {
    figures.train_iterations = result.time_to_train->budget.iterations;
    figures.time_to_train_s = result.time_to_train->wall_s;
  }
  // The result's throughput is the compressed phase's; rank by the run's average.
  const double ratio = static_cast<double>(result.iteration_time.ns()) /
                       static_cast<double>(result.average_iteration_time.ns());
  figures.samples_per_second *= ratio;
  figures.tokens_per_second *= ratio;
  figures.mfu *= ratio;
  TimeBreakdown& mean = figures.breakdown;
  const auto stages = static_cast<int64_t>(result.stages.size());
  for (const TimeBreakdown& stage : result.stages) {
    mean.compute += stage.compute;
    mean.recompute += stage.recompute;
    mean.tensor += stage.tensor;
    mean.pipeline += stage.pipeline;
    mean.expert += stage.expert;
    mean.context += stage.context;
    mean.data_exposed += stage.data_exposed;
    mean.optimizer += stage.optimizer;
    mean.idle += stage.idle;
  }
  for (DurationNs* part :
       {&mean.compute, &mean.recompute, &mean.tensor, &mean.pipeline, &mean.expert, &mean.context,
        &mean.data_exposed, &mean.optimizer, &mean.idle}) {
    *part = DurationNs(part->ns() / std::max<int64_t>(stages, 1));
  }
  return figures;
}

std::vector<EmbeddingSharding> EmbeddingShardingOf(const PlanChoice& choice,
                                                   const SearchSpace& space) {
  const auto index = static_cast<size_t>(choice.embedding_sharding);
  return index < space.embedding_shardings.size() ? space.embedding_shardings[index]
                                                  : std::vector<EmbeddingSharding>{};
}

std::string_view PlanStatusName(PlanStatus status) {
  return kStatusNames[static_cast<size_t>(status)];
}

std::string PlanLabel(const PlanChoice& choice, const SearchSpace& space) {
  const ParallelPlan& plan = choice.plan;
  std::string tensor = fmt::format("TP {}", plan.tensor);
  if (plan.on_grid()) {
    tensor +=
        fmt::format(" ({}{})", models::TensorLayoutNames()[static_cast<size_t>(plan.tensor_layout)],
                    plan.tensor_layout == models::TensorLayout::k2p5D
                        ? fmt::format(", depth {}", plan.tensor_depth)
                        : "");
  } else if (plan.sequence_parallel) {
    tensor += " (SP)";
  }
  std::string pipeline = fmt::format("PP {}", plan.pipeline);
  if (plan.pipeline > 1) {
    pipeline += plan.virtual_stages > 1
                    ? fmt::format(" (interleaved ×{})", plan.virtual_stages)
                    : fmt::format(" ({})", models::PipelineScheduleName(plan.schedule));
  }
  std::string label = fmt::format("DP {} × {} × {}", plan.data, tensor, pipeline);
  if (plan.context > 1) {
    label += fmt::format(" × CP {} ({})", plan.context,
                         models::ContextCommNames()[static_cast<size_t>(plan.context_comm)]);
  }
  if (plan.expert > 1) label += fmt::format(" × EP {}", plan.expert);
  if (plan.folded_experts()) label += " (folded, expert TP 1)";
  if (plan.expert_overlap) label += " (a2a overlapped)";
  if (space.global_batches.size() > 1 && choice.global_batch > 0) {
    label += fmt::format(" · batch {}", choice.global_batch);
  }
  label += fmt::format(" · mb {} · ZeRO {} · recompute {}", choice.micro_batch, plan.zero_stage,
                       models::RecomputeName(choice.recompute));
  const std::string& method = space.compression[static_cast<size_t>(choice.compression)].method;
  if (space.compression.size() > 1 || method != "none") label += fmt::format(" · {}", method);
  if (choice.fp8 != models::Fp8Recipe::kNone) {
    label += fmt::format(" · FP8 ({})", models::Fp8RecipeNames()[static_cast<size_t>(choice.fp8)]);
  }
  if (choice.activation_offload > 0) {
    label += fmt::format(" · offload {} layers", choice.activation_offload);
  }
  if (space.embedding_shardings.size() > 1) {
    label +=
        fmt::format(" · tables {}", EmbeddingShardingLabel(EmbeddingShardingOf(choice, space)));
  }
  if (space.orders.size() > 1 || plan.order != ParallelPlan{}.order) {
    label += fmt::format(" · order {}", PlanOrderName(plan));
  }
  return label;
}

// The context-parallel (size, variant) pairs of the space that divide `ranks`: size 1 once.
std::vector<std::pair<int, models::ContextComm>> ContextChoices(const SearchSpace& space, int ranks,
                                                                bool transformer) {
  if (!transformer) return {{1, models::ContextComm::kP2p}};
  std::vector<std::pair<int, models::ContextComm>> choices;
  for (int context : space.context) {
    if (ranks % context != 0) continue;
    if (context == 1) {
      choices.emplace_back(1, models::ContextComm::kP2p);
      continue;
    }
    for (models::ContextComm comm : space.context_comm) choices.emplace_back(context, comm);
  }
  return choices;
}

// The activation offloading layer counts of the space that Megatron-Core allows on the plan
// (CheckActivationOffload): under Megatron, without pipelining or recompute, below the model's
// layers; 0 otherwise (once).
std::vector<int> OffloadChoices(const SimulationConfig& base, const SearchSpace& space,
                                const ParallelPlan& plan, models::Recompute recompute,
                                bool transformer) {
  std::vector<int> choices;
  for (const int layers : space.activation_offload) {
    const bool allowed = layers == 0 || (transformer && plan.pipeline == 1 &&
                                         base.training.framework == models::Framework::kMegatron &&
                                         recompute == models::Recompute::kNone &&
                                         layers < base.model.transformer.layers);
    const int choice = allowed ? layers : 0;
    if (std::find(choices.begin(), choices.end(), choice) == choices.end()) {
      choices.push_back(choice);
    }
  }
  if (choices.empty()) choices.push_back(0);
  return choices;
}

// The recompute policies a plan is tried with. Under PyTorch, "selective" is its selective
// activation checkpointing as torchtitan configures it (selective_op): Megatron's attention-core
// recompute is Megatron-Core's, and a PyTorch plan running it would be simulated with a policy
// its framework does not have (and, not being replayed, without the allocator's reserve).
std::vector<models::Recompute> RecomputeChoices(const SimulationConfig& base,
                                                const SearchSpace& space, bool transformer) {
  if (!transformer) return {base.training.recompute};
  if (base.training.framework != models::Framework::kPyTorch) return space.recompute;
  std::vector<models::Recompute> choices;
  for (models::Recompute recompute : space.recompute) {
    if (recompute == models::Recompute::kSelective) recompute = models::Recompute::kSelectiveOp;
    if (std::find(choices.begin(), choices.end(), recompute) == choices.end()) {
      choices.push_back(recompute);
    }
  }
  return choices;
}

// The plan at one global batch (and, for a DLRM, one table placement: an index into
// SearchSpace::embedding_shardings) with every training choice of the space: ZeRO stage,
// micro-batch, recompute, compression, FP8 and activation offloading.
void AddTrainingChoices(const SimulationConfig& base, const SearchSpace& space,
                        const ParallelPlan& plan, bool transformer, int64_t global_batch,
                        int placement, std::vector<PlanChoice>& plans) {
  // ZeRO shards over data (× context) parallelism; compression compresses its reduction.
  const bool replicated = plan.DataIndices() > 1;
  const std::vector<int> zero_stages = replicated ? space.zero_stages : std::vector<int>{0};
  const int methods = replicated ? static_cast<int>(space.compression.size()) : 1;
  const std::vector<models::Recompute> recompute_choices =
      RecomputeChoices(base, space, transformer);
  for (int zero : zero_stages) {
    for (int64_t micro_batch : space.micro_batches) {
      for (const models::Recompute recompute : recompute_choices) {
        // PyTorch's selective op checkpointing on 1D tensor layouts only (CheckRecompute).
        if (recompute == models::Recompute::kSelectiveOp &&
            plan.tensor_layout != models::TensorLayout::k1D) {
          continue;
        }
        for (const auto& [method, fp8] : Variants(methods, plan.tensor_layout, space)) {
          for (const int offload : OffloadChoices(base, space, plan, recompute, transformer)) {
            PlanChoice& choice = plans.emplace_back(PlanChoice{.plan = plan,
                                                               .micro_batch = micro_batch,
                                                               .recompute = recompute,
                                                               .compression = method,
                                                               .fp8 = fp8,
                                                               .activation_offload = offload,
                                                               .global_batch = global_batch,
                                                               .embedding_sharding = placement});
            choice.plan.zero_stage = zero;
            // The config's expert all-to-all overlap where Megatron-Core runs it on the plan.
            choice.plan.expert_overlap =
                base.plan.expert_overlap &&
                ExpertOverlapAllowed(choice.plan, recompute, base.training.framework);
            choice.plan.expert_delay_wgrad =
                choice.plan.expert_overlap && base.plan.expert_delay_wgrad;
          }
        }
      }
    }
  }
}

// The space's rank orders that number `plan`'s ranks differently: two orders that differ only
// in where its dimensions of size 1 sit are the same numbering, tried once (the first).
std::vector<std::array<PlanDimension, 3>> DistinctOrders(const SearchSpace& space,
                                                         ParallelPlan plan) {
  std::vector<std::array<PlanDimension, 3>> orders;
  for (const auto& order : space.orders) {
    plan.order = order;
    const bool seen = std::any_of(orders.begin(), orders.end(),
                                  [&plan](const auto& kept) { return plan.NumbersLike(kept); });
    if (!seen) orders.push_back(order);
  }
  return orders;
}

// (expert-parallel size, expert tensor size; 0: the tensor size) of a MoE model: experts carved
// out of the data (× context) indices, each split over the tensor group; and under 1D tensor
// parallelism with sequence parallelism also MoE parallel folding, whole experts over
// tensor × data (× context) ranks.
std::vector<std::pair<int, int>> ExpertChoices(const ParallelPlan& plan, int experts) {
  std::vector<std::pair<int, int>> choices;
  if (experts < 2) return {{1, 0}};
  for (int expert : Divisors(plan.DataIndices())) {
    if (experts % expert == 0) choices.emplace_back(expert, 0);
  }
  if (plan.tensor > 1 && plan.sequence_parallel && !plan.on_grid()) {
    for (int expert : Divisors(plan.tensor * plan.DataIndices())) {
      if (experts % expert == 0) choices.emplace_back(expert, 1);
    }
  }
  return choices;
}

std::vector<PlanChoice> EnumeratePlans(const SimulationConfig& base, const SearchSpace& space,
                                       size_t limit) {
  std::vector<PlanChoice> plans;
  const int gpus = base.cluster.gpu_count();
  const bool transformer = base.model.family == models::ModelFamily::kTransformer;
  const models::TransformerSpec& spec = base.model.transformer;
  const int experts = transformer && spec.moe.enabled() ? spec.moe.experts : 1;
  for (int tensor : transformer ? Divisors(gpus) : std::vector<int>{1}) {
    for (int pipeline : transformer ? Divisors(gpus / tensor) : std::vector<int>{1}) {
      for (const auto& [context, comm] :
           ContextChoices(space, gpus / (tensor * pipeline), transformer)) {
        ParallelPlan plan = base.plan;
        plan.data = gpus / (tensor * pipeline * context);
        plan.tensor = tensor;
        plan.pipeline = pipeline;
        plan.context = context;
        plan.context_comm = comm;
        for (const auto& [layout, depth] : TensorShapes(tensor, space.tensor_modes)) {
          plan.tensor_layout = layout;
          plan.tensor_depth = depth;
          for (bool sequence : space.sequence_parallel) {
            // Sequence parallelism splits a 1D group's norms and dropouts: nothing to split
            // without one (and on a grid the layout already does).
            if (sequence && (tensor == 1 || layout != models::TensorLayout::k1D)) continue;
            plan.sequence_parallel = sequence;
            for (const auto& [expert, expert_tensor] : ExpertChoices(plan, experts)) {
              plan.expert = expert;
              plan.expert_tensor = expert_tensor;
              plan.expert_imbalance =
                  expert == 1 || expert_tensor == 1 ? 1.0 : base.plan.expert_imbalance;
              for (const auto& [schedule, virtual_stages] :
                   Schedules(pipeline, transformer ? PipelineUnits(base.plan, spec) : 1, space)) {
                plan.schedule = schedule;
                plan.virtual_stages = virtual_stages;
                for (const auto& order : DistinctOrders(space, plan)) {
                  plan.order = order;
                  for (const int64_t batch : space.global_batches) {
                    for (size_t placement = 0; placement < space.embedding_shardings.size();
                         ++placement) {
                      AddTrainingChoices(base, space, plan, transformer, batch,
                                         static_cast<int>(placement), plans);
                    }
                  }
                }
                if (plans.size() > limit) return plans;
              }
            }
          }
        }
      }
    }
  }
  return plans;
}

SimulationConfig ConfigFor(const SimulationConfig& base, const SearchSpace& space,
                           const PlanChoice& choice) {
  SimulationConfig config = base;
  config.plan = choice.plan;
  config.training.micro_batch = choice.micro_batch;
  if (choice.global_batch > 0) config.training.global_batch = choice.global_batch;
  config.plan.embedding_sharding = EmbeddingShardingOf(choice, space);
  config.training.recompute = choice.recompute;
  config.compression = space.compression[static_cast<size_t>(choice.compression)];
  config.training.fp8 = choice.fp8;
  if (choice.fp8 != models::Fp8Recipe::kNone) config.training.dtype = DType::kBf16;
  config.training.activation_offload_layers = choice.activation_offload;
  if (choice.activation_offload == 0) config.training.activation_offload_v1 = false;
  return config;
}

DurationNs IterationLowerBound(const ResolvedConfig& config, const PassTimes& times) {
  const models::TransformerSpec& spec = config.model.transformer;
  const ParallelPlan& plan = config.plan;
  const int64_t microbatches = config.Microbatches();
  DurationNs before;  // the first micro-batch's forward and the last one's backward, stages < s
  DurationNs bound;
  for (int stage = 0; stage < plan.pipeline; ++stage) {
    // All chunks' compute and grid work, and chunk 0's compute forward and backward.
    DurationNs compute, grid, first_forward, first_backward;
    const auto add = [&](const PieceTimes& piece, bool first_chunk) {
      compute += piece.forward + piece.backward + piece.recompute;
      grid += piece.forward_grid + piece.backward_grid + piece.recompute_grid;
      if (first_chunk) {
        first_forward += piece.forward;
        first_backward += piece.backward + piece.recompute;
      }
    };
    for (int chunk = 0; chunk < plan.virtual_stages; ++chunk) {
      for (const int layer : models::ChunkLayerIndices(spec, plan.pipeline, plan.virtual_stages,
                                                       stage, chunk, plan.chunk_layers)) {
        add(times.Layer(spec, layer), chunk == 0);
      }
    }
    if (stage == 0) add(times.embedding, true);
    if (stage == plan.pipeline - 1) add(times.output, plan.virtual_stages == 1);
    // Both streams start after the stage's first receive.
    const DurationNs work = std::max(compute, grid);
    bound = std::max(bound, before + DurationNs(work.ns() * microbatches));
    before += first_forward + first_backward;
  }
  return bound;
}

namespace {

// The error for a space past `limit` plans, with the sizes of the lists that multiply it.
Error TooManyPlans(const SearchSpace& space, size_t limit) {
  return Error(
      fmt::format(
          "the search space has more than {} plans (each parallel layout × {} "
          "micro-batches × {} ZeRO stages × {} recompute policies{}{}{}{}{}): give shorter "
          "lists, or fewer GPUs",
          limit, space.micro_batches.size(), space.zero_stages.size(), space.recompute.size(),
          space.compression.size() > 1
              ? fmt::format(" × {} compression methods", space.compression.size())
              : "",
          space.fp8.size() > 1 ? fmt::format(" × {} FP8 choices", space.fp8.size()) : "",
          space.context.size() > 1 ? fmt::format(", over {} context sizes", space.context.size())
                                   : "",
          space.global_batches.size() > 1
              ? fmt::format(", × {} global batches", space.global_batches.size())
              : "",
          space.embedding_shardings.size() > 1
              ? fmt::format(", × {} table placements", space.embedding_shardings.size())
              : ""),
      "search");
}

// The iterations a run of each global batch of the space needs (with a time_to_train section), by
// which a plan's iteration bound scales to a bound on its run's wall clock: the run's iterations
// each take at least the bound, and failures and checkpoints only add. 1 each without a
// section, where the search ranks iterations.
Expected<std::map<int64_t, int64_t>> RunIterations(const SimulationConfig& base,
                                                   const SearchSpace& space) {
  std::map<int64_t, int64_t> iterations;
  for (const int64_t batch : space.global_batches) {
    iterations[batch] = 1;
    if (!base.time_to_train || batch <= 0) continue;
    DTSIM_ASSIGN_OR_RETURN(const TokenBudget budget,
                           TokensToTrain(*base.time_to_train, base.model, batch,
                                         std::max<int64_t>(base.training.seq_len, 0)));
    iterations[batch] = budget.iterations;
  }
  return iterations;
}

}  // namespace

Expected<SearchResult> Search(const SimulationConfig& base, const SearchSpace& space,
                              const SearchOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (base.cluster.nodes <= 0) {
    return Error("the search needs the cluster's size: give cluster.nodes (or --gpus)",
                 "cluster.nodes");
  }
  if (base.diloco) {
    return Error(
        "the search does not vary DiLoCo replicas yet: search the plan of one replica "
        "(its share of the GPUs and the batch), then simulate or sweep the DiLoCo job",
        "diloco", std::to_string(base.diloco->replicas));
  }
  if (base.plan.layer_split != ParallelPlan::LayerSplit::kUniform) {
    return Error(
        "the search varies the pipeline size with uniform stages; simulate a balanced "
        "or given split of its best plan instead",
        "parallelism.pipeline.layers",
        base.plan.layer_split == ParallelPlan::LayerSplit::kBalanced ? "balanced" : "a list");
  }
  const int threads = options.threads > 0 ? options.threads : DefaultThreads();
  const auto report = [&options](std::string_view phase, size_t done, size_t total) {
    if (options.progress) options.progress(phase, done, total);
  };
  DTSIM_ASSIGN_OR_RETURN(const ConfigCostModel cost, LoadCostModel(base));
  DTSIM_ASSIGN_OR_RETURN(const auto iterations, RunIterations(base, space));
  const std::vector<PlanChoice> all = EnumeratePlans(base, space, options.max_plans);
  if (all.size() > options.max_plans) return TooManyPlans(space, options.max_plans);
  SearchResult result;
  result.enumerated = all.size();
  for (size_t i = static_cast<size_t>(options.shard - 1); i < all.size();
       i += static_cast<size_t>(options.shards)) {
    result.plans.push_back({.index = i, .choice = all[i]});
  }
  std::vector<EvaluatedPlan>& plans = result.plans;

  // Divisibility, memory and lower bounds.
  PassTimesCache passes(*cost.model);
  std::atomic<size_t> done{0};
  // In an order spread over the enumeration (a check's cost varies along it: many pipeline
  // stages' memory to estimate in one part, plans failing a divisibility check at once in
  // another), so that the rate so far — the time left — holds.
  const SpreadOrder spread(plans.size());
  ParallelFor(plans.size(), threads, [&](size_t k) {
    const size_t i = spread(k);
    plans[i] = Check(base, space, plans[i].index, plans[i].choice, passes);
    report("checking", ++done, plans.size());
  });

  // Simulate in order of lower bound (on what the ranking reads, RankingNs: the iteration, or
  // the run); stop where the bound passes the K-th best.
  const auto bound = [&iterations](const EvaluatedPlan& plan) {
    const auto found = iterations.find(plan.choice.global_batch);
    const int64_t steps = found == iterations.end() ? 1 : found->second;
    return static_cast<int64_t>(
        std::min(static_cast<double>(plan.lower_bound.ns()) * static_cast<double>(steps), 1e18));
  };
  std::vector<size_t> order;
  for (size_t i = 0; i < plans.size(); ++i) {
    if (plans[i].status == PlanStatus::kBounded) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&plans, &bound](size_t a, size_t b) {
    return std::tuple(bound(plans[a]), a) < std::tuple(bound(plans[b]), b);
  });
  TopTimes best(static_cast<size_t>(std::max(options.top, options.rerank)));
  // Progress counts simulations, not plans (most plans past the first few hundred are pruned
  // by the bound in no time): those run so far, and those the plans not yet reached are
  // forecast to need.
  std::vector<int64_t> bounds;
  bounds.reserve(order.size());
  for (size_t i : order) bounds.push_back(bound(plans[i]));
  SimulationForecast forecast(std::move(bounds));
  std::atomic<size_t> reached{0};
  done = 0;
  ParallelFor(order.size(), threads, [&](size_t k) {
    EvaluatedPlan& plan = plans[order[k]];
    const bool run = bound(plan) <= best.Kth() &&
                     (!plan.memory_replay_pending || FitsReplayed(base, space, plan));
    if (run) {
      if (Status simulated =
              SimulatePlan(base, space, options, *cost.model, network::DefaultNetworkModel(), plan);
          simulated.ok()) {
        plan.status = PlanStatus::kSimulated;
        const int64_t ranked = RankingNs(*plan.figures, false);
        best.Add(ranked);
        forecast.Simulated(bound(plan), ranked);
      } else {
        Fail(plan, simulated);
      }
    }
    const size_t simulated = run ? ++done : done.load();
    report("simulating", simulated, simulated + forecast.StillToSimulate(++reached, best));
  });

  // Re-rank the best with the flow model.
  RankPlans(result, 0);
  const size_t reranked =
      std::min(result.ranking.size(), static_cast<size_t>(std::max(options.rerank, 0)));
  done = 0;
  ParallelFor(reranked, threads, [&](size_t k) {
    EvaluatedPlan& plan = plans[result.ranking[k]];
    if (Status simulated = SimulatePlan(base, space, options, *cost.model,
                                        network::LinkSharingNetworkModel(), plan);
        !simulated.ok()) {
      Fail(plan, simulated);
    }
    report("flow model", ++done, reranked);
  });
  RankPlans(result, options.rerank);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

Status ExplainEmptySearch(const SearchResult& result, const SimulationConfig& base) {
  if (result.Count(PlanStatus::kSimulated) > 0) return Status::Ok();
  std::vector<std::string> parts;
  for (const auto& [pruned_reason, count] : result.PrunedByReason()) {
    const std::string& reason = pruned_reason;  // clang 14 cannot capture a structured binding
    const auto example =
        std::find_if(result.plans.begin(), result.plans.end(), [&reason](const EvaluatedPlan& p) {
          return (p.status == PlanStatus::kInvalid || p.status == PlanStatus::kOutOfMemory) &&
                 p.reason == reason;
        });
    if (reason == "memory") {
      const auto smallest = std::min_element(result.plans.begin(), result.plans.end(),
                                             [](const EvaluatedPlan& a, const EvaluatedPlan& b) {
                                               const auto key = [](const EvaluatedPlan& p) {
                                                 return p.status == PlanStatus::kOutOfMemory
                                                            ? p.memory_bytes
                                                            : std::numeric_limits<int64_t>::max();
                                               };
                                               return key(a) < key(b);
                                             });
      parts.push_back(fmt::format(
          "{} do not fit in memory (the smallest needs {} per GPU, {} has {})", count,
          FormatGiB(smallest->memory_bytes), base.gpu.name, FormatGiB(base.gpu.memory.count())));
    } else {
      parts.push_back(
          fmt::format("{} fail the check of {} (e.g. {})", count, reason, example->detail));
    }
  }
  if (const size_t failed = result.Count(PlanStatus::kFailed); failed > 0) {
    const auto example =
        std::find_if(result.plans.begin(), result.plans.end(),
                     [](const EvaluatedPlan& p) { return p.status == PlanStatus::kFailed; });
    parts.push_back(fmt::format("{} failed to simulate (e.g. {})", failed, example->detail));
  }
  return Error(fmt::format("no plan survives: of {} plans{}, {}", result.plans.size(),
                           result.plans.size() == result.enumerated ? "" : " in this shard",
                           parts.empty() ? "none were enumerated"
                                         : fmt::format("{}", fmt::join(parts, "; "))),
               "search", std::to_string(result.plans.size()));
}

}  // namespace dtsim::strategies
