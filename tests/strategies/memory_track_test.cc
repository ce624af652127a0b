// The memory track a simulated iteration carries for its timeline (graph::MemoryChange): what
// each rank holds over the iteration under the pipeline schedule, checked against the schedule
// and the memory model's peak.
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "tests/strategies/simulate_helpers.h"

namespace dtsim::strategies {
namespace {

TEST(MemoryTrackTest, OneForwardOneBackwardKeepsPMinusRMicrobatches) {
  // 16 layers on 4 stages (ranks 0–3), 16 micro-batches, 1F1B: stage r runs p − r = 4 − r
  // forwards before its first backward, so its track climbs 4 − r micro-batches' worth of kept
  // activations above its base (the embedding's too on stage 0; the last stage's one
  // micro-batch with the output layer's), then returns to the base by the iteration's end. The
  // top is the memory model's peak less its working set for stages 0–2, whose peak is the
  // first backward with every micro-batch in flight.
  Json json = Json::parse(R"({
    "model": {"family": "transformer", "layers": 16, "hidden": 2048, "heads": 16,
              "vocab": 1024, "max_seq": 1024},
    "training": {"global_batch": 16, "micro_batch": 1, "seq_len": 1024},
    "cluster": {"preset": "dgx-a100", "gpu": "a100-sxm4-80gb"},
    "parallelism": {"data": 1, "tensor": 1, "pipeline": {"size": 4, "schedule": "1f1b"}}
  })");
  const SimulationResult result = SimulateJson(json);
  const std::vector<std::vector<int64_t>> tracks = MemoryTracks(result);
  ASSERT_EQ(tracks.size(), 4u);
  for (int stage = 0; stage < 4; ++stage) {
    const std::vector<int64_t>& track = tracks[static_cast<size_t>(stage)];
    const models::MemoryBreakdown& memory =
        result.iteration->stats.stage_memory[static_cast<size_t>(stage)];
    const int64_t base = track.front();
    EXPECT_EQ(base, memory.total() - memory.activations - memory.temporary) << stage;
    EXPECT_EQ(track.back(), base) << stage;
    const int64_t top = *std::max_element(track.begin(), track.end());
    // One micro-batch's forward through the stage: the first rise that stays (the stage's
    // layers, one change each, and the embedding's on stage 0).
    const int changes_per_forward = 4 + (stage == 0 ? 1 : 0) + (stage == 3 ? 1 : 0);
    const int64_t one = track[static_cast<size_t>(changes_per_forward)] - base;
    EXPECT_GT(one, 0);
    if (stage < 3) {
      EXPECT_EQ(top - base, (4 - stage) * one) << stage;
      EXPECT_EQ(top, memory.total() - memory.temporary) << stage;
    } else {
      EXPECT_EQ(top - base, one);
    }
  }
}

TEST(MemoryTrackTest, AReplayedLoopDrawsWhatTheReplayKeeps) {
  // A Llama-style decoder under FSDP2 on two ranks (pytorch, zero_stage 3): the loop is
  // replayed through the caching allocator and the stage's peak is the replay's, at the loss
  // with every block's saved tensors live. The track draws each block's tensors as the replay
  // keeps them from forward to backward (their sum the peak's activations), so its top is that
  // peak less its working set, as for the analytic track; 3 blocks and the last output.
  Json json = Json::parse(R"({
    "training": {"global_batch": 4, "micro_batch": 2, "seq_len": 2048, "framework": "pytorch",
                 "flash_attention": true, "dropout": false},
    "cluster": {"preset": "dgx-h100", "gpu": "h100-sxm5-80gb", "nodes": 1, "gpus_per_node": 2},
    "parallelism": {"data": 2, "zero_stage": 3}
  })");
  json["model"] = LlamaStyleModel(3, 256, 4, 4, 768, 8192, 2048);
  const SimulationResult result = SimulateJson(json);
  const std::vector<std::vector<int64_t>> tracks = MemoryTracks(result);
  ASSERT_EQ(tracks.size(), 2u);
  const models::MemoryBreakdown& memory = result.iteration->stats.stage_memory.front();
  ASSERT_TRUE(memory.reserve_modelled);
  ASSERT_EQ(memory.replayed_layer_kept.size(), 4u);
  for (const std::vector<int64_t>& track : tracks) {
    EXPECT_EQ(track.front(), memory.total() - memory.activations - memory.temporary);
    EXPECT_EQ(track.back(), track.front());
    EXPECT_EQ(*std::max_element(track.begin(), track.end()), memory.total() - memory.temporary);
  }
}

}  // namespace
}  // namespace dtsim::strategies
