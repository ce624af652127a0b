#include "strategies/diloco_sync.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "sim/base/dtype.h"
#include "sim/base/strings.h"
#include "sim/graph/builder.h"
#include "strategies/categories.h"
#include "strategies/compression.h"

namespace dtsim::strategies {
namespace {

// A byte count computed in floating point, rounded up and kept within int64 (a size nobody can
// move saturates, as ClampedNs saturates a time).
Bytes CeilBytes(double bytes) {
  constexpr double kLimit = 9223372036854775807.0;
  return Bytes(bytes < kLimit ? static_cast<int64_t>(std::ceil(bytes))
                              : std::numeric_limits<int64_t>::max());
}

// An error about one of the section's keys.
Error DilocoError(std::string message, std::string_view key, std::string value) {
  return Error(std::move(message), fmt::format("diloco.{}", key), std::move(value));
}

}  // namespace

Status CheckDiloco(const SimulationConfig& config) {
  if (!config.diloco || config.diloco->replica) return Status::Ok();
  const DilocoConfig& diloco = *config.diloco;
  const std::string replicas = std::to_string(diloco.replicas);
  const ParallelPlan& plan = config.plan;
  if (config.model.family == models::ModelFamily::kDlrm) {
    return DilocoError(
        "a DLRM's embedding tables are sharded over every rank, not replicated: "
        "DiLoCo replicates the model in each replica",
        "replicas", replicas);
  }
  if (plan.data % diloco.replicas != 0) {
    return DilocoError(
        fmt::format("the {} data-parallel ranks (parallelism.data) must split evenly "
                    "into the replicas",
                    plan.data),
        "replicas", replicas);
  }
  if (config.cluster.nodes % diloco.replicas != 0) {
    return DilocoError(fmt::format("each replica runs on whole nodes: the cluster's {} nodes must "
                                   "split evenly into the replicas",
                                   config.cluster.nodes),
                       "replicas", replicas);
  }
  const network::InterTopology topology = config.cluster.inter.topology;
  if (topology != network::InterTopology::kFatTree &&
      topology != network::InterTopology::kRailOptimized) {
    return DilocoError(
        "the replicas split a fat-tree or rail-optimized fabric's nodes; a ring's or "
        "torus's share would not be one (a replica's own network is not built)",
        "replicas", replicas);
  }
  if (plan.experts_apart()) {
    return DilocoError(
        "DiLoCo with expert parallelism is not built yet (the experts' outer state "
        "would be sharded over the expert-data-parallel group)",
        "replicas", replicas);
  }
  if (MakeCompression(config.compression)->Compresses()) {
    return DilocoError(fmt::format("DiLoCo with gradient compression (\"{}\") is not built yet",
                                   config.compression.method),
                       "replicas", replicas);
  }
  if (plan.gradient_sync != GradientSync::kAllReduce) {
    return DilocoError(
        "DiLoCo's replicas reduce their gradients with NCCL collectives; parameter "
        "servers are not built with it",
        "replicas", replicas);
  }
  return Status::Ok();
}

Expected<ResolvedConfig> DilocoReplica(const ResolvedConfig& job) {
  const int m = job.diloco->replicas;
  SimulationConfig replica = job;
  replica.plan.data /= m;
  replica.training.global_batch /= m;
  replica.cluster.nodes /= m;
  replica.time_to_train.reset();
  replica.diloco->replica = true;
  Expected<ResolvedConfig> resolved = Resolve(replica);
  if (resolved.ok()) return resolved;
  const Error& error = resolved.error();
  return Error(fmt::format("one DiLoCo replica ({} data-parallel ranks on {} nodes) cannot run: {}",
                           replica.plan.data, replica.cluster.nodes, error.message()),
               error.location(), error.value());
}

int OuterShards(const SimulationConfig& config) {
  const int indices = config.plan.DataIndices();
  return config.diloco && !config.diloco->replica ? indices / config.diloco->replicas : indices;
}

int64_t OuterShare(const SimulationConfig& config, int64_t parameter_count) {
  const int64_t parts = int64_t{OuterShards(config)} * config.diloco->fragments;
  return (parameter_count + parts - 1) / parts;
}

int64_t OuterStateBytes(const SimulationConfig& config, int64_t parameter_count) {
  const int64_t shard = (parameter_count + OuterShards(config) - 1) / OuterShards(config);
  const int64_t per_parameter = config.diloco->outer_state == OuterState::kGpu ? 8 : 4;
  return per_parameter * shard;
}

Expected<graph::TaskGraph> OuterSyncGraph(const ResolvedConfig& job, const ResolvedConfig& replica,
                                          int stage, int64_t parameter_count) {
  const DilocoConfig& diloco = *job.diloco;
  const int shards = OuterShards(replica);
  const auto shard = static_cast<double>(OuterShare(replica, parameter_count));
  const ParallelPlan& plan = replica.plan;
  const int32_t rank = plan.Rank(0, stage, 0);
  graph::TaskGraphBuilder builder;
  const graph::StreamId stream = RoleStream(builder, rank, StreamRole::kCompute);
  // The fp32 outer copy of the shard, over the GPU's host link each way.
  const bool host = diloco.outer_state == OuterState::kHost;
  const DurationNs copy = TransferTime(CeilBytes(4 * shard), job.gpu.host_bandwidth);
  if (host) {
    builder.AddTask(stream, graph::TaskKind::kMemcpy, "outer copy in", kOptimizerCategory, copy);
  }
  if (!diloco.link) {
    // Its counterparts in the other replicas, W/M ranks apart.
    std::vector<int32_t> outer;
    outer.reserve(static_cast<size_t>(diloco.replicas));
    for (int m = 0; m < diloco.replicas; ++m) outer.push_back(rank + m * plan.world());
    const std::vector<int32_t> self = {rank};
    const graph::CommId comm =
        builder.AddCollective(graph::CommKind::kAllReduce,
                              CeilBytes(shard * OuterPrecisionBytes(diloco.precision)), self);
    builder.PriceAs(comm, outer);
    builder.AddCollectiveTask(stream, comm, "outer all-reduce", kDataCategory);
  }
  // The Nesterov step, memory-bound: the parameter and the outer gradient read and written,
  // the fp32 outer copy read and written, the fp32 momentum read and written.
  const double param_bytes = DTypeBytes(job.training.param_dtype);
  const double update_bytes =
      shard * (2 * param_bytes + 2 * OuterPrecisionBytes(diloco.precision) + 16);
  builder.AddTask(stream, graph::TaskKind::kCompute, "outer update", kOptimizerCategory,
                  TransferTime(CeilBytes(update_bytes), job.gpu.memory_bandwidth));
  if (host) {
    builder.AddTask(stream, graph::TaskKind::kMemcpy, "outer copy out", kOptimizerCategory, copy);
  }
  if (plan.zero_stage < 3 && shards > 1) {
    std::vector<int32_t> members;
    members.reserve(static_cast<size_t>(plan.DataIndices()));
    for (int dp = 0; dp < plan.DataIndices(); ++dp) members.push_back(plan.Rank(dp, stage, 0));
    const std::vector<int32_t> self = {rank};
    const graph::CommId comm =
        builder.AddCollective(graph::CommKind::kAllGather, CeilBytes(shard * param_bytes), self);
    builder.PriceAs(comm, members);
    builder.AddCollectiveTask(stream, comm, "outer all-gather", kDataCategory);
  }
  return std::move(builder).Build();
}

DurationNs SiteAllReduce(const DilocoConfig& diloco, double site_bytes) {
  const double m = diloco.replicas;
  return TransferTime(CeilBytes(2 * (m - 1) / m * site_bytes), diloco.link->bandwidth) +
         diloco.link->latency * (2 * (int64_t{diloco.replicas} - 1));
}

DurationNs ExposedSynchronization(const DilocoConfig& diloco, DurationNs synchronization,
                                  DurationNs inner_step) {
  const DurationNs hidden = inner_step * diloco.overlap_steps;
  return synchronization > hidden ? synchronization - hidden : DurationNs::Zero();
}

}  // namespace dtsim::strategies
