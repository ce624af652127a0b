// The memory model: ZeRO's per-stage state, micro-batches in flight per schedule, activations
// per stage, tensor-parallel parameter shards — each expectation derived in its comment.
#include "models/memory.h"

#include <gtest/gtest.h>

#include "models/parameters.h"

namespace dtsim::models {
namespace {

ModelSpec Preset(const char* name) {
  Expected<ModelSpec> model = ModelPreset(name);
  EXPECT_TRUE(model.ok());
  return *model;
}

TEST(MemoryTest, ZeroStagesDivideModelStatesAsThePaperSays) {
  // Rajbhandari et al. SC'20 Fig. 1: 2Ψ fp16 parameters + 2Ψ fp16 gradients + 12Ψ Adam state
  // (fp32 master, momentum, variance) per device, N = 64: stage 0 16Ψ; stage 1 4Ψ + 12Ψ/N;
  // stage 2 2Ψ + 14Ψ/N; stage 3 16Ψ/N (7.5B: 120, 31.4, 16.6, 1.9 GB).
  const ModelSpec model = Preset("megatron-7.5b");
  const auto psi = static_cast<double>(CountParameters(model).total);
  const double n = 64;
  const double expected[] = {16 * psi, 4 * psi + 12 * psi / n, 2 * psi + 14 * psi / n,
                             16 * psi / n};
  for (int stage = 0; stage <= 3; ++stage) {
    MemoryPlan plan{.shard = {.micro_batch = 1, .seq_len = 2048, .dtype = DType::kFp16},
                    .data_parallel = 64,
                    .zero_stage = stage,
                    .param_dtype = DType::kFp16,
                    .grad_dtype = DType::kFp16};
    Expected<MemoryBreakdown> memory = EstimateMemory(model, plan);
    ASSERT_TRUE(memory.ok()) << memory.error().ToString();
    EXPECT_EQ(memory->parameter_count, CountParameters(model).total);
    const double states =
        static_cast<double>(memory->parameters + memory->gradients + memory->optimizer_state);
    EXPECT_NEAR(states, expected[stage], 3) << "ZeRO stage " << stage;  // ceil per part
  }
}

TEST(MemoryTest, MicrobatchesInFlightPerSchedule) {
  // p = 8, m = 64, v = 4 (notes §7.2): GPipe keeps all 64; 1F1B rank r keeps p − r;
  // interleaved rank 0: (2·7 + 3·8 + 1) / 4 = 9.75 stage-equivalents.
  EXPECT_DOUBLE_EQ(MicrobatchesInFlight(PipelineSchedule::kGpipe, 8, 0, 1, 64), 64);
  EXPECT_DOUBLE_EQ(MicrobatchesInFlight(PipelineSchedule::kOneForwardOneBackward, 8, 0, 1, 64), 8);
  EXPECT_DOUBLE_EQ(MicrobatchesInFlight(PipelineSchedule::kOneForwardOneBackward, 8, 7, 1, 64), 1);
  EXPECT_DOUBLE_EQ(MicrobatchesInFlight(PipelineSchedule::kOneForwardOneBackward, 8, 0, 1, 3), 3);
  EXPECT_DOUBLE_EQ(MicrobatchesInFlight(PipelineSchedule::kInterleaved, 8, 0, 4, 64), 9.75);
}

TEST(MemoryTest, FirstStageHoldsAllLayersWorthOfActivations) {
  // GPT-3 175B, t = 8 with sequence parallelism and selective recompute, p = 16, b = 1,
  // s = 2048, 1F1B: stage 0 holds p = 16 micro-batches of 96/16 = 6 layers, each
  // 34·s·b·h/t bytes (Korthikanti §4.3: L layers' worth, independent of p), plus per
  // micro-batch the embedding's int64 ids 8·s·b and its dropout mask s·b·h/t.
  const ModelSpec model = Preset("gpt3-175b");
  const MemoryPlan plan{.shard = {.micro_batch = 1,
                                  .seq_len = 2048,
                                  .dtype = DType::kBf16,
                                  .tensor_parallel = 8,
                                  .sequence_parallel = true},
                        .recompute = Recompute::kSelective,
                        .pipeline_stages = 16,
                        .microbatches = 64,
                        .data_parallel = 8,
                        .zero_stage = 1};
  Expected<MemoryBreakdown> memory = EstimateMemory(model, plan);
  ASSERT_TRUE(memory.ok()) << memory.error().ToString();
  const int64_t sbh = 2048LL * 12288;
  EXPECT_EQ(memory->activations, 16 * (6 * 34 * sbh / 8 + 8 * 2048 + sbh / 8));
  EXPECT_DOUBLE_EQ(memory->microbatches_in_flight, 16);
}

TEST(MemoryTest, TensorParallelParameterShard) {
  // LLaMA-2 70B at t = 8, one stage: per layer Q and O 2·h·h/8, K and V one replicated-free
  // KV head each 2·h·128, two RMSNorms 2·h, SwiGLU 3·h·f/8; plus the V/8 × h embedding shard,
  // the final norm h and the untied V/8 × h output shard (32,000 pads to 32,768 = 32·128·8).
  const ModelSpec model = Preset("llama2-70b");
  const int64_t h = 8192, f = 28672, v = 32768;
  const int64_t layer = 2 * h * h / 8 + 2 * h * 128 + 2 * h + 3 * h * f / 8;
  const MemoryPlan plan{.shard = {.micro_batch = 1, .seq_len = 4096, .tensor_parallel = 8}};
  EXPECT_EQ(StageParameterCount(model, plan), 80 * layer + v / 8 * h + h + v / 8 * h);
}

TEST(MemoryTest, PlanErrors) {
  const ModelSpec model = Preset("gpt3-175b");
  MemoryPlan plan{.shard = {.micro_batch = 1, .seq_len = 2048}, .pipeline_stages = 7};
  Expected<MemoryBreakdown> memory = EstimateMemory(model, plan);
  ASSERT_FALSE(memory.ok());
  EXPECT_NE(memory.error().ToString().find("(7) must divide layers (96)"), std::string::npos)
      << memory.error().ToString();
  plan.pipeline_stages = 1;
  plan.zero_stage = 4;
  EXPECT_FALSE(EstimateMemory(model, plan).ok());
}

TEST(MemoryTest, RecsysAndVisionModels) {
  // DLRM: tables split 8 ways (ceil), the MLPs replicated.
  const ModelSpec dlrm = Preset("dlrm-mlperf");
  const ParameterCount count = CountParameters(dlrm);
  const MemoryPlan plan{.shard = {.micro_batch = 2048, .dtype = DType::kFp32},
                        .param_dtype = DType::kFp32,
                        .grad_dtype = DType::kFp32,
                        .embedding_shards = 8};
  EXPECT_EQ(StageParameterCount(dlrm, plan), count.layers + (count.embedding + 7) / 8);
  Expected<MemoryBreakdown> memory = EstimateMemory(Preset("resnet-50"), plan);
  ASSERT_TRUE(memory.ok());
  // fp32 weights need no master copy: Adam keeps 8 bytes per parameter.
  EXPECT_EQ(memory->optimizer_state, 8 * 25'557'032LL);
  EXPECT_GT(memory->activations, 0);
}

}  // namespace
}  // namespace dtsim::models
