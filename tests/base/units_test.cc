#include "sim/base/units.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace dtsim
