// PyTorch's caching allocator replayed (models/caching_allocator.h): rounding, the two pools,
// segment sizes, splitting, best fit, coalescing, streams and the release-and-retry before an
// out-of-memory error. Every expected figure is derived in a comment from the policy of
// c10/cuda/CUDACachingAllocator.cpp.
#include "models/caching_allocator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dtsim::models {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

CachingAllocator::Handle Take(CachingAllocator& allocator, int64_t bytes, int stream = 0) {
  Expected<CachingAllocator::Handle> handle = allocator.Allocate(bytes, stream);
  EXPECT_TRUE(handle.ok()) << handle.error().ToString();
  return handle.ok() ? *handle : -1;
}

TEST(CachingAllocatorTest, RoundsRequestsAndSizesSegmentsAsPyTorch) {
  EXPECT_EQ(AllocatorBlockSize(1), 512);                   // at least kMinBlockSize
  EXPECT_EQ(AllocatorBlockSize(512), 512);                 // a multiple already
  EXPECT_EQ(AllocatorBlockSize(513), 1024);                // up to the next 512
  EXPECT_EQ(AllocatorSegmentSize(512), 2 * kMiB);          // small pool: 2 MiB buffers
  EXPECT_EQ(AllocatorSegmentSize(kMiB), 2 * kMiB);         // 1 MiB is still small
  EXPECT_EQ(AllocatorSegmentSize(kMiB + 512), 20 * kMiB);  // 1–10 MiB: a 20 MiB segment
  EXPECT_EQ(AllocatorSegmentSize(10 * kMiB), 10 * kMiB);   // from 10 MiB: rounded to 2 MiB
  EXPECT_EQ(AllocatorSegmentSize(10 * kMiB + 512), 12 * kMiB);
}

TEST(CachingAllocatorTest, SplitsAndCountsUnsplitSlackAsAllocated) {
  CachingAllocator allocator;
  // 1 B: a 512 B block of a new 2 MiB small segment.
  Take(allocator, 1);
  EXPECT_EQ(allocator.stats().allocated, 512);
  EXPECT_EQ(allocator.stats().requested, 1);
  EXPECT_EQ(allocator.stats().reserved, 2 * kMiB);
  // 1 MiB + 1 B: 1 MiB + 512 B out of a 20 MiB segment; the rest (19 MiB − 512 B > 1 MiB)
  // is split off and cached.
  Take(allocator, kMiB + 1);
  EXPECT_EQ(allocator.stats().allocated, 512 + kMiB + 512);
  EXPECT_EQ(allocator.stats().reserved, 2 * kMiB + 20 * kMiB);
  // 11 MiB: the best fit is the 19 MiB − 512 B cached in the 20 MiB segment; what remains,
  // 8 MiB − 512 B, is split off again. Nothing new is reserved.
  Take(allocator, 11 * kMiB);
  EXPECT_EQ(allocator.stats().allocated, 512 + kMiB + 512 + 11 * kMiB);
  EXPECT_EQ(allocator.stats().reserved, 22 * kMiB);
  EXPECT_EQ(allocator.stats().device_mallocs, 2);

  // In a new allocator, 11 MiB reserves a 12 MiB segment whose last 1 MiB is not more than
  // 1 MiB, so not split off: the request holds all 12 MiB.
  CachingAllocator fresh;
  Take(fresh, 11 * kMiB);
  EXPECT_EQ(fresh.stats().allocated, 12 * kMiB);
  EXPECT_EQ(fresh.stats().requested, 11 * kMiB);
  EXPECT_EQ(fresh.stats().reserved, 12 * kMiB);
}

TEST(CachingAllocatorTest, AFreedBlockTooSmallForTheNextRequestIsReservedBeside) {
  CachingAllocator allocator;
  // 60 MiB reserved and freed; 40 MiB split from it leaves 20 MiB cached; 30 MiB does not
  // fit there, so a 30 MiB segment is added: 90 MiB reserved for 70 MiB allocated.
  allocator.Free(Take(allocator, 60 * kMiB));
  Take(allocator, 40 * kMiB);
  Take(allocator, 30 * kMiB);
  EXPECT_EQ(allocator.stats().allocated, 70 * kMiB);
  EXPECT_EQ(allocator.stats().reserved, 90 * kMiB);
  EXPECT_EQ(allocator.stats().peak_allocated, 70 * kMiB);
  EXPECT_EQ(allocator.stats().peak_reserved, 90 * kMiB);
}

TEST(CachingAllocatorTest, TakesTheSmallestCachedBlockThatFits) {
  CachingAllocator allocator;
  // Segments of 40, 20 (in use) and 30 MiB; the 40 and the 30 freed. 25 MiB
  // takes the 30 MiB block (the smallest that holds it) and leaves 5 MiB cached: a 35 MiB
  // request then still finds the 40 MiB block, and nothing new is reserved.
  const CachingAllocator::Handle forty = Take(allocator, 40 * kMiB);
  Take(allocator, 20 * kMiB);
  const CachingAllocator::Handle thirty = Take(allocator, 30 * kMiB);
  allocator.Free(forty);
  allocator.Free(thirty);
  Take(allocator, 25 * kMiB);
  Take(allocator, 35 * kMiB);
  EXPECT_EQ(allocator.stats().reserved, 90 * kMiB);
  EXPECT_EQ(allocator.stats().device_mallocs, 3);
  // Of the 40 MiB block, 35 MiB taken and 5 MiB (> 1 MiB) split off; of the 30 MiB one,
  // 25 MiB and 5 MiB: 20 + 25 + 35 = 80 MiB allocated.
  EXPECT_EQ(allocator.stats().allocated, 80 * kMiB);
}

TEST(CachingAllocatorTest, FreedNeighboursMergeBackIntoTheirSegment) {
  CachingAllocator allocator;
  // A 100 MiB segment cut into 30 + 30 + 40 (cached); freeing both 30s merges the three back
  // into one 100 MiB block, which a 100 MiB request takes without a new segment.
  allocator.Free(Take(allocator, 100 * kMiB));
  const CachingAllocator::Handle a = Take(allocator, 30 * kMiB);
  const CachingAllocator::Handle b = Take(allocator, 30 * kMiB);
  allocator.Free(a);
  allocator.Free(b);
  Take(allocator, 100 * kMiB);
  EXPECT_EQ(allocator.stats().reserved, 100 * kMiB);
  EXPECT_EQ(allocator.stats().device_mallocs, 1);
  EXPECT_EQ(allocator.stats().allocated, 100 * kMiB);
}

TEST(CachingAllocatorTest, BlocksAreReusedOnTheirOwnStreamOnly) {
  CachingAllocator allocator;
  // 50 MiB freed on stream 0 is not handed to stream 1 (its kernels may still use it).
  allocator.Free(Take(allocator, 50 * kMiB, 0));
  Take(allocator, 50 * kMiB, 1);
  EXPECT_EQ(allocator.stats().reserved, 100 * kMiB);
  Take(allocator, 50 * kMiB, 0);
  EXPECT_EQ(allocator.stats().reserved, 100 * kMiB);
}

TEST(CachingAllocatorTest, SmallRequestsPackIntoTwoMebibyteSegments) {
  CachingAllocator allocator;
  // 4,096 blocks of 512 B fill one 2 MiB segment exactly; the next opens a second.
  for (int i = 0; i < 4096; ++i) Take(allocator, 512);
  EXPECT_EQ(allocator.stats().segments, 1);
  Take(allocator, 512);
  EXPECT_EQ(allocator.stats().segments, 2);
  EXPECT_EQ(allocator.stats().reserved, 4 * kMiB);
}

TEST(CachingAllocatorTest, ReleasesItsCacheBeforeRunningOutOfMemory) {
  CachingAllocator allocator({.capacity = 100 * kMiB});
  // 60 MiB cached; 80 MiB more would pass 100 MiB, so the cache is released (one retry)
  // and the 80 MiB segment reserved.
  allocator.Free(Take(allocator, 60 * kMiB));
  Take(allocator, 80 * kMiB);
  EXPECT_EQ(allocator.stats().reserved, 80 * kMiB);
  EXPECT_EQ(allocator.stats().retries, 1);
  EXPECT_EQ(allocator.stats().peak_reserved, 80 * kMiB);  // never 140 MiB
  // 30 MiB more: nothing cached to release, 80 + 30 > 100.
  const Expected<CachingAllocator::Handle> oom = allocator.Allocate(30 * kMiB);
  ASSERT_FALSE(oom.ok());
  EXPECT_EQ(oom.error().message(),
            "out of memory: a request of 31457280 B needs a new segment of 30.0 MiB, with 80.0 "
            "MiB allocated and 80.0 MiB reserved of 100.0 MiB");
}

TEST(CachingAllocatorTest, ASplitSegmentIsNotReleased) {
  CachingAllocator allocator({.capacity = 100 * kMiB});
  // A 60 MiB segment with 20 MiB in use and 40 MiB cached: the cached part cannot be
  // released (its segment is in use), so 50 MiB more does not fit: 60 + 50 > 100.
  allocator.Free(Take(allocator, 60 * kMiB));
  Take(allocator, 20 * kMiB);
  EXPECT_FALSE(allocator.Allocate(50 * kMiB).ok());
  EXPECT_EQ(allocator.stats().reserved, 60 * kMiB);
  // 40 MiB fits in the cached rest.
  Take(allocator, 40 * kMiB);
  EXPECT_EQ(allocator.stats().allocated, 60 * kMiB);
}

// Expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True): one segment per pool
// and stream grows by 20 MiB pages (large pool) at its end.
TEST(CachingAllocatorTest, ExpandableSegmentsMapPagesAtTheirEnd) {
  CachingAllocator allocator({.expandable_segments = true});
  // 30 MiB maps two pages (40 MiB) and splits off 10 MiB (512 B or more splits, in either
  // pool). 15 MiB fits no cached block; the free 10 MiB before the unmapped end takes one page
  // more (it lacks 5 MiB): 30 MiB, of which 15 are split off. 60 MiB reserved for 45 MiB
  // allocated — the default allocator reserves 30 + 16 = 46 MiB, one segment each.
  Take(allocator, 30 * kMiB);
  EXPECT_EQ(allocator.stats().reserved, 40 * kMiB);
  Take(allocator, 15 * kMiB);
  EXPECT_EQ(allocator.stats().reserved, 60 * kMiB);
  EXPECT_EQ(allocator.stats().allocated, 45 * kMiB);
  EXPECT_EQ(allocator.stats().segments, 1);
  // The fragmenting sequence of AFreedBlockTooSmallForTheNextRequestIsReservedBeside: 60 MiB
  // freed, 40 MiB split from it, 30 MiB then grows the free 20 MiB at the end by one page:
  // 80 MiB reserved where the default allocator reserves 90.
  CachingAllocator other({.expandable_segments = true});
  other.Free(Take(other, 60 * kMiB));
  Take(other, 40 * kMiB);
  Take(other, 30 * kMiB);
  EXPECT_EQ(other.stats().reserved, 80 * kMiB);
  EXPECT_EQ(other.stats().allocated, 70 * kMiB);
}

TEST(CachingAllocatorTest, ExpandableSegmentsKeepTheGrowableBlockForLast) {
  CachingAllocator allocator({.expandable_segments = true});
  // [45 | 15 | 40 | unmapped], 100 MiB mapped (45 maps three pages, 15 fills the rest, 40 two
  // more); the 45 and the 40 freed. 38 MiB fits both: the 40 is the smaller, but it can grow
  // into the unmapped end, so the 45 is taken (38 + 7 split off). 42 MiB then fits no cached
  // block and the free 40 at the end grows by a page: 120 MiB reserved.
  const CachingAllocator::Handle a = Take(allocator, 45 * kMiB);
  Take(allocator, 15 * kMiB);
  const CachingAllocator::Handle c = Take(allocator, 40 * kMiB);
  EXPECT_EQ(allocator.stats().reserved, 100 * kMiB);
  allocator.Free(a);
  allocator.Free(c);
  Take(allocator, 38 * kMiB);
  EXPECT_EQ(allocator.stats().reserved, 100 * kMiB);
  Take(allocator, 42 * kMiB);
  EXPECT_EQ(allocator.stats().reserved, 120 * kMiB);
  EXPECT_EQ(allocator.stats().allocated, (15 + 38 + 42) * kMiB);
}

TEST(CachingAllocatorTest, ExpandableSegmentsRunOutOfMemoryAtTheCapacity) {
  CachingAllocator allocator({.capacity = 50 * kMiB, .expandable_segments = true});
  Take(allocator, 30 * kMiB);  // 40 MiB mapped
  const Expected<CachingAllocator::Handle> oom = allocator.Allocate(25 * kMiB);
  ASSERT_FALSE(oom.ok());  // 10 free + 15 lacking: one page more, 60 > 50
  EXPECT_EQ(oom.error().message(),
            "out of memory: a request of 26214400 B does not fit the expandable segments, "
            "with 30.0 MiB allocated and 40.0 MiB reserved of 50.0 MiB");
  Take(allocator, 10 * kMiB);  // the cached 10 MiB
  EXPECT_EQ(allocator.stats().reserved, 40 * kMiB);
}

}  // namespace
}  // namespace dtsim::models
