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

CachingAllocator::CachingAllocator(AllocatorOptions options)
    : capacity_(options.capacity), expandable_(options.expandable_segments) {}

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

int64_t CachingAllocator::ExpandableSize(Handle handle) const {
  const Block& block = blocks_[static_cast<size_t>(handle)];
  if (block.next == -1 || blocks_[static_cast<size_t>(block.next)].mapped) return block.size;
  return block.size + blocks_[static_cast<size_t>(block.next)].size;
}

CachingAllocator::Handle CachingAllocator::TakeFreeBlock(Pool& pool, int stream, int64_t size) {
  auto it = pool.lower_bound(PoolKey{stream, size, 0, -1});
  if (it == pool.end() || std::get<0>(*it) != stream) return -1;
  // A block that can grow into unmapped space counts as the size it can grow to: a larger
  // block that cannot is taken first.
  for (auto next = std::next(it);
       blocks_[static_cast<size_t>(std::get<3>(*it))].expandable && next != pool.end() &&
       std::get<0>(*next) == stream &&
       ExpandableSize(std::get<3>(*next)) < ExpandableSize(std::get<3>(*it));
       ++next) {
    it = next;
  }
  const Handle handle = std::get<3>(*it);
  pool.erase(it);
  return handle;
}

bool CachingAllocator::Map(Handle handle, int64_t bytes) {
  Block& block = blocks_[static_cast<size_t>(handle)];
  const int64_t page = block.small ? kAllocatorSmallBuffer : kAllocatorLargeBuffer;
  const int64_t mapped = std::min(block.size, (bytes + page - 1) / page * page);
  if (mapped > capacity_ - stats_.reserved) return false;
  (block.small ? small_unmapped_ : large_unmapped_)
      .erase(UnmappedKey{block.stream, block.address, handle});
  block.mapped = true;
  if (mapped < block.size) {
    const Block rest{.address = block.address + mapped,
                     .size = block.size - mapped,
                     .stream = block.stream,
                     .small = block.small,
                     .mapped = false,
                     .expandable = true,
                     .prev = handle,
                     .next = block.next};
    const Handle split = NewBlock(rest);  // `block` is stale after
    Block& kept = blocks_[static_cast<size_t>(handle)];
    if (kept.next != -1) blocks_[static_cast<size_t>(kept.next)].prev = split;
    kept.next = split;
    kept.size = mapped;
    (rest.small ? small_unmapped_ : large_unmapped_)
        .insert(UnmappedKey{rest.stream, rest.address, split});
  }
  const Block& mapped_block = blocks_[static_cast<size_t>(handle)];
  for (const Handle neighbour : {mapped_block.prev, mapped_block.next}) {
    const Block* other = neighbour == -1 ? nullptr : &blocks_[static_cast<size_t>(neighbour)];
    if (other != nullptr && !other->allocated && other->mapped) MergeInto(handle, neighbour);
  }
  PoolOf(blocks_[static_cast<size_t>(handle)]).insert(KeyOf(handle));
  stats_.reserved += mapped;
  stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
  ++stats_.device_mallocs;
  return true;
}

CachingAllocator::Handle CachingAllocator::AllocateExpandable(bool small, int stream,
                                                              int64_t size) {
  Unmapped& unmapped = small ? small_unmapped_ : large_unmapped_;
  const auto free_at = [&](Handle h) {
    return h != -1 && !blocks_[static_cast<size_t>(h)].allocated;
  };
  Handle candidate = -1;
  for (auto it = unmapped.lower_bound(UnmappedKey{stream, 0, -1});
       it != unmapped.end() && std::get<0>(*it) == stream && candidate == -1; ++it) {
    Handle start = std::get<2>(*it);
    if (free_at(blocks_[static_cast<size_t>(start)].prev)) {
      start = blocks_[static_cast<size_t>(start)].prev;
    }
    int64_t room = 0;
    for (Handle h = start; room < size && free_at(h); h = blocks_[static_cast<size_t>(h)].next) {
      room += blocks_[static_cast<size_t>(h)].size;
    }
    if (room >= size) candidate = start;
  }
  if (candidate == -1) {  // a new segment: virtual addresses enough for any device
    constexpr int64_t kVirtualBytes = int64_t{1} << 46;
    candidate = NewBlock({.address = next_address_,
                          .size = kVirtualBytes,
                          .stream = stream,
                          .small = small,
                          .mapped = false,
                          .expandable = true});
    next_address_ += kVirtualBytes;
    unmapped.insert(
        UnmappedKey{stream, blocks_[static_cast<size_t>(candidate)].address, candidate});
    ++stats_.segments;
  }
  if (!blocks_[static_cast<size_t>(candidate)].mapped) {
    if (!Map(candidate, std::min(blocks_[static_cast<size_t>(candidate)].size, size))) return -1;
  }
  while (blocks_[static_cast<size_t>(candidate)].size < size) {
    // A free mapped block before unmapped space: map what it lacks, merged into it.
    const Handle next = blocks_[static_cast<size_t>(candidate)].next;
    const int64_t lacking = size - blocks_[static_cast<size_t>(candidate)].size;
    if (!Map(next, std::min(lacking, blocks_[static_cast<size_t>(next)].size))) return -1;
    candidate = next;
  }
  PoolOf(blocks_[static_cast<size_t>(candidate)]).erase(KeyOf(candidate));
  return candidate;
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
      if (block.prev != -1 || block.next != -1 || block.expandable) {
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
  if (handle == -1 && expandable_) {
    handle = AllocateExpandable(small, stream, size);
    if (handle == -1) {
      return Error(
          fmt::format("out of memory: a request of {} B does not fit the expandable "
                      "segments, with {} allocated and {} reserved of {}",
                      bytes, Mib(stats_.allocated), Mib(stats_.reserved), Mib(capacity_)));
    }
  }
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
  if (small || block.expandable ? remaining >= kAllocatorMinBlock
                                : remaining > kAllocatorSmallSize) {
    const Block rest{.address = block.address + size,
                     .size = remaining,
                     .stream = stream,
                     .small = small,
                     .expandable = block.expandable,
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
    if (neighbour == -1) continue;
    const Block& other = blocks_[static_cast<size_t>(neighbour)];
    if (!other.allocated && other.mapped) MergeInto(handle, neighbour);
  }
  PoolOf(blocks_[static_cast<size_t>(handle)]).insert(KeyOf(handle));
}

}  // namespace dtsim::models
