// Tensor parallelism in the eager Llama replay (models/eager_llama.h, EagerRun::tensor_ranks):
// torchtitan's 2D layout under FSDP2, every byte a block keeps derived here from the shapes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>

#include "models/eager_allocations.h"
#include "models/model_spec.h"
#include "tests/models/preset_helpers.h"

namespace dtsim::models {
namespace {

using testing::HasSubstr;

// The toy Llama (tests/models/preset_helpers.h) of 2 layers.
TransformerSpec Toy() { return ToyLlama(2, 256); }

// A micro-batch of 2 × 256 tokens under FSDP2 over 2 ranks, bf16, saving every activation.
EagerRun TpRun(int tensor_ranks) {
  return {.micro_batch = 2, .seq_len = 256, .fsdp_ranks = 2, .tensor_ranks = tensor_ranks};
}

TEST(EagerTensorParallelTest, BlocksKeepTheGatheredInputsWhole) {
  // What block 0 keeps from forward to backward, t tokens on the rank (512), ts = t / tp on its
  // part of the sequence, h = 512, the rank's query width q = 512 / tp, its MLP width f =
  // 1,536 / tp, bf16 (2 B):
  //   its input x (the attention norm's saved input)           ts·h·2
  //   the attention norm's and the MLP norm's 1/rms             2 · ts·4
  //   the attention's input: under TP gathered whole (wq, wk and wv save it), else the norm's
  //   output                                                    t·h·2
  //   the rotated queries, the repeated keys and values, the attention's output (flash
  //   attention saves them)                                      4 · t·q·2
  //   flash attention's philox seed and offset                   2 · 512 (8 B each, a block)
  //   its log-sum-exp: 2 sequences × 8 / tp heads × 256 × 4 B    16,384 / tp
  //   the residual h (the MLP norm's saved input)                ts·h·2
  //   the MLP's input, as the attention's                         t·h·2
  //   w1's output, silu of it, w3's output and their product     4 · t·f·2
  // Megatron's sequence parallelism keeps the sharded norm outputs and gathers them again in
  // backward; DTensor's keeps the gathered ones, so TP shrinks only x, h and the norms' 1/rms.
  for (const int tp : {1, 2}) {
    const int64_t t = 512, ts = t / tp, h = 512, q = 512 / tp, f = 1536 / tp;
    const int64_t kept = ts * h * 2 + 2 * ts * 4 + t * h * 2 + 4 * t * q * 2 + 2 * 512 +
                         16384 / tp + ts * h * 2 + t * h * 2 + 4 * t * f * 2;
    const Expected<EagerPeaks> peaks = ReplayEagerTraining(Toy(), TpRun(tp));
    ASSERT_TRUE(peaks.ok()) << peaks.error().ToString();
    ASSERT_EQ(peaks->layer_kept.size(), 3u);
    EXPECT_EQ(peaks->layer_kept[0], kept) << "tp " << tp;
    EXPECT_EQ(peaks->layer_kept[1], kept) << "tp " << tp;
    // The last block's output (the final norm's saved input), on the rank's part of the
    // sequence.
    EXPECT_EQ(peaks->layer_kept[2], ts * h * 2) << "tp " << tp;
  }
}

TEST(EagerTensorParallelTest, TheOpPolicyStoresTheReduceScattersOutputs) {
  // torchtitan's op policy (selective_op) saves the outputs of every odd mm, of flash
  // attention and of _c10d_functional.reduce_scatter_tensor. Block 0 keeps, as above:
  //   its input x                                                 ts·h·2
  //   wq's and wv's outputs (the first and third mm)              t·q·2 + t·kv·2
  //   flash attention's output, log-sum-exp, seed and offset      t·q·2 + 16,384 / tp + 2 · 512
  //   w1's output (the fifth mm)                                  t·f·2
  //   w2's output (the seventh): under TP its partial sums        t·h·2
  //   under TP, the two reduce-scatters' outputs                  2 · ts·h·2
  // with the rank's key-value width kv = 256 / tp.
  for (const int tp : {1, 2}) {
    const int64_t t = 512, ts = t / tp, h = 512, q = 512 / tp, kv = 256 / tp, f = 1536 / tp;
    const int64_t scatters = tp > 1 ? 2 * ts * h * 2 : 0;
    const int64_t kept = ts * h * 2 + t * q * 2 + t * kv * 2 + t * q * 2 + 16384 / tp + 2 * 512 +
                         t * f * 2 + t * h * 2 + scatters;
    EagerRun run = TpRun(tp);
    run.recompute = Recompute::kSelectiveOp;
    const Expected<EagerPeaks> peaks = ReplayEagerTraining(Toy(), run);
    ASSERT_TRUE(peaks.ok()) << peaks.error().ToString();
    ASSERT_EQ(peaks->layer_kept.size(), 3u);
    EXPECT_EQ(peaks->layer_kept[0], kept) << "tp " << tp;
  }
}

TEST(EagerTensorParallelTest, TheLossParallelBackwardHoldsFourVocabularyShards) {
  // A vocabulary of 2^17 at hidden 512: the loss dominates. The rank's logits are t × v / tp =
  // 512 × 65,536 (TP 2), 128 MiB in fp32. As loss_parallel's fused backward adds exp(log_softmax)
  // to the one-hot zeros, four such fp32 tensors are live (the saved log_softmax, the zeros,
  // exp's output, their sum); without TP, nll_loss's and log_softmax's backward hold three of
  // the whole vocabulary (t × v × 4 = 256 MiB each).
  TransformerSpec spec = Toy();
  spec.vocab = 1 << 17;
  const int64_t shard = int64_t{512} * (1 << 16) * 4;
  const Expected<EagerPeaks> tp = ReplayEagerTraining(spec, TpRun(2));
  ASSERT_TRUE(tp.ok()) << tp.error().ToString();
  EXPECT_GE(tp->allocated, 4 * shard);
  const Expected<EagerPeaks> whole = ReplayEagerTraining(spec, TpRun(1));
  ASSERT_TRUE(whole.ok()) << whole.error().ToString();
  EXPECT_GE(whole->allocated, 3 * 2 * shard);
  // Four of half the vocabulary against three of all of it, and the rest (parameters, the
  // logits' bf16 copies, blocks) smaller: TP 2 peaks lower, by less than half.
  EXPECT_LT(tp->allocated, whole->allocated);
  EXPECT_GT(tp->allocated, whole->allocated / 2);
}

TEST(EagerTensorParallelTest, RefusesWhatItDoesNotReplay) {
  const TransformerSpec spec = Toy();
  // Without FSDP2 (autocast over fp32 parameters).
  EagerRun autocast = TpRun(2);
  autocast.fsdp_ranks = 0;
  const Expected<EagerPeaks> no_fsdp = ReplayEagerTraining(spec, autocast);
  ASSERT_FALSE(no_fsdp.ok());
  EXPECT_THAT(no_fsdp.error().ToString(), HasSubstr("replayed under FSDP2"));
  // Beside context parallelism the ranks divide the rank's part of the sequence: 256 / 2 = 128
  // tokens, which 3 ranks do not (the heads checked first, 6 of them here); 2 do, and its ring
  // attention runs on the rank's 4 heads.
  EagerRun ring = TpRun(2);
  ring.context_ranks = 2;
  const Expected<EagerPeaks> with_ring = ReplayEagerTraining(spec, ring);
  ASSERT_TRUE(with_ring.ok()) << with_ring.error().ToString();
  TransformerSpec six = spec;
  six.heads = 6;
  six.kv_heads = 3;
  six.ffn_hidden = 1530;
  EagerRun three_ring = TpRun(3);
  three_ring.context_ranks = 2;
  const Expected<EagerPeaks> part = ReplayEagerTraining(six, three_ring);
  ASSERT_FALSE(part.ok());
  EXPECT_EQ(part.error().ToString(),
            "seq_len: 3 tensor-parallel ranks do not divide the 128 seq_len, got 128");
  // 3 ranks divide none of the 8 heads, the 4 key-value heads, the MLP or the sequence.
  const Expected<EagerPeaks> three = ReplayEagerTraining(spec, TpRun(3));
  ASSERT_FALSE(three.ok());
  EXPECT_EQ(three.error().ToString(),
            "heads: 3 tensor-parallel ranks do not divide the 8 heads, got 8");
  // A GPT-style decoder is not replayed under TP.
  Expected<ModelSpec> gpt2 = ModelPreset("gpt2-124m");
  ASSERT_TRUE(gpt2.ok());
  const Expected<EagerPeaks> gpt = ReplayEagerTraining(gpt2->transformer, TpRun(2));
  ASSERT_FALSE(gpt.ok());
  EXPECT_THAT(gpt.error().ToString(), HasSubstr("Llama-style"));
}

}  // namespace
}  // namespace dtsim::models
