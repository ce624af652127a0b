// Where a replayed step's time goes (docs/replay.md, "Where the time goes"): the step's
// critical path — from its end marker back to its start, each task reached through the
// prerequisite it waited for, the one that ended last (its stream predecessor, the launching
// call, a sync or inferred wait, or for a collective its last peer to arrive) — split by what
// ran on it. A what-if shortens a step only through its path: a step whose path is host work
// gains nothing from a faster GPU, one whose path is measured gaps gains nothing at all.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/time.h"
#include "sim/graph/task_times.h"
#include "traces/kernel_class.h"
#include "traces/replay_graph.h"
#include "traces/trace.h"

namespace dtsim::strategies {

// What the path ran: GPU kernels, copies and sets; collectives and NCCL kernels; host work
// between CUDA calls (framework, Python, data loading); time inside CUDA API calls (launch
// overhead); the measured rest of calls that waited (syncs, a full launch queue, another
// thread); fixed delays the replay cannot explain (GPU gaps, a thread's measured start); and,
// under a network what-if told where the trace ran, a collective's wait for its peers.
enum class PathPart : uint8_t { kGpu, kCommunication, kHost, kApi, kWait, kGap, kPeerWait };
inline constexpr size_t kPathParts = 7;
std::string_view PathPartName(PathPart part);  // "gpu", "communication", "host", ...

struct StepPath {
  std::array<DurationNs, kPathParts> parts{};
  // Of the GPU part, the ops of the kernel classes asked about (a what-if's speedups).
  DurationNs sped_up;
  // Of the whole path, what ran on other ranks of the job: the step's rank waiting for peers
  // that arrived last at a collective they shared, and for what held those peers up.
  DurationNs on_peers;

  DurationNs operator[](PathPart part) const { return parts[static_cast<size_t>(part)]; }
  DurationNs Total() const;  // the step's simulated duration
};

// Per step of `replay` simulated as `times` (as many as replay.steps; none when the times are
// not the graph's), its critical path. `classes`: the kernel classes whose GPU time on the path
// goes into `sped_up`, the device events of the job's traces (`job`, needed with classes)
// telling what each GPU op was.
std::vector<StepPath> StepPaths(std::span<const traces::Trace* const> job,
                                const traces::ReplayGraph& replay, const graph::TaskTimes& times,
                                std::span<const traces::KernelSpeedup> classes = {});

// Why a speed-up what-if barely moved a step whose replayed path is `replayed` and whose time
// changed by `change` (a fraction): the parts that bound it, when the GPU work it speeds up is a
// small share of the path (under 5%) or the step moved under 1%; empty otherwise.
std::string WhyUnmoved(const StepPath& replayed, double change);

}  // namespace dtsim::strategies
