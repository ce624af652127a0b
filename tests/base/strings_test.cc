#include "sim/base/strings.h"

#include <gtest/gtest.h>

#include <array>

namespace dtsim {
namespace {

TEST(EditDistanceTest, ClassicCases) {
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
  EXPECT_EQ(EditDistance("", "abc"), 3);
  EXPECT_EQ(EditDistance("same", "same"), 0);
}

TEST(ClosestMatchTest, SuggestsOnlyPlausibleTypos) {
  constexpr std::array<std::string_view, 3> kKeys = {"duration", "deps", "rank"};
  EXPECT_EQ(ClosestMatch("durtion", kKeys), "duration");
  EXPECT_EQ(ClosestMatch("dep", kKeys), "deps");
  EXPECT_EQ(ClosestMatch("completely_different", kKeys), "");
  EXPECT_EQ(DidYouMean("rnak", kKeys), " (did you mean \"rank\"?)");
}

// A short name for longer ones (cluster.gpu=h100) lists what it begins, up to three.
TEST(DidYouMeanTest, AShortNameSuggestsTheNamesItBegins) {
  const std::array<std::string_view, 4> gpus = {"a100-sxm4-80gb", "h100-sxm5-80gb",
                                                "h100-pcie-80gb", "h200-sxm-141gb"};
  EXPECT_EQ(DidYouMean("h100", gpus), " (did you mean \"h100-sxm5-80gb\" or \"h100-pcie-80gb\"?)");
  EXPECT_EQ(DidYouMean("H200", gpus), " (did you mean \"h200-sxm-141gb\"?)");
  EXPECT_EQ(DidYouMean("sxm5", gpus), " (did you mean \"h100-sxm5-80gb\"?)");
  EXPECT_EQ(DidYouMean("b200", gpus), "");  // nothing begins with it, and no name is one edit off
}

TEST(QuoteTest, EscapesLikeJson) {
  EXPECT_EQ(Quote("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
  EXPECT_EQ(Quote(std::string_view("\x01", 1)), "\"\\u0001\"");
}

}  // namespace
}  // namespace dtsim

namespace dtsim {
namespace {

TEST(CsvFieldTest, QuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(CsvField("DP 8 × TP 8"), "DP 8 × TP 8");
  EXPECT_EQ(CsvField("a,b"), "\"a,b\"");
  EXPECT_EQ(CsvField("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(CsvField("two\nlines"), "\"two\nlines\"");
}

}  // namespace
}  // namespace dtsim
