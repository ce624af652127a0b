// The communications of a simulated iteration, summed by what they are and how the network
// model ran them: op, size, group size and method ("ring", "nvls", "direct on 4 channels"),
// with how many ran and how long they took from start to end (waits for late participants not
// counted; the group is the one the network prices: under symmetric ranks, the whole group).
// `dtsim simulate` prints the costliest and writes them all to its result.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "network/cluster_model.h"
#include "sim/base/time.h"
#include "sim/graph/task_graph.h"
#include "sim/graph/task_times.h"

namespace dtsim::strategies {

struct CollectiveSummary {
  graph::CommKind kind = graph::CommKind::kAllReduce;
  int64_t size_bytes = 0;
  int group_size = 0;
  std::string method;  // empty: the model ran it without moving data (a group of one)
  int64_t count = 0;
  DurationNs total;    // over all `count`
  DurationNs longest;  // the longest one
};

// One entry per distinct (kind, size, group size, method), costliest total first (ties by
// kind, size, group size, method). `methods` may be empty (no network model): no methods.
std::vector<CollectiveSummary> SummarizeCollectives(const graph::TaskGraph& graph,
                                                    const graph::TaskTimes& times,
                                                    const network::CommMethods& methods);

}  // namespace dtsim::strategies
