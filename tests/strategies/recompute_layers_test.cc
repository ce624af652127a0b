// training.recompute_every: the recompute policy on every n-th layer only (torchtitan's
// per-layer checkpointing frequency). What it keeps, what it recomputes and what it costs, each
// derived from the same config with the policy on every layer and on none.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "models/memory.h"
#include "models/ops.h"
#include "strategies/config.h"
#include "strategies/simulate.h"
#include "tests/strategies/simulate_helpers.h"

namespace dtsim::strategies {
namespace {

using testing::HasSubstr;

// 8 layers of hidden 1,024 on one H100, 2 micro-batches of 1,024 tokens (no pipeline: one
// stage holds every layer, one micro-batch in flight).
Json EightLayers(const char* recompute, int every = 1) {
  Json json = Json::parse(R"({
    "model": {"family": "transformer", "layers": 8, "hidden": 1024, "heads": 16,
              "vocab": 32768, "max_seq": 1024},
    "training": {"global_batch": 2, "micro_batch": 1, "seq_len": 1024, "dropout": false,
                 "flash_attention": true},
    "cluster": {"preset": "dgx-h100", "gpu": "h100-sxm5-80gb", "nodes": 1, "gpus_per_node": 1},
    "parallelism": {"data": 1},
    "simulation": {"network_model": "analytical"}
  })");
  json["training"]["recompute"] = recompute;
  if (every != 1) json["training"]["recompute_every"] = every;
  return json;
}

TEST(RecomputeLayersTest, EveryNthLayerCountsFromOne) {
  // torchtitan wraps blocks n, 2n, … counted from 1: indices n − 1, 2n − 1, … from 0.
  for (int index = 0; index < 6; ++index) EXPECT_TRUE(models::RecomputesLayer(1, index));
  EXPECT_FALSE(models::RecomputesLayer(2, 0));
  EXPECT_TRUE(models::RecomputesLayer(2, 1));
  EXPECT_FALSE(models::RecomputesLayer(2, 2));
  EXPECT_TRUE(models::RecomputesLayer(2, 3));
  EXPECT_FALSE(models::RecomputesLayer(3, 0));
  EXPECT_FALSE(models::RecomputesLayer(3, 1));
  EXPECT_TRUE(models::RecomputesLayer(3, 2));
  EXPECT_TRUE(models::RecomputesLayer(3, 5));
}

TEST(RecomputeLayersTest, HalfTheLayersKeepEverythingAndHalfOnlyTheirInput) {
  // Every 2nd of 8 identical layers recomputed: 4 keep what `none` keeps, 4 what `full` keeps;
  // the embedding, output and temporary buffers are the same in all three. So the activations
  // are the mean of the two, and the recomputed forward is half of full's: 4 layers' instead
  // of 8 (each recomputed forward is the same ops at the same price).
  const SimulationResult none = SimulateJson(EightLayers("none"));
  const SimulationResult full = SimulateJson(EightLayers("full"));
  const SimulationResult half = SimulateJson(EightLayers("full", 2));
  const models::MemoryBreakdown& kept_all = none.iteration->stats.stage_memory[0];
  const models::MemoryBreakdown& kept_inputs = full.iteration->stats.stage_memory[0];
  const models::MemoryBreakdown& kept_half = half.iteration->stats.stage_memory[0];
  EXPECT_GT(kept_all.activations, kept_inputs.activations);
  EXPECT_EQ(2 * kept_half.activations, kept_all.activations + kept_inputs.activations);
  EXPECT_EQ(kept_half.temporary, kept_inputs.temporary);
  EXPECT_EQ(kept_half.parameters, kept_all.parameters);

  EXPECT_EQ(none.stages[0].recompute.ns(), 0);
  ASSERT_GT(full.stages[0].recompute.ns(), 0);
  EXPECT_EQ(2 * half.stages[0].recompute.ns(), full.stages[0].recompute.ns());
  EXPECT_EQ(half.stages[0].compute, full.stages[0].compute);
  // Hardware FLOPs count the recomputed forwards: half of full's extra over none.
  const double extra = full.iteration->stats.hardware_flops - none.iteration->stats.hardware_flops;
  EXPECT_GT(extra, 0);
  EXPECT_NEAR(half.iteration->stats.hardware_flops - none.iteration->stats.hardware_flops,
              extra / 2, 1e-9 * extra);
  EXPECT_EQ(half.iteration->stats.model_flops, full.iteration->stats.model_flops);
  EXPECT_LT(half.iteration_time, full.iteration_time);
  EXPECT_GT(half.iteration_time, none.iteration_time);
}

TEST(RecomputeLayersTest, SelectiveOnEveryThirdLayer) {
  // Selective recompute on layers 3 and 6 of 8 (indices 2 and 5): the other 6 keep everything.
  // Its recomputed attention cores are 2/8 of selective-on-every-layer's. (Without flash
  // attention: with it the cores keep nothing selective could drop, and recompute nothing.)
  Json json = EightLayers("selective");
  json["training"]["flash_attention"] = false;
  const SimulationResult every = SimulateJson(json);
  json["training"]["recompute_every"] = 3;
  const SimulationResult third = SimulateJson(json);
  ASSERT_GT(every.stages[0].recompute.ns(), 0);
  EXPECT_EQ(4 * third.stages[0].recompute.ns(), every.stages[0].recompute.ns());
}

// GPT-2's block at hidden 1,024 (16 heads, FFN 4,096, biases, GELU, LayerNorm), 8 layers, one
// sequence of 1,024 tokens per micro-batch, flash attention, bf16.
Json Gpt2Style(const char* recompute) {
  Json json = EightLayers(recompute);
  json["model"] = Json::parse(R"({"family": "transformer", "layers": 8, "hidden": 1024,
      "heads": 16, "ffn_hidden": 4096, "vocab": 32768, "max_seq": 1024, "activation": "gelu",
      "norm": "layernorm", "position": "learned", "linear_bias": true})");
  return json;
}

TEST(RecomputeLayersTest, SelectiveOpKeepsEveryOtherMatmulAndAttention) {
  // torchtitan's "op" policy on a GPT-2 block: of its matmuls QKV (1st), projection (2nd), FC1
  // (3rd), FC2 (4th) it keeps the 1st and 3rd outputs, and the flash kernel's output and row
  // statistics; full keeps only the input, which both keep. Per layer over 1,024 tokens:
  //   QKV 1,024·3,072·2 = 6,291,456 + attention 1,024·1,024·2 = 2,097,152
  //   + statistics 4·16·1,024 = 65,536 + FC1 1,024·4,096·2 = 8,388,608 = 16,842,752 bytes,
  // for 8 layers 134,742,016 bytes more than full (embedding and output the same).
  const SimulationResult full = SimulateJson(Gpt2Style("full"));
  const SimulationResult op = SimulateJson(Gpt2Style("selective_op"));
  const SimulationResult none = SimulateJson(Gpt2Style("none"));
  const int64_t full_bytes = full.iteration->stats.stage_memory[0].activations;
  EXPECT_EQ(op.iteration->stats.stage_memory[0].activations - full_bytes, 134742016);
  EXPECT_LT(op.iteration->stats.stage_memory[0].activations,
            none.iteration->stats.stage_memory[0].activations);
  // It recomputes the rest: full's recomputed forward less the kept ops' FLOPs (model FLOPs,
  // the flash kernel's unmasked 4·s²·d per head), per layer
  //   QKV 2·1,024·3,072·1,024 = 6,442,450,944 + FC1 2·1,024·4,096·1,024 = 8,589,934,592
  //   + attention 4·1,024²·64·16 = 4,294,967,296 = 19,327,352,832,
  // times 8 layers and 2 micro-batches: 309,237,645,312.
  const double full_extra =
      full.iteration->stats.hardware_flops - full.iteration->stats.model_flops;
  const double op_extra = op.iteration->stats.hardware_flops - op.iteration->stats.model_flops;
  EXPECT_NEAR(full_extra - op_extra, 309237645312.0, 1.0);
  EXPECT_GT(op.stages[0].recompute.ns(), 0);
  EXPECT_LT(op.stages[0].recompute, full.stages[0].recompute);
}

TEST(RecomputeLayersTest, SelectiveOpCountsLlamaMatmulsAsPyTorchRunsThem) {
  // A Llama-style block (rotary, SwiGLU, hidden 1,024, 16 heads of 64, 4 KV heads, FFN 4,096):
  // PyTorch runs wq, wk, wv, wo, w1 (gate), w3 (up), w2 as seven matmuls where dtsim fuses QKV
  // and gate/up. The policy keeps the 1st, 3rd, 5th and 7th — q (1,024 columns), v (256),
  // gate (4,096), w2 (1,024) — and the flash kernel's output (1,024) and statistics. Over 1,024
  // tokens, 2 bytes each: 1,024·2·7,424 + 4·16·1,024 = 15,269,888 bytes a layer more than
  // full, 122,159,104 for 8 layers.
  Json json = EightLayers("full");
  json["model"] = Json::parse(R"({"family": "transformer", "layers": 8, "hidden": 1024,
      "heads": 16, "kv_heads": 4, "ffn_hidden": 4096, "vocab": 32768, "max_seq": 1024,
      "activation": "swiglu", "norm": "rmsnorm", "position": "rotary"})");
  const SimulationResult full = SimulateJson(json);
  json["training"]["recompute"] = "selective_op";
  const SimulationResult op = SimulateJson(json);
  EXPECT_EQ(op.iteration->stats.stage_memory[0].activations -
                full.iteration->stats.stage_memory[0].activations,
            122159104);
  // Not recomputed (model FLOPs): q 2·1,024·1,024·1,024 = 2,147,483,648, v 2·1,024·256·1,024 =
  // 536,870,912, gate 2·1,024·4,096·1,024 = 8,589,934,592, w2 the same, attention
  // 4·1,024²·64·16 = 4,294,967,296: 24,159,191,040 a layer, 386,547,056,640 for 8 layers and 2
  // micro-batches. (k and up are recomputed as the parts of the fused GEMMs they are.)
  const double full_extra =
      full.iteration->stats.hardware_flops - full.iteration->stats.model_flops;
  const double op_extra = op.iteration->stats.hardware_flops - op.iteration->stats.model_flops;
  EXPECT_NEAR(full_extra - op_extra, 386547056640.0, 1.0);
}

TEST(RecomputeLayersTest, SelectiveOpNeedsOneDimensionalTensorParallelism) {
  Json json = EightLayers("selective_op");
  json["cluster"]["gpus_per_node"] = 4;
  json["training"]["global_batch"] = 4;
  json["training"]["micro_batch"] = 2;  // the 2×2 grid splits the batch
  json["parallelism"] = Json::parse(R"({"data": 1, "tensor": {"size": 4, "mode": "2d"}})");
  EXPECT_THAT(ConfigError(json),
              HasSubstr("parallelism.tensor.mode: selective_op recompute (PyTorch's selective "
                        "activation checkpointing) is built for 1D tensor parallelism"));
}

TEST(RecomputeLayersTest, FullEqualsSymmetricRanks) {
  // The policy is per layer, not per rank: simulating every rank gives the symmetric result.
  Json json = EightLayers("full", 2);
  json["parallelism"] = Json::parse(R"({"data": 2, "pipeline": 2})");
  json["cluster"]["gpus_per_node"] = 4;
  json["training"]["global_batch"] = 8;
  const SimulationResult symmetric = SimulateJson(json);
  json["simulation"]["ranks"] = "full";
  const SimulationResult full = SimulateJson(json);
  EXPECT_EQ(symmetric.iteration_time, full.iteration_time);
}

TEST(RecomputeLayersTest, BadValuesAreNamed) {
  EXPECT_THAT(ConfigError(EightLayers("none", 2)),
              HasSubstr("training.recompute_every: recompute_every 2 picks the layers "
                        "training.recompute applies to, but it is \"none\": name their policy"));
  Json zero = EightLayers("full");
  zero["training"]["recompute_every"] = 0;
  EXPECT_THAT(ConfigError(zero), HasSubstr("training.recompute_every"));
  Json text = EightLayers("full");
  text["training"]["recompute_every"] = "2";
  EXPECT_THAT(ConfigError(text), HasSubstr("training.recompute_every"));
}

// recompute_modules (Megatron-Core's --recompute-modules) on the 8 layers: "mlp" keeps each
// layer's MLP input and recomputes the MLP in the backward pass. Per layer and micro-batch the
// MLP saves fc1's input 1,024 × 1,024 × 2, GeLU's input 1,024 × 4,096 × 2 and fc2's the same:
// 2,097,152 + 2 × 8,388,608 = 18,874,368 B freed, 8 layers × 1 micro-batch in flight. The
// recompute re-runs the norm and the MLP: its time is what one forward of them costs. The plan
// line and the result name the modules.
TEST(RecomputeLayersTest, MegatronCoreModulesKeepTheModuleInput) {
  const SimulationResult none = SimulateJson(EightLayers("none"));
  Json json = EightLayers("selective");
  const SimulationResult core = SimulateJson(json);
  EXPECT_EQ(core.stages[0].recompute.ns(), 0);  // flash attention: nothing to recompute
  json["training"]["recompute_modules"] = {"core_attn", "mlp"};
  const ResolvedConfig config = ConfigOf(json);
  EXPECT_EQ(config.training.recompute_modules, models::kRecomputeCoreAttn | models::kRecomputeMlp);
  const SimulationResult mlp = SimulateJson(json);
  EXPECT_EQ(none.iteration->stats.stage_memory[0].activations -
                mlp.iteration->stats.stage_memory[0].activations,
            8 * 18'874'368LL);
  EXPECT_GT(mlp.stages[0].recompute.ns(), 0);
  EXPECT_GT(mlp.iteration_time, none.iteration_time);
}

TEST(RecomputeLayersTest, RecomputeModulesErrorsNameTheKey) {
  Json full = EightLayers("full");
  full["training"]["recompute_modules"] = {"mlp"};
  EXPECT_THAT(ConfigError(full), HasSubstr("training.recompute_modules: recompute_modules name "
                                           "what \"selective\" recomputes"));
  Json typo = EightLayers("selective");
  typo["training"]["recompute_modules"] = {"mlp", "moe_actt"};
  EXPECT_THAT(ConfigError(typo), HasSubstr("training.recompute_modules[1]: unknown recompute "
                                           "module (did you mean \"moe_act\"?)"));
  Json twice = EightLayers("selective");
  twice["training"]["recompute_modules"] = {"mlp", "mlp"};
  EXPECT_THAT(ConfigError(twice), HasSubstr("training.recompute_modules[1]: named twice"));
  Json empty = EightLayers("selective");
  empty["training"]["recompute_modules"] = Json::array();
  EXPECT_THAT(ConfigError(empty), HasSubstr("expected a non-empty array"));
  Json grid = EightLayers("selective");
  grid["training"]["recompute_modules"] = {"mlp"};
  grid["cluster"]["gpus_per_node"] = 4;
  grid["training"]["global_batch"] = 4;
  grid["training"]["micro_batch"] = 2;
  grid["parallelism"] = Json::parse(R"({"data": 1, "tensor": {"size": 4, "mode": "2d"}})");
  EXPECT_THAT(ConfigError(grid), HasSubstr("built for 1D tensor parallelism"));
}

}  // namespace
}  // namespace dtsim::strategies
