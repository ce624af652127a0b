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
  // The query calls' records are off by default and listed; a whole-run capture is one window
  // and hooks cudaDeviceReset.
  EXPECT_THAT(profile->api_calls_not_recorded,
              testing::IsSupersetOf({"cudaGetDevice", "cuDevicePrimaryCtxGetState"}));
  EXPECT_EQ(profile->capture_range, "whole");
  EXPECT_EQ(profile->capture_windows, 1);
  EXPECT_TRUE(profile->flush_before_device_reset);
  session->reset();  // a session ends before the next one starts
  const auto run = [](const SessionOptions& options) -> Expected<Profile> {
    DTSIM_ASSIGN_OR_RETURN(std::unique_ptr<CuptiSession> next, CuptiSession::Start(options));
    return next->Finish();
  };
  // --all-api-calls keeps them.
  const Expected<Profile> everything = run({.all_api_calls = true});
  ASSERT_TRUE(everything.ok()) << everything.error().ToString();
  EXPECT_THAT(everything->api_calls_not_recorded, testing::IsEmpty());
  // A capture by the profiler API records nothing until the program calls cuProfilerStart.
  const Expected<Profile> unopened = run({.capture_profiler_api = true});
  ASSERT_TRUE(unopened.ok()) << unopened.error().ToString();
  EXPECT_EQ(unopened->capture_range, "cuda_profiler_api");
  EXPECT_EQ(unopened->capture_windows, 0);
  EXPECT_THAT(unopened->api_calls_not_recorded, testing::IsEmpty());
}

}  // namespace
}  // namespace dtsim::profiler
