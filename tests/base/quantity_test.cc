#include "sim/base/quantity.h"

#include <gtest/gtest.h>

namespace dtsim {
namespace {

TEST(ParseBandwidthTest, NetworkAndMemoryUnits) {
  EXPECT_EQ(ParseBandwidth("100 Gbps")->bits_per_second(), 100 * kGiga);
  EXPECT_EQ(ParseBandwidth("100 Gb/s")->bits_per_second(), 100 * kGiga);
  // 25 GB/s = 25e9 bytes/s = 200e9 bits/s.
  EXPECT_EQ(ParseBandwidth("25 GB/s")->bits_per_second(), 200 * kGiga);
  // 1.6 TB/s = 1.6e12 bytes/s = 1.28e13 bits/s.
  EXPECT_EQ(ParseBandwidth("1.6 TB/s")->bits_per_second(), 12'800 * kGiga);
  // 1 GiB/s = 2^30 bytes/s = 2^33 bits/s.
  EXPECT_EQ(ParseBandwidth("1 GiB/s")->bits_per_second(), int64_t{1} << 33);
  EXPECT_EQ(ParseBandwidth("200Gbps")->bits_per_second(), 200 * kGiga);
}

TEST(ParseBytesTest, DecimalAndBinaryPrefixes) {
  EXPECT_EQ(ParseBytes("80 GiB")->count(), 80 * kGibi);
  EXPECT_EQ(ParseBytes("80 GB")->count(), 80 * kGiga);
  EXPECT_EQ(ParseBytes("1.5 KiB")->count(), 1536);
  EXPECT_EQ(ParseBytes("0 B")->count(), 0);
  EXPECT_EQ(ParseBytes("  4 MiB  ")->count(), 4 * kMebi);
}

TEST(ParseDurationTest, Units) {
  EXPECT_EQ(*ParseDuration("2 us"), Microseconds(2));
  EXPECT_EQ(*ParseDuration("2 \u00b5s"), Microseconds(2));
  EXPECT_EQ(*ParseDuration("1.5 ms"), Microseconds(1500));
  EXPECT_EQ(*ParseDuration("1e3 ns"), Microseconds(1));
  EXPECT_EQ(*ParseDuration("3 s"), Seconds(3));
  // Minutes and hours, for what a training run's reliability is told in (time_to_train).
  EXPECT_EQ(*ParseDuration("10 min"), Seconds(600));
  EXPECT_EQ(*ParseDuration("1.5 h"), Seconds(5400));
  // 292 years of nanoseconds fit an int64; 3·10^6 hours (342 years) do not.
  EXPECT_EQ(*ParseDuration("2000000 h"), Seconds(7200000000));
  EXPECT_FALSE(ParseDuration("3e6 h").ok());
  // 1.2345 us = 1234.5 ns, rounded to the nearest ns (away from zero at .5).
  EXPECT_EQ(*ParseDuration("1.2345 us"), Nanoseconds(1235));
}

TEST(ParseFlopRateTest, Units) {
  EXPECT_DOUBLE_EQ(ParseFlopRate("312 TFLOP/s")->flop_per_second(), 312e12);
  EXPECT_DOUBLE_EQ(ParseFlopRate("989.5 TFLOPS")->flop_per_second(), 989.5e12);
}

// One test per error the parser can give: the message and the offending value.
struct BadQuantity {
  const char* text;
  const char* message;
};

class BadBandwidthTest : public testing::TestWithParam<BadQuantity> {};

TEST_P(BadBandwidthTest, ReportsMessageAndValue) {
  const Expected<Bandwidth> parsed = ParseBandwidth(GetParam().text);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().message(), GetParam().message);
  EXPECT_EQ(parsed.error().value(), std::string("\"") + GetParam().text + "\"");
}

INSTANTIATE_TEST_SUITE_P(
    Errors, BadBandwidthTest,
    testing::Values(
        BadQuantity{"100 Gbs", "unknown bandwidth unit \"Gbs\" (did you mean \"Gbps\"?)"},
        BadQuantity{"100 gbps", "unknown bandwidth unit \"gbps\" (did you mean \"Gbps\"?)"},
        BadQuantity{"", "empty bandwidth"}, BadQuantity{"   ", "empty bandwidth"},
        BadQuantity{"-5 Gbps", "bandwidth must not be negative"},
        BadQuantity{"100",
                    "bandwidth needs a unit, one of \"bps\", \"kbps\", \"Kbps\", "
                    "\"Mbps\", \"Gbps\", \"Tbps\", \"b/s\", \"kb/s\", \"Mb/s\", \"Gb/s\", "
                    "\"Tb/s\", \"B/s\", \"kB/s\", \"KB/s\", \"MB/s\", \"GB/s\", \"TB/s\", "
                    "\"KiB/s\", \"MiB/s\", \"GiB/s\", \"TiB/s\""},
        BadQuantity{"fast", "bandwidth must start with a number, as in \"1 bps\""},
        BadQuantity{". Gbps", "malformed number in bandwidth"},
        BadQuantity{"1e+ Gbps", "malformed number in bandwidth"},
        BadQuantity{"0.01 bps", "bandwidth is below the resolution of 1 bps"},
        BadQuantity{"1e30 Tbps", "bandwidth is too large"}));

TEST(ParseQuantityErrorsTest, UnknownUnitWithoutCloseMatchListsUnits) {
  const Expected<DurationNs> parsed = ParseDuration("5 fortnights");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().message(),
            "unknown duration unit \"fortnights\" (expected one of \"ns\", \"us\", \"\u00b5s\", "
            "\"ms\", \"s\", \"min\", \"h\")");
}

TEST(ParseQuantityErrorsTest, DurationBelowResolution) {
  EXPECT_EQ(ParseDuration("0.1 ns").error().message(), "duration is below the resolution of 1 ns");
  EXPECT_EQ(ParseDuration("-5 us").error().message(), "duration must not be negative");
  EXPECT_EQ(ParseDuration("5 Us").error().message(),
            "unknown duration unit \"Us\" (did you mean \"us\"?)");
}

TEST(ParseQuantityErrorsTest, BytesErrors) {
  EXPECT_EQ(ParseBytes("4 MiBs").error().message(),
            "unknown size unit \"MiBs\" (did you mean \"MiB\"?)");
  EXPECT_EQ(ParseBytes("1.2.3 B").error().message(),
            "unknown size unit \".3 B\" (expected one of \"B\", \"kB\", \"KB\", \"MB\", \"GB\", "
            "\"TB\", \"PB\", \"KiB\", \"MiB\", \"GiB\", \"TiB\", \"PiB\")");
  // The whole error as a user reads it.
  EXPECT_EQ(ParseBytes("4 GiBB").error().ToString(),
            "unknown size unit \"GiBB\" (did you mean \"GiB\"?), got \"4 GiBB\"");
}

// Found by the quantity fuzzer in CI: 0 * 10^9501 was 0 * inf = NaN, which llround turned into
// INT64_MIN (and FormatDuration then negated it). Zero is zero whatever its exponent; a value too
// large for long double is "too large", not NaN or infinity.
TEST(ParseQuantityErrorsTest, HugeExponentsAreZeroOrTooLarge) {
  EXPECT_EQ(ParseDuration(".0e09501s")->ns(), 0);
  EXPECT_EQ(ParseBytes("0e9999 B")->count(), 0);
  EXPECT_EQ(ParseFlopRate("0e9999 FLOP/s")->flop_per_second(), 0.0);
  EXPECT_EQ(ParseDuration("1e9999 s").error().message(), "duration is too large");
  EXPECT_EQ(ParseFlopRate("1e9999 PFLOP/s").error().message(), "FLOP rate is too large");
}

TEST(FormatTest, HumanRenderings) {
  EXPECT_EQ(FormatDuration(Nanoseconds(999)), "999 ns");
  EXPECT_EQ(FormatDuration(Nanoseconds(1'234'567)), "1.235 ms");
  EXPECT_EQ(FormatDuration(Seconds(2)), "2.000 s");
  EXPECT_EQ(FormatBandwidth(*ParseBandwidth("100 Gbps")), "12.5 GB/s");
}

}  // namespace
}  // namespace dtsim
