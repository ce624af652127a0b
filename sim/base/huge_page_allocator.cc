#include "sim/base/huge_page_allocator.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace dtsim::huge_pages {

#if defined(__linux__)

void* Map(size_t bytes) {
  void* block = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (block == MAP_FAILED) throw std::bad_alloc();
  // Advice only: where the kernel has no transparent huge pages the block stays in 4 KiB pages.
  (void)madvise(block, bytes, MADV_HUGEPAGE);
  return block;
}

void Unmap(void* block, size_t bytes) { munmap(block, bytes); }

#else

void* Map(size_t bytes) { return ::operator new(bytes); }
void Unmap(void* block, size_t bytes) { ::operator delete(block, bytes); }

#endif

}  // namespace dtsim::huge_pages
