// Pipeline schedules: the order in which one stage runs the forward and backward passes of the
// micro-batches (docs/strategies.md, "Pipeline").
#pragma once

#include <cstdint>
#include <vector>

#include "strategies/config.h"

namespace dtsim::strategies {

struct PipelineStep {
  bool forward = true;
  int64_t microbatch = 0;
};

// GPipe: every forward, then every backward (micro-batch order). 1F1B (PipeDream-Flush, as
// Megatron): stage s runs min(p − s − 1, m) warm-up forwards, then alternates one forward and
// one backward, then drains the remaining backwards. Precondition: not kInterleaved.
std::vector<PipelineStep> StageSchedule(ScheduleKind schedule, int stages, int stage,
                                        int64_t microbatches);

}  // namespace dtsim::strategies
