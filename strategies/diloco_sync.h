// A DiLoCo job (strategies/diloco.h) under a plan: the checks, one replica's config — what its
// inner steps run — and the outer synchronization each fragment pays every `sync_every` steps
// (docs/diloco.md). The replicas are the outermost dimension of the rank order: replica m holds
// ranks m·W/M … (m+1)·W/M − 1, on whole nodes, each laid out as the plan's order says.
#pragma once

#include <cstdint>
#include <vector>

#include "models/memory.h"
#include "sim/base/status.h"
#include "sim/graph/task_graph.h"
#include "strategies/config.h"
#include "strategies/diloco.h"

namespace dtsim::strategies {

// The job's DiLoCo section against its plan, model and cluster: replicas dividing the
// data-parallel size and the nodes, no expert parallelism, no DLRM, no gradient compression or
// parameter servers. Errors name the field and the value.
Status CheckDiloco(const SimulationConfig& config);

// The config one replica trains with between synchronizations: data / M data-parallel ranks,
// global batch / M, nodes / M; its `diloco.replica` set.
Expected<ResolvedConfig> DilocoReplica(const ResolvedConfig& job);

// The data-parallel ranks of one replica that hold the same weights (and so share the outer
// state): the replica's data × context × 2.5D depth.
int OuterShards(const SimulationConfig& config);

// A rank's share of one fragment of `parameter_count`: ⌈count / (OuterShards · F)⌉ parameters.
int64_t OuterShare(const SimulationConfig& config, int64_t parameter_count);

// A rank's outer state on the GPU: the fp32 outer Nesterov momentum of its 1/OuterShards share
// of `parameter_count`, and with `outer_state` "gpu" the fp32 outer copy too: 4 or 8 B a
// parameter.
int64_t OuterStateBytes(const SimulationConfig& config, int64_t parameter_count);

// One fragment's outer synchronization for the rank of `stage` holding `parameter_count`
// parameters, as a task graph over the whole job's cluster: with the outer copy in host memory
// its shard copied in, the all-reduce of its outer-gradient shard over its M counterparts (one
// per replica), its outer Nesterov step, the new outer copy out to the host, then — unless
// ZeRO-3 keeps the parameters sharded — the all-gather of the updated shard inside its replica.
// Across sites (`diloco.link`) the all-reduce is priced by SiteAllReduce instead and left out here.
// `replica` is DilocoReplica(job). The tasks are named "outer copy in", "outer all-reduce",
// "outer update", "outer copy out", "outer all-gather".
Expected<graph::TaskGraph> OuterSyncGraph(const ResolvedConfig& job, const ResolvedConfig& replica,
                                          int stage, int64_t parameter_count);

// Across sites: every rank of a replica all-reduces its shard at once, so a site's link carries
// the whole replica's outer gradient, `site_bytes` (the model's parameters × the outer
// precision / F): a ring over the M sites, 2(M−1)/M · site_bytes / bandwidth + 2(M−1) latencies.
DurationNs SiteAllReduce(const DilocoConfig& diloco, double site_bytes);

// Of one fragment's synchronization, what the τ inner steps it runs behind do not hide:
// max(0, synchronization − τ · inner step). The run's average step is the inner step plus F/H of
// it (one synchronization every H/F steps).
DurationNs ExposedSynchronization(const DilocoConfig& diloco, DurationNs synchronization,
                                  DurationNs inner_step);

}  // namespace dtsim::strategies
