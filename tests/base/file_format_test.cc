#include "sim/base/file_format.h"

#include <gtest/gtest.h>

namespace dtsim {
namespace {

constexpr FileFormat kThing{"dtsim.thing", 2, 3, "not a thing"};

std::string ErrorOf(const char* text) {
  const Status status = CheckFormat(Json::parse(text), kThing);
  return status.ok() ? "ok" : status.error().ToString();
}

TEST(FileFormatTest, HeaderIsTheNameThenMajorDotMinor) {
  EXPECT_EQ(kThing.Version(), "2.3");
  EXPECT_EQ(FormatHeader(kThing).dump(), R"({"format":"dtsim.thing","version":"2.3"})");
}

TEST(FileFormatTest, ReadsItsMajorWithAnyMinorAndTheOldIntegerForm) {
  EXPECT_EQ(ErrorOf(R"({"format": "dtsim.thing", "version": "2.3"})"), "ok");
  EXPECT_EQ(ErrorOf(R"({"format": "dtsim.thing", "version": "2.0"})"), "ok");
  EXPECT_EQ(ErrorOf(R"({"format": "dtsim.thing", "version": "2.17"})"), "ok");  // newer minor
  EXPECT_EQ(ErrorOf(R"({"format": "dtsim.thing", "version": 2})"), "ok");       // before "M.m"
}

TEST(FileFormatTest, NamesWhatIsWrong) {
  EXPECT_EQ(ErrorOf(R"({"format": "dtsim.other", "version": "2.0"})"),
            "format: not a thing: expected format \"dtsim.thing\", got \"dtsim.other\"");
  EXPECT_EQ(ErrorOf(R"({"version": "2.0"})"), "format: missing required field");
  EXPECT_EQ(ErrorOf(R"({"format": 7})"), "format: expected a string, got 7");
  EXPECT_EQ(ErrorOf(R"({"format": "dtsim.thing"})"), "version: missing the version");
  EXPECT_EQ(ErrorOf(R"({"format": "dtsim.thing", "version": "3.0"})"),
            "version: unsupported version of dtsim.thing (this dtsim reads 2.x), got \"3.0\"");
  EXPECT_EQ(ErrorOf(R"({"format": "dtsim.thing", "version": 1})"),
            "version: unsupported version of dtsim.thing (this dtsim reads 2.x), got 1");
  for (const char* bad : {R"("2")", R"("2.")", R"(".3")", R"("2.x")", R"("2.3.1")", R"("-2.0")",
                          R"(" 2.0")", "2.0", "true", "null", R"({"major": 2})"}) {
    const std::string text = std::string(R"({"format": "dtsim.thing", "version": )") + bad + "}";
    EXPECT_NE(ErrorOf(text.c_str()).find("version: expected a version \"MAJOR.MINOR\""),
              std::string::npos)
        << bad << ": " << ErrorOf(text.c_str());
  }
  EXPECT_EQ(ErrorOf(R"([1, 2])"), "expected a JSON object, got [1,2]");
}

TEST(FileFormatTest, ErrorsInANestedDocumentCarryItsPath) {
  const Json document = Json::parse(R"({"format": "dtsim.thing", "version": "9.0"})");
  Expected<JsonObjectReader> reader = JsonObjectReader::Make(document, "points[3].result");
  ASSERT_TRUE(reader.ok());
  const Status status = CheckFormat(*reader, kThing);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().ToString(),
            "points[3].result.version: unsupported version of dtsim.thing (this dtsim reads "
            "2.x), got \"9.0\"");
}

}  // namespace
}  // namespace dtsim
