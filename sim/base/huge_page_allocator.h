// An allocator for the per-task arrays of graphs with tens of millions of tasks: a block of at
// least kHugeBlockBytes is mapped on its own and advised for transparent huge pages, so the
// kernel backs it with 2 MiB pages instead of 4 KiB ones. Debian's default THP mode is
// "madvise", so without the advice every 4 KiB of a 1.7 GB graph costs a page fault; with it,
// the full GPT-3 175B example's run measured ~9% faster (docs/strategies.md, "Speed").
// Smaller blocks, and systems without madvise, use operator new.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace dtsim {

namespace huge_pages {
inline constexpr size_t kHugeBlockBytes = size_t{4} << 20;
// A mapping of `bytes` (>= kHugeBlockBytes) advised for huge pages; throws std::bad_alloc.
void* Map(size_t bytes);
void Unmap(void* block, size_t bytes);
}  // namespace huge_pages

template <typename T>
class HugePageAllocator {
 public:
  using value_type = T;

  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT: allocators convert implicitly

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes >= huge_pages::kHugeBlockBytes) return static_cast<T*>(huge_pages::Map(bytes));
    return static_cast<T*>(::operator new(bytes, std::align_val_t(alignof(T))));
  }
  void deallocate(T* block, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes >= huge_pages::kHugeBlockBytes) {
      huge_pages::Unmap(block, bytes);
    } else {
      ::operator delete(block, std::align_val_t(alignof(T)));
    }
  }

  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
};

// A vector for per-task (or per-edge) data.
template <typename T>
using LargeVector = std::vector<T, HugePageAllocator<T>>;

// The bytes a vector holds (its capacity), for memory reports.
template <typename T, typename Allocator>
size_t VectorBytes(const std::vector<T, Allocator>& v) {
  return v.capacity() * sizeof(T);  // NOLINT(bugprone-sizeof-expression): T may be a pointer
}

}  // namespace dtsim
