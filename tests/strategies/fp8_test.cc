// FP8 training (Transformer Engine): the config, what it changes in a simulated iteration — the
// linear layers' GEMMs at the FP8 peak, their casts, FP8 sequence-parallel all-gathers, the
// per-iteration weight casts — and the MFU it reports, each expectation derived in a comment.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "strategies/categories.h"
#include "strategies/config.h"
#include "strategies/simulate.h"
#include "strategies/stage_memory.h"
#include "tests/strategies/simulate_helpers.h"

namespace dtsim::strategies {
namespace {

using testing::HasSubstr;

// 8 layers of hidden 4096 (32 heads, FFN 16,384) on one DGX H100, TP 4 with sequence
// parallelism, DP 2, 4 micro-batches of 2,048 tokens.
Json H100Config() {
  return Json::parse(R"({
    "model": {"family": "transformer", "layers": 8, "hidden": 4096, "heads": 32,
              "vocab": 32768, "max_seq": 2048},
    "training": {"global_batch": 8, "micro_batch": 1, "seq_len": 2048, "dropout": false,
                 "flash_attention": true},
    "cluster": {"preset": "dgx-h100", "gpu": "h100-sxm5-80gb", "nodes": 1},
    "parallelism": {"data": 2, "tensor": {"size": 4, "sequence_parallel": true}},
    "simulation": {"network_model": "analytical"}
  })");
}

Json Fp8(Json json, const char* recipe = nullptr) {
  json["training"]["precision"] = "fp8";
  if (recipe != nullptr) json["training"]["fp8_recipe"] = recipe;
  return json;
}

TEST(Fp8Test, PrecisionFp8KeepsBf16ActivationsAndDefaultsToDelayedScaling) {
  const ResolvedConfig config = ConfigOf(Fp8(H100Config()));
  EXPECT_EQ(config.training.dtype, DType::kBf16);
  EXPECT_EQ(config.training.fp8, models::Fp8Recipe::kDelayed);
  EXPECT_EQ(ConfigOf(Fp8(H100Config(), "blockwise")).training.fp8, models::Fp8Recipe::kBlockwise);
}

TEST(Fp8Test, ConfigErrorsNameTheKey) {
  Json recipe_alone = H100Config();
  recipe_alone["training"]["fp8_recipe"] = "delayed";
  EXPECT_THAT(ConfigError(recipe_alone), HasSubstr("training.fp8_recipe"));
  EXPECT_THAT(ConfigError(recipe_alone), HasSubstr("needs \"precision\": \"fp8\""));
  EXPECT_THAT(ConfigError(Fp8(H100Config(), "curent")), HasSubstr("did you mean \"current\""));
  EXPECT_THAT(ConfigError(Fp8(H100Config(), "mxfp8")),
              HasSubstr("MXFP8 needs microscaling tensor cores"));
  Json a100 = Fp8(H100Config());
  a100["cluster"] = {{"preset", "dgx-a100"}, {"gpu", "a100-sxm4-80gb"}, {"nodes", 1}};
  EXPECT_THAT(ConfigError(a100), HasSubstr("has no FP8 tensor cores"));
  Json grid = Fp8(H100Config());
  grid["parallelism"]["tensor"] = {{"size", 4}, {"mode", "2d"}};
  grid["training"]["micro_batch"] = 2;  // the 2×2 grid splits it
  EXPECT_THAT(ConfigError(grid), HasSubstr("parallelism.tensor.mode"));
  Json blackwell = Fp8(H100Config(), "mxfp8");
  blackwell["cluster"]["gpu"] = "b200-sxm-180gb";
  EXPECT_EQ(ConfigError(blackwell), "");
}

// Regression: BF16 (the default precision) on a V100, which has no BF16 tensor cores, priced
// the GEMMs on the vector units and printed "MFU inf%" (the model FLOPs over a zero peak).
// Every precision is checked against the GPU's matrix peaks, as FP8 was.
TEST(Fp8Test, APrecisionTheGpuHasNoMatrixPeakForIsAnError) {
  Json v100 = H100Config();
  v100["cluster"] = {{"preset", "dgx-a100"}, {"gpu", "v100-sxm2-32gb"}, {"nodes", 1}};
  EXPECT_THAT(ConfigError(v100),
              HasSubstr("training.precision: the GPU \"v100-sxm2-32gb\" has no bf16 matrix peak "
                        "(no bf16 tensor cores): its GEMMs and MFU would have no peak to run "
                        "at; train in fp32 or fp16, got \"bf16\""));
  v100["training"]["precision"] = "fp16";
  EXPECT_EQ(ConfigError(v100), "");
}

// The FP8 iteration's casts, GEMMs and gathers, against the BF16 one's.
TEST(Fp8Test, GemmsRunAtTheFp8PeakAndTheCastsCostWhatTheyMove) {
  const SimulationResult bf16 = SimulateJson(H100Config());
  const SimulationResult fp8 = SimulateJson(Fp8(H100Config()));
  // Faster, but by less than the GEMMs' 2× peak: the roofline's FP8 curve (0.65 of 1,979
  // TFLOP/s against 0.75 of 989) gives large GEMMs 1.73×, and attention, norms and the casts
  // stay or add memory-bound time.
  const double ratio = fp8.iteration_time.ToSecondsDouble() / bf16.iteration_time.ToSecondsDouble();
  EXPECT_LT(ratio, 0.95);
  EXPECT_GT(ratio, 1 / 1.73);
  // The same model FLOPs; MFU against BF16's peak, and the FP8 one exactly half of it (the
  // H100's dense FP8 peak, 1,978.9 TFLOP/s, is twice its BF16 one, 989.4).
  EXPECT_DOUBLE_EQ(fp8.iteration->stats.model_flops, bf16.iteration->stats.model_flops);
  EXPECT_NEAR(fp8.mfu_fp8, fp8.mfu * 989.4 / 1978.9, 1e-12);
  EXPECT_EQ(bf16.mfu_fp8, 0);
}

TEST(Fp8Test, SequenceParallelGathersMoveFp8) {
  // Each all-gather of a sequence-parallel shard moves FP8, as Transformer Engine quantizes the
  // shard before gathering it: in forward before QKV and FC1 (the next column-parallel input),
  // in backward before the projection's and FC2's backward (the row-parallel output gradient,
  // grad_output_preprocess). A shard is s·b·h/t = 2,048 × 4,096 / 4 elements, 4 MiB in BF16 and
  // 2 MiB in FP8 (delayed scaling, 1 byte each). Rank 0 runs 4 micro-batches × 8 layers × 2
  // gathers each way, plus the embedding's forward one and the output layer's backward one per
  // micro-batch; in backward QKV and FC1 also gather again the input they saved — its FP8
  // column-wise copy — for their weight gradients (4 × 8 × 2 more). Delayed scaling needs no
  // amax all-reduce per gather.
  const SimulationResult bf16 = SimulateJson(H100Config());
  const SimulationResult fp8 = SimulateJson(Fp8(H100Config()));
  const int64_t shard = int64_t{2048} * 4096 / 4;
  const int64_t gathers = int64_t{4} * (8 * 2 + 1) * 2 + int64_t{4} * 8 * 2;
  EXPECT_EQ(RankBytes(bf16, graph::CommKind::kAllGather, "") -
                RankBytes(fp8, graph::CommKind::kAllGather, ""),
            gathers * shard * (2 - 1));
  EXPECT_EQ(RankBytes(fp8, graph::CommKind::kAllReduce, "", "tp"), 0);
}

TEST(Fp8Test, CurrentScalingAgreesOnEachGatheredShardsScale) {
  // Under current scaling the TP ranks first all-reduce (max) the shard's row- and column-wise
  // amaxes, 2 × 4 B coalesced, before each FP8 gather (Float8CurrentScalingQuantizer's
  // with_amax_reduction): as many as the gathers above, 136 on rank 0; over the 4 TP ranks.
  const SimulationResult current = SimulateJson(Fp8(H100Config(), "current"));
  EXPECT_EQ(RankBytes(current, graph::CommKind::kAllReduce, "", "tp"), 136 * 8);
  EXPECT_EQ(Tally(current.iteration->graph, graph::CommKind::kAllReduce, 4).bytes,
            2 * 136 * 8);  // each TP group's, both data-parallel replicas
}

TEST(Fp8Test, OptimizerStepQuantizesTheWeightsOnce) {
  // The step adds one cast of the rank's FP8 weights: per layer 12·h²/t = 12 · 4096² / 4 =
  // 50,331,648 elements, 8 layers, each read in BF16 and written row- and column-wise in FP8:
  // 4 bytes, 1.61 GB at 0.85 × 3.35 TB/s = 565.6 µs (+2 µs ramp, 1 µs launch).
  const SimulationResult bf16 = SimulateJson(H100Config());
  const SimulationResult fp8 = SimulateJson(Fp8(H100Config()));
  const double elements = 8 * 12.0 * 4096 * 4096 / 4;
  const double expected = elements * 4 / (0.85 * 3350e9) + 2e-6 + 1e-6;
  const double added =
      fp8.stages[0].optimizer.ToSecondsDouble() - bf16.stages[0].optimizer.ToSecondsDouble();
  EXPECT_NEAR(added, expected, 2e-6);
}

TEST(Fp8Test, MemoryKeepsFp8WeightCopiesAndSavesFp8Inputs) {
  const SimulationResult bf16 = SimulateJson(H100Config());
  const SimulationResult fp8 = SimulateJson(Fp8(H100Config()));
  const models::MemoryBreakdown& a = bf16.iteration->stats.stage_memory[0];
  const models::MemoryBreakdown& b = fp8.iteration->stats.stage_memory[0];
  // Two FP8 copies (row- and column-wise) of the 8 layers' 12·h²/t weight elements.
  EXPECT_EQ(b.fp8_weights, int64_t{2} * 8 * 12 * 4096 * 4096 / 4);
  EXPECT_EQ(a.fp8_weights, 0);
  // Each linear layer's saved input shrinks from 2 to 1 byte per element: QKV's and FC1's the
  // sequence shard s·h/t, the projection's s·h/t, FC2's s·4h/t — 7·s·h/t per layer and
  // micro-batch, times 8 layers and the 1F1B stage's 1 micro-batch in flight (no pipeline: m
  // capped at p − s = 1).
  EXPECT_EQ(a.activations - b.activations, int64_t{7} * 2048 * 4096 / 4 * 8);
}

TEST(Fp8Test, SymmetricRanksMatchFull) {
  for (const char* recipe : {"current", "delayed"}) {
    Json json = Fp8(H100Config(), recipe);
    json["parallelism"]["pipeline"] = 2;
    json["cluster"]["nodes"] = 2;
    ExpectSymmetricMatchesFull(json);
  }
}

TEST(Fp8Test, ZeroThreeCastsEachGatheredLayerAndKeepsTwoLayersOfFp8Weights) {
  // ZeRO-3 frees a layer's gathered weights after each use, so Transformer Engine quantizes
  // them again each time: before every layer's forward and before its backward, 8 layers × 4
  // micro-batches × 2 = 64 casts on rank 0 (none in the optimizer step). Only the two
  // gathered layers' FP8 copies exist at once: 2 · 12·h²/t · 2 (row- and column-wise) · 1 B =
  // 2 · 12 · 4096² / 4 · 2 bytes, against all 8 layers' without ZeRO-3.
  Json json = Fp8(H100Config());
  json["parallelism"]["zero_stage"] = 3;
  const SimulationResult zero3 = SimulateJson(json);
  const graph::TaskGraph& graph = zero3.iteration->graph;
  int casts = 0;
  for (uint32_t t = 0; t < graph.task_count(); ++t) {
    const graph::TaskId id(t);
    if (graph.rank_of(id) == 0 && graph.name(graph.task(id).name).ends_with("fp8 weight cast")) {
      ++casts;
    }
  }
  EXPECT_EQ(casts, 8 * 4 * 2);
  const int64_t layer_weights = int64_t{12} * 4096 * 4096 / 4;
  const auto fp8_weights = [](const Json& config) {
    const auto memory = EstimateStageMemory(ConfigOf(config));
    EXPECT_TRUE(memory.ok());
    return memory.ok() ? memory->front().fp8_weights : 0;
  };
  EXPECT_EQ(fp8_weights(json), 2 * layer_weights * 2);
  json["parallelism"]["zero_stage"] = 1;
  EXPECT_EQ(fp8_weights(json), 8 * layer_weights * 2);
  json["parallelism"]["zero_stage"] = 3;
  ExpectSymmetricMatchesFull(json);
}

TEST(Fp8Test, DelayedScalingReducesAmaxesOverTheStagePerChunkPass) {
  // Delayed scaling: leaving a chunk's forward, the stage's 8 ranks (TP 4 × DP 2) all-reduce
  // the amaxes of its FP8 tensors — 4 linear layers a layer (QKV, projection, FC1, FC2) × 8
  // layers × 3 (input, weight, output) × 4 B = 384 B — and after its backward 4 · 8 · 2 · 4 =
  // 256 B; one chunk, 4 micro-batches: 4 of each, on the compute stream as "dp".
  const SimulationResult delayed = SimulateJson(Fp8(H100Config()));
  const CommTally amax = Tally(delayed.iteration->graph, graph::CommKind::kAllReduce, 8);
  EXPECT_EQ(amax.count, 4 + 4);
  EXPECT_EQ(amax.bytes, 4 * 384 + 4 * 256);
  // Current scaling takes each tensor's own amax: no reduction across the stage.
  EXPECT_EQ(Tally(SimulateJson(Fp8(H100Config(), "current")).iteration->graph,
                  graph::CommKind::kAllReduce, 8)
                .count,
            0);
}

// FP8 parameters (Megatron-Core's --fp8-param-gather) under the distributed optimizer (ZeRO-1
// over the 2 data-parallel replicas): one FP8 copy beside the parameter instead of two, and the
// updated GEMM weights gathered in FP8.
TEST(Fp8Test, Fp8ParametersStoreOneCopyAndGatherQuantized) {
  Json json = Fp8(H100Config());
  json["parallelism"]["zero_stage"] = 1;
  const SimulationResult copies = SimulateJson(json);
  json["training"]["param_precision"] = "fp8";
  const ResolvedConfig config = ConfigOf(json);
  EXPECT_TRUE(config.training.fp8_params);
  EXPECT_EQ(config.training.param_dtype, DType::kBf16);
  const SimulationResult fp8 = SimulateJson(json);
  const models::MemoryBreakdown& a = copies.iteration->stats.stage_memory[0];
  const models::MemoryBreakdown& b = fp8.iteration->stats.stage_memory[0];
  // The rank's FP8 weights: 8 layers × 12·h²/t = 402,653,184 elements, 1 B each quantized.
  const int64_t weights = int64_t{8} * 12 * 4096 * 4096 / 4;
  EXPECT_EQ(a.fp8_weights, 2 * weights);
  EXPECT_EQ(b.fp8_weights, weights);
  EXPECT_EQ(a.parameters - b.parameters, weights);  // 2 B → 1 B each
  EXPECT_EQ(a.optimizer_state, b.optimizer_state);  // the fp32 master copy stays
  // Each replica all-gathers its half of the rank's P parameters after the step: in bf16,
  // ⌈P/2⌉ × 2 bytes; with FP8 parameters the FP8 share f = weights / P of them at 1 B:
  // ⌈P/2⌉ × (2 − f).
  const int64_t p = a.parameter_count;
  const int64_t shard = (p + 1) / 2;
  const CommTally bf16_gathers = Tally(copies.iteration->graph, graph::CommKind::kAllGather, 2);
  const CommTally fp8_gathers = Tally(fp8.iteration->graph, graph::CommKind::kAllGather, 2);
  ASSERT_GT(bf16_gathers.count, 0);
  ASSERT_EQ(fp8_gathers.count, bf16_gathers.count);
  EXPECT_EQ(bf16_gathers.bytes / bf16_gathers.count, shard * 2);
  const double share = static_cast<double>(weights) / static_cast<double>(p);
  EXPECT_EQ(fp8_gathers.bytes / fp8_gathers.count,
            std::llround(static_cast<double>(shard) * (2 - share)));
  EXPECT_LE(fp8.iteration_time, copies.iteration_time);

  json["parallelism"]["zero_stage"] = 3;
  EXPECT_THAT(ConfigError(json), HasSubstr("FP8 parameters are modelled with unsharded"));
}

}  // namespace
}  // namespace dtsim::strategies
