// Gradient compression: each method's payload and kernels derived from its paper or reference
// implementation (notes §9), its config errors, and what it does to a simulated iteration.
#include "strategies/compression.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "strategies/simulate.h"
#include "tests/strategies/simulate_helpers.h"

namespace dtsim::strategies {
namespace {

using testing::HasSubstr;

std::unique_ptr<GradientCompression> Make(const Json& json) {
  Expected<CompressionConfig> config = CompressionFromJson(json, "compression");
  EXPECT_TRUE(config.ok()) << config.error().ToString();
  return MakeCompression(*config);
}

std::string ReadError(const Json& json) {
  Expected<CompressionConfig> config = CompressionFromJson(json, "compression");
  return config.ok() ? "" : config.error().ToString();
}

GradientTensors Elements(int64_t n) { return {.matrices = {}, .vector_elements = n}; }

double WireBytes(const std::vector<ReductionStep>& steps, int ranks) {
  double bytes = 0;
  for (const ReductionStep& step : steps) bytes += WireBytesPerRank(step, ranks);
  return bytes;
}

double KernelFlops(const std::vector<ReductionStep>& steps, bool gemms_only) {
  double flops = 0;
  for (const ReductionStep& step : steps) {
    for (const models::Op& op : step.kernels) {
      if (!gemms_only || op.matmul) flops += op.flops;
    }
  }
  return flops;
}

TEST(CompressionTest, OneBitAdamSendsAThirtySecondOfFp32PlusScales) {
  // DeepSpeed's compressed_allreduce (notes §9.1) on n = 340e6, N = 64: n is padded to a
  // multiple of N·lcm(N, 8) = 4096, ñ = 83,008·4,096 = 340,000,768. Per rank: the sign
  // all-to-all sends 63/64 of ñ/8 = 42,500,096 B → 41,836,032; the server all-gather sends its
  // ñ/(8N) = 664,064 B chunk to 63 peers → 41,836,032; two scale all-gathers 63·4 B each.
  // Total 83,672,568 B (notes §11: 83.67 MB), against 2·63/64·4n = 2,677,500,000 B for an fp32
  // all-reduce: 1/32.0 (1/16 of fp16).
  const auto onebit = Make(Json{{"method", "onebit_adam"}});
  const std::vector<ReductionStep> steps = onebit->Reduce(Elements(340'000'000), 64, DType::kFp32);
  EXPECT_DOUBLE_EQ(WireBytes(steps, 64), 83'672'568.0);
  const double fp32 = WireBytes(PlainAllReduce(340'000'000, DType::kFp32), 64);
  EXPECT_DOUBLE_EQ(fp32, 2'677'500'000.0);
  EXPECT_NEAR(fp32 / WireBytes(steps, 64), 32.0, 0.01);
  EXPECT_NEAR(WireBytes(PlainAllReduce(340'000'000, DType::kFp16), 64) / WireBytes(steps, 64), 16.0,
              0.01);
  // The collectives it turns into, in order: sign all-to-all, then gathers (not all-reduce).
  std::vector<graph::CommKind> kinds;
  for (const ReductionStep& step : steps) {
    if (step.collective) kinds.push_back(*step.collective);
  }
  EXPECT_EQ(kinds, (std::vector<graph::CommKind>{
                       graph::CommKind::kAllToAll, graph::CommKind::kAllGather,
                       graph::CommKind::kAllGather, graph::CommKind::kAllGather}));
  // It compresses the momentum at the step, one buffer; warm-up 15% of the run by default.
  EXPECT_TRUE(onebit->ReducesAtStep());
  EXPECT_EQ(onebit->warmup_steps(), 15000);
  // Worker error ñ and server error ñ/N, fp32.
  EXPECT_EQ(onebit->StateBytes(Elements(340'000'000), 64, DType::kFp16),
            4 * 340'000'768LL + 4 * 340'000'768LL / 64);
}

TEST(CompressionTest, CastTopKAndQsgdPayloads) {
  const int64_t n = 1'000'000;
  // fp16: the all-reduce carries 2 bytes per element; already-16-bit gradients need no cast.
  const auto fp16 = Make(Json{{"method", "fp16"}});
  const std::vector<ReductionStep> cast = fp16->Reduce(Elements(n), 8, DType::kFp32);
  ASSERT_EQ(cast.size(), 3u);
  EXPECT_EQ(cast[1].bytes.count(), 2 * n);
  EXPECT_EQ(fp16->Reduce(Elements(n), 8, DType::kBf16).size(), 1u);
  // Top-k at density 0.001: k = 1,000 (value, int32 index) pairs, fp32 values: an all-gather
  // of 8,000 B per rank (notes §9.4).
  const auto topk = Make(Json{{"method", "topk"}, {"density", 0.001}});
  const std::vector<ReductionStep> sparse = topk->Reduce(Elements(n), 8, DType::kFp32);
  ASSERT_EQ(sparse[1].collective, graph::CommKind::kAllGather);
  EXPECT_EQ(sparse[1].bytes.count(), 1000 * (4 + 4));
  EXPECT_EQ(topk->StateBytes(Elements(n), 8, DType::kFp32), 4 * n);  // the residual
  // QSGD at 4 bits with 512-element buckets: n/2 bytes of levels + ⌈n/512⌉ = 1,954 scales.
  const auto qsgd = Make(Json{{"method", "qsgd"}, {"bits", 4}});
  const std::vector<ReductionStep> quantized = qsgd->Reduce(Elements(n), 8, DType::kFp32);
  EXPECT_EQ(quantized[1].bytes.count(), n / 2 + 4 * 1954);
}

TEST(CompressionTest, PowerSgdProjectsMatricesAndAllReducesTheRest) {
  // A 4096 × 16384 matrix at rank 4 (notes §11): P is 4096·4 and Q 16384·4 elements, a
  // compression of 4096·16384/((4096 + 16384)·4) = 819.2×; the three GEMMs (M·Q, Mᵀ·P, P·Qᵀ)
  // are 3·2·4096·16384·4 = 1.61e9 FLOPs. A 1-D bias of 4096 and a 2 × 1024 matrix (which
  // would not shrink: (2 + 1024)·4·2 > 2·1024) go through one uncompressed all-reduce first.
  const auto power = Make(Json{{"method", "powersgd"}, {"rank", 4}});
  GradientTensors bucket{.matrices = {{4096, 16384}, {2, 1024}}, .vector_elements = 4096};
  const std::vector<ReductionStep> steps = power->Reduce(bucket, 8, DType::kFp32);
  std::vector<int64_t> all_reduces;
  for (const ReductionStep& step : steps) {
    if (step.collective) {
      EXPECT_EQ(*step.collective, graph::CommKind::kAllReduce);  // linear: all-reduce compatible
      all_reduces.push_back(step.bytes.count());
    }
  }
  EXPECT_EQ(all_reduces, (std::vector<int64_t>{4 * (4096 + 2048), 4 * 4096 * 4, 4 * 16384 * 4}));
  EXPECT_NEAR(4096.0 * 16384 / ((4096 + 16384) * 4), 819.2, 1e-9);
  EXPECT_DOUBLE_EQ(KernelFlops(steps, true), 3 * 2.0 * 4096 * 16384 * 4);
  // Besides: error feedback adds the residual before and takes the approximation off after
  // (n·m FLOPs each), and Gram-Schmidt over 4 columns of 4096 costs 2·4096·4² FLOPs.
  EXPECT_DOUBLE_EQ(KernelFlops(steps, false) - KernelFlops(steps, true),
                   2.0 * 4096 * 16384 + 2.0 * 4096 * 16);
  EXPECT_EQ(power->warmup_steps(), 1000);  // PyTorch's start_powerSGD_iter
}

TEST(CompressionTest, ConfigErrorsNameThePathAndTheChoices) {
  EXPECT_THAT(ReadError(Json{{"method", "onebit-adam"}}),
              HasSubstr("compression.method: unknown compression method (did you mean "
                        "\"onebit_adam\"?)"));
  EXPECT_THAT(ReadError(Json{{"method", "zip"}}),
              HasSubstr("\"none\", \"fp16\", \"bf16\", \"onebit_adam\", \"onebit_lamb\", "
                        "\"topk\", \"qsgd\", \"powersgd\""));
  EXPECT_THAT(ReadError(Json{{"method", "topk"}, {"density", 2}}),
              HasSubstr("compression.density"));
  EXPECT_THAT(ReadError(Json{{"method", "topk"}, {"rank", 2}}), HasSubstr("compression.rank"));
  EXPECT_THAT(ReadError(Json{{"method", "onebit_adam"}, {"steps", 10}, {"warmup_steps", 20}}),
              HasSubstr("more warm-up steps than the run has (10)"));
  EXPECT_EQ(ReadError(Json("powersgd")), "");  // a method name alone
}

// BERT-Large-shaped layers (hidden 1024, 24 layers) data parallel over 8 nodes of 1 GPU on 25
// Gb Ethernet: the gradient all-reduce dominates the iteration.
Json DataParallelConfig() {
  return Json::parse(R"({
    "model": "bert-large",
    "training": {"global_batch": 64, "micro_batch": 8, "seq_len": 128, "precision": "fp16",
                 "grad_precision": "fp16"},
    "cluster": {"preset": "ethernet-25g", "nodes": 8, "gpus_per_node": 1, "gpu": "v100-sxm2-32gb"},
    "parallelism": {"data": 8}
  })");
}

TEST(CompressionTest, OneBitAdamRunHasTwoPhasesAndTheirAverage) {
  Json json = DataParallelConfig();
  const SimulationResult plain = SimulateJson(json);
  json["compression"] = {{"method", "onebit_adam"}, {"steps", 1000}, {"warmup_steps", 250}};
  const SimulationResult onebit = SimulateJson(json);
  ASSERT_EQ(onebit.phases.size(), 2u);
  // The warm-up is the uncompressed iteration, exactly (the same graph).
  EXPECT_EQ(onebit.phases[0].iteration_time, plain.iteration_time);
  EXPECT_EQ(onebit.phases[0].steps, 250);
  EXPECT_EQ(onebit.phases[1].steps, 750);
  EXPECT_EQ(onebit.phases[1].iteration_time, onebit.iteration_time);
  // 16× fewer bytes on a network-bound plan: the compressed phase is faster, even though its
  // one buffer waits for the whole backward.
  EXPECT_LT(onebit.iteration_time.ToSecondsDouble(), 0.7 * plain.iteration_time.ToSecondsDouble());
  // Average over the run: (250·warm + 750·compressed)/1000.
  const double average = (250 * plain.iteration_time.ToSecondsDouble() +
                          750 * onebit.iteration_time.ToSecondsDouble()) /
                         1000;
  EXPECT_NEAR(onebit.average_iteration_time.ToSecondsDouble(), average, 1e-9);
  // The error buffers count as optimizer state: 4·ñ + 4·ñ/8 bytes more.
  const models::MemoryBreakdown& with = onebit.iteration->stats.stage_memory[0];
  const models::MemoryBreakdown& without = plain.iteration->stats.stage_memory[0];
  const int64_t parameters = without.parameters / 2;  // fp16 weights
  const int64_t padded = (parameters + 63) / 64 * 64;
  EXPECT_EQ(with.optimizer_state - without.optimizer_state, 4 * padded + 4 * padded / 8);
}

TEST(CompressionTest, EveryMethodSimulatesAndFullMatchesSymmetric) {
  for (const char* method : {"fp16", "onebit_lamb", "topk", "qsgd", "powersgd"}) {
    Json json = DataParallelConfig();
    json["training"]["grad_precision"] = "fp32";
    json["compression"] = {{"method", method}, {"warmup_steps", 0}};
    const SimulationResult full = SimulateJson(json);
    EXPECT_TRUE(full.phases.empty()) << method;  // no warm-up, one phase
    json["simulation"] = {{"ranks", "symmetric"}};
    const SimulationResult symmetric = SimulateJson(json);
    EXPECT_NEAR(symmetric.iteration_time.ToSecondsDouble() / full.iteration_time.ToSecondsDouble(),
                1.0, 0.001)
        << method;
  }
}

TEST(CompressionTest, PlansCompressionCannotJoinAreRejected) {
  Json json = DataParallelConfig();
  json["compression"] = "topk";
  json["parallelism"]["zero_stage"] = 1;
  Expected<ResolvedConfig> zero = ConfigFromJson(json, "");
  ASSERT_FALSE(zero.ok());
  EXPECT_THAT(zero.error().ToString(), HasSubstr("ZeRO stage 1 reduce-scatters them"));
  json = DataParallelConfig();
  json["compression"] = "onebit_adam";
  json["training"]["optimizer"] = "sgd";
  Expected<ResolvedConfig> sgd = ConfigFromJson(json, "");
  ASSERT_FALSE(sgd.ok());
  EXPECT_THAT(sgd.error().ToString(), HasSubstr("training.optimizer must be \"adam\""));
}

}  // namespace
}  // namespace dtsim::strategies
