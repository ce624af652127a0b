// CUPTI is present on build machines without a GPU; asking the library its version needs no
// device, so this checks the checked-call wrapper against the real library.
#include "profiler/cupti/cupti_call.h"

#include <gtest/gtest.h>

namespace dtsim::profiler {
namespace {

TEST(CuptiCallTest, RuntimeVersionIsAtLeastTheHeaders) {
  const Expected<uint32_t> version = CuptiRuntimeVersion();
  ASSERT_TRUE(version.ok()) << version.error().ToString();
  EXPECT_GE(*version, CuptiHeaderVersion());
}

TEST(CuptiCallTest, ErrorsNameTheCallAndCuptisReason) {
  const Error error = CuptiError("cuptiActivityFlushAll(0)", CUPTI_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(error.message().rfind("cuptiActivityFlushAll(0) failed: CUPTI_ERROR_NOT_INITIALIZED", 0),
            0u) << error.message();
}

}  // namespace
}  // namespace dtsim::profiler
