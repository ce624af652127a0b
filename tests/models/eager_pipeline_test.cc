// Pipelining in the eager Llama replay (models/eager_llama.h, EagerRun::pipeline): a rank of
// torch.distributed.pipelining's schedule under FSDP2 as torchtitan runs it, every byte the
// tests compare derived here from the shapes and the schedule.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "models/eager_allocations.h"
#include "models/model_spec.h"
#include "models/pipeline_schedules.h"
#include "tests/models/preset_helpers.h"

namespace dtsim::models {
namespace {

using testing::HasSubstr;

// The toy Llama of tests/models/preset_helpers.h (hidden 512, 8 heads of 64 over 4 key-value
// heads, MLP 1,536, vocabulary 1,024) over sequences of 2,048.
TransformerSpec Toy(int layers) { return ToyLlama(layers, 2048); }

// Rank `rank` of `stages` under 1F1B, two blocks a stage, 8 micro-batches of 2 × 2,048 tokens,
// FSDP2 over 2 ranks, every block checkpointed; expandable segments, as torchtitan sets them (a
// block then splits whenever 512 B would remain, so what is allocated is the requests rounded,
// with no unsplit slack that depends on what the allocator cached before).
EagerRun StageRun(int stages, int rank,
                  PipelineSchedule schedule = PipelineSchedule::kOneForwardOneBackward,
                  int chunks = 1) {
  return {.micro_batch = 2,
          .seq_len = 2048,
          .recompute = Recompute::kFull,
          .micro_batches = 8,
          .expandable_segments = true,
          .fsdp_ranks = 2,
          .pipeline = {.stages = stages,
                       .rank = rank,
                       .schedule = schedule,
                       .chunks = chunks,
                       .chunk_layers = std::vector<int>(static_cast<size_t>(stages * chunks), 2)},
          .clip_grad_norm = true};
}

// One micro-batch's residual stream on a rank: 4,096 tokens × 512 × 2 B (bf16) = 4 MiB — a
// stage's input, a block's saved input, a stage's output, a received input's gradient.
constexpr int64_t kStream = int64_t{4096} * 512 * 2;

TEST(EagerPipelineTest, OneForwardOneBackwardStagesHoldTheirMicroBatchesInFlight) {
  // Stages 1 and 2 of four under 1F1B are alike but for the schedule: the same two blocks, a
  // receive buffer for each micro-batch's input and one for its output's gradient (16 streams,
  // held). Stage s runs p − s − 1 warm-up forwards, then forward-backward pairs, then the
  // rest's backwards; a backward's micro-batch and those forwarded since are in flight, each
  // keeping its second block's input and the stage's output (2 streams; the first block's input
  // is its receive buffer); each backward leaves its input's gradient as the buffer's .grad
  // until the next step (1 stream). During backward k:
  //   stage 1 (F0 F1 | F2 B0 … F7 B5 | B6 B7): 3 in flight to B5, then 2, 1: at B5 3·2 + 5 = 11
  //   stage 2 (F0 | F1 B0 … F7 B6 | B7):       2 in flight to B6, then 1:    at B6 2·2 + 6 = 10
  // streams besides the same parameters, gradients and recompute working set: the peaks differ
  // by one stream.
  const TransformerSpec spec = Toy(8);
  const Expected<EagerPeaks> one = ReplayEagerTraining(spec, StageRun(4, 1));
  ASSERT_TRUE(one.ok()) << one.error().ToString();
  const Expected<EagerPeaks> two = ReplayEagerTraining(spec, StageRun(4, 2));
  ASSERT_TRUE(two.ok()) << two.error().ToString();
  EXPECT_EQ(one->pipeline_buffer_bytes, 16 * kStream);
  EXPECT_EQ(two->pipeline_buffer_bytes, 16 * kStream);
  EXPECT_EQ(one->allocated - two->allocated, kStream);
  // The first stage receives no input (8 output-gradient buffers), the last no gradient (8
  // input buffers).
  const Expected<EagerPeaks> first = ReplayEagerTraining(spec, StageRun(4, 0));
  ASSERT_TRUE(first.ok()) << first.error().ToString();
  EXPECT_EQ(first->pipeline_buffer_bytes, 8 * kStream);
  const Expected<EagerPeaks> last = ReplayEagerTraining(spec, StageRun(4, 3));
  ASSERT_TRUE(last.ok()) << last.error().ToString();
  EXPECT_EQ(last->pipeline_buffer_bytes, 8 * kStream);
}

TEST(EagerPipelineTest, Fsdp2KeepsTheStageGatheredAndItsGradientsUnshardedInFp32) {
  // Under pipelining FSDP2 neither reshards nor reduce-scatters until the stage's last
  // backward: at the peak (a backward mid-step) the stage's gradients are its unsharded
  // parameters' in fp32, accumulated over the micro-batches. A block's parameters (rows ×
  // columns; all rows even, so FSDP2 over 2 ranks pads none): two norms 512, wq and wo
  // 512 × 512, wk and wv 256 × 512, w1, w2 and w3 1,536 × 512 — 2,048 B + 2,048 B + 2 · 1 MiB +
  // 2 · 512 KiB + 3 · 3 MiB = 12 MiB + 4 KiB in fp32, each a multiple of 512 B. Two blocks.
  constexpr int64_t kBlockFp32 = (int64_t{12} << 20) + 4096;
  const TransformerSpec spec = Toy(8);
  const Expected<EagerPeaks> middle = ReplayEagerTraining(spec, StageRun(4, 1));
  ASSERT_TRUE(middle.ok()) << middle.error().ToString();
  EXPECT_EQ(middle->grads_at_peak, 2 * kBlockFp32);
  // What the rank holds beside (parameters and the optimizer's state, sharded; the batch; the
  // receive buffers) is the same whatever the micro-batches; the unsharded bf16 parameters
  // (half the fp32 gradients) are in the iteration's tensors at the peak.
  EXPECT_GE(middle->allocated - middle->held_at_peak - middle->grads_at_peak,
            kBlockFp32 + 11 * kStream);
}

TEST(EagerPipelineTest, AnInterleavedRankRunsItsChunksApart) {
  // Two stages of two chunks: rank 0 holds model chunks 0 (the embedding: no input buffer) and
  // 2 (inputs and output gradients), 8 micro-batches each: 3 × 8 buffers.
  const TransformerSpec spec = Toy(8);
  const Expected<EagerPeaks> rank0 =
      ReplayEagerTraining(spec, StageRun(2, 0, PipelineSchedule::kInterleaved, 2));
  ASSERT_TRUE(rank0.ok()) << rank0.error().ToString();
  EXPECT_EQ(rank0->pipeline_buffer_bytes, 24 * kStream);
  const Expected<EagerPeaks> rank1 =
      ReplayEagerTraining(spec, StageRun(2, 1, PipelineSchedule::kInterleaved, 2));
  ASSERT_TRUE(rank1.ok()) << rank1.error().ToString();
  EXPECT_EQ(rank1->pipeline_buffer_bytes, 24 * kStream);  // chunks 1 and 3 (the output layer)
  // The same two blocks a rank under GPipe hold every micro-batch in flight at the first
  // backward: more than 1F1B's at most two.
  const Expected<EagerPeaks> gpipe =
      ReplayEagerTraining(Toy(4), StageRun(2, 0, PipelineSchedule::kGpipe));
  const Expected<EagerPeaks> one_f_one_b = ReplayEagerTraining(Toy(4), StageRun(2, 0));
  ASSERT_TRUE(gpipe.ok() && one_f_one_b.ok());
  EXPECT_GT(gpipe->allocated, one_f_one_b->allocated + 8 * kStream);
}

TEST(EagerPipelineTest, ContextParallelismRunsAroundTheSchedule) {
  // Under context parallelism over 2 of the FSDP2 ranks each micro-batch's stream is the rank's
  // half of the sequence: the middle stage's 16 receive buffers are half as large.
  EagerRun ring = StageRun(4, 1);
  ring.context_ranks = 2;
  const Expected<EagerPeaks> peaks = ReplayEagerTraining(Toy(8), ring);
  ASSERT_TRUE(peaks.ok()) << peaks.error().ToString();
  EXPECT_EQ(peaks->pipeline_buffer_bytes, 16 * kStream / 2);
  // Its ring attention steps count: 1 chunk × 8 micro-batches × (2 blocks + 2) slots × 2 ranks
  // is 64; 2,000 micro-batches are 8,000 slots, × 8 ranks past kMaxEagerReplayRingSteps (32,768).
  EagerRun long_ring = ring;
  long_ring.micro_batches = 2000;
  long_ring.context_ranks = 8;
  long_ring.fsdp_ranks = 8;
  const Expected<EagerPeaks> too_long = ReplayEagerTraining(Toy(8), long_ring);
  ASSERT_FALSE(too_long.ok());
  EXPECT_THAT(too_long.error().ToString(), HasSubstr("more ring attention steps"));
}

TEST(EagerPipelineTest, RefusesWhatItDoesNotReplay) {
  const TransformerSpec spec = Toy(8);
  EagerRun unsharded = StageRun(4, 1);
  unsharded.fsdp_ranks = 0;
  const Expected<EagerPeaks> no_fsdp = ReplayEagerTraining(spec, unsharded);
  ASSERT_FALSE(no_fsdp.ok());
  EXPECT_THAT(no_fsdp.error().ToString(), HasSubstr("replayed under FSDP2"));
  EagerRun short_chunks = StageRun(4, 1);
  short_chunks.pipeline.chunk_layers = {2, 2, 2, 1};
  const Expected<EagerPeaks> seven = ReplayEagerTraining(spec, short_chunks);
  ASSERT_FALSE(seven.ok());
  EXPECT_EQ(seven.error().ToString(),
            "pipeline.chunk_layers: 4 chunk layer counts summing to 7, for 4 chunks of the "
            "model's 8 layers, got 7");
  EagerRun odd = StageRun(2, 0, PipelineSchedule::kInterleaved, 2);
  odd.micro_batches = 3;
  const Expected<EagerPeaks> interleaved = ReplayEagerTraining(spec, odd);
  ASSERT_FALSE(interleaved.ok());
  EXPECT_THAT(interleaved.error().ToString(), HasSubstr("multiples of its 2 stages"));
  EagerRun many = StageRun(4, 1);
  many.micro_batches = 8192;  // × (2 blocks + 2) slots: past kMaxEagerReplayPipelineSlots
  const Expected<EagerPeaks> too_many = ReplayEagerTraining(spec, many);
  ASSERT_FALSE(too_many.ok());
  EXPECT_THAT(too_many.error().ToString(), HasSubstr("more than the replay keeps apart"));
  EagerRun outside = StageRun(4, 4);
  const Expected<EagerPeaks> no_rank = ReplayEagerTraining(spec, outside);
  ASSERT_FALSE(no_rank.ok());
  EXPECT_THAT(no_rank.error().ToString(), HasSubstr("has no rank 4"));
}

}  // namespace
}  // namespace dtsim::models
