// CUPTI is present on build machines without a GPU; asking the library its version needs no
// device, so this checks the checked-call wrapper against the real library.
#include "profiler/cupti/cupti_call.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "profiler/cupti/cupti_session.h"

namespace dtsim::profiler {
namespace {

TEST(CuptiCallTest, RuntimeVersionIsAtLeastTheHeaders) {
  const Expected<uint32_t> version = CuptiRuntimeVersion();
  ASSERT_TRUE(version.ok()) << version.error().ToString();
  EXPECT_GE(*version, CuptiHeaderVersion());
}

TEST(CuptiCallTest, ErrorsNameTheCallAndCuptisReason) {
  const Error error = CuptiError("cuptiActivityFlushAll(0)", CUPTI_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(
      error.message().rfind("cuptiActivityFlushAll(0) failed: CUPTI_ERROR_NOT_INITIALIZED", 0), 0u)
      << error.message();
}

// Without a GPU CUPTI may refuse to trace; either way a session starts and finishes cleanly or
// fails with an error naming the CUPTI call, never a crash. A second session is refused.
TEST(CuptiSessionTest, StartsAndFinishesOrNamesTheFailingCall) {
  Expected<std::unique_ptr<CuptiSession>> session = CuptiSession::Start({});
  if (!session.ok()) {
    EXPECT_EQ(session.error().message().rfind("cupti", 0), 0u) << session.error().ToString();
    return;
  }
  EXPECT_THAT(CuptiSession::Start({}).error().message(), testing::HasSubstr("already running"));
  const Expected<Profile> profile = (*session)->Finish();
  ASSERT_TRUE(profile.ok()) << profile.error().ToString();
  EXPECT_TRUE(profile->kernels.empty());
  EXPECT_GE(profile->cupti_version, CuptiHeaderVersion());
}

}  // namespace
}  // namespace dtsim::profiler
