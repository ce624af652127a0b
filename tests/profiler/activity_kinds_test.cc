#include "profiler/activity_kinds.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dtsim::profiler {
namespace {

TEST(ActivityKindsTest, TheDefaultIsEveryKindButSyncCudaEventAndMemory) {
  EXPECT_EQ(ActivityKinds::Default().ToString(),
            "kernel,memcpy,memset,runtime,driver,external,nvtx,overhead");
  EXPECT_EQ(ActivityKinds::All().ToString(),
            "kernel,memcpy,memset,runtime,driver,sync,cuda_event,external,nvtx,overhead,memory");
}

TEST(ActivityKindsTest, ParsesNamesSetsAndMixes) {
  EXPECT_EQ(ParseActivityKinds("kernel,memcpy")->ToString(), "kernel,memcpy");
  EXPECT_EQ(ParseActivityKinds("all")->ToString(), ActivityKinds::All().ToString());
  EXPECT_EQ(ParseActivityKinds("default")->ToString(), ActivityKinds::Default().ToString());
  EXPECT_EQ(ParseActivityKinds("default,sync")->ToString(),
            "kernel,memcpy,memset,runtime,driver,sync,external,nvtx,overhead");
  EXPECT_EQ(ParseActivityKinds("default,memory")->ToString(),
            "kernel,memcpy,memset,runtime,driver,external,nvtx,overhead,memory");
}

TEST(ActivityKindsTest, AnUnknownNameListsTheKnownOnes) {
  const Expected<ActivityKinds> kinds = ParseActivityKinds("kernel,snyc");
  ASSERT_FALSE(kinds.ok());
  EXPECT_THAT(kinds.error().ToString(), testing::HasSubstr("\"snyc\""));
  EXPECT_THAT(kinds.error().ToString(), testing::HasSubstr("did you mean \"sync\""));
  EXPECT_THAT(kinds.error().ToString(), testing::HasSubstr("(or all, default)"));
  EXPECT_FALSE(ParseActivityKinds("").ok());
}

}  // namespace
}  // namespace dtsim::profiler
