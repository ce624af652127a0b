// The memory one rank of each pipeline stage needs (models/memory.h's estimate under the plan,
// plus gradient compression's error-feedback residuals), and the check that it fits the GPU.
#pragma once

#include <optional>
#include <vector>

#include "models/eager_allocations.h"
#include "models/memory.h"
#include "sim/base/status.h"
#include "strategies/config.h"

namespace dtsim::strategies {

// The memory model's view of pipeline stage `stage` of the config's plan.
models::MemoryPlan MemoryPlanOf(const ResolvedConfig& config, int stage);

// The eager PyTorch loop models::ReplayEagerTraining replays, when the config trains as it does:
// framework pytorch on one GPU (micro-batches accumulated), bf16 autocast over fp32 parameters and
// gradients — or FSDP2 (zero_stage 3) over data (× p2p context) parallelism, on one GPU or more,
// beside sequence-parallel 1D tensor parallelism or not, pipelined or not, as torchtitan runs it
// (bf16 gathered, fp32 reduced, gradients clipped), or DDP (zero_stage 0 over data parallelism
// alone: its gradient buckets) — flash attention, no
// dropout, Adam, no FP8 or compression, a PyTorch checkpoint policy (none, full,
// selective_op); else none.
std::optional<models::EagerRun> EagerLoopOf(const ResolvedConfig& config);

// Which plans' loops EstimateStageMemory replays: every one EagerLoopOf gives, or (the search's
// first pass over many plans) those without a pipeline, whose rank's replay is one schedule
// step, not a pipeline's every micro-batch on every stage.
enum class MemoryReplay { kAll, kUnpipelined };

// Per-stage memory (one rank of each pipeline stage), fitting the GPU or not; where EagerLoopOf
// gives the loop (and `replay` takes it), at the replayed peak with the caching allocator's
// reserve.
Expected<std::vector<models::MemoryBreakdown>> EstimateStageMemory(
    const ResolvedConfig& config, MemoryReplay replay = MemoryReplay::kAll);
// Whether EstimateStageMemory replays the plan's loop only under MemoryReplay::kAll.
bool ReplaysPipelinedLoop(const ResolvedConfig& config);
// The same; errors when a stage does not fit the GPU ("needs 97.2 GiB per GPU, …").
Expected<std::vector<models::MemoryBreakdown>> StageMemory(const ResolvedConfig& config);

}  // namespace dtsim::strategies
