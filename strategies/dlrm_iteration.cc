#include "strategies/dlrm_iteration.h"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "sim/graph/builder.h"
#include "strategies/embedding_sharding.h"
#include "strategies/gradient_reduction.h"

namespace dtsim::strategies {
namespace {

using graph::TaskId;
using models::Op;

// The part of the model an op belongs to: the first part of its name ("bottom", "interaction",
// "top", "loss", "embedding").
std::string_view DlrmPart(std::string_view name) { return name.substr(0, name.find('.')); }

struct PricedPart {
  std::vector<Op> ops;
  std::vector<DurationNs> durations;
  double model_flops = 0;
};

class DlrmBuilder {
 public:
  DlrmBuilder(const ResolvedConfig& config, const models::OpCostModel& cost)
      : config_(config),
        cost_(cost),
        spec_(config.model.dlrm),
        ranks_(config.plan.data),
        layout_(LayoutEmbeddings(spec_, config.plan.embedding_sharding, ranks_,
                                 config.training.micro_batch, config.training.dtype,
                                 config.cluster.gpus_per_node)) {
    if (config.ranks == RanksMode::kSymmetric) {
      // Rank 0 stands for every rank, with the busiest one's tables: the rank a result's
      // breakdown reads, doing the work every rank waits for at the exchanges.
      simulated_ = {0};
    } else {
      simulated_.resize(static_cast<size_t>(ranks_));
      std::iota(simulated_.begin(), simulated_.end(), 0);
    }
    logical_.resize(static_cast<size_t>(ranks_));
    std::iota(logical_.begin(), logical_.end(), 0);
  }

  Expected<IterationGraph> Build() {
    const TrainingConfig& training = config_.training;
    const models::LayerOps dense = models::DlrmOps(spec_, training.micro_batch, training.dtype);
    DTSIM_ASSIGN_OR_RETURN(bottom_forward_, Price(dense.forward, true, "bottom"));
    DTSIM_ASSIGN_OR_RETURN(top_forward_, Price(dense.forward, false, "bottom"));
    DTSIM_ASSIGN_OR_RETURN(top_backward_, Price(dense.backward, false, "bottom"));
    DTSIM_ASSIGN_OR_RETURN(bottom_backward_, Price(dense.backward, true, "bottom"));
    const double state_bytes = models::OptimizerStateBytes(training.optimizer, training.param_dtype,
                                                           training.optimizer_state);
    // Every rank's embedding work: the simulated ranks' tasks and the iteration's FLOPs.
    std::vector<PricedPart> embedding_forward(static_cast<size_t>(ranks_));
    std::vector<PricedPart> embedding_backward(static_cast<size_t>(ranks_));
    for (int r = 0; r < ranks_; ++r) {
      const models::LayerOps bags = models::DlrmEmbeddingOps(
          spec_, layout_.ranks[static_cast<size_t>(r)].lookups, training.dtype, state_bytes);
      DTSIM_ASSIGN_OR_RETURN(embedding_forward[static_cast<size_t>(r)],
                             Price(bags.forward, false, ""));
      DTSIM_ASSIGN_OR_RETURN(embedding_backward[static_cast<size_t>(r)],
                             Price(bags.backward, false, ""));
    }
    const int64_t microbatches = config_.Microbatches();
    std::vector<std::vector<TaskId>> ready(simulated_.size());
    for (int64_t microbatch = 0; microbatch < microbatches; ++microbatch) {
      const bool last = microbatch == microbatches - 1;
      const Exchanges exchanges = NewExchanges();
      for (size_t s = 0; s < simulated_.size(); ++s) {
        const int32_t rank = simulated_[s];
        const auto work = static_cast<size_t>(simulated_.size() == 1 ? layout_.busiest : rank);
        MicroBatch(rank, embedding_forward[work], embedding_backward[work], exchanges,
                   last ? &ready[s] : nullptr);
      }
    }
    Tally(embedding_forward, embedding_backward, microbatches);
    return Finish(ready);
  }

 private:
  // A micro-batch's exchanges over every rank, each posted by every simulated rank; none where
  // there is nothing to send (one rank, or no tables of the kind).
  struct Exchanges {
    std::optional<graph::CommId> indices, pooled, summed, gradients, gathered;
    // Table-row-wise: per node (the reduce-scatter, the all-gather) and per local index (the
    // all-to-alls across nodes), for the groups a simulated rank is in.
    std::map<int, graph::CommId> node_summed, node_gathered, across, across_back;
  };
  // The ops of `ops` in (or, `inside` false, out of) the segment `segment`, embedding bags left
  // out unless `segment` is empty (then every op), with their prices.
  Expected<PricedPart> Price(const std::vector<Op>& ops, bool inside, std::string_view segment) {
    PricedPart priced;
    for (const Op& op : ops) {
      const std::string_view part = DlrmPart(op.name);
      if (!segment.empty() && (part == "embedding" || (part == segment) != inside)) continue;
      DTSIM_ASSIGN_OR_RETURN(const models::OpCost cost, cost_.PriceOrError(op));
      priced.ops.push_back(op);
      priced.durations.push_back(cost.duration);
      priced.model_flops += op.model_flops;
      costs_.push_back(cost);
    }
    return priced;
  }

  // One micro-batch on `rank`: bottom MLP forward while its indices go to the tables; its
  // tables' lookups; the pooled embeddings back; interaction, top MLP and loss, and back; the
  // pooled gradients to the tables while the bottom MLP's backward runs; the tables' updates.
  void MicroBatch(int32_t rank, const PricedPart& bags, const PricedPart& updates,
                  const Exchanges& exchanges, std::vector<TaskId>* ready) {
    const graph::StreamId compute = RoleStream(builder_, rank, StreamRole::kCompute);
    const graph::StreamId exchange = RoleStream(builder_, rank, StreamRole::kExpert);
    Emit(compute, bottom_forward_, "fwd", nullptr);
    const std::optional<TaskId> indices =
        Post(exchange, exchanges.indices, "indices all-to-all", std::nullopt);
    const TaskId lookups = Work(compute, bags, "embedding fwd", indices);
    // On the in-order exchange stream each waits for the one before: the last ends them all.
    const int node = rank / layout_.ranks_per_node;
    const int local = rank % layout_.ranks_per_node;
    const std::optional<TaskId> pooled =
        PostChain(exchange, lookups,
                  {{exchanges.pooled, "pooled all-to-all"},
                   {exchanges.summed, "pooled reduce-scatter"},
                   {Find(exchanges.node_summed, node), "pooled node reduce-scatter"},
                   {Find(exchanges.across, local), "pooled all-to-all across nodes"}});
    const TaskId interaction = Emit(compute, top_forward_, "fwd", nullptr).first;
    if (pooled) builder_.AddDependency(interaction, *pooled);
    const TaskId dense_backward = Emit(compute, top_backward_, "bwd", ready).second;
    const std::optional<TaskId> gradients =
        PostChain(exchange, dense_backward,
                  {{exchanges.gradients, "gradient all-to-all"},
                   {exchanges.gathered, "gradient all-gather"},
                   {Find(exchanges.across_back, local), "gradient all-to-all across nodes"},
                   {Find(exchanges.node_gathered, node), "gradient node all-gather"}});
    Emit(compute, bottom_backward_, "bwd", ready);
    const TaskId update = Work(compute, updates, "embedding bwd", gradients);
    if (ready != nullptr && layout_.replicated_parameters > 0) ready->push_back(update);
  }

  Exchanges NewExchanges() {
    const auto make = [this](graph::CommKind kind, Bytes bytes) -> std::optional<graph::CommId> {
      if (bytes.count() <= 0 || ranks_ == 1) return std::nullopt;
      const auto [members, priced] = Subgroup(0, 1, ranks_);
      return builder_.AddCollective(kind, bytes, members, priced);
    };
    Exchanges exchanges{
        .indices = make(graph::CommKind::kAllToAll, layout_.index_all_to_all),
        .pooled = make(graph::CommKind::kAllToAll, layout_.output_all_to_all),
        .summed = make(graph::CommKind::kReduceScatter, layout_.output_reduce_scatter),
        .gradients = make(graph::CommKind::kAllToAll, layout_.output_all_to_all),
        .gathered = make(graph::CommKind::kAllGather, layout_.gradient_all_gather),
        .node_summed = {},
        .node_gathered = {},
        .across = {},
        .across_back = {}};
    // The subgroups of the simulated ranks, each over its whole logical group.
    const int per_node = layout_.ranks_per_node;
    for (const int32_t rank : simulated_) {
      const int node = rank / per_node;
      const int local = rank % per_node;
      if (per_node > 1 && layout_.node_reduce_scatter.count() > 0 &&
          !exchanges.node_summed.contains(node)) {
        const auto [members, priced] = Subgroup(node * per_node, 1, per_node);
        exchanges.node_summed[node] = builder_.AddCollective(
            graph::CommKind::kReduceScatter, layout_.node_reduce_scatter, members, priced);
        exchanges.node_gathered[node] = builder_.AddCollective(
            graph::CommKind::kAllGather, layout_.node_all_gather, members, priced);
      }
      if (layout_.cross_node_all_to_all.count() > 0 && !exchanges.across.contains(local)) {
        const auto [members, priced] = Subgroup(local, per_node, ranks_ / per_node);
        exchanges.across[local] = builder_.AddCollective(
            graph::CommKind::kAllToAll, layout_.cross_node_all_to_all, members, priced);
        exchanges.across_back[local] = builder_.AddCollective(
            graph::CommKind::kAllToAll, layout_.cross_node_all_to_all, members, priced);
      }
    }
    return exchanges;
  }

  // The group of `count` ranks from `first`, `stride` apart: its simulated members and all of it.
  std::pair<graph::GroupId, graph::GroupId> Subgroup(int first, int stride, int count) {
    const auto key = std::tuple(first, stride, count);
    if (const auto found = subgroups_.find(key); found != subgroups_.end()) return found->second;
    std::vector<int32_t> logical, members;
    for (int i = 0; i < count; ++i) {
      const int32_t rank = first + i * stride;
      logical.push_back(rank);
      if (std::find(simulated_.begin(), simulated_.end(), rank) != simulated_.end()) {
        members.push_back(rank);
      }
    }
    const std::pair<graph::GroupId, graph::GroupId> groups = {builder_.MakeGroup(members),
                                                              builder_.MakeGroup(logical)};
    subgroups_.emplace(key, groups);
    return groups;
  }

  static std::optional<graph::CommId> Find(const std::map<int, graph::CommId>& comms, int key) {
    const auto found = comms.find(key);
    return found == comms.end() ? std::nullopt : std::optional<graph::CommId>(found->second);
  }

  // The exchanges of `chain` that exist, each posted after `after`; the last posted (on the
  // in-order stream it ends after all of them), none when none exists.
  std::optional<TaskId> PostChain(
      graph::StreamId stream, TaskId after,
      std::initializer_list<std::pair<std::optional<graph::CommId>, std::string_view>> chain) {
    std::optional<TaskId> last;
    for (const auto& [comm, name] : chain) {
      if (const std::optional<TaskId> posted = Post(stream, comm, name, after)) last = posted;
    }
    return last;
  }

  // `rank`'s part in `comm` on the exchange stream after `after`.
  std::optional<TaskId> Post(graph::StreamId stream, std::optional<graph::CommId> comm,
                             std::string_view name, std::optional<TaskId> after) {
    if (!comm) return std::nullopt;
    const TaskId task = builder_.AddCollectiveTask(stream, *comm, name, kExpertCategory);
    if (after) builder_.AddDependency(task, *after);
    return task;
  }

  // The embedding bags (or updates) of a rank as one task, after `after`.
  TaskId Work(graph::StreamId stream, const PricedPart& priced, std::string_view name,
              std::optional<TaskId> after) {
    const DurationNs total =
        std::accumulate(priced.durations.begin(), priced.durations.end(), DurationNs::Zero());
    const TaskId task =
        builder_.AddTask(stream, graph::TaskKind::kCompute, name, kComputeCategory, total);
    if (after) builder_.AddDependency(task, *after);
    return task;
  }

  // Compute tasks, one per segment; with `ready`, a task also ends at each weight gradient
  // (final there) and is recorded. Returns the first task and the last.
  std::pair<TaskId, TaskId> Emit(graph::StreamId stream, const PricedPart& priced,
                                 std::string_view suffix, std::vector<TaskId>* ready) {
    std::optional<TaskId> first;
    DurationNs pending;
    std::string_view segment;
    std::optional<TaskId> last;
    const auto flush = [&] {
      if (pending == DurationNs::Zero() && last) return;
      last = builder_.AddTask(stream, graph::TaskKind::kCompute,
                              fmt::format("{} {}", segment, suffix), kComputeCategory, pending);
      if (!first) first = last;
      pending = DurationNs::Zero();
    };
    for (size_t i = 0; i < priced.ops.size(); ++i) {
      const std::string_view op_segment = DlrmPart(priced.ops[i].name);
      if (op_segment != segment && !segment.empty()) flush();
      segment = op_segment;
      pending += priced.durations[i];
      if (ready != nullptr && priced.ops[i].weight_gemm == Op::WeightGemm::kWgrad) {
        flush();
        ready->push_back(*last);
      }
    }
    flush();
    return {*first, *last};
  }

  // FLOPs and compute sources of every rank (simulated or not) over the iteration.
  void Tally(const std::vector<PricedPart>& bags, const std::vector<PricedPart>& updates,
             int64_t microbatches) {
    const auto m = static_cast<double>(microbatches);
    double flops = bottom_forward_.model_flops + top_forward_.model_flops +
                   top_backward_.model_flops + bottom_backward_.model_flops;
    flops *= ranks_;
    for (int r = 0; r < ranks_; ++r) {
      flops +=
          bags[static_cast<size_t>(r)].model_flops + updates[static_cast<size_t>(r)].model_flops;
    }
    result_.model_flops = flops * m;
    result_.hardware_flops = result_.model_flops;
    // Dense ops run on every rank; each rank's bags once each (priced in Price's order).
    const size_t dense = bottom_forward_.ops.size() + top_forward_.ops.size() +
                         top_backward_.ops.size() + bottom_backward_.ops.size();
    for (size_t i = 0; i < costs_.size(); ++i) {
      result_.sources.Add(costs_[i], static_cast<int64_t>(m * (i < dense ? ranks_ : 1)));
    }
  }

  Expected<IterationGraph> Finish(const std::vector<std::vector<TaskId>>& ready) {
    std::vector<GradientTensors> points = DlrmGradientPoints(spec_);
    if (layout_.replicated_parameters > 0) {
      points.push_back({.matrices = {}, .vector_elements = layout_.replicated_parameters});
    }
    DTSIM_CHECK(ready.front().size() == points.size(),
                "a DLRM's weight-gradient GEMMs and its gradient points must pair up");
    GradientReducer reducer(config_, cost_, CompressionPhase::kCompressed, builder_,
                            result_.sources);
    ReductionGroup group{
        .simulated = simulated_, .logical = logical_, .ready = {}, .represented = ranks_};
    for (const std::vector<TaskId>& rank_ready : ready) group.ready.emplace_back(rank_ready);
    DTSIM_RETURN_IF_ERROR(ReduceAndStep(reducer, points, group));
    DTSIM_ASSIGN_OR_RETURN(graph::TaskGraph graph, std::move(builder_).Build());
    return IterationGraph{std::move(graph), std::move(result_)};
  }

  const ResolvedConfig& config_;
  const models::OpCostModel& cost_;
  const models::DlrmSpec& spec_;
  int ranks_;
  EmbeddingLayout layout_;
  std::vector<int32_t> simulated_;
  std::vector<int32_t> logical_;
  std::map<std::tuple<int, int, int>, std::pair<graph::GroupId, graph::GroupId>> subgroups_;
  PricedPart bottom_forward_, top_forward_, top_backward_, bottom_backward_;
  std::vector<models::OpCost> costs_;
  graph::TaskGraphBuilder builder_;
  IterationStats result_;
};

}  // namespace

std::vector<GradientTensors> DlrmGradientPoints(const models::DlrmSpec& spec) {
  std::vector<GradientTensors> points;
  const auto chain = [&points](int64_t input, const std::vector<int64_t>& widths) {
    std::vector<GradientTensors> layers;
    for (const int64_t width : widths) {
      layers.push_back({.matrices = {{width, input}}, .vector_elements = width});
      input = width;
    }
    points.insert(points.end(), layers.rbegin(), layers.rend());
  };
  chain(spec.InteractionWidth(), spec.top_mlp);
  chain(spec.dense_features, spec.bottom_mlp);
  return points;
}

Expected<IterationGraph> BuildDlrmIteration(const ResolvedConfig& config,
                                            const models::OpCostModel& cost) {
  return DlrmBuilder(config, cost).Build();
}

}  // namespace dtsim::strategies
