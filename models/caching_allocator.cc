#include "models/caching_allocator.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "sim/base/check.h"
#include "sim/base/units.h"

namespace dtsim::models {
namespace {

std::string Mib(int64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / static_cast<double>(kMebi));
}

}  // namespace

int64_t AllocatorBlockSize(int64_t bytes) {
  if (bytes < kAllocatorMinBlock) return kAllocatorMinBlock;
  return (bytes + kAllocatorMinBlock - 1) / kAllocatorMinBlock * kAllocatorMinBlock;
}

int64_t AllocatorSegmentSize(int64_t block_size) {
  if (block_size <= kAllocatorSmallSize) return kAllocatorSmallBuffer;
  if (block_size < kAllocatorMinLargeAlloc) return kAllocatorLargeBuffer;
  return (block_size + kAllocatorRoundLarge - 1) / kAllocatorRoundLarge * kAllocatorRoundLarge;
}

CachingAllocator::CachingAllocator(int64_t capacity) : capacity_(capacity) {}

CachingAllocator::PoolKey CachingAllocator::KeyOf(Handle handle) const {
  const Block& block = blocks_[static_cast<size_t>(handle)];
  return {block.stream, block.size, block.address, handle};
}

CachingAllocator::Handle CachingAllocator::NewBlock(const Block& block) {
  if (!unused_.empty()) {
    const Handle handle = unused_.back();
    unused_.pop_back();
    blocks_[static_cast<size_t>(handle)] = block;
    return handle;
  }
  blocks_.push_back(block);
  return static_cast<Handle>(blocks_.size() - 1);
}

CachingAllocator::Handle CachingAllocator::TakeFreeBlock(Pool& pool, int stream, int64_t size) {
  const auto it = pool.lower_bound(PoolKey{stream, size, 0, -1});
  if (it == pool.end() || std::get<0>(*it) != stream) return -1;
  const Handle handle = std::get<3>(*it);
  pool.erase(it);
  return handle;
}

CachingAllocator::Handle CachingAllocator::ReserveSegment(int64_t segment_size, int stream,
                                                          bool small) {
  if (segment_size > capacity_ - stats_.reserved) return -1;
  const Handle handle =
      NewBlock({.address = next_address_, .size = segment_size, .stream = stream, .small = small});
  next_address_ += segment_size;
  stats_.reserved += segment_size;
  stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
  ++stats_.segments;
  ++stats_.device_mallocs;
  return handle;
}

void CachingAllocator::ReleaseCachedSegments() {
  for (Pool* pool : {&small_, &large_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      const Handle handle = std::get<3>(*it);
      const Block& block = blocks_[static_cast<size_t>(handle)];
      if (block.prev != -1 || block.next != -1) {
        ++it;
        continue;
      }
      stats_.reserved -= block.size;
      --stats_.segments;
      unused_.push_back(handle);
      it = pool->erase(it);
    }
  }
}

Expected<CachingAllocator::Handle> CachingAllocator::Allocate(int64_t bytes, int stream) {
  DTSIM_CHECK(bytes > 0, "an allocation of no bytes");
  const int64_t size = AllocatorBlockSize(bytes);
  const bool small = size <= kAllocatorSmallSize;
  Pool& pool = small ? small_ : large_;
  Handle handle = TakeFreeBlock(pool, stream, size);
  if (handle == -1) {
    const int64_t segment = AllocatorSegmentSize(size);
    handle = ReserveSegment(segment, stream, small);
    if (handle == -1) {
      ReleaseCachedSegments();
      ++stats_.retries;
      handle = ReserveSegment(segment, stream, small);
    }
    if (handle == -1) {
      return Error(fmt::format(
          "out of memory: a request of {} B needs a new segment of {}, with "
          "{} allocated and {} reserved of {}",
          bytes, Mib(segment), Mib(stats_.allocated), Mib(stats_.reserved), Mib(capacity_)));
    }
  }
  Block& block = blocks_[static_cast<size_t>(handle)];
  const int64_t remaining = block.size - size;
  if (small ? remaining >= kAllocatorMinBlock : remaining > kAllocatorSmallSize) {
    const Block rest{.address = block.address + size,
                     .size = remaining,
                     .stream = stream,
                     .small = small,
                     .prev = handle,
                     .next = block.next};
    const Handle split = NewBlock(rest);  // may reallocate blocks_: `block` is stale after
    Block& kept = blocks_[static_cast<size_t>(handle)];
    if (kept.next != -1) blocks_[static_cast<size_t>(kept.next)].prev = split;
    kept.next = split;
    kept.size = size;
    pool.insert(KeyOf(split));
  }
  Block& taken = blocks_[static_cast<size_t>(handle)];
  taken.allocated = true;
  taken.requested = bytes;
  stats_.allocated += taken.size;
  stats_.requested += bytes;
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
  return handle;
}

void CachingAllocator::MergeInto(Handle into, Handle from) {
  Block& dst = blocks_[static_cast<size_t>(into)];
  Block& src = blocks_[static_cast<size_t>(from)];
  PoolOf(src).erase(KeyOf(from));
  if (src.next == into) {  // `from` precedes `into`
    dst.address = src.address;
    dst.prev = src.prev;
    if (dst.prev != -1) blocks_[static_cast<size_t>(dst.prev)].next = into;
  } else {
    dst.next = src.next;
    if (dst.next != -1) blocks_[static_cast<size_t>(dst.next)].prev = into;
  }
  dst.size += src.size;
  unused_.push_back(from);
}

void CachingAllocator::Free(Handle handle) {
  Block& block = blocks_[static_cast<size_t>(handle)];
  DTSIM_CHECK(block.allocated, "a block freed twice");
  block.allocated = false;
  stats_.allocated -= block.size;
  stats_.requested -= block.requested;
  block.requested = 0;
  for (const Handle neighbour : {block.prev, block.next}) {
    if (neighbour != -1 && !blocks_[static_cast<size_t>(neighbour)].allocated) {
      MergeInto(handle, neighbour);
    }
  }
  PoolOf(blocks_[static_cast<size_t>(handle)]).insert(KeyOf(handle));
}

}  // namespace dtsim::models
