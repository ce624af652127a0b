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
  int chunk = 0;  // the model chunk (virtual stage) it runs: 0 unless interleaved
};

// GPipe: every forward, then every backward (micro-batch order). 1F1B (PipeDream-Flush, as
// Megatron): stage s runs min(p − s − 1, m) warm-up forwards, then alternates one forward and
// one backward, then drains the remaining backwards. Interleaved 1F1B (Megatron, SC'21 §2.2.2)
// with v chunks per stage: the m·v chunk passes go in groups of p micro-batches per chunk
// (forward chunks ascending, backward descending), with 2(p − s − 1) + (v − 1)·p warm-up
// forwards (all of them when m == p). Precondition for interleaved: m divisible by p.
std::vector<PipelineStep> StageSchedule(models::PipelineSchedule schedule, int stages, int stage,
                                        int64_t microbatches, int chunks = 1);

}  // namespace dtsim::strategies
