// The collectives of one job matched across its ranks' traces (docs/replay.md, "A whole job"):
// which NCCL kernel of each rank took part in the same collective, and how each rank's clock
// relates to the first rank's.
//
// A collective's ranks finish it together (the last data arrives everywhere within a few
// microseconds), so the ends of its kernels are the same instant on every rank. Matching uses
// that: per process group (its name and ranks when the trace records them, else its size),
// each rank's collectives are paired in order with the first loaded member's, the pairs whose
// ends agree once the clocks are aligned. A rank's clock offset is the most common difference
// between the ends of compatible collectives (same kind, and the same size where both traces
// give one) — so ranks recorded on different hosts, and traces that each lost different
// collectives (a sampled trace, or profiling windows that start at different kernels), match.
// A collective some loaded member has no partner for stays that rank's own.
//
// Each matched collective's transfer is its shortest member kernel: the member that arrived
// last waited for no one, so its kernel is the transfer alone; the others' longer kernels are
// that plus their wait for it, which the replay rebuilds as a rendezvous.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sim/base/status.h"
#include "sim/base/time.h"
#include "traces/trace.h"

namespace dtsim::traces {

struct JobCollective {
  // (index of the rank's trace in the job, Trace::collectives index), in job order.
  std::vector<std::pair<uint32_t, uint32_t>> members;
  DurationNs transfer;  // the shortest member kernel
  TimeNs last_arrival;  // the latest member kernel start, on the first trace's clock
};

struct JobCollectives {
  std::vector<JobCollective> collectives;
  // [job index][Trace::collectives index]: the JobCollective it is in, or kNone.
  std::vector<std::vector<uint32_t>> of_rank;
  // Per job index: its clock minus the first trace's (zero for the first, and for a trace that
  // shares no matched collective with it, directly or through others: `aligned` says which).
  std::vector<DurationNs> clock_offset;
  std::vector<bool> aligned;
  std::vector<int64_t> unmatched;  // per job index: its collectives no other loaded rank shared
};

// Matches the collectives of `job` (one trace per rank). Point-to-point kernels and
// collectives without a size are left unmatched. Never fails on what traces contain.
JobCollectives MatchJobCollectives(std::span<const Trace* const> job);

}  // namespace dtsim::traces
