#include "models/pipeline_schedules.h"

#include <algorithm>
#include <array>

#include "sim/base/check.h"
#include "sim/base/registry.h"

namespace dtsim::models {
namespace {

// GPipe: every forward, then every backward, in micro-batch order; all m stay alive.
std::vector<PipelineStep> GpipeSteps(int /*stages*/, int /*stage*/, int64_t microbatches,
                                     int /*chunks*/, int /*extra_warmup*/) {
  std::vector<PipelineStep> steps;
  steps.reserve(static_cast<size_t>(2 * microbatches));
  for (int64_t i = 0; i < microbatches; ++i) steps.push_back({Pass::kForward, i});
  for (int64_t i = 0; i < microbatches; ++i) steps.push_back({Pass::kBackward, i});
  return steps;
}

double GpipeInFlight(int /*stages*/, int /*stage*/, int64_t microbatches, int /*chunks*/) {
  return static_cast<double>(microbatches);
}

// 1F1B (PipeDream-Flush, as Megatron): stage s runs min(p − s − 1 + extra, m) warm-up
// forwards, then alternates one forward and one backward, then drains the remaining backwards.
std::vector<PipelineStep> OneForwardOneBackwardSteps(int stages, int stage, int64_t microbatches,
                                                     int /*chunks*/, int extra_warmup) {
  std::vector<PipelineStep> steps;
  steps.reserve(static_cast<size_t>(2 * microbatches));
  const int64_t warmup = std::min<int64_t>(stages - stage - 1 + extra_warmup, microbatches);
  for (int64_t i = 0; i < warmup; ++i) steps.push_back({Pass::kForward, i});
  for (int64_t i = 0; i < microbatches - warmup; ++i) {
    steps.push_back(
        {.pass = Pass::kForward, .microbatch = warmup + i, .beside_next = extra_warmup > 0});
    steps.push_back({Pass::kBackward, i});
  }
  for (int64_t i = microbatches - warmup; i < microbatches; ++i) {
    steps.push_back({Pass::kBackward, i});
  }
  return steps;
}

// The warm-up and the steady forward before the first backward: min(p − s, m).
double OneForwardOneBackwardInFlight(int stages, int stage, int64_t microbatches, int /*chunks*/) {
  return std::min<double>(stages - stage, static_cast<double>(microbatches));
}

// The k-th chunk pass of an interleaved stage: groups of p micro-batches per chunk, forward
// chunks ascending, backward chunks descending.
PipelineStep InterleavedStep(Pass pass, int64_t k, int stages, int chunks) {
  const int64_t group = k / stages;
  const int chunk_in_order = static_cast<int>(group % chunks);
  return {.pass = pass,
          .microbatch = (group / chunks) * stages + k % stages,
          .chunk = pass == Pass::kForward ? chunk_in_order : chunks - 1 - chunk_in_order};
}

// Megatron-Core's warm-up of an interleaved stage: 2(p − s − 1) + (v − 1)·p chunk forwards
// (+ `extra`: one more under its all-to-all overlap, so that each paired forward and backward
// are independent; schedules.py, core_r0.14), at most all m·v of them. (Megatron-LM before Core
// ran every forward first whenever m == p; Core warms up the same way for every m.)
int64_t InterleavedWarmup(int stages, int stage, int64_t microbatches, int chunks,
                          int extra_warmup) {
  return std::min<int64_t>(microbatches * chunks, int64_t{2} * (stages - stage - 1) +
                                                      int64_t{chunks - 1} * stages + extra_warmup);
}

// Interleaved 1F1B (Megatron, SC'21 §2.2.2) with v chunks per stage: the m·v chunk passes in
// 1F1B order after the warm-up. Precondition: m divisible by p (checked with the config).
std::vector<PipelineStep> InterleavedSteps(int stages, int stage, int64_t microbatches, int chunks,
                                           int extra_warmup) {
  DTSIM_CHECK(microbatches % stages == 0, "interleaving needs micro-batches divisible by stages");
  const int64_t total = microbatches * chunks;
  const int64_t warmup = InterleavedWarmup(stages, stage, microbatches, chunks, extra_warmup);
  std::vector<PipelineStep> steps;
  steps.reserve(static_cast<size_t>(2 * total));
  for (int64_t k = 0; k < warmup; ++k) {
    steps.push_back(InterleavedStep(Pass::kForward, k, stages, chunks));
  }
  for (int64_t k = 0; k < total - warmup; ++k) {
    steps.push_back(InterleavedStep(Pass::kForward, warmup + k, stages, chunks));
    steps.back().beside_next = extra_warmup > 0;
    steps.push_back(InterleavedStep(Pass::kBackward, k, stages, chunks));
  }
  for (int64_t k = total - warmup; k < total; ++k) {
    steps.push_back(InterleavedStep(Pass::kBackward, k, stages, chunks));
  }
  return steps;
}

// (2(p − s − 1) + (v − 1)·p + 1) chunk passes of 1/v of a stage each, capped at m·v: the
// warm-up plus the steady forward.
double InterleavedInFlight(int stages, int stage, int64_t microbatches, int chunks) {
  const double passes = 2.0 * (stages - stage - 1) + (chunks - 1.0) * stages + 1;
  return std::min(passes, static_cast<double>(microbatches) * chunks) / chunks;
}

constexpr std::array<PipelineScheduleEntry, 3> kSchedules = {{
    {"gpipe", PipelineSchedule::kGpipe, "every forward, then every backward (GPipe)", false,
     GpipeSteps, GpipeInFlight},
    {"1f1b", PipelineSchedule::kOneForwardOneBackward,
     "warm-up forwards, then one forward one backward (PipeDream-Flush, Megatron)", false,
     OneForwardOneBackwardSteps, OneForwardOneBackwardInFlight},
    {"interleaved", PipelineSchedule::kInterleaved,
     "1F1B over v model chunks per stage (Megatron's virtual pipeline)", true, InterleavedSteps,
     InterleavedInFlight},
}};
constexpr std::array<std::string_view, kSchedules.size()> kNames = RegistryNames(kSchedules);

consteval bool IndexedByEnum() {
  for (size_t i = 0; i < kSchedules.size(); ++i) {
    if (static_cast<size_t>(kSchedules[i].schedule) != i) return false;
  }
  return true;
}
static_assert(IndexedByEnum(), "kSchedules must be in PipelineSchedule's order");

}  // namespace

std::span<const PipelineScheduleEntry> PipelineSchedules() { return kSchedules; }
std::span<const std::string_view> PipelineScheduleNames() { return kNames; }

const PipelineScheduleEntry& PipelineScheduleOf(PipelineSchedule schedule) {
  return kSchedules[static_cast<size_t>(schedule)];
}

std::string_view PipelineScheduleName(PipelineSchedule schedule) {
  return PipelineScheduleOf(schedule).name;
}

Expected<const PipelineScheduleEntry*> FindPipelineSchedule(std::string_view name) {
  return FindInRegistry<PipelineScheduleEntry>(kSchedules, kNames, name, "pipeline schedule");
}

std::vector<PipelineStep> StageSchedule(PipelineSchedule schedule, int stages, int stage,
                                        int64_t microbatches, int chunks, int extra_warmup) {
  return PipelineScheduleOf(schedule).steps(stages, stage, microbatches, chunks, extra_warmup);
}

double MicrobatchesInFlight(PipelineSchedule schedule, int stages, int stage, int virtual_stages,
                            int64_t microbatches) {
  return PipelineScheduleOf(schedule).in_flight(stages, stage, microbatches, virtual_stages);
}

}  // namespace dtsim::models
