// Model and GPU specs from JSON: presets, field-by-field overrides, and every bad-input error
// naming its JSON path and value.
#include "models/model_spec.h"

#include <gtest/gtest.h>

#include <iterator>
#include <string_view>
#include <utility>

#include "models/gpu.h"
#include "models/parameters.h"

namespace dtsim::models {
namespace {

std::string ModelError(const char* text) {
  Expected<ModelSpec> model = ModelFromJson(Json::parse(text), "model");
  EXPECT_FALSE(model.ok()) << text;
  return model.ok() ? "" : model.error().ToString();
}

std::string GpuError(const char* text) {
  Expected<GpuSpec> gpu = GpuFromJson(Json::parse(text), "cluster.gpu");
  EXPECT_FALSE(gpu.ok()) << text;
  return gpu.ok() ? "" : gpu.error().ToString();
}

void ExpectContains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "in: " << text << "\nmissing: " << part;
}

// Switch Transformer's capacity, ceil(k·T·c / E): 2 experts of 8 with factor 1.25 over 1,000
// tokens take ceil(2 · 1000 · 1.25 / 8) = ceil(312.5) = 313 each; dropless ignores the factor
// (2 · 1000 / 8 = 250). A dense model routes nothing: 0, not k·T/0 (which UBSan caught as inf
// converted to an int64, found by the simulate fuzzer).
TEST(ModelSpecTest, ExpertCapacity) {
  MoeSpec moe{.experts = 8, .top_k = 2, .capacity_factor = 1.25};
  EXPECT_EQ(moe.Capacity(1000), 313);
  moe.dropless = true;
  EXPECT_EQ(moe.Capacity(1000), 250);
  EXPECT_EQ(MoeSpec{}.Capacity(1000), 0);
}

TEST(ModelSpecTest, PresetOverriddenFieldByField) {
  Expected<ModelSpec> model =
      ModelFromJson(Json::parse(R"({"preset": "gpt3-175b", "layers": 48, "hidden": 8192,
                                    "heads": 64})"),
                    "model");
  ASSERT_TRUE(model.ok()) << model.error().ToString();
  const TransformerSpec& t = model->transformer;
  EXPECT_EQ(model->name, "gpt3-175b");
  EXPECT_EQ(t.layers, 48);
  EXPECT_EQ(t.hidden, 8192);
  EXPECT_EQ(t.kv_heads, 64);          // multi-head attention follows heads
  EXPECT_EQ(t.ffn_hidden, 4 * 8192);  // 4h follows hidden
  EXPECT_EQ(t.vocab, 50257);          // untouched
  // A GQA preset keeps its KV heads when heads change.
  Expected<ModelSpec> llama =
      ModelFromJson(Json::parse(R"({"preset": "llama3-8b", "heads": 64})"), "model");
  ASSERT_TRUE(llama.ok());
  EXPECT_EQ(llama->transformer.kv_heads, 8);
  EXPECT_EQ(llama->transformer.ffn_hidden, 14336);
}

TEST(ModelSpecTest, CustomModelsOfEveryFamily) {
  Expected<ModelSpec> moe = ModelFromJson(Json::parse(R"({
      "family": "transformer", "layers": 4, "hidden": 512, "heads": 8, "vocab": 1000,
      "max_seq": 128, "norm": "rmsnorm", "activation": "swiglu", "position": "rotary",
      "linear_bias": false, "tied_embeddings": false,
      "moe": {"experts": 4, "top_k": 2, "capacity_factor": 1.25, "every": 2}})"),
                                          "model");
  ASSERT_TRUE(moe.ok()) << moe.error().ToString();
  EXPECT_EQ(moe->transformer.MoeLayerCount(), 2);
  EXPECT_EQ(moe->transformer.ffn_hidden, 2048);
  Expected<ModelSpec> dlrm = ModelFromJson(Json::parse(R"({"family": "dlrm",
      "table_rows": [1000, 50], "embedding_dim": 16, "bottom_mlp": [64, 16], "top_mlp": [32, 1]})"),
                                           "model");
  ASSERT_TRUE(dlrm.ok()) << dlrm.error().ToString();
  // Tables 1050·16 + bottom 13·64+64 + 64·16+16 + top (16 + 3·2/2 = 19)·32+32 + 32+1.
  EXPECT_EQ(CountParameters(*dlrm).total,
            1050 * 16 + (13 * 64 + 64) + (64 * 16 + 16) + (19 * 32 + 32) + (32 + 1));
  Expected<ModelSpec> resnet =
      ModelFromJson(Json::parse(R"({"preset": "resnet-50", "classes": 10})"), "model");
  ASSERT_TRUE(resnet.ok());
  // 25,557,032 − 2048·990 − 990 (the classifier's 990 fewer outputs).
  EXPECT_EQ(CountParameters(*resnet).total, 25'557'032 - 2048 * 990 - 990);
  EXPECT_TRUE(ModelFromJson(Json("bert-large"), "model").ok());
}

// moe.layers: one flag a decoder layer decides alone where the experts are, in place of a
// preset's every and first_dense_layers; either of those in turn drops a preset's list.
TEST(ModelSpecTest, MoeLayersListedOneFlagALayer) {
  Expected<ModelSpec> listed =
      ModelFromJson(Json::parse(R"({"preset": "deepseek-v3", "layers": 4, "mtp_layers": 0,
                      "moe": {"layers": [1, 0, 0, 1]}})"),
                    "model");
  ASSERT_TRUE(listed.ok()) << listed.error().ToString();
  const TransformerSpec& t = listed->transformer;
  EXPECT_EQ(t.moe.first_dense_layers, 0);  // the preset's 3 gives way
  EXPECT_TRUE(t.IsMoeLayer(0));
  EXPECT_FALSE(t.IsMoeLayer(1));
  EXPECT_FALSE(t.IsMoeLayer(2));
  EXPECT_TRUE(t.IsMoeLayer(3));
  EXPECT_EQ(t.MoeLayerCount(), 2);
  // Counted without walking: every 3 after 4 dense of 20 layers: 5, 8, 11, 14, 17 (i + 1 a
  // multiple of 3 from 6 to 18) — 20/3 − 4/3 = 6 − 1 = 5.
  Expected<ModelSpec> every =
      ModelFromJson(Json::parse(R"({"family": "transformer", "layers": 20, "hidden": 64, "heads": 4,
                      "vocab": 100, "max_seq": 16,
                      "moe": {"experts": 4, "every": 3, "first_dense_layers": 4}})"),
                    "model");
  ASSERT_TRUE(every.ok()) << every.error().ToString();
  int walked = 0;
  for (int i = 0; i < 20; ++i) walked += every->transformer.IsMoeLayer(i) ? 1 : 0;
  EXPECT_EQ(walked, 5);
  EXPECT_EQ(every->transformer.MoeLayerCount(), 5);

  std::string e = ModelError(R"({"preset": "mixtral-8x7b", "moe": {"layers": [1, 0]}})");
  ExpectContains(e, "model.moe.layers");
  ExpectContains(e, "expected one flag a layer (1 MoE, 0 dense MLP): 32 layers, 2 flags");
  e = ModelError(R"({"preset": "mixtral-8x7b", "layers": 2, "moe": {"layers": [0, 0]}})");
  ExpectContains(e, "model.moe.layers: no layer is MoE");
  e = ModelError(R"({"preset": "mixtral-8x7b", "moe": {"layers": [1, 2]}})");
  ExpectContains(e, "model.moe.layers[1]");
  e = ModelError(R"({"preset": "mixtral-8x7b", "moe": {"layers": [], "every": 2}})");
  ExpectContains(e, "places MoE layers beside every: give one or the other");
  e = ModelError(R"({"preset": "mixtral-8x7b", "moe": {"layers": []}})");
  ExpectContains(e, "expected one flag a layer (1 MoE, 0 dense MLP)");
}

TEST(ModelSpecTest, BadModelInputNamesPathAndValue) {
  std::string e = ModelError(R"({"preset": "gpt3-175b", "heads": 100})");
  ExpectContains(e, "model.heads");
  ExpectContains(e, "heads must divide hidden (12288 % 100 = 88)");
  ExpectContains(e, "100");
  e = ModelError(R"({"preset": "llama2-70b", "kv_heads": 7})");
  ExpectContains(e, "model.kv_heads");
  ExpectContains(e, "kv_heads must divide heads (64 % 7 = 1)");
  e = ModelError(R"({"preset": "gpt-3-175b"})");
  ExpectContains(e, "model.preset");
  ExpectContains(e, "unknown model preset");
  ExpectContains(e, "\"gpt3-175b\"");  // the suggestion and the list
  ExpectContains(e, "\"llama3-70b\"");
  e = ModelError(R"({"preset": "gpt3-175b", "hidden": -4096})");
  ExpectContains(e, "model.hidden");
  ExpectContains(e, "-4096");
  e = ModelError(R"({"preset": "gpt3-175b", "layer": 4})");
  ExpectContains(e, "model.layer");
  ExpectContains(e, "did you mean \"layers\"");
  e = ModelError(R"({"family": "transformer", "layers": 2, "hidden": 64, "heads": 4})");
  ExpectContains(e, "model.vocab");
  ExpectContains(e, "missing required field");
  e = ModelError(R"({"preset": "mixtral-8x7b", "moe": {"top_k": 9}})");
  ExpectContains(e, "model.moe.top_k");
  ExpectContains(e, "top_k must be in [1, experts = 8]");
  e = ModelError(R"({"preset": "resnet-50", "family": "dlrm"})");
  ExpectContains(e, "the preset is a resnet model");
  e = ModelError(R"({"preset": "gpt3-175b", "norm": "batchnorm"})");
  ExpectContains(e, "model.norm");
  ExpectContains(e, "\"layernorm\", \"rmsnorm\"");
  e = ModelError(R"({"preset": "dlrm-mlperf", "bottom_mlp": [512, 64]})");
  ExpectContains(e, "model.bottom_mlp");
  ExpectContains(e, "must end at embedding_dim (128)");
  e = ModelError(R"({"preset": "dlrm-mlperf", "table_rows": [10, -1]})");
  ExpectContains(e, "model.table_rows[1]");
}

TEST(ModelSpecTest, GpuPresetsAndOverrides) {
  Expected<GpuSpec> gpu = GpuFromJson(Json::parse(R"({"preset": "h100-sxm5-80gb",
      "memory": "94 GiB", "matrix_peak": {"fp8": "1000 TFLOP/s"},
      "matrix_efficiency": {"max": 0.6}})"),
                                      "gpu");
  ASSERT_TRUE(gpu.ok()) << gpu.error().ToString();
  EXPECT_EQ(gpu->memory.count(), 94 * kGibi);
  EXPECT_DOUBLE_EQ(gpu->MatrixPeak(DType::kFp8).flop_per_second(), 1000e12);
  EXPECT_DOUBLE_EQ(gpu->MatrixPeak(DType::kBf16).flop_per_second(), 989.4e12);
  EXPECT_DOUBLE_EQ(gpu->matrix_efficiency.max, 0.6);
  EXPECT_EQ(gpu->matrix_efficiency.ramp.ns(), 3110);  // the preset's, untouched
  EXPECT_EQ(gpu->power_limited_compute, 0.85);        // likewise
  for (std::string_view name : GpuPresetNames()) EXPECT_TRUE(GpuPreset(name).ok()) << name;
}

// SM counts from NVIDIA's architecture whitepapers; "sms" overrides, 0 counts none.
TEST(ModelSpecTest, GpuSmCounts) {
  const std::pair<std::string_view, int> expected[] = {
      {"v100-sxm2-32gb", 80},  {"a100-sxm4-40gb", 108}, {"a100-sxm4-80gb", 108},
      {"h100-sxm5-80gb", 132}, {"h100-pcie-80gb", 114}, {"h200-sxm-141gb", 132},
      {"b200-sxm-180gb", 148}, {"gb200-186gb", 148}};
  EXPECT_EQ(std::size(expected), GpuPresetNames().size());
  for (const auto& [name, sms] : expected) EXPECT_EQ(GpuPreset(name)->sms, sms) << name;
  const Expected<GpuSpec> gpu =
      GpuFromJson(Json::parse(R"({"preset": "h100-sxm5-80gb", "sms": 0})"), "gpu");
  ASSERT_TRUE(gpu.ok()) << gpu.error().ToString();
  EXPECT_EQ(gpu->sms, 0);
  ExpectContains(GpuError(R"({"preset": "a100-sxm4-80gb", "sms": 513})"), "cluster.gpu.sms");
  ExpectContains(GpuError(R"({"preset": "a100-sxm4-80gb", "sms": 1.5})"), "cluster.gpu.sms");
}

TEST(ModelSpecTest, BadGpuInputNamesPathAndValue) {
  std::string e = GpuError(R"("a100")");
  ExpectContains(e, "cluster.gpu");
  ExpectContains(e, "unknown GPU");
  ExpectContains(e, "\"a100-sxm4-40gb\", \"a100-sxm4-80gb\"");
  e = GpuError(R"({"preset": "h100", "memory": "80 GiB"})");
  ExpectContains(e, "cluster.gpu.preset");
  e = GpuError(R"({"preset": "a100-sxm4-80gb", "matrix_peak": {"bf17": "1 TFLOP/s"}})");
  ExpectContains(e, "cluster.gpu.matrix_peak.bf17");
  ExpectContains(e, "did you mean \"bf16\"");
  e = GpuError(R"({"preset": "a100-sxm4-80gb", "memory": "-80 GiB"})");
  ExpectContains(e, "cluster.gpu.memory");
  e = GpuError(R"({"preset": "a100-sxm4-80gb", "matrix_efficiency": {"max": 1.5}})");
  ExpectContains(e, "cluster.gpu.matrix_efficiency.max");
  ExpectContains(e, "must be in (0, 1]");
  e = GpuError(R"({"matrix_peak": {"bf16": "100 TFLOP/s"}})");
  ExpectContains(e, "cluster.gpu.memory_bandwidth");
}

}  // namespace
}  // namespace dtsim::models
