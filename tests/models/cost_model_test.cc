// Cost models: roofline derived by hand, measured lookup, interpolation, the chain and the
// efficiency fit.
#include "models/cost_model.h"

#include <gtest/gtest.h>

#include <cmath>

namespace dtsim::models {
namespace {

GpuSpec A100() {
  Expected<GpuSpec> gpu = GpuPreset("a100-sxm4-80gb");
  EXPECT_TRUE(gpu.ok());
  return *gpu;
}

traces::OpSignature GemmSignature(int64_t m, int64_t n, int64_t k) {
  return Op::Gemm("g", Pass::kForward, DType::kBf16, m, n, k).signature;
}

// A table of GEMMs that all run at `flops_per_second`.
traces::OpCostTable UniformGemms(double flops_per_second,
                                 std::initializer_list<std::array<int64_t, 3>> shapes) {
  std::vector<traces::MeasuredOp> ops;
  for (const auto& [m, n, k] : shapes) {
    const double seconds = 2.0 * m * n * k / flops_per_second;
    ops.push_back({GemmSignature(m, n, k), DurationNs(std::llround(seconds * 1e9)), 5});
  }
  Expected<traces::OpCostTable> table = traces::OpCostTable::Make("a100", "test", std::move(ops));
  EXPECT_TRUE(table.ok());
  return *table;
}

TEST(CostModelTest, RooflineComputeBoundGemm) {
  const RooflineCostModel roofline(A100());
  const Op gemm = Op::Gemm("g", Pass::kForward, DType::kBf16, 8192, 8192, 8192);
  // compute = 2·8192³ / (312 TFLOP/s · 0.80) + 5 us ramp = 4,405,118 ns + 5,000 ns;
  // memory = 3·8192²·2 B / (2039 GB/s · 0.85) + 2 us = 232,281 ns + 2,000 ns: compute wins;
  // plus the 1 us launch overhead.
  const double compute_ns = 2.0 * 8192 * 8192 * 8192 / (312e12 * 0.80) * 1e9 + 5000;
  const std::optional<OpCost> cost = roofline.Price(gemm);
  ASSERT_TRUE(cost.has_value());
  EXPECT_EQ(cost->duration.ns(), std::llround(compute_ns) + 1000);
  EXPECT_EQ(cost->source, CostSource::kRoofline);
}

TEST(CostModelTest, RooflineMemoryBoundAndVectorFallbacks) {
  const RooflineCostModel roofline(A100());
  const Op add =
      Op::Streaming("add", OpKind::kElementwise, Pass::kForward, DType::kBf16, 100'000'000, 6);
  // 6e8 B / (2039e9 B/s · 0.85) + 2 us, + 1 us launch.
  const double memory_ns = 6e8 / (2039e9 * 0.85) * 1e9 + 2000;
  EXPECT_EQ(roofline.Price(add)->duration.ns(), std::llround(memory_ns) + 1000);
  // V100 has no bf16 tensor cores: a bf16 GEMM falls back to the vector peak (15.7 TFLOP/s).
  Expected<GpuSpec> v100 = GpuPreset("v100-sxm2-32gb");
  ASSERT_TRUE(v100.ok());
  const RooflineCostModel old(*v100);
  const Op gemm = Op::Gemm("g", Pass::kForward, DType::kBf16, 4096, 4096, 4096);
  const double vector_ns = 2.0 * 4096 * 4096 * 4096 / 15.7e12 * 1e9;
  EXPECT_EQ(old.Price(gemm)->duration.ns(), std::llround(vector_ns) + 1000);
}

TEST(CostModelTest, EfficiencyCurveIsHalfMaxAtTheRampWork) {
  const EfficiencyCurve curve{0.8, DurationNs(5000)};
  // x_half = ramp · peak · max = 5e-6 · 312e12 · 0.8 = 1.248e9 FLOPs.
  EXPECT_NEAR(curve.Efficiency(1.248e9, 312e12), 0.4, 1e-12);
  EXPECT_NEAR(curve.Efficiency(1e15, 312e12), 0.8, 1e-3);
}

TEST(CostModelTest, MeasuredIsExactSignatureOnly) {
  const traces::OpCostTable table = UniformGemms(200e12, {{1024, 1024, 1024}});
  const MeasuredCostModel measured(A100(), table);
  const Op hit = Op::Gemm("g", Pass::kForward, DType::kBf16, 1024, 1024, 1024);
  EXPECT_EQ(measured.Price(hit)->duration, table.ops()[0].duration);
  EXPECT_EQ(measured.Price(hit)->source, CostSource::kMeasured);
  EXPECT_FALSE(measured.Price(Op::Gemm("g", Pass::kForward, DType::kFp16, 1024, 1024, 1024)));
  EXPECT_FALSE(measured.Price(Op::Gemm("g", Pass::kForward, DType::kBf16, 1024, 1024, 2048)));
}

TEST(CostModelTest, InterpolatesThroughputInsideTheMeasuredRangeOnly) {
  // Every measured GEMM runs at 200 TFLOP/s, so any interpolated one does too:
  // 2·2048·3072·1536 / 200e12 s.
  const traces::OpCostTable table = UniformGemms(
      200e12, {{1024, 1024, 1024}, {4096, 4096, 4096}, {1024, 4096, 2048}, {4096, 1024, 1024}});
  const InterpolatedCostModel interpolated(A100(), table);
  const Op inside = Op::Gemm("g", Pass::kForward, DType::kBf16, 2048, 3072, 1536);
  const std::optional<OpCost> cost = interpolated.Price(inside);
  ASSERT_TRUE(cost.has_value());
  EXPECT_NEAR(static_cast<double>(cost->duration.ns()), 2.0 * 2048 * 3072 * 1536 / 200e12 * 1e9, 2);
  EXPECT_EQ(cost->source, CostSource::kInterpolated);
  // m = 8192 lies beyond every measured m: no extrapolation.
  EXPECT_FALSE(interpolated.Price(Op::Gemm("g", Pass::kForward, DType::kBf16, 8192, 2048, 2048)));
}

TEST(CostModelTest, InterpolationWeighsTheNearestPoints) {
  // Two measured points at 100 and 300 TFLOP/s; the geometric midpoint is equidistant, so its
  // throughput is their mean, 200 TFLOP/s.
  std::vector<traces::MeasuredOp> ops = {
      {GemmSignature(1024, 1024, 1024),
       DurationNs(std::llround(2.0 * 1024 * 1024 * 1024 / 100e12 * 1e9))},
      {GemmSignature(4096, 4096, 4096),
       DurationNs(std::llround(2.0 * 4096 * 4096 * 4096 / 300e12 * 1e9))}};
  Expected<traces::OpCostTable> table = traces::OpCostTable::Make("a100", "", std::move(ops));
  ASSERT_TRUE(table.ok());
  const InterpolatedCostModel interpolated(A100(), *table);
  const std::optional<OpCost> cost =
      interpolated.Price(Op::Gemm("g", Pass::kForward, DType::kBf16, 2048, 2048, 2048));
  ASSERT_TRUE(cost.has_value());
  // Throughputs from rounded durations: 100.0000x and 300.0000x TFLOP/s, within 1 ns.
  EXPECT_NEAR(static_cast<double>(cost->duration.ns()), 2.0 * 2048 * 2048 * 2048 / 200e12 * 1e9, 2);
}

TEST(CostModelTest, ChainRecordsWhichSourcePricedEachOp) {
  const traces::OpCostTable table = UniformGemms(200e12, {{1024, 1024, 1024}, {4096, 4096, 4096}});
  Expected<std::unique_ptr<OpCostModel>> chain = MakeCostModel("chain", A100(), &table);
  ASSERT_TRUE(chain.ok());
  CostSourceTally tally;
  for (const Op& op :
       {Op::Gemm("a", Pass::kForward, DType::kBf16, 1024, 1024, 1024),
        Op::Gemm("b", Pass::kForward, DType::kBf16, 2048, 2048, 2048),
        Op::Streaming("c", OpKind::kNorm, Pass::kForward, DType::kBf16, 1 << 20, 4)}) {
    const std::optional<OpCost> cost = (*chain)->Price(op);
    ASSERT_TRUE(cost.has_value());
    tally.Add(*cost);
  }
  EXPECT_EQ(tally.ops(CostSource::kMeasured), 1);
  EXPECT_EQ(tally.ops(CostSource::kInterpolated), 1);
  EXPECT_EQ(tally.ops(CostSource::kRoofline), 1);
  EXPECT_NEAR(tally.Share(CostSource::kMeasured) + tally.Share(CostSource::kInterpolated) +
                  tally.Share(CostSource::kRoofline),
              1.0, 1e-12);
}

TEST(CostModelTest, RegistryErrors) {
  Expected<std::unique_ptr<OpCostModel>> unknown = MakeCostModel("rooflin", A100(), nullptr);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().ToString().find("did you mean \"roofline\""), std::string::npos)
      << unknown.error().ToString();
  EXPECT_NE(unknown.error().ToString().find("\"chain\", \"measured\""), std::string::npos);
  Expected<std::unique_ptr<OpCostModel>> no_table = MakeCostModel("measured", A100(), nullptr);
  ASSERT_FALSE(no_table.ok());
  EXPECT_NE(no_table.error().ToString().find("needs a measured op-cost table"), std::string::npos);
  // The chain without a table has nothing to look up: it is the roofline.
  Expected<std::unique_ptr<OpCostModel>> chain = MakeCostModel("chain", A100(), nullptr);
  ASSERT_TRUE(chain.ok());
  EXPECT_EQ((*chain)->name(), "roofline");
}

TEST(CostModelTest, EveryEntryMakesTheModelItNames) {
  traces::OpCostTable table;
  for (const CostModelEntry& entry : CostModels()) {
    Expected<std::unique_ptr<OpCostModel>> model = MakeCostModel(entry.name, A100(), &table);
    ASSERT_TRUE(model.ok()) << entry.name;
    EXPECT_EQ((*model)->name(), entry.name);
  }
  EXPECT_EQ(DefaultCostModel().name, "chain");
  EXPECT_EQ(CostModelNames().size(), CostModels().size());
}

TEST(CostModelTest, FitRecoversTheCurveThatMadeTheTable) {
  const GpuSpec gpu = A100();
  const EfficiencyCurve truth{0.7, DurationNs(6000)};
  std::vector<traces::MeasuredOp> ops;
  for (int64_t size : {512, 1024, 2048, 4096, 8192}) {
    const double seconds = truth.TimeSeconds(2.0 * size * size * size, 312e12);
    ops.push_back({GemmSignature(size, size, size), DurationNs(std::llround(seconds * 1e9))});
  }
  Expected<traces::OpCostTable> table = traces::OpCostTable::Make("a100", "", std::move(ops));
  ASSERT_TRUE(table.ok());
  Expected<EfficiencyCurve> fit = FitMatrixEfficiency(*table, gpu, DType::kBf16);
  ASSERT_TRUE(fit.ok()) << fit.error().ToString();
  EXPECT_NEAR(fit->max, 0.7, 1e-5);  // the table's times are rounded to whole ns
  EXPECT_NEAR(static_cast<double>(fit->ramp.ns()), 6000, 1);
  EXPECT_FALSE(FitMatrixEfficiency(*table, gpu, DType::kFp16).ok());  // no fp16 GEMMs
}

}  // namespace
// The recording model prices through the one it wraps and lists each signature once, in the
// order first asked, with how often and the first op's name.
TEST(CostModelTest, RecordingListsEverySignatureOnce) {
  const RooflineCostModel roofline(A100());
  const RecordingCostModel recording(roofline);
  const Op qkv = Op::Gemm("attn.qkv", Pass::kForward, DType::kBf16, 8192, 1536, 2048);
  const Op again = Op::Gemm("mlp.fc1", Pass::kForward, DType::kBf16, 8192, 1536, 2048);
  const Op norm =
      Op::Streaming("attn.norm", OpKind::kNorm, Pass::kForward, DType::kBf16, 1 << 22, 4);
  EXPECT_EQ(recording.Price(qkv)->duration, roofline.Price(qkv)->duration);
  EXPECT_TRUE(recording.Price(norm).has_value());
  EXPECT_TRUE(recording.Price(again).has_value());
  ASSERT_EQ(recording.recorded().size(), 2u);
  EXPECT_EQ(recording.recorded()[0].signature.Key(), "gemm bf16 k=2048 m=8192 n=1536");
  EXPECT_EQ(recording.recorded()[0].example, "attn.qkv");
  EXPECT_EQ(recording.recorded()[0].count, 2);
  EXPECT_EQ(recording.recorded()[1].signature.op, "norm");
  EXPECT_EQ(recording.name(), "roofline");
}

}  // namespace dtsim::models
