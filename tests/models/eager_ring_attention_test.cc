// Context parallelism's ring attention (models/eager_ring_attention.h): what PyTorch's
// _attention.py allocates on the first rank of the ring, every peak derived here from its
// sequence; and the Llama-style loop under FSDP2 × CP (models/eager_llama.h) against the same
// loop on a rank's share of the sequence.
#include "models/eager_ring_attention.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "models/eager_allocations.h"
#include "models/model_spec.h"

namespace dtsim::models {
namespace {

using testing::HasSubstr;

// 1,024 tokens of 32 heads of 128: the queries in bf16 Q = 1,024 × 4,096 × 2 B = 8 MiB, the
// log-sum-exp L = 32 × 1,024 × 4 B = 128 KiB; every block a multiple of 512 B (the seed's and
// offset's 8 B take a block of 512 each).
constexpr int64_t kQ = int64_t{8} << 20;
constexpr int64_t kL = int64_t{128} << 10;
constexpr int64_t kSeeds = 2 * 512;

class Tensors : public EagerTensors {
 public:
  Tensors() : EagerTensors(TransformerSpec{.layers = 1}, EagerRun{}, 6) {}
};

RingAttention RingOf(Tensors& tensors, int ranks) {
  return RingAttention(tensors, {.ranks = ranks, .queries = kQ, .logsumexp = kL},
                       {.layer = 0,
                        .out = 0,
                        .logsumexp = 1,
                        .seed = 2,
                        .offset = 3,
                        .grad_queries = 4,
                        .grad_keys_values = 5});
}

TEST(RingAttentionTest, ForwardOnTwoRanks) {
  // Live at the top: the gathered keys and values (2 × 2Q), the running output (2Q) and its
  // replacement (torch.cat, 2Q), step 1's output (Q/2) and its fp32 cast (Q), the updated half
  // (Q); the running log-sum-exp's replacement (L, the old one freed first), step 1's (L/2) and
  // its updated half (L/2); step 1's seed and offset. Left: the op's results, output Q,
  // log-sum-exp L, seed and offset.
  Tensors tensors;
  ASSERT_TRUE(RingOf(tensors, 2).Forward().ok());
  EXPECT_EQ(tensors.allocator_stats().peak_allocated, 21 * kQ / 2 + 2 * kL + kSeeds);
  EXPECT_EQ(tensors.allocator_stats().allocated, kQ + kL + kSeeds);
}

TEST(RingAttentionTest, BackwardOnTwoRanks) {
  // At step 1's flash attention backward: the fp32 gradients' accumulators (3 × 2Q), step 0's
  // concatenation (2Q, its variable never rebound on two ranks), the gathered keys and values
  // (4Q), step 0's dq, dk, dv (3Q), the sent and received gradients (2 × 4Q), step 1's dq (Q/2),
  // dk, dv (2Q), its workspace (Q + L/2 + 256 → 512) and the log-sum-exp's half (L/2). Left:
  // the queries' gradient (Q) and the keys' and values' (2Q) in bf16.
  Tensors tensors;
  ASSERT_TRUE(RingOf(tensors, 2).Backward().ok());
  EXPECT_EQ(tensors.allocator_stats().peak_allocated, 53 * kQ / 2 + kL + 512);
  EXPECT_EQ(tensors.allocator_stats().allocated, 3 * kQ);
}

TEST(RingAttentionTest, MoreRanksGatherMore) {
  // From three ranks on, step 1 concatenates keys and values while the contiguous copies live:
  // forward 2 × 2Q + (keys, values, the concatenation, step 0's output Q, the running output
  // 2Q) + L + step 0's seed and offset = (2n + 7)Q + L; backward at step 1's new concatenation,
  // the old not yet freed: (2n + 23)Q. The same results left.
  for (const int ranks : {4, 8}) {
    Tensors forward;
    ASSERT_TRUE(RingOf(forward, ranks).Forward().ok());
    EXPECT_EQ(forward.allocator_stats().peak_allocated, (2 * ranks + 7) * kQ + kL + kSeeds);
    EXPECT_EQ(forward.allocator_stats().allocated, kQ + kL + kSeeds);
    Tensors backward;
    ASSERT_TRUE(RingOf(backward, ranks).Backward().ok());
    EXPECT_EQ(backward.allocator_stats().peak_allocated, (2 * ranks + 23) * kQ);
    EXPECT_EQ(backward.allocator_stats().allocated, 3 * kQ);
  }
}

TransformerSpec SmallLlama() {
  Expected<ModelSpec> llama = ModelPreset("llama3-8b");
  EXPECT_TRUE(llama.ok());
  TransformerSpec spec = llama->transformer;
  spec.layers = 2;
  spec.hidden = 1024;
  spec.heads = 8;  // heads of 128, as Llama 3's
  spec.kv_heads = 2;
  spec.ffn_hidden = 2048;
  return spec;
}

TEST(RingAttentionTest, ALoopUnderContextParallelismHoldsWhatItsContextAdds) {
  // FSDP2 over 8 ranks, full recompute: the peak is at the loss (three fp32 tensors of 8,192 ×
  // 128,256 tokens × vocabulary, 4 GiB each), when every block keeps its input only. n ranks of
  // context parallelism over n × 8,192 tokens train each rank on 8,192 as the loop without it
  // on 8,192 does, and hold at the loss besides (b = 1, s = 8,192, head_dim 128, s × 128 × 4 B
  // = 4 MiB):
  //   the whole rotation table: (n − 1) × 4 MiB
  //   the token ids: ((n·s + 1) × 8 → 65,536n + 512) − ((s + 1) × 8 → 66,048) = 65,536 (n − 1)
  //   inputs and targets: 2 × (n − 1) × s × 8 B = 131,072 (n − 1)
  //   context_parallel(): the table's copy (n × 4 MiB), the shards of inputs and labels (2 ×
  //   65,536 B) and of the table (4 MiB), and the table shard's clone (4 MiB)
  // = (2n + 1) × 4 MiB + 196,608 (n − 1) + 131,072 — on two ranks 20 MiB + 327,680 B — give or
  // take blocks the allocator hands out unsplit (under 1 MiB).
  const TransformerSpec spec = SmallLlama();
  const EagerRun plain{.micro_batch = 1,
                       .seq_len = 8192,
                       .recompute = Recompute::kFull,
                       .expandable_segments = true,
                       .fsdp_ranks = 8,
                       .clip_grad_norm = true};
  const Expected<EagerPeaks> without = ReplayEagerTraining(spec, plain);
  ASSERT_TRUE(without.ok()) << without.error().ToString();
  for (const int64_t ranks : {2, 4, 8}) {
    EagerRun ring = plain;
    ring.seq_len = 8192 * ranks;
    ring.context_ranks = static_cast<int>(ranks);
    const Expected<EagerPeaks> with = ReplayEagerTraining(spec, ring);
    ASSERT_TRUE(with.ok()) << with.error().ToString();
    const int64_t context = (2 * ranks + 1) * (int64_t{4} << 20) + 196608 * (ranks - 1) + 131072;
    EXPECT_NEAR(static_cast<double>(with->allocated - without->allocated),
                static_cast<double>(context), double{1 << 20})
        << ranks;
  }
}

TEST(RingAttentionTest, EveryPolicyAndHeadLayoutFreesWhatItMakes) {
  // With one head per key-value head the keys' and values' gradients share ring attention's
  // buffer without repeat_kv between them; under the op policy the attention's results come
  // from its store. Every tensor made is freed (RunSteps checks), and the peak is no lower
  // than the same loop's on one rank of the ring's tokens.
  for (const int kv_heads : {2, 8}) {
    TransformerSpec spec = SmallLlama();
    spec.kv_heads = kv_heads;
    for (const Recompute recompute :
         {Recompute::kNone, Recompute::kFull, Recompute::kSelectiveOp}) {
      const EagerRun ring{.micro_batch = 1,
                          .seq_len = 4096,
                          .recompute = recompute,
                          .fsdp_ranks = 4,
                          .context_ranks = 4};
      const Expected<EagerPeaks> peaks = ReplayEagerTraining(spec, ring);
      ASSERT_TRUE(peaks.ok()) << peaks.error().ToString();
      EagerRun plain = ring;
      plain.seq_len = 1024;
      plain.context_ranks = 1;
      const Expected<EagerPeaks> share = ReplayEagerTraining(spec, plain);
      ASSERT_TRUE(share.ok());
      EXPECT_GE(peaks->allocated, share->allocated) << kv_heads;
    }
  }
}

TEST(RingAttentionTest, ContextParallelismNeedsFsdpAndWholeChunks) {
  const TransformerSpec spec = SmallLlama();
  const EagerRun unsharded{.micro_batch = 1, .seq_len = 1024, .context_ranks = 2};
  const Expected<EagerPeaks> alone = ReplayEagerTraining(spec, unsharded);
  ASSERT_FALSE(alone.ok());
  EXPECT_THAT(alone.error().message(), HasSubstr("under FSDP2 over a multiple of its 2 ranks"));
  EagerRun uneven = unsharded;
  uneven.fsdp_ranks = 4;
  uneven.seq_len = 1026;  // 2 × 2 chunks of 256.5 tokens
  const Expected<EagerPeaks> chunks = ReplayEagerTraining(spec, uneven);
  ASSERT_FALSE(chunks.ok());
  EXPECT_THAT(chunks.error().message(), HasSubstr("2 × 2 equal chunks; 1026 tokens"));
  uneven.seq_len = 1024;
  uneven.fsdp_ranks = 3;
  EXPECT_FALSE(ReplayEagerTraining(spec, uneven).ok());
  uneven.context_ranks = 0;
  EXPECT_FALSE(ReplayEagerTraining(spec, uneven).ok());
  // 2 layers × 32,768 ranks: more ring steps than the replay takes (it would run for seconds;
  // a plan keeps the analytic estimate).
  const EagerRun wide{
      .micro_batch = 1, .seq_len = 65536, .fsdp_ranks = 32768, .context_ranks = 32768};
  const Expected<EagerPeaks> too_wide = ReplayEagerTraining(spec, wide);
  ASSERT_FALSE(too_wide.ok());
  EXPECT_THAT(too_wide.error().message(),
              HasSubstr("2 layers × 32768 context-parallel ranks is more ring attention steps "
                        "than the replay takes (32768)"));
}

}  // namespace
}  // namespace dtsim::models
