// Gemma 3's layer (models/model_presets.cc, Gemma3): GeGLU (TransformerSpec's kGeGlu, a gated MLP
// priced as SwiGLU), norms after the attention and the MLP (post_norms), and the presets — each
// expectation derived in its comment.
#include <gtest/gtest.h>

#include <string>

#include "models/eager_allocations.h"
#include "models/memory.h"
#include "models/model_spec.h"
#include "models/ops.h"
#include "models/parameters.h"
#include "tests/models/preset_helpers.h"

namespace dtsim::models {
namespace {

TransformerSpec Toy(bool post_norms) {
  TransformerSpec spec = ToyLlama(2, 512);  // hidden 512, 8 heads of 64 over 4, MLP 1,536
  spec.post_norms = post_norms;
  return spec;
}

double Sum(const std::vector<Op>& ops, double Op::*field) {
  double total = 0;
  for (const Op& op : ops) total += op.*field;
  return total;
}

TEST(GemmaLayerTest, GeGluIsPricedAsSwiGlu) {
  // Both are a gated MLP: gate and up h → f in one GEMM of 2f columns, an elementwise product
  // that reads 2f and writes f, and down f → h. Only the gate's function differs, and an
  // elementwise op's time is its bytes: the same FLOPs, bytes and saved bytes.
  TransformerSpec geglu = Toy(false);
  geglu.activation = Activation::kGeGlu;
  const TransformerShard shard{.micro_batch = 2, .seq_len = 512};
  const LayerOps a = TransformerLayerOps(geglu, 0, shard);
  const LayerOps b = TransformerLayerOps(Toy(false), 0, shard);
  EXPECT_EQ(Sum(a.forward, &Op::flops), Sum(b.forward, &Op::flops));
  EXPECT_EQ(Sum(a.backward, &Op::flops), Sum(b.backward, &Op::flops));
  EXPECT_EQ(LayerActivationBytes(a, Recompute::kNone, shard, 1024),
            LayerActivationBytes(b, Recompute::kNone, shard, 1024));
  // 3 · 512 · 1,536 MLP weights a layer, as SwiGLU's.
  EXPECT_EQ(MlpParameters(geglu, 1536), 3 * 512 * 1536);
}

TEST(GemmaLayerTest, PostNormsAddTwoNormsThatSaveTheirInputs) {
  // RMSNorm: one weight of hidden = 512 each, 2 · 512 = 1,024 parameters a layer more.
  EXPECT_EQ(DenseLayerParameters(Toy(true)) - DenseLayerParameters(Toy(false)), 1024);
  // b = 2, s = 512, bf16: each norm saves its input, the attention's or the MLP's output,
  // 1,024 tokens · 512 · 2 B = 1,048,576 B; two a layer. Under full recompute the layer keeps
  // its input alone, either way.
  const TransformerShard shard{.micro_batch = 2, .seq_len = 512, .dtype = DType::kBf16};
  const LayerOps with = TransformerLayerOps(Toy(true), 0, shard);
  const LayerOps without = TransformerLayerOps(Toy(false), 0, shard);
  EXPECT_EQ(LayerActivationBytes(with, Recompute::kNone, shard, 1024) -
                LayerActivationBytes(without, Recompute::kNone, shard, 1024),
            2 * 1024 * 512 * 2);
  EXPECT_EQ(LayerActivationBytes(with, Recompute::kFull, shard, 1024),
            LayerActivationBytes(without, Recompute::kFull, shard, 1024));
  // Megatron-Core's "mlp" recompute module re-runs the MLP, not the post norm after it: the
  // norm keeps its input, so the two layers still differ by both norms' inputs.
  TransformerShard mlp_recompute = shard;
  mlp_recompute.recompute_modules = kRecomputeMlp;
  EXPECT_EQ(LayerActivationBytes(TransformerLayerOps(Toy(true), 0, mlp_recompute),
                                 Recompute::kSelective, mlp_recompute, 1024) -
                LayerActivationBytes(TransformerLayerOps(Toy(false), 0, mlp_recompute),
                                     Recompute::kSelective, mlp_recompute, 1024),
            2 * 1024 * 512 * 2);
  // Each runs on its branch's output, before the residual add.
  std::string order;
  for (const Op& op : with.forward) {
    for (const char* name : {"attn.proj", "attn.post_norm", "attn.residual", "mlp.fc2",
                             "mlp.post_norm", "mlp.residual"}) {
      if (op.name == name) order += std::string(name) + " ";
    }
  }
  EXPECT_EQ(order, "attn.proj attn.post_norm attn.residual mlp.fc2 mlp.post_norm mlp.residual ");
}

TEST(GemmaLayerTest, PresetsAndWhatLeavesThemToTheAnalyticModel) {
  const TransformerSpec gemma = PresetTransformer("gemma3-27b");
  EXPECT_EQ(gemma.activation, Activation::kGeGlu);
  EXPECT_TRUE(gemma.qk_norm && gemma.post_norms && gemma.tied_embeddings);
  // 62 layers, every sixth from layer 5 full: 5, 11, …, 59 — ten of them; 52 windowed.
  EXPECT_EQ(gemma.WindowedLayers(), 52);
  EXPECT_EQ(gemma.WindowOf(5), 0);
  EXPECT_EQ(gemma.WindowOf(6), 1024);
  // The eager replay has neither the QK norm nor the post norms: the analytic model prices it.
  TransformerSpec toy = Toy(true);
  toy.tied_embeddings = true;
  const Expected<EagerPeaks> peaks =
      ReplayEagerTraining(toy, EagerRun{.micro_batch = 1, .seq_len = 256});
  ASSERT_FALSE(peaks.ok());
  EXPECT_NE(peaks.error().ToString().find("norms after the attention and the MLP"),
            std::string::npos)
      << peaks.error().ToString();
}

}  // namespace
}  // namespace dtsim::models
