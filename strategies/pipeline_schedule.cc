#include "strategies/pipeline_schedule.h"

#include <algorithm>

#include "sim/base/check.h"

namespace dtsim::strategies {

namespace {

// The k-th chunk pass of an interleaved stage: groups of p micro-batches per chunk.
PipelineStep InterleavedStep(bool forward, int64_t k, int stages, int chunks) {
  const int64_t group = k / stages;
  const int chunk_in_order = static_cast<int>(group % chunks);
  return {.forward = forward,
          .microbatch = (group / chunks) * stages + k % stages,
          .chunk = forward ? chunk_in_order : chunks - 1 - chunk_in_order};
}

std::vector<PipelineStep> Interleaved(int stages, int stage, int64_t microbatches, int chunks) {
  DTSIM_CHECK(microbatches % stages == 0, "interleaving needs micro-batches divisible by stages");
  const int64_t total = microbatches * chunks;
  const int64_t warmup = microbatches == stages
                             ? total
                             : std::min<int64_t>(total, int64_t{2} * (stages - stage - 1) +
                                                            int64_t{chunks - 1} * stages);
  std::vector<PipelineStep> steps;
  steps.reserve(static_cast<size_t>(2 * total));
  for (int64_t k = 0; k < warmup; ++k) steps.push_back(InterleavedStep(true, k, stages, chunks));
  for (int64_t k = 0; k < total - warmup; ++k) {
    steps.push_back(InterleavedStep(true, warmup + k, stages, chunks));
    steps.push_back(InterleavedStep(false, k, stages, chunks));
  }
  for (int64_t k = total - warmup; k < total; ++k) {
    steps.push_back(InterleavedStep(false, k, stages, chunks));
  }
  return steps;
}

}  // namespace

std::vector<PipelineStep> StageSchedule(models::PipelineSchedule schedule, int stages, int stage,
                                        int64_t microbatches, int chunks) {
  if (schedule == models::PipelineSchedule::kInterleaved) {
    return Interleaved(stages, stage, microbatches, chunks);
  }
  std::vector<PipelineStep> steps;
  steps.reserve(static_cast<size_t>(2 * microbatches));
  if (schedule == models::PipelineSchedule::kGpipe) {
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
