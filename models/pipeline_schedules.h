// Pipeline schedules, one registry entry each (docs/strategies.md, "Pipeline"): the order in
// which a stage runs its micro-batches' forward and backward passes — what task emission
// follows — and how many micro-batches' activations that order keeps alive — what the memory
// model charges. Both come from the same entry, and a test checks the second against the peak
// of the first, so they cannot drift. Adding a schedule is one entry in pipeline_schedules.cc
// (and its enumerator here).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "models/ops.h"
#include "sim/base/status.h"

namespace dtsim::models {

// Indexes PipelineSchedules(): "gpipe", "1f1b", "interleaved".
enum class PipelineSchedule : uint8_t { kGpipe, kOneForwardOneBackward, kInterleaved };

// One pass of one micro-batch through one model chunk of a stage.
struct PipelineStep {
  Pass pass = Pass::kForward;  // kForward or kBackward
  int64_t microbatch = 0;
  int chunk = 0;  // the model chunk (virtual stage) it runs: 0 unless the schedule interleaves
  // A steady-state forward, with extra warm-up forwards, that runs beside the backward after it
  // (Megatron-Core's combined 1F1B step under its all-to-all overlap).
  bool beside_next = false;
};

struct PipelineScheduleEntry {
  std::string_view name;
  PipelineSchedule schedule;
  std::string_view summary;
  // Whether the schedule runs v > 1 model chunks per stage (virtual stages): it then needs at
  // least 2 stages and micro-batches divisible by the stages.
  bool virtual_stages;
  // The passes stage `stage` of `stages` runs, in order, for `microbatches` micro-batches of
  // `chunks` model chunks (1 unless virtual_stages), with `extra_warmup` more warm-up forwards
  // than the schedule's own (1F1B orders; Megatron-Core's all-to-all overlap takes one).
  std::vector<PipelineStep> (*steps)(int stages, int stage, int64_t microbatches, int chunks,
                                     int extra_warmup);
  // The micro-batches whose activations the stage holds at its peak, in units of one stage's
  // activations (fractional when chunks are 1/v of a stage). The same with one extra warm-up
  // forward when each steady forward then runs beside a backward, layer by layer (as
  // Megatron-Core's all-to-all overlap does): the forward it runs ahead is the steady forward
  // the backward no longer waits for.
  double (*in_flight)(int stages, int stage, int64_t microbatches, int chunks);
};

std::span<const PipelineScheduleEntry> PipelineSchedules();
std::span<const std::string_view> PipelineScheduleNames();  // indexed by PipelineSchedule
const PipelineScheduleEntry& PipelineScheduleOf(PipelineSchedule schedule);
std::string_view PipelineScheduleName(PipelineSchedule schedule);
// The entry named `name`; the error lists the registered names with the nearest one.
Expected<const PipelineScheduleEntry*> FindPipelineSchedule(std::string_view name);

// PipelineScheduleOf(schedule).steps / .in_flight.
std::vector<PipelineStep> StageSchedule(PipelineSchedule schedule, int stages, int stage,
                                        int64_t microbatches, int chunks = 1, int extra_warmup = 0);
double MicrobatchesInFlight(PipelineSchedule schedule, int stages, int stage, int virtual_stages,
                            int64_t microbatches);

}  // namespace dtsim::models
