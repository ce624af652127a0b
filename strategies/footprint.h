// What building and simulating a config's task graph will take, known before any of it is
// built: a config that asks for 10⁹ GPUs or 10¹² tokens fails in milliseconds with a message,
// not after minutes of building by the kernel's OOM killer.
#pragma once

#include <cstdint>

#include "sim/base/status.h"
#include "strategies/config.h"

namespace dtsim::strategies {

// Memory per task of a built and simulated graph: the graph (24-byte tasks, dependency and
// successor CSR arrays, names), the simulator's per-task state and times, and the builder's
// temporaries. Measured: GPT-3 175B on 1,024 GPUs, every rank, 20.9 M tasks in a peak RSS of
// 1.7 GB (81 bytes a task; docs/strategies.md "Speed").
inline constexpr int64_t kBytesPerTask = 80;

struct Footprint {
  int64_t simulated_ranks = 0;
  int64_t microbatches = 0;
  // A lower bound on the graph's tasks: every simulated rank runs a forward and a backward
  // task of each of its layers for each micro-batch (a data-parallel model: one of each).
  double tasks = 0;
  double bytes = 0;  // tasks × kBytesPerTask
};

Footprint EstimateFootprint(const ResolvedConfig& config);

// The default of --max-memory: three quarters of this machine's physical memory.
int64_t DefaultMaxMemory();

// An error when the config's footprint exceeds `max_memory` bytes (0: DefaultMaxMemory()),
// saying what it needs, why, and what would shrink it.
Status CheckFootprint(const ResolvedConfig& config, int64_t max_memory);

}  // namespace dtsim::strategies
