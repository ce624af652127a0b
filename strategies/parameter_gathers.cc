#include "strategies/parameter_gathers.h"

#include <fmt/format.h>

#include <algorithm>

#include "models/parameters.h"
#include "strategies/categories.h"
#include "strategies/layer_gradients.h"

namespace dtsim::strategies {

using graph::CommKind;
using graph::TaskId;

ParameterGathers::ParameterGathers(graph::TaskGraphBuilder& builder, const ResolvedConfig& config,
                                   const models::OpCostModel& cost, StageCollectives& collectives)
    : builder_(builder), config_(config), cost_(cost), collectives_(collectives) {
  if (SynchronizedZero3(config)) deepspeed_.emplace(config);
}

bool ParameterGathers::Gathers(const SimulationConfig& config) {
  return config.plan.zero_stage >= 3 && config.plan.WeightReplicas() >= 2;
}

// torchtitan turns reshard_after_forward off under pipelining, and PyTorch's pipeline stages
// turn resharding after backward off but for the last micro-batch (torchtitan's parallelize
// and torch.distributed.pipelining's _PipelineStageBase).
bool ParameterGathers::KeepsGathered(const SimulationConfig& config) {
  return Gathers(config) && config.training.framework == models::Framework::kPyTorch &&
         config.plan.pipeline > 1;
}

bool ParameterGathers::NeedsGather(size_t key) {
  if (!Gathers()) return false;
  if (!KeepsGathered(config_)) return true;
  if (gathered_.size() <= key) gathered_.resize(key + 1, false);
  if (gathered_[key]) return false;
  gathered_[key] = true;
  return true;
}

bool ParameterGathers::KeptSinceForward(bool backward) const {
  return backward && config_.training.framework == models::Framework::kPyTorch &&
         !config_.training.reshard_after_forward;
}

void ParameterGathers::Embedding(PeerGroup& group, bool backward) {
  if (deepspeed_) return GatherEach(group, 0, backward, "embedding gather");
  if (KeptSinceForward(backward) || !NeedsGather(0)) return;
  Gather(group, EmbeddingGradients(config_.model.transformer, config_.plan).elements(),
         "embedding gather");
}

// A layer's parameters on one rank are as many as its gradients; with expert parallelism its
// local experts' are gathered apart.
void ParameterGathers::Layer(PeerGroup& group, int layer, bool backward) {
  if (deepspeed_) {
    return GatherEach(group, 2 + static_cast<size_t>(layer), backward,
                      fmt::format("layer{} gather", layer));
  }
  if (KeptSinceForward(backward) || !NeedsGather(2 + static_cast<size_t>(layer))) return;
  const models::TransformerSpec& spec = config_.model.transformer;
  const ParallelPlan& plan = config_.plan;
  const int64_t parameters =
      plan.on_grid()
          ? LayerGradients(spec, plan, layer).dense.elements()
          : models::LayerParameterCount(spec, plan.tensor, plan.expert, plan.ExpertTensor(), layer);
  const int64_t experts =
      plan.experts_apart() ? LayerGradients(spec, plan, layer).experts.elements() : 0;
  Gather(group, parameters, fmt::format("layer{} gather", layer), experts);
}

void ParameterGathers::Output(PeerGroup& group, int stage, bool backward) {
  if (deepspeed_) return GatherEach(group, 1, backward, "output gather");
  if (KeptSinceForward(backward) || !NeedsGather(1)) return;
  const models::TransformerSpec& spec = config_.model.transformer;
  Gather(group, OutputGradients(spec, config_.plan, stage).elements(), "output gather");
}

// The gather for the next piece may start once the compute before the current one has ended,
// and the piece's first task waits for its own gather. With expert parallelism a MoE layer's
// local experts (`expert_parameters` of `parameters`) are sharded over their
// expert-data-parallel group instead (D/EP ranks, t·D/EP under MoE parallel folding, as
// ZeRO-1/2 shard their optimizer state and gradients): a second gather over that group follows the
// dense one on the same stream.
void ParameterGathers::Gather(PeerGroup& group, int64_t parameters, std::string_view name,
                              int64_t expert_parameters) {
  const ParallelPlan& plan = config_.plan;
  const int replicas = plan.WeightReplicas();
  const int64_t dense = parameters - expert_parameters;
  const int64_t element_bytes = DTypeBytes(config_.training.dtype);
  std::vector<std::vector<graph::CommId>> pieces;
  pieces.push_back(collectives_.Matched(StageCollectives::Across::kData, CommKind::kAllGather,
                                        Bytes((dense + replicas - 1) / replicas * element_bytes)));
  const int expert_data = plan.ExpertData();
  if (expert_parameters > 0 && expert_data > 1) {
    pieces.push_back(collectives_.Matched(
        StageCollectives::Across::kExpertData, CommKind::kAllGather,
        Bytes((expert_parameters + expert_data - 1) / expert_data * element_bytes)));
  }
  group.Flush();
  std::vector<TaskId> gathers;
  for (size_t i = 0; i < group.ranks().size(); ++i) {
    const graph::StreamId stream = RoleStream(builder_, group.ranks()[i], StreamRole::kZero);
    const TaskId gather =
        builder_.AddCollectiveTask(stream, pieces.front()[i], name, kDataCategory);
    if (!after_.empty() && after_[i]) builder_.AddDependency(gather, *after_[i]);
    // The experts' gather runs after the dense one on the same stream: waiting for it is
    // waiting for both.
    gathers.push_back(pieces.size() > 1 ? builder_.AddCollectiveTask(
                                              stream, pieces.back()[i],
                                              fmt::format("{} experts", name), kDataCategory)
                                        : gather);
  }
  after_.clear();
  for (size_t i = 0; i < group.ranks().size(); ++i) after_.push_back(group.last(i));
  group.WaitBefore(gathers);
}

DurationNs ParameterGathers::Priced(const models::Op& op) const {
  // An op-cost table holds no such copies: the roofline prices what the table cannot.
  const std::optional<models::OpCost> priced = cost_.Price(op);
  const models::OpCost price =
      priced ? *priced
             : models::RooflineCostModel(config_.gpu).Price(op).value_or(models::OpCost{});
  return price.duration;
}

DurationNs ParameterGathers::ListCopies(int64_t part_elements) const {
  return Priced(ListApiCopy(part_elements, config_.training.dtype, models::Pass::kForward)) *
         config_.plan.WeightReplicas();
}

// Each gather then its copies, on the compute stream: the synchronize before and after every
// gather keeps compute from overlapping it. Its buffer is zeroed, then the host builds the
// list of parts (the GPU idle), launches the gather, then issues the copies while it runs: the
// last copy ends max(gather's end + the copies, launch + the host's copies), within one copy.
void ParameterGathers::GatherEach(PeerGroup& group, size_t piece, bool backward,
                                  std::string_view name) {
  const int64_t replicas = config_.plan.WeightReplicas();
  const int64_t element_bytes = DTypeBytes(config_.training.dtype);
  const ListApiHost host = GatherHost(static_cast<int>(replicas), config_.gpu);
  for (const int64_t elements : deepspeed_->At(piece, backward)) {
    const int64_t part = (elements + replicas - 1) / replicas;
    const DurationNs copies = ListCopies(part);
    group.Add(
        Priced(GatherBufferZeros(part * replicas, config_.training.dtype, models::Pass::kForward)),
        "gather buffer zeros", kDataCategory);
    group.Host(host.loop, "gather list (host)", kDataCategory);
    group.PostBeside(collectives_.Matched(StageCollectives::Across::kData, CommKind::kAllGather,
                                          Bytes(part * element_bytes)),
                     name, kDataCategory, std::max(DurationNs::Zero(), host.copies - copies),
                     "gather list-API copies issued (host)");
    group.Add(copies, "gather list-API copies", kDataCategory);
  }
}

void ParameterGathers::ReduceEach(PeerGroup& group, const GradientTensors& gradients, bool layer) {
  if (!deepspeed_) return;
  const int64_t replicas = config_.plan.WeightReplicas();
  const int64_t grad_bytes = DTypeBytes(config_.training.grad_dtype);
  // The host builds the list (the GPU idle), then issues the copies one by one, the GPU running
  // each as it comes: they end max(the host's copies, the GPU's) after the list, within one
  // copy. Then the host launches the reduce-scatter.
  const ListApiHost host = ReduceScatterHost(static_cast<int>(replicas), config_.gpu);
  for (const int64_t elements : ParameterTensors(config_.model.transformer, gradients, layer)) {
    const int64_t part = (elements + replicas - 1) / replicas;
    const DurationNs copies = ListCopies(part);
    group.Host(host.loop, "reduce-scatter list (host)", kDataCategory);
    group.Host(std::max(DurationNs::Zero(), host.copies - copies),
               "reduce-scatter list-API copies issued (host)", kDataCategory);
    group.Add(copies, "reduce-scatter list-API copies", kDataCategory);
    group.Post(collectives_.Matched(StageCollectives::Across::kData, CommKind::kReduceScatter,
                                    Bytes(part * replicas * grad_bytes)),
               "gradient reduce-scatter", kDataCategory);
  }
}

}  // namespace dtsim::strategies
