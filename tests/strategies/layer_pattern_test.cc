// Megatron-LM's per-layer pattern arguments (strategies/layer_pattern.h): integers and the list
// expressions its _eval_pattern evaluates, and its window flags read as a model's fields.
#include "strategies/layer_pattern.h"

#include <fmt/format.h>
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
  const Status status = ReadMegatronMoeLayers(text, layers, moe);
  return status.ok() ? DumpJson(moe) : status.error().ToString();
}

// --moe-layer-freq exactly as Megatron-Core places it: an integer N on layers 0, N, 2N, …
// (gpt_layer_specs.py), a list on the layers it flags; written as first_dense_layers and every
// where they say it, else one flag a layer.
TEST(LayerPatternTest, MoeLayerFrequencies) {
  EXPECT_EQ(MoeLayers("[0]*3+[1]*58", 61), R"({"every":1,"first_dense_layers":3})");
  // An alternation from layer 1 is every 2 (layer 0 dense without being counted).
  EXPECT_EQ(MoeLayers("([0,1])*4", 8), R"({"every":2,"first_dense_layers":0})");
  EXPECT_EQ(MoeLayers("[0]*3+([1,0])*4", 11), R"({"every":2,"first_dense_layers":3})");
  EXPECT_EQ(MoeLayers("[0]*3+([0,1])*4", 11), R"({"layers":[0,0,0,0,1,0,1,0,1,0,1]})");
  EXPECT_EQ(MoeLayers("1", 8), R"({"every":1})");
  // 2 on 8 layers: [1 if i % 2 == 0 else 0 for i in range(8)], MoE on 0, 2, 4, 6.
  EXPECT_EQ(MoeLayers("2", 8), R"({"layers":[1,0,1,0,1,0,1,0]})");
  EXPECT_EQ(MoeLayers("([1,0])*4", 8), R"({"layers":[1,0,1,0,1,0,1,0]})");
  EXPECT_EQ(MoeLayers("[0,1,1,0]", 4), R"({"layers":[0,1,1,0]})");
  EXPECT_THAT(MoeLayers("[0]*8", 8), HasSubstr("--moe-layer-freq: no layer is MoE"));
  EXPECT_THAT(MoeLayers("[0,2]", 2), HasSubstr("expected flags of 0 (dense MLP) or 1 (MoE)"));
  EXPECT_THAT(MoeLayers("0", 8), HasSubstr("expected a positive integer or a list"));
  EXPECT_THAT(MoeLayers("[1]*3", 8),
              HasSubstr("--moe-layer-freq: expected one flag a layer: 8 layers, 3 flags"));
  EXPECT_THAT(MoeLayers("4", 100000), HasSubstr("more layers than dtsim lists MoE layers for"));
}

TEST(LayerPatternTest, PlacementsAsEvery) {
  const auto placed = [](std::vector<int64_t> flags) {
    const std::optional<EveryPlacement> p = PlacementAsEvery(flags);
    return p ? fmt::format("{}/{}", p->first_dense, p->every) : std::string("none");
  };
  EXPECT_EQ(placed({1, 1, 1}), "0/1");
  EXPECT_EQ(placed({0, 0, 1, 1}), "2/1");
  EXPECT_EQ(placed({0, 1, 0, 1}), "0/2");
  EXPECT_EQ(placed({0, 0, 1, 0, 0, 1}), "0/3");
  EXPECT_EQ(placed({0, 0, 0, 1, 0, 1}), "3/2");
  EXPECT_EQ(placed({1, 0, 1, 0}), "none");
  EXPECT_EQ(placed({0, 1, 1, 0}), "none");
  EXPECT_EQ(placed({0, 0}), "none");
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
