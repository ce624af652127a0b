#include "sim/base/json_reader.h"

#include <gtest/gtest.h>

namespace dtsim {
namespace {

// The reader points into `value`, which must outlive it.
JsonObjectReader Reader(const Json& value) {
  Expected<JsonObjectReader> reader = JsonObjectReader::Make(value, "cluster");
  EXPECT_TRUE(reader.ok());
  return std::move(reader).value();
}

TEST(ParseJsonTest, SyntaxErrorNamesFileLineAndColumn) {
  const Expected<Json> parsed = ParseJson("{\n  \"a\": 1,\n  \"b\" 2\n}", "c.json");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().file(), "c.json");
  EXPECT_EQ(parsed.error().location(), "line 3, column 7");
  EXPECT_NE(parsed.error().message().find("invalid JSON"), std::string::npos);
}

// Regression (issue 26): 100,000 nested arrays overflowed the stack of the recursive code that
// copies, compares and prints JSON values; the parser now stops at kMaxJsonDepth.
TEST(ParseJsonTest, NestingPastTheLimitIsAnErrorNamingWhere) {
  const std::string deep = "{\"a\":\n" + std::string(100000, '[') + std::string(100000, ']') + "}";
  const Expected<Json> parsed = ParseJson(deep, "deep.json");
  ASSERT_FALSE(parsed.ok());
  // The 257th open bracket: the object is level 1, the arrays 2..; line 2 holds the arrays.
  EXPECT_EQ(parsed.error().ToString(),
            "deep.json: line 2, column 256: JSON nested deeper than 256 levels");
  const std::string at_limit = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(ParseJson(at_limit, "ok.json").ok());
}

TEST(ParseJsonTest, BracketsInsideStringsDoNotCountAsNesting) {
  const std::string text = "[\"" + std::string(1000, '[') + "\\\"{\"]";
  EXPECT_FALSE(FindJsonNestingPastLimit(text, 1).has_value());
  EXPECT_TRUE(ParseJson(text, "s.json").ok());
  EXPECT_EQ(FindJsonNestingPastLimit("[[{}]]", 2), std::optional<size_t>(2));
}

TEST(ReadJsonFileTest, MissingFile) {
  const Expected<Json> parsed = ReadJsonFile("/nonexistent/x.json");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().ToString(),
            "/nonexistent/x.json: cannot open: No such file or directory");
}

TEST(JsonObjectReaderTest, ReadsTypedFields) {
  const Json value = {{"name", "a100"},
                      {"nodes", 4},
                      {"latency", "2 us"},
                      {"bandwidth", "200 Gbps"},
                      {"memory", "80 GiB"}};
  JsonObjectReader reader = Reader(value);
  EXPECT_EQ(*reader.String("name"), "a100");
  EXPECT_EQ(*reader.Int("nodes"), 4);
  EXPECT_EQ(*reader.Duration("latency"), Microseconds(2));
  EXPECT_EQ(reader.Rate("bandwidth")->bits_per_second(), 200 * kGiga);
  EXPECT_EQ(reader.Size("memory")->count(), 80 * kGibi);
  EXPECT_EQ(*reader.IntOr("absent", 7), 7);
  EXPECT_TRUE(reader.Finish().ok());
}

TEST(JsonObjectReaderTest, MissingFieldNamesThePath) {
  const Json empty = Json::object();
  JsonObjectReader reader = Reader(empty);
  EXPECT_EQ(reader.Int("nodes").error().ToString(), "cluster.nodes: missing required field");
}

TEST(JsonObjectReaderTest, WrongTypeNamesPathAndValue) {
  const Json value = {{"nodes", "four"}, {"name", 3}, {"latency", 2}};
  JsonObjectReader reader = Reader(value);
  EXPECT_EQ(reader.Int("nodes").error().ToString(),
            "cluster.nodes: expected an integer, got \"four\"");
  EXPECT_EQ(reader.String("name").error().ToString(), "cluster.name: expected a string, got 3");
  EXPECT_EQ(reader.Duration("latency").error().ToString(),
            "cluster.latency: expected a quantity with a unit, such as \"2 us\", got 2");
}

TEST(JsonObjectReaderTest, BadQuantityNamesPathAndValue) {
  const Json value = {{"bandwidth", "100 Gbs"}};
  JsonObjectReader reader = Reader(value);
  EXPECT_EQ(reader.Rate("bandwidth").error().ToString(),
            "cluster.bandwidth: unknown bandwidth unit \"Gbs\" (did you mean \"Gbps\"?), "
            "got \"100 Gbs\"");
}

TEST(JsonObjectReaderTest, UnknownKeySuggestsNearestKnownKey) {
  const Json value = {{"nodse", 4}};
  JsonObjectReader reader = Reader(value);
  (void)reader.IntOr("nodes", 1);
  (void)reader.IntOr("gpus_per_node", 8);
  EXPECT_EQ(reader.Finish().error().ToString(),
            "cluster.nodse: unknown key (did you mean \"nodes\"?)");
}

TEST(JsonObjectReaderTest, UnknownKeyWithoutCloseMatchListsKnownKeys) {
  const Json value = {{"zzzzzzzz", 4}};
  JsonObjectReader reader = Reader(value);
  (void)reader.IntOr("nodes", 1);
  EXPECT_EQ(reader.Finish().error().ToString(),
            "cluster.zzzzzzzz: unknown key (expected one of \"nodes\")");
}

TEST(JsonObjectReaderTest, OneOfRejectsBothAndNeither) {
  const Json two = {{"size", "1 MiB"}, {"size_bytes", 5}};
  JsonObjectReader both = Reader(two);
  EXPECT_EQ(both.OneOf("size", "size_bytes").error().ToString(),
            "cluster: give either \"size\" or \"size_bytes\", not both");
  const Json empty = Json::object();
  JsonObjectReader neither = Reader(empty);
  EXPECT_EQ(neither.OneOf("size", "size_bytes").error().ToString(),
            "cluster: missing required field \"size\" (or \"size_bytes\")");
}

TEST(JsonToIntTest, RangeAndType) {
  EXPECT_EQ(*JsonToInt(Json(5), "x", 0, 10), 5);
  EXPECT_EQ(*JsonToInt(Json(1e6), "x", 0, 2'000'000), 1'000'000);  // exponent form, integral
  EXPECT_EQ(JsonToInt(Json(2.5), "x", 0, 10).error().ToString(), "x: expected an integer, got 2.5");
  EXPECT_EQ(JsonToInt(Json(-1), "x", 0, 10).error().ToString(), "x: must be in [0, 10], got -1");
}

TEST(JsonObjectReaderTest, NotAnObject) {
  EXPECT_EQ(JsonObjectReader::Make(Json::array(), "tasks[0]").error().ToString(),
            "tasks[0]: expected a JSON object, got []");
}

}  // namespace
}  // namespace dtsim
