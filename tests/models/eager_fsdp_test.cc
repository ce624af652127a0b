// FSDP2's buffers around one parameter group (models/eager_fsdp.h), every size derived here from
// the shapes: what PyTorch's _fsdp_collectives.py allocates for the group, on which stream, and
// when it is freed. And DDP's gradient buckets (models/eager_tensors.h).
#include "models/eager_fsdp.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "models/eager_allocations.h"
#include "models/model_spec.h"

namespace dtsim::models {
namespace {

// A group of two parameters over 4 ranks: 1000 × 1000 (250 rows a rank) and 3 × 1000 (one row a
// rank, the fourth padding): shards of 250,000 and 1,000 elements, padded unsharded 1,000,000 and
// 4,000. Every block is the request rounded up to 512 B.
constexpr int64_t kAllGatherInput = 502272;     // (250,000 + 1,000) × 2 B = 502,000
constexpr int64_t kAllGatherOutput = 2008064;   // 4 × 502,000 = 2,008,000
constexpr int64_t kUnsharded = 2000384 + 8192;  // 1,000,000 × 2 and 4,000 × 2 B
constexpr int64_t kReduceInput = 4016128;       // 1,004,000 × 4 B = 4,016,000
constexpr int64_t kReduceOutput = 1004032;      // 1,004,000 / 4 × 4 B = 1,004,000

class Tensors : public EagerTensors {
 public:
  Tensors() : EagerTensors(TransformerSpec{.layers = 1}, EagerRun{}, 1) {}
};

FsdpGroupSpec Group(bool reshard_after_forward) {
  return {.parameters = {{1000, 1000}, {3, 1000}}, .reshard_after_forward = reshard_after_forward};
}

TEST(EagerFsdpTest, AGroupsBuffersAcrossAStep) {
  Tensors tensors;
  FsdpGroups fsdp(tensors, 4, {Group(true), Group(true)});
  const auto allocated = [&] { return tensors.allocator_stats().allocated; };
  EXPECT_EQ(fsdp.ShardBytes({1000, 1000}), 250000 * 4);
  EXPECT_EQ(fsdp.ShardBytes({3, 1000}), 1000 * 4);
  // Forward: the flat bf16 shards and the all-gather output on the copy-in stream (the shards
  // freed), the unsharded parameters; the output kept until the next group's unshard.
  ASSERT_TRUE(fsdp.PreForward(0).ok());
  EXPECT_EQ(allocated(), kAllGatherOutput + kUnsharded);
  EXPECT_EQ(tensors.allocator_stats().peak_allocated, kAllGatherOutput + kUnsharded);
  ASSERT_TRUE(fsdp.PreForward(1).ok());  // group 0's output freed after group 1's all-gather
  EXPECT_EQ(tensors.allocator_stats().peak_allocated,
            2 * kAllGatherOutput + kUnsharded + kAllGatherInput);
  EXPECT_EQ(allocated(), kAllGatherOutput + 2 * kUnsharded);
  fsdp.PostForward(0);
  fsdp.PostForward(1);
  fsdp.FinishForward();
  EXPECT_EQ(allocated(), 0);
  // Backward: group 1 unsharded (its all-gather output freed at once), group 0 prefetched.
  ASSERT_TRUE(fsdp.PreBackward(1, 0).ok());
  EXPECT_EQ(allocated(), kUnsharded + kAllGatherOutput);
  // Its bf16 gradients, then the post-backward: unsharded parameters freed, the fp32
  // reduce-scatter input and chunk_cat's scratch (16 B × (977 + 4 + 3 × 2 + 1) = 15,808), the
  // gradients freed, the output kept as the .grad.
  for (const int64_t bytes : {int64_t{2000000}, int64_t{8000}}) {
    const Expected<CachingAllocator::Handle> gradient = tensors.AllocBuffer(bytes, 0);
    ASSERT_TRUE(gradient.ok());
    fsdp.AddGradient(1, bytes == 2000000 ? 0 : 1, *gradient, bytes);
  }
  ASSERT_TRUE(fsdp.PostBackward(1).ok());
  EXPECT_EQ(allocated(), kAllGatherOutput + kReduceInput + kReduceOutput);
  // Group 0: unsharded from its prefetch, and its reduce-scatter frees group 1's input.
  ASSERT_TRUE(fsdp.PreBackward(0, -1).ok());
  EXPECT_EQ(allocated(), kUnsharded + kReduceInput + kReduceOutput);
  const Expected<CachingAllocator::Handle> gradient = tensors.AllocBuffer(2008000, 0);
  ASSERT_TRUE(gradient.ok());
  fsdp.AddGradient(0, 0, *gradient, 2008000);
  ASSERT_TRUE(fsdp.PostBackward(0).ok());
  EXPECT_EQ(allocated(), kReduceInput + 2 * kReduceOutput);
  fsdp.FinishBackward();
  EXPECT_EQ(allocated(), 2 * kReduceOutput);  // the sharded .grad, until the optimizer's step
}

TEST(EagerFsdpTest, OneRankCastsItsShardsAndNeverReshardsWhatItKeeps) {
  // One rank: no all-gather; each shard's bf16 cast (its whole size), the unsharded tensor, the
  // cast freed once the next is made: at most the unsharded tensors and one cast live.
  Tensors tensors;
  FsdpGroups fsdp(tensors, 1, {Group(false)});
  ASSERT_TRUE(fsdp.PreForward(0).ok());
  // 2,000,384 + 8,192 unsharded (1,000,000 and 3,000 elements: 6,000 B → 6,144), the first
  // cast (2,000,384) live beside both and the second's.
  constexpr int64_t kOneRank = 2000384 + 6144;
  EXPECT_EQ(tensors.allocator_stats().allocated, kOneRank);
  EXPECT_EQ(tensors.allocator_stats().peak_allocated, 2000384 + 2000384 + 6144);
  fsdp.PostForward(0);  // reshard_after_forward false: kept for backward
  ASSERT_TRUE(fsdp.PreBackward(0, -1).ok());
  EXPECT_EQ(tensors.allocator_stats().allocated, kOneRank);
  ASSERT_TRUE(fsdp.PostBackward(0).ok());  // no gradient: only the reshard
  EXPECT_EQ(tensors.allocator_stats().allocated, 0);
}

TEST(EagerFsdpTest, UnderPipeliningGradientsAccumulateInFp32UntilTheStagesLastBackward) {
  // backward_maybe_with_nosync: no reshard and no reduce-scatter in any micro-batch's backward.
  // The first micro-batch's post-backward casts each bf16 gradient to fp32 (the fp32 copy made,
  // then the bf16 freed), the next adds into those in place; the stage's last backward calls the
  // post-backward by hand: reshard, reduce-scatter of the fp32 gradients.
  constexpr int64_t kBf16 = 2000384 + 8192;   // 2,000,000 and 8,000 B
  constexpr int64_t kFp32 = 4000256 + 16384;  // 4,000,000 and 16,000 B
  Tensors tensors;
  FsdpGroups fsdp(tensors, 4, {Group(false)}, /*accumulate=*/true);
  const auto allocated = [&] { return tensors.allocator_stats().allocated; };
  ASSERT_TRUE(fsdp.PreForward(0).ok());
  fsdp.PostForward(0);
  fsdp.FinishForward();
  EXPECT_EQ(allocated(), kUnsharded);  // kept through every micro-batch
  for (int microbatch = 0; microbatch < 3; ++microbatch) {
    ASSERT_TRUE(fsdp.PreBackward(0, -1).ok());  // unsharded already: nothing gathered
    EXPECT_EQ(allocated(), kUnsharded + (microbatch > 0 ? kFp32 : 0));
    // In backward order (the second parameter's gradient first): cast in module order.
    for (const auto& [parameter, bytes] : {std::pair{1, int64_t{8000}}, {0, int64_t{2000000}}}) {
      const Expected<CachingAllocator::Handle> gradient = tensors.AllocBuffer(bytes, 0);
      ASSERT_TRUE(gradient.ok());
      fsdp.AddGradient(0, parameter, *gradient, bytes);
    }
    const int64_t before = tensors.allocator_stats().peak_allocated;
    ASSERT_TRUE(fsdp.PostBackward(0).ok());
    EXPECT_EQ(allocated(), kUnsharded + kFp32);
    if (microbatch == 0) {
      // At most both bf16 gradients and the first fp32 copy (4,000,256) live.
      EXPECT_EQ(tensors.allocator_stats().peak_allocated, kUnsharded + kBf16 + 4000256);
    } else {  // added in place
      EXPECT_EQ(tensors.allocator_stats().peak_allocated, before);
    }
  }
  ASSERT_TRUE(fsdp.ReduceAccumulated(0).ok());
  EXPECT_EQ(allocated(), kReduceInput + kReduceOutput);
  fsdp.FinishBackward();
  EXPECT_EQ(allocated(), kReduceOutput);
}

TEST(EagerDdpTest, BucketsCloseAtTheirLimit) {
  // The first bucket closes at 1 MiB, the others at 25 MiB; a parameter past the limit closes
  // its bucket with it; the rest is a last bucket.
  constexpr int64_t kMiB = int64_t{1} << 20;
  EXPECT_EQ(DdpBucketBytes(std::vector<int64_t>(40, kMiB)),
            (std::vector<int64_t>{kMiB, 25 * kMiB, 14 * kMiB}));
  EXPECT_EQ(DdpBucketBytes(std::vector<int64_t>{kMiB / 2, 100 * kMiB, 3 * kMiB, 30 * kMiB, 8}),
            (std::vector<int64_t>{kMiB / 2 + 100 * kMiB, 33 * kMiB, 8}));
  EXPECT_TRUE(DdpBucketBytes({}).empty());
}

}  // namespace
}  // namespace dtsim::models
