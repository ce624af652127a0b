#include "strategies/pipeline_schedule.h"

#include <algorithm>

#include "sim/base/check.h"

namespace dtsim::strategies {

std::vector<PipelineStep> StageSchedule(ScheduleKind schedule, int stages, int stage,
                                        int64_t microbatches) {
  DTSIM_CHECK(schedule != ScheduleKind::kInterleaved, "interleaved schedules are built elsewhere");
  std::vector<PipelineStep> steps;
  steps.reserve(static_cast<size_t>(2 * microbatches));
  if (schedule == ScheduleKind::kGpipe) {
    for (int64_t i = 0; i < microbatches; ++i) steps.push_back({true, i});
    for (int64_t i = 0; i < microbatches; ++i) steps.push_back({false, i});
    return steps;
  }
  const int64_t warmup = std::min<int64_t>(stages - stage - 1, microbatches);
  for (int64_t i = 0; i < warmup; ++i) steps.push_back({true, i});
  for (int64_t i = 0; i < microbatches - warmup; ++i) {
    steps.push_back({true, warmup + i});
    steps.push_back({false, i});
  }
  for (int64_t i = microbatches - warmup; i < microbatches; ++i) steps.push_back({false, i});
  return steps;
}

}  // namespace dtsim::strategies
