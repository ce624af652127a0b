#include "sim/base/huge_page_allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>

namespace dtsim {
namespace {

TEST(HugePageAllocatorTest, VectorsKeepTheirContentsAcrossTheMappingThreshold) {
  // Growing from small blocks (operator new) to mapped ones (≥ 4 MiB) and back down with
  // shrink_to_fit moves the contents each time; every element must survive.
  LargeVector<uint64_t> values;
  const size_t count = 3 * huge_pages::kHugeBlockBytes / sizeof(uint64_t);
  for (size_t i = 0; i < count; ++i) values.push_back(i * 7);
  EXPECT_GE(values.capacity() * sizeof(uint64_t), huge_pages::kHugeBlockBytes);
  for (size_t i = 0; i < count; i += 4099) ASSERT_EQ(values[i], i * 7);
  values.resize(100);
  values.shrink_to_fit();
  EXPECT_LT(VectorBytes(values), huge_pages::kHugeBlockBytes);
  for (size_t i = 0; i < values.size(); ++i) ASSERT_EQ(values[i], i * 7);
  LargeVector<uint64_t> copy(values);  // a copy allocates through the same allocator
  EXPECT_EQ(copy, values);
}

TEST(HugePageAllocatorTest, MappedBlocksAreWritableToTheEnd) {
  HugePageAllocator<uint32_t> allocator;
  const size_t count = huge_pages::kHugeBlockBytes / sizeof(uint32_t) + 1;
  uint32_t* block = allocator.allocate(count);
  std::iota(block, block + count, 0u);
  EXPECT_EQ(block[count - 1], count - 1);
  allocator.deallocate(block, count);
}

}  // namespace
}  // namespace dtsim
