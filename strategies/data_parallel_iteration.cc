#include "strategies/data_parallel_iteration.h"

#include <fmt/format.h>

#include <numeric>
#include <string>

#include "models/resnet.h"
#include "sim/graph/builder.h"
#include "strategies/gradient_reduction.h"

namespace dtsim::strategies {
namespace {

using graph::TaskId;
using models::Op;

// The task an op lands in: "stage2.block0" for the ops of a bottleneck block, else the first
// part of its name ("stem", "avgpool", "fc", "loss").
std::string_view Segment(std::string_view name) {
  size_t end = name.find('.');
  if (name.starts_with("stage") && end != std::string_view::npos) end = name.find('.', end + 1);
  return name.substr(0, end);
}

struct PricedOps {
  std::vector<DurationNs> durations;
  double model_flops = 0;
};

}  // namespace

std::vector<GradientTensors> ResNetGradientPoints(const models::ResNetSpec& spec) {
  std::vector<GradientTensors> points;
  const int64_t features = models::ResNetFeatures(spec);
  points.push_back({.matrices = {{spec.classes, features}}, .vector_elements = spec.classes});
  const std::vector<models::ConvLayer> convs = models::ResNetConvs(spec);
  for (auto conv = convs.rbegin(); conv != convs.rend(); ++conv) {
    points.push_back(
        {.matrices = {{conv->out_channels, conv->in_channels * conv->kernel * conv->kernel}},
         .vector_elements = 2 * conv->out_channels});
  }
  return points;
}

namespace {

class DataParallelBuilder {
 public:
  DataParallelBuilder(const SimulationConfig& config, const models::OpCostModel& cost,
                      CompressionPhase phase)
      : config_(config),
        cost_(cost),
        phase_(phase),
        simulated_(config.ranks == RanksMode::kSymmetric ? 1 : config.plan.data) {}

  Expected<IterationGraph> Build() {
    const models::LayerOps ops = models::ResNetOps(
        config_.model.resnet, config_.training.micro_batch, config_.training.dtype);
    DTSIM_ASSIGN_OR_RETURN(const PricedOps forward, Price(ops.forward));
    DTSIM_ASSIGN_OR_RETURN(const PricedOps backward, Price(ops.backward));
    const int64_t microbatches = config_.Microbatches();
    const std::vector<GradientTensors> points = ResNetGradientPoints(config_.model.resnet);
    // Per simulated rank, where each gradient point is ready in the last backward.
    std::vector<std::vector<TaskId>> ready(static_cast<size_t>(simulated_));
    for (int32_t rank = 0; rank < simulated_; ++rank) {
      const graph::StreamId stream = RoleStream(builder_, rank, StreamRole::kCompute);
      for (int64_t microbatch = 0; microbatch < microbatches; ++microbatch) {
        const bool last = microbatch == microbatches - 1;
        Emit(stream, ops.forward, forward, "fwd", nullptr);
        Emit(stream, ops.backward, backward, "bwd",
             last ? &ready[static_cast<size_t>(rank)] : nullptr);
      }
    }
    // Every op runs on every rank for every micro-batch.
    const double uses = static_cast<double>(microbatches) * config_.plan.data;
    result_.model_flops = (forward.model_flops + backward.model_flops) * uses;
    result_.hardware_flops = result_.model_flops;
    for (const models::OpCost& source : sources_) {
      result_.sources.Add(source, static_cast<int64_t>(uses));
    }

    DTSIM_CHECK(ready.front().size() == points.size(),
                "a ResNet's weight-gradient GEMMs and its gradient points must pair up");
    GradientReducer reducer(config_, cost_, phase_, builder_, result_.sources);
    ReductionGroup group{
        .simulated = {}, .logical = {}, .ready = {}, .represented = config_.plan.data};
    group.logical.resize(static_cast<size_t>(config_.plan.data));
    std::iota(group.logical.begin(), group.logical.end(), 0);
    group.simulated.assign(group.logical.begin(), group.logical.begin() + simulated_);
    for (const std::vector<TaskId>& rank_ready : ready) group.ready.emplace_back(rank_ready);
    DTSIM_RETURN_IF_ERROR(ReduceAndStep(reducer, points, group));
    DTSIM_ASSIGN_OR_RETURN(graph::TaskGraph graph, std::move(builder_).Build());
    return IterationGraph{std::move(graph), std::move(result_)};
  }

 private:
  Expected<PricedOps> Price(const std::vector<Op>& ops) {
    PricedOps priced;
    for (const Op& op : ops) {
      DTSIM_ASSIGN_OR_RETURN(const models::OpCost cost, cost_.PriceOrError(op));
      priced.durations.push_back(cost.duration);
      priced.model_flops += op.model_flops;
      sources_.push_back(cost);
    }
    return priced;
  }

  // One pass as compute tasks, one per segment; with `ready`, the pass also ends a task at
  // each weight gradient and records it (the gradient is final there).
  void Emit(graph::StreamId stream, const std::vector<Op>& ops, const PricedOps& priced,
            std::string_view suffix, std::vector<TaskId>* ready) {
    DurationNs pending;
    std::string_view segment;
    auto flush = [&] {
      if (pending == DurationNs::Zero()) return;
      last_ = builder_.AddTask(stream, graph::TaskKind::kCompute,
                               fmt::format("{} {}", segment, suffix), kComputeCategory, pending);
      pending = DurationNs::Zero();
    };
    for (size_t i = 0; i < ops.size(); ++i) {
      const std::string_view op_segment = Segment(ops[i].name);
      if (op_segment != segment) {
        flush();
        segment = op_segment;
      }
      pending += priced.durations[i];
      if (ready != nullptr && ops[i].weight_gemm == Op::WeightGemm::kWgrad) {
        flush();
        ready->push_back(*last_);
      }
    }
    flush();
  }

  const SimulationConfig& config_;
  const models::OpCostModel& cost_;
  CompressionPhase phase_;
  int simulated_;
  graph::TaskGraphBuilder builder_;
  IterationStats result_;
  std::vector<models::OpCost> sources_;
  std::optional<TaskId> last_;
};

}  // namespace

Expected<IterationGraph> BuildDataParallelIteration(const ResolvedConfig& config,
                                                    const models::OpCostModel& cost,
                                                    CompressionPhase phase) {
  return DataParallelBuilder(config, cost, phase).Build();
}

}  // namespace dtsim::strategies
