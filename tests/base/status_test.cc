#include "sim/base/status.h"

#include <gtest/gtest.h>

namespace dtsim {
namespace {

TEST(ErrorTest, ToStringJoinsFileLocationMessageAndValue) {
  const Error error =
      Error("duration must not be negative", "tasks[3].duration", "\"-5 us\"").InFile("g.json");
  EXPECT_EQ(error.ToString(),
            "g.json: tasks[3].duration: duration must not be negative, got \"-5 us\"");
  EXPECT_EQ(Error("plain").ToString(), "plain");
}

TEST(ErrorTest, InnermostFileWins) {
  const Error error = Error("bad").InFile("inner.json").InFile("outer.json");
  EXPECT_EQ(error.file(), "inner.json");
}

TEST(ErrorTest, UnderPrefixesThePath) {
  EXPECT_EQ(Error("x", "rank").Under("tasks[2]").location(), "tasks[2].rank");
  EXPECT_EQ(Error("x", "[1]").Under("group").location(), "group[1]");
  EXPECT_EQ(Error("x").Under("--comm-latency").location(), "--comm-latency");
}

Expected<int> Half(int value) {
  if (value % 2 != 0) return Error("odd", "", std::to_string(value));
  return value / 2;
}

Expected<int> Quarter(int value) {
  DTSIM_ASSIGN_OR_RETURN(const int half, Half(value));
  DTSIM_ASSIGN_OR_RETURN(const int quarter, Half(half));
  return quarter;
}

TEST(ExpectedTest, PropagatesTheFirstError) {
  EXPECT_EQ(*Quarter(12), 3);
  const Expected<int> failed = Quarter(6);  // 6 / 2 = 3 is odd
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().value(), "3");
}

Status CheckEven(int value) {
  DTSIM_RETURN_IF_ERROR(Half(value));
  return Status::Ok();
}

TEST(StatusTest, ReturnIfError) {
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(5).error().message(), "odd");
}

TEST(CheckDeathTest, FailedCheckAbortsWithTheCondition) {
  EXPECT_DEATH(DTSIM_CHECK(1 + 1 == 3, "arithmetic is broken"),
               "internal check failed.*1 \\+ 1 == 3: arithmetic is broken");
}

}  // namespace
}  // namespace dtsim
