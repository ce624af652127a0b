// Internal to the replay graph builder (traces/replay_graph.cc): what the builders of a job's
// traces share — the graph builder, the graph ranks, the collectives matched across traces and
// the CommIds made for them — and the tasks a GPU op becomes in a replay graph.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/graph/builder.h"
#include "traces/job_collectives.h"
#include "traces/replay_graph.h"
#include "traces/trace.h"

namespace dtsim::traces::replay_detail {

// The job's collectives as the graph's CommIds, shared by the builders of its traces.
struct CommTable {
  std::vector<DurationNs> durations;  // measured, by CommId
  std::vector<CommSource> sources;    // by CommId
  // (JobCollectives index, 0 for the collective or 1 + k for a rewrite's k-th step) → CommId.
  std::map<std::pair<uint32_t, size_t>, graph::CommId> shared;
};

// What the builders of a job's traces share.
struct JobContext {
  std::vector<int32_t> ranks;  // graph rank per job index
  bool global_ranks = false;   // whether they are the traces' distributedInfo ranks
  JobCollectives collectives;
  graph::TaskGraphBuilder builder;
  CommTable comms;
};

// The tasks a GPU op becomes, what-ifs applied: a kernel, copy or set with its (sped-up)
// duration; an NCCL collective over its (rescaled) group with its measured duration kept for
// the measured replay — or, shared with other traces of the job, its transfer — or the chain a
// rewrite what-if replaces it by.
class DeviceOpTasks {
 public:
  DeviceOpTasks(const Trace& trace, uint32_t job_index, const ReplayOptions& options,
                JobContext& job, ReplayStats& stats)
      : trace_(trace),
        job_index_(job_index),
        options_(options),
        job_(&job),
        builder_(&job.builder),
        stats_(&stats) {}

  // The task of a GPU op; for a collective a what-if rewrote, the last of its chain, the first
  // going to `chain_first`.
  graph::TaskId Add(graph::StreamId stream, const DeviceEvent& op, graph::TaskId& chain_first);

 private:
  // A collective over `group_size` ranks: this trace's own, or (`shared` a JobCollectives
  // index) the one its members post, made by the first — `step` tells a rewrite's steps apart.
  graph::CommId Collective(graph::CommKind kind, Bytes bytes, std::string_view name,
                           uint32_t shared, size_t step, int32_t group_size,
                           std::span<const int32_t> known);

  graph::TaskId RewriteChain(graph::StreamId stream, std::string_view name,
                             const std::vector<CollectiveRewriteStep>& steps, uint32_t shared,
                             int32_t group_size, graph::TaskId& chain_first);

  // The op's measured duration, divided by the first speedup whose class it belongs to.
  DurationNs Duration(const DeviceEvent& op);

  // The global ranks the trace records for a collective's group, when the graph's ranks are
  // global ranks and the group keeps its traced size.
  std::span<const int32_t> KnownRanks(const CollectiveInfo& info) const;

  int32_t PricedGroupSize(const CollectiveInfo& info) const;

  const Trace& trace_;
  uint32_t job_index_;
  const ReplayOptions& options_;
  JobContext* job_;
  graph::TaskGraphBuilder* builder_;
  ReplayStats* stats_;
};

}  // namespace dtsim::traces::replay_detail
