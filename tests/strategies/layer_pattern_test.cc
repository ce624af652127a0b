// Megatron-LM's per-layer pattern arguments (strategies/layer_pattern.h): integers and the list
// expressions its _eval_pattern evaluates, and its window flags read as a model's fields.
#include "strategies/layer_pattern.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

namespace dtsim::strategies {
namespace {

using testing::HasSubstr;

std::string Eval(std::string_view text) {
  const auto value = EvalLayerPattern(text, "--window-attn-skip-freq");
  if (!value.ok()) return value.error().ToString();
  if (const auto* n = std::get_if<int64_t>(&*value)) return std::to_string(*n);
  return DumpJson(Json(std::get<std::vector<int64_t>>(*value)));
}

TEST(LayerPatternTest, EvaluatesMegatronsListExpressions) {
  EXPECT_EQ(Eval("6"), "6");
  EXPECT_EQ(Eval(" [1, 1, 0] "), "[1,1,0]");
  EXPECT_EQ(Eval("[1,0,]"), "[1,0]");  // Python's trailing comma
  EXPECT_EQ(Eval("[]"), "[]");
  // Megatron's help text: "([1]*3+[0]*1)*3" is [1,1,1,0,1,1,1,0,1,1,1,0].
  EXPECT_EQ(Eval("([1]*3+[0]*1)*3"), "[1,1,1,0,1,1,1,0,1,1,1,0]");
  EXPECT_EQ(Eval("2*[0]+[1]*(1+1)"), "[0,0,1,1]");
  EXPECT_EQ(Eval("[2*3, 1]"), "[6,1]");
}

TEST(LayerPatternTest, AnythingElseIsAnErrorNamingTheFlag) {
  EXPECT_EQ(Eval("[1,0"),
            "--window-attn-skip-freq: expected ',' or ']' at character 5 of the pattern (an "
            "integer, or a list expression such as \"([1]*3+[0])*12\"), got \"[1,0\"");
  EXPECT_THAT(Eval("list(range(4))"), HasSubstr("expected an integer, '(' or '[' at character 1"));
  EXPECT_THAT(Eval("[1.5]"), HasSubstr("expected ',' or ']' at character 3"));
  EXPECT_THAT(Eval("[1]*[2]"), HasSubstr("a list multiplied by a list"));
  EXPECT_THAT(Eval("[1]+2"), HasSubstr("a list added to an integer"));
  EXPECT_THAT(Eval("[[1]]"), HasSubstr("a list inside a list"));
  EXPECT_THAT(Eval("6 7"), HasSubstr("unexpected text at character 3"));
  // Bounded: lists past kMaxLayerPatternLength, integers past 2^30, nesting past 64.
  EXPECT_THAT(Eval("[1]*100000"), HasSubstr("a list too long"));
  EXPECT_THAT(Eval("[1]*1000*1000"), HasSubstr("a list too long"));
  EXPECT_THAT(Eval("1000000000*1000000000"), HasSubstr("an integer too large"));
  EXPECT_THAT(Eval("9999999999"), HasSubstr("an integer too large"));
  EXPECT_THAT(Eval(std::string(100, '(') + "1" + std::string(100, ')')),
              HasSubstr("nested too deeply"));
}

// The writer's expressions read back as the list they were written from.
TEST(LayerPatternTest, ExpressionsAreShortAndReadBack) {
  std::vector<int64_t> deepseek(61, 1);
  std::fill_n(deepseek.begin(), 3, 0);
  std::vector<int64_t> gemma;
  for (int i = 0; i < 60; ++i) gemma.push_back((i + 1) % 6 != 0 ? 1 : 0);
  EXPECT_EQ(LayerPatternExpression(deepseek), "[0]*3+[1]*58");
  EXPECT_EQ(LayerPatternExpression(gemma), "([1,1,1,1,1,0])*10");
  EXPECT_EQ(LayerPatternExpression({1, 1, 0}), "[1]*2+[0]*1");
  for (const auto& flags : {deepseek, gemma}) {
    EXPECT_EQ(Eval(LayerPatternExpression(flags)), DumpJson(Json(flags)));
  }
}

std::string MoeLayers(const std::string& text, int64_t layers) {
  Json moe = Json::object();
  const auto note = ReadMegatronMoeLayers(text, layers, moe);
  if (!note.ok()) return note.error().ToString();
  return DumpJson(moe) + (note->has_value() ? " " + **note : "");
}

// --moe-layer-freq: lists dtsim places exactly, integers (MoE on layers 0, N, …) placed on
// N - 1, 2N - 1, … with a note, the rest an error.
TEST(LayerPatternTest, MoeLayerFrequencies) {
  EXPECT_EQ(MoeLayers("[0]*3+[1]*58", 61), R"({"every":1,"first_dense_layers":3})");
  EXPECT_EQ(MoeLayers("([0,1])*4", 8), R"({"every":2,"first_dense_layers":1})");
  EXPECT_EQ(MoeLayers("1", 8), R"({"every":1})");
  EXPECT_EQ(MoeLayers("2", 8),
            R"({"every":2} --moe-layer-freq 2: MoE on layers 0, 2, 4, …, which dtsim places on )"
            "1, 3, … (the same count when 2 divides the layers)");
  EXPECT_THAT(MoeLayers("([1,0])*4", 8),
              HasSubstr("--moe-layer-freq: a MoE layer pattern dtsim cannot place"));
  EXPECT_THAT(MoeLayers("[0]*8", 8), HasSubstr("a MoE layer pattern dtsim cannot place"));
  EXPECT_THAT(MoeLayers("[1]*3", 8),
              HasSubstr("--moe-layer-freq: expected one flag a layer: 8 layers, 3 flags"));
}

std::string Windows(std::string_view size, std::optional<std::string> skip = std::nullopt) {
  Json model = Json::object();
  const Status status = ReadMegatronWindows(size, skip, model);
  return status.ok() ? DumpJson(model) : status.error().ToString();
}

TEST(LayerPatternTest, WindowFlagsAreTheModelsWindows) {
  EXPECT_EQ(Windows("4096,0"), R"({"sliding_window":4096})");
  EXPECT_EQ(Windows("(128, 0)", "2"), R"({"sliding_window":128,"sliding_window_pattern":2})");
  EXPECT_EQ(Windows("1024,0", "[1,1,1,0]*2"),
            R"({"sliding_window":1024,"sliding_window_pattern":[1,1,1,0,1,1,1,0]})");
  EXPECT_EQ(Windows("-1,0"), "{}");  // unbounded: full attention
  EXPECT_EQ(Windows("4096,4096"),
            "--window-size: dtsim models causal windows: LEFT of at least 1 key before the "
            "query, RIGHT 0, got \"4096,4096\"");
  EXPECT_THAT(Windows("4096"), HasSubstr("--window-size: expected LEFT,RIGHT"));
  EXPECT_THAT(Windows("4096,0", "1"),
              HasSubstr("--window-attn-skip-freq: expected at least 2 (every N-th layer keeps "
                        "full attention), got \"1\""));
}

}  // namespace
}  // namespace dtsim::strategies
