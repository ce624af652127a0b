#include "sim/base/units.h"

#include <gtest/gtest.h>

#include <limits>

#include "sim/base/time.h"

namespace dtsim {
namespace {

TEST(TimeTest, PointsAndIntervalsCombine) {
  const TimeNs start(1000);
  const TimeNs end = start + Microseconds(3);
  EXPECT_EQ(end.ns(), 4000);
  EXPECT_EQ((end - start).ns(), 3000);
  EXPECT_EQ(Milliseconds(2).ns(), 2'000'000);
  EXPECT_EQ(Seconds(1).ns(), 1'000'000'000);
  EXPECT_LT(start, end);
  EXPECT_DOUBLE_EQ(Milliseconds(1500).ToSecondsDouble(), 1.5);
}

// Time arithmetic saturates at the int64 range rather than overflowing (undefined behaviour
// UBSan reports; in a release build a wrapped, negative time).
TEST(TimeTest, ArithmeticSaturatesAtTheInt64Range) {
  const DurationNs max = DurationNs::Max();
  const DurationNs min = DurationNs(std::numeric_limits<int64_t>::min());
  EXPECT_EQ(max + Nanoseconds(1), max);
  EXPECT_EQ(min - Nanoseconds(1), min);
  EXPECT_EQ(min + Nanoseconds(-1), min);
  EXPECT_EQ(max - Nanoseconds(-1), max);
  EXPECT_EQ(max * 2, max);
  EXPECT_EQ(max * -2, min);
  EXPECT_EQ(min * -1, max);  // -(-2^63) is 2^63, one past the maximum
  DurationNs sum = Seconds(1);
  sum += max;
  EXPECT_EQ(sum, max);
  sum -= max;  // saturated sums stay saturated: max - max is 0, not the 1 s lost
  EXPECT_EQ(sum, DurationNs::Zero());
  EXPECT_EQ(TimeNs::Max() + Seconds(1), TimeNs::Max());
  EXPECT_EQ(TimeNs::Max() - TimeNs(-1), max);
  TimeNs now(int64_t{9'000'000'000'000'000'000});
  now += Seconds(1'000'000'000);  // 9.0e18 + 1e18 ns
  EXPECT_EQ(now, TimeNs::Max());
  // Within range, nothing changes: 2^62 + 2^62 - 1 = 2^63 - 1 exactly.
  EXPECT_EQ(DurationNs(int64_t{1} << 62) + DurationNs((int64_t{1} << 62) - 1), max);
  // 2^62 * 2 = 2^63 is one past the range: it saturates to 2^63 - 1, and stays one short.
  EXPECT_EQ(DurationNs(int64_t{1} << 62) * 2 - Nanoseconds(3), DurationNs::Max() - Nanoseconds(3));
}

TEST(TimeTest, ClampedNsSaturatesAndTakesNaNAsTheMaximum) {
  EXPECT_EQ(ClampedNs(1234.0), Nanoseconds(1234));
  EXPECT_EQ(ClampedNs(-1234.0), Nanoseconds(-1234));
  EXPECT_EQ(ClampedNs(1e300), DurationNs::Max());
  EXPECT_EQ(ClampedNs(9223372036854775808.0), DurationNs::Max());  // 2^63
  EXPECT_EQ(ClampedNs(-1e300), DurationNs(std::numeric_limits<int64_t>::min()));
  EXPECT_EQ(ClampedNs(std::numeric_limits<double>::infinity()), DurationNs::Max());
  EXPECT_EQ(ClampedNs(std::numeric_limits<double>::quiet_NaN()), DurationNs::Max());
  // The largest double below 2^63, 2^63 - 1024, converts exactly.
  EXPECT_EQ(ClampedNs(9223372036854774784.0), Nanoseconds(9'223'372'036'854'774'784));
}

TEST(UnitsTest, PrefixesAreDefinedOnce) {
  EXPECT_EQ(kGiga, 1'000'000'000);
  EXPECT_EQ(kGibi, int64_t{1} << 30);
  EXPECT_EQ(Bandwidth::BytesPerSecond(25 * kGiga).bits_per_second(), 200 * kGiga);
}

TEST(TransferTimeTest, ExactWhenDivisible) {
  // 1 GB at 8 Gbps: 8e9 bits / 8e9 bits/s = 1 s.
  EXPECT_EQ(TransferTime(Bytes(kGiga), Bandwidth::BitsPerSecond(8 * kGiga)), Seconds(1));
  // 1 byte at 1 Gbps: 8 bits / 1e9 bits/s = 8 ns.
  EXPECT_EQ(TransferTime(Bytes(1), Bandwidth::BitsPerSecond(kGiga)), Nanoseconds(8));
}

TEST(TransferTimeTest, RoundsUp) {
  // 1 byte at 3 bit/s: 8/3 s = 2666666666.67 ns, rounded up to ...667.
  EXPECT_EQ(TransferTime(Bytes(1), Bandwidth::BitsPerSecond(3)), Nanoseconds(2'666'666'667));
}

TEST(TransferTimeTest, NeverZeroForNonEmptyTransfer) {
  // 1 byte at 1 Pbps: 8e-6 ns, still 1 ns.
  EXPECT_EQ(TransferTime(Bytes(1), Bandwidth::BitsPerSecond(kPeta)), Nanoseconds(1));
  EXPECT_EQ(TransferTime(Bytes(0), Bandwidth::BitsPerSecond(kGiga)), Nanoseconds(0));
}

TEST(TransferTimeTest, LargeTransfersDoNotOverflow) {
  // 1 TiB at 100 Gbps: 2^40 * 8 bits / 1e11 bits/s = 87.96093022208 s exactly.
  EXPECT_EQ(TransferTime(Bytes(kTebi), Bandwidth::BitsPerSecond(100 * kGiga)),
            Nanoseconds(87'960'930'223));
}

TEST(TransferTimeTest, SaturatesPastTheInt64Range) {
  // 2^62 bytes at 1 bit/s: 2^65 s, 3.7e28 ns, far past int64's 9.2e18.
  EXPECT_EQ(TransferTime(Bytes(int64_t{1} << 62), Bandwidth::BitsPerSecond(1)), DurationNs::Max());
  // 1 GB at 1 bit/s: 8e9 s = 8e18 ns, just inside.
  EXPECT_EQ(TransferTime(Bytes(kGiga), Bandwidth::BitsPerSecond(1)),
            Nanoseconds(8'000'000'000'000'000'000));
}

}  // namespace
}  // namespace dtsim
