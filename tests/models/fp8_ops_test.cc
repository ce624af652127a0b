// FP8 in the op decomposition and the roofline: which ops run in FP8, what the casts move, the
// weights a layer quantizes, and an FP8 GEMM's time against a BF16 one's at one shape.
#include <gtest/gtest.h>

#include <string>

#include "models/cost_model.h"
#include "models/gpu.h"
#include "models/ops.h"

namespace dtsim::models {
namespace {

TEST(Fp8OpsTest, CastBytesPerRecipe) {
  // Read BF16 (2), write FP8 row- and column-wise (1 + 1); blockwise adds an fp32 scale per
  // 128 elements each way (2·4/128), MXFP8 an E8M0 byte per 32 (2/32); current scaling reads
  // the tensor once more for its amax (+2).
  EXPECT_DOUBLE_EQ(Fp8QuantizeBytes(Fp8Recipe::kDelayed), 4);
  EXPECT_DOUBLE_EQ(Fp8QuantizeBytes(Fp8Recipe::kCurrent), 6);
  EXPECT_DOUBLE_EQ(Fp8QuantizeBytes(Fp8Recipe::kBlockwise), 4.0625);
  EXPECT_DOUBLE_EQ(Fp8QuantizeBytes(Fp8Recipe::kMxfp8), 4.0625);
}

TEST(Fp8OpsTest, Fp8GemmAgainstBf16AtOneShape) {
  // 8192³ on an H100 SXM: 2·8192³ = 1.0995e12 FLOPs at the power limit (0.85 of the burst
  // rate). BF16 at 0.7818 × 0.85 × 989.4 TFLOP/s: 1.6723 ms + 3.11 µs ramp; FP8 at
  // 0.7124 × 0.85 × 1,978.9: 0.9176 ms + 2.90 µs; each + 1 µs launch (memory: 403 MB in BF16
  // at 0.85 × 3.35 TB/s is 0.14 ms, below both). Ratio 1.819: the peak ratio 2 through the
  // two measured curves (tests/models/gpu_calibration_test.cc).
  const GpuSpec gpu = *GpuPreset("h100-sxm5-80gb");
  const RooflineCostModel roofline(gpu);
  const double flops = 2.0 * 8192 * 8192 * 8192;
  const double bf16 = roofline.Price(Op::Gemm("g", Pass::kForward, DType::kBf16, 8192, 8192, 8192))
                          ->duration.ToSecondsDouble();
  const double fp8 = roofline.Price(Op::Gemm("g", Pass::kForward, DType::kFp8, 8192, 8192, 8192))
                         ->duration.ToSecondsDouble();
  EXPECT_NEAR(bf16, flops / (0.7818 * 0.85 * 989.4e12) + 4.11e-6, 2e-9);
  EXPECT_NEAR(fp8, flops / (0.7124 * 0.85 * 1978.9e12) + 3.90e-6, 2e-9);
  EXPECT_NEAR(bf16 / fp8, 1.819, 1e-3);
}

TEST(Fp8OpsTest, LinearLayersRunInFp8AfterTheirCasts) {
  // GPT-3 175B's layer (h = 12,288, 96 heads, FFN 4h), t = 8 with sequence parallelism, one
  // sequence of 2,048 tokens.
  const TransformerSpec spec = ModelPreset("gpt3-175b")->transformer;
  const TransformerShard bf16{.micro_batch = 1,
                              .seq_len = 2048,
                              .dtype = DType::kBf16,
                              .tensor_parallel = 8,
                              .sequence_parallel = true,
                              .flash_attention = true};
  TransformerShard fp8 = bf16;
  fp8.fp8 = Fp8Recipe::kDelayed;
  const LayerOps a = TransformerLayerOps(spec, 0, bf16);
  const LayerOps b = TransformerLayerOps(spec, 0, fp8);
  // The four linear layers gain an input cast each, and a gradient cast each in backward.
  EXPECT_EQ(b.forward.size(), a.forward.size() + 4);
  EXPECT_EQ(b.backward.size(), a.backward.size() + 4);
  int fp8_gemms = 0;
  for (const Op& op : b.forward) {
    if (op.kind == OpKind::kGemm && op.dtype == DType::kFp8) ++fp8_gemms;
    if (op.name == "attn.qkv.quantize") {
      // The sequence shard s·h/t = 2,048 · 12,288 / 8 elements, before the all-gather.
      EXPECT_DOUBLE_EQ(op.bytes, 2048.0 * 12288 / 8 * 4);
    }
  }
  EXPECT_EQ(fp8_gemms, 4);  // QKV, projection, FC1, FC2; attention stays BF16
  // Weights quantized per layer: QKV 3h², projection h², FC1 and FC2 4h² each, over t.
  EXPECT_EQ(Fp8WeightElements(b), int64_t{12} * 12288 * 12288 / 8);
  EXPECT_EQ(Fp8WeightElements(a), 0);
  // The same model FLOPs.
  EXPECT_DOUBLE_EQ(TotalModelFlops(b.forward), TotalModelFlops(a.forward));
}

}  // namespace
}  // namespace dtsim::models
