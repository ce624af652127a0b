// YAML read as JSON values (sim/base/yaml_reader.h): scalars kept as their text, null as null,
// and every malformed or hostile document an error naming the file, line and column.
#include "sim/base/yaml_reader.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace dtsim {
namespace {

using testing::HasSubstr;

Json Parsed(const std::string& text) {
  Expected<Json> parsed = ParseYaml(text, "c.yaml");
  EXPECT_TRUE(parsed.ok()) << parsed.error().ToString();
  return parsed.ok() ? *parsed : Json();
}

std::string ErrorOf(const std::string& text) {
  Expected<Json> parsed = ParseYaml(text, "c.yaml");
  EXPECT_FALSE(parsed.ok()) << text;
  return parsed.ok() ? std::string() : parsed.error().ToString();
}

TEST(YamlReaderTest, ScalarsAreTheirTextAndNullIsNull) {
  const Json json = Parsed(
      "a: 1e-5\n"
      "b: '16'\n"
      "c: True\n"
      "d: ~\n"
      "e:\n"
      "f: null\n"
      "g: \"null\"\n"
      "h: [1, two, {k: v}]\n"
      "i:\n  - .5\n  - ${data_dir}/x  # a comment\n");
  EXPECT_EQ(json["a"], "1e-5");
  EXPECT_EQ(json["b"], "16");
  EXPECT_EQ(json["c"], "True");
  EXPECT_TRUE(json["d"].is_null());
  EXPECT_TRUE(json["e"].is_null());
  EXPECT_TRUE(json["f"].is_null());
  EXPECT_EQ(json["g"], "null");  // quoted: a string
  EXPECT_EQ(json["h"], Json::parse(R"(["1", "two", {"k": "v"}])"));
  EXPECT_EQ(json["i"], Json::parse(R"([".5", "${data_dir}/x"])"));
}

TEST(YamlReaderTest, EmptyDocumentsAndAliases) {
  EXPECT_TRUE(Parsed("").is_null());
  EXPECT_TRUE(Parsed("# only a comment\n").is_null());
  EXPECT_EQ(Parsed("base: &b {x: 1}\ncopy: *b\n")["copy"], Json::parse(R"({"x": "1"})"));
  // YAML's merge key: the mapping's own keys win, then the earlier of the merged ones.
  const Json merged = Parsed(
      "a: &a {x: 1, y: 1}\n"
      "b: &b {y: 2, z: 2}\n"
      "c:\n  <<: [*a, *b]\n  x: 3\n"
      "d:\n  <<: *b\n");
  EXPECT_EQ(merged["c"], Json::parse(R"({"x": "3", "y": "1", "z": "2"})"));
  EXPECT_EQ(merged["d"], Json::parse(R"({"y": "2", "z": "2"})"));
}

TEST(YamlReaderTest, ErrorsNameTheFileLineAndColumn) {
  EXPECT_THAT(ErrorOf("a: 1\nb: [1, 2\n"), HasSubstr("c.yaml: line 3, column 1: not valid YAML"));
  EXPECT_EQ(ErrorOf("a: 1\nb: 2\na: 3\n"),
            "c.yaml: line 3, column 1: a key given twice in one mapping, got a");
  EXPECT_THAT(ErrorOf("a: 1\n---\nb: 2\n"),
              HasSubstr("c.yaml: line 2, column 1: several YAML documents"));
  EXPECT_THAT(ErrorOf("? [a, b]\n: 1\n"), HasSubstr("a mapping key that is not a plain value"));
  EXPECT_THAT(ErrorOf("a: *missing\n"), HasSubstr("not valid YAML"));
  EXPECT_EQ(ErrorOf("a:\n  <<: 1\n"), "c.yaml: line 2, column 7: a merge key (<<) takes mappings");
  EXPECT_THAT(ErrorOf("a:\n  <<: [{x: 1}, 2]\n"), HasSubstr("a merge key (<<) takes mappings"));
}

// Nesting past kMaxYamlDepth (flow or block), an alias naming the sequence it is in, and
// aliases multiplying past kMaxYamlValues: errors, not a crash or a hang.
TEST(YamlReaderTest, HostileDocumentsAreBounded) {
  EXPECT_THAT(ErrorOf(std::string(100, '[') + std::string(100, ']')),
              HasSubstr("nested deeper than 64 levels"));
  std::string block;
  for (int level = 0; level < 70; ++level) block += std::string(level, ' ') + "k:\n";
  block += std::string(70, ' ') + "k: 1\n";
  EXPECT_THAT(ErrorOf(block), HasSubstr("nested deeper than 64 levels"));
  // 10 values, then 10 aliases of the level below, 7 levels: 10^7 values.
  std::string bomb = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int level = 1; level <= 6; ++level) {
    bomb += fmt::format(
        "l{0}: &l{0} [*l{1}, *l{1}, *l{1}, *l{1}, *l{1}, *l{1}, *l{1}, *l{1}, "
        "*l{1}, *l{1}]\n",
        level, level - 1);
  }
  EXPECT_THAT(ErrorOf(bomb), HasSubstr("more than 1000000 values"));
  EXPECT_THAT(ErrorOf("a: &a [1, *a]\n"), HasSubstr("c.yaml: line 1, column 11: "));
  // yaml-cpp's YAML::LoadAll never returns on these (fuzzing found the first): it keeps
  // starting empty documents at a stray comma.
  for (const char* text : {"  ,oop:loop]\n", ",]", " ,"}) {
    EXPECT_THAT(ErrorOf(text), HasSubstr("c.yaml: ")) << text;
  }
  const std::string deep = std::string(20000, '[');  // yaml-cpp's own depth guard
  EXPECT_THAT(ErrorOf(deep), HasSubstr("c.yaml: "));
}

TEST(YamlReaderTest, ReadsAFileAndNamesAMissingOne) {
  EXPECT_THAT(ReadYamlFile("/nonexistent/c.yaml").error().ToString(),
              HasSubstr("/nonexistent/c.yaml"));
  Expected<Json> read = ReadYamlFile(DTSIM_SOURCE_DIR "/tests/data/launch/llama2_70b_nemo.yaml");
  ASSERT_TRUE(read.ok()) << read.error().ToString();
  EXPECT_EQ((*read)["model"]["num_layers"], "80");
}

}  // namespace
}  // namespace dtsim
