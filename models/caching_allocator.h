// PyTorch's CUDA caching allocator replayed over a sequence of allocations and frees, to say
// what a run reserves (torch.cuda.max_memory_reserved) beside what its tensors hold
// (max_memory_allocated). The policy is that of c10/cuda/CUDACachingAllocator.cpp (PyTorch 1.x
// to 2.11) under its default configuration — no expandable segments, no max_split_size, no
// garbage-collection threshold (docs/allocator.md):
//
// - a request is rounded up to a multiple of 512 B (512 B at least);
// - requests of at most 1 MiB come from the small pool, the rest from the large one;
// - a request takes the smallest cached free block of its pool and stream that holds it
//   (ties: the lowest address); failing that, a new segment is reserved (cudaMalloc): 2 MiB
//   for a small request, 20 MiB for a large one under 10 MiB, else the request rounded up
//   to 2 MiB;
// - the block is split when what remains is at least 512 B (small pool) or more than 1 MiB
//   (large pool); an unsplit block is allocated whole, its slack counted as allocated;
// - a freed block merges with free neighbours of its segment and is cached, never returned
//   to the device, except when a new segment would pass the capacity: then every cached
//   segment with no block in use is released and the reservation tried once more (an
//   out-of-memory error when that fails too).
//
// With expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, which torchtitan
// sets) each stream's pool has one segment of virtual addresses that grows by mapping pages —
// 2 MiB in the small pool, 20 MiB in the large — at its end: a request no cached block holds
// takes the lowest-addressed unmapped space, with the free block before it, and maps what it
// lacks; a block splits whenever 512 B or more remain; free neighbours merge only when both
// are mapped; and a cached block that can still grow (the one before the unmapped end) is
// passed over for another that fits. Releasing mapped pages is not modelled: past the capacity
// an expandable allocator is out of memory.
#pragma once

#include <cstdint>
#include <limits>
#include <set>
#include <tuple>
#include <vector>

#include "sim/base/status.h"

namespace dtsim::models {

inline constexpr int64_t kAllocatorMinBlock = 512;                     // kMinBlockSize
inline constexpr int64_t kAllocatorSmallSize = int64_t{1} << 20;       // kSmallSize: 1 MiB
inline constexpr int64_t kAllocatorSmallBuffer = int64_t{2} << 20;     // kSmallBuffer
inline constexpr int64_t kAllocatorLargeBuffer = int64_t{20} << 20;    // kLargeBuffer
inline constexpr int64_t kAllocatorMinLargeAlloc = int64_t{10} << 20;  // kMinLargeAlloc
inline constexpr int64_t kAllocatorRoundLarge = int64_t{2} << 20;      // kRoundLarge

struct AllocatorOptions {
  // The device memory the allocator may reserve (the GPU's less the CUDA context's and
  // NCCL's), past which it releases its cache and then runs out of memory.
  int64_t capacity = std::numeric_limits<int64_t>::max();
  bool expandable_segments = false;
};

// The bytes a request of `bytes` occupies (round_size) and the segment reserved for it when
// no cached block holds it (get_allocation_size).
int64_t AllocatorBlockSize(int64_t bytes);
int64_t AllocatorSegmentSize(int64_t block_size);

struct AllocatorStats {
  int64_t allocated = 0;       // bytes of the blocks in use (rounded, unsplit slack included)
  int64_t reserved = 0;        // bytes of the segments reserved from the device
  int64_t requested = 0;       // bytes the live requests asked for
  int64_t peak_allocated = 0;  // max_memory_allocated
  int64_t peak_reserved = 0;   // max_memory_reserved
  int64_t segments = 0;        // segments reserved now (expandable: segments begun)
  int64_t device_mallocs = 0;  // segments reserved (expandable: page ranges mapped) in all
  int64_t retries = 0;         // times the cached segments were released to make room
};

class CachingAllocator {
 public:
  using Handle = int32_t;

  explicit CachingAllocator(AllocatorOptions options = {});

  // A block of at least `bytes` (> 0) on `stream`; an out-of-memory error naming the request
  // and what is allocated and reserved when even an emptied cache leaves no room.
  Expected<Handle> Allocate(int64_t bytes, int stream = 0);
  // Returns the block to its pool. Precondition: `handle` came from Allocate and is live.
  void Free(Handle handle);

  const AllocatorStats& stats() const { return stats_; }
  // Starts the peaks over from now, as torch.cuda.reset_peak_memory_stats does.
  void ResetPeaks() {
    stats_.peak_allocated = stats_.allocated;
    stats_.peak_reserved = stats_.reserved;
  }

 private:
  struct Block {
    int64_t address = 0;
    int64_t size = 0;
    int64_t requested = 0;
    int stream = 0;
    bool small = false;
    bool allocated = false;
    bool mapped = true;       // false: an expandable segment's unmapped end
    bool expandable = false;  // in an expandable segment
    Handle prev = -1;         // neighbours within the segment
    Handle next = -1;
  };
  // A pool orders its free blocks as PyTorch's BlockComparator: stream, size, address.
  using PoolKey = std::tuple<int, int64_t, int64_t, Handle>;
  using Pool = std::set<PoolKey>;
  // An expandable segment's unmapped space, by stream and address.
  using UnmappedKey = std::tuple<int, int64_t, Handle>;
  using Unmapped = std::set<UnmappedKey>;

  Pool& PoolOf(const Block& block) { return block.small ? small_ : large_; }
  PoolKey KeyOf(Handle handle) const;
  Handle NewBlock(const Block& block);
  // A cached block of `pool` on `stream` holding `size` bytes, taken out of the pool; -1 if
  // none.
  Handle TakeFreeBlock(Pool& pool, int stream, int64_t size);
  // Reserves a segment of `segment_size` bytes as one block; -1 past the capacity.
  Handle ReserveSegment(int64_t segment_size, int stream, bool small);
  // Releases every cached block that is a whole segment (release_cached_blocks).
  void ReleaseCachedSegments();
  // An expandable segment's free block of at least `size` bytes, pages mapped as needed and
  // taken out of the pool; -1 past the capacity (try_allocate_expandable_block).
  Handle AllocateExpandable(bool small, int stream, int64_t size);
  // Maps the pages holding the first `bytes` of unmapped block `handle`, merged with the free
  // blocks beside it and cached; false past the capacity (map_block).
  bool Map(Handle handle, int64_t bytes);
  int64_t ExpandableSize(Handle handle) const;
  void MergeInto(Handle into, Handle from);

  int64_t capacity_;
  bool expandable_;
  int64_t next_address_ = 0;
  std::vector<Block> blocks_;
  std::vector<Handle> unused_;  // indices of blocks_ merged away or released
  Pool small_;
  Pool large_;
  Unmapped small_unmapped_;
  Unmapped large_unmapped_;
  AllocatorStats stats_;
};

}  // namespace dtsim::models
