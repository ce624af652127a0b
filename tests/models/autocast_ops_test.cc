// PyTorch eager under autocast over fp32 weights in the op decomposition (docs/models.md,
// "PyTorch eager under autocast"): the casts, fp32 norms and residual stream, bias-gradient
// reductions and the loss PyTorch launches, derived for GPT-2 small as
// tools/gpu_checks/gpt2_step.py trains it (micro-batch 8 × 1,024 tokens, bf16 autocast, flash
// attention, no dropout).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "models/ops.h"
#include "tests/models/preset_helpers.h"

namespace dtsim::models {
namespace {

constexpr int64_t kTokens = 8 * 1024;           // T
constexpr int64_t kHidden = 768;                // h
constexpr int64_t kVocab = 50'304;              // V, padded as the preset pads 50,257
static_assert(kTokens * kHidden == 6'291'456);  // T·h, the elements of a layer's activation

TransformerShard Gpt2Shard(bool autocast) {
  return {.micro_batch = 8,
          .seq_len = 1024,
          .dtype = DType::kBf16,
          .flash_attention = true,
          .dropout = false,
          .autocast = autocast};
}

std::vector<std::string> Names(const std::vector<Op>& ops) {
  std::vector<std::string> names;
  for (const Op& op : ops) names.push_back(op.name);
  return names;
}

double Bytes(const std::vector<Op>& ops, OpKind kind) {
  double bytes = 0;
  for (const Op& op : ops) bytes += op.kind == kind ? op.bytes : 0;
  return bytes;
}

const Op& Find(const std::vector<Op>& ops, const std::string& name) {
  for (const Op& op : ops) {
    if (op.name == name) return op;
  }
  ADD_FAILURE() << "no op " << name;
  return ops.front();
}

TEST(AutocastOpsTest, LayerCastsEveryWeightAndFp32InputAndWidensTheStream) {
  const TransformerSpec spec = PresetTransformer("gpt2-124m");
  const LayerOps plain = TransformerLayerOps(spec, 0, Gpt2Shard(false));
  const LayerOps ops = TransformerLayerOps(spec, 0, Gpt2Shard(true));
  // Forward, as PyTorch launches it (the profile in tests/data/captured/h100_gpt2_small_step
  // has these copies under aten::linear: one per weight and bias, one per norm output).
  EXPECT_EQ(Names(ops.forward), (std::vector<std::string>{"attn.norm",
                                                          "attn.qkv.input_cast",
                                                          "attn.qkv.weight_cast",
                                                          "attn.qkv.bias_cast",
                                                          "attn.qkv",
                                                          "attn.core",
                                                          "attn.proj.weight_cast",
                                                          "attn.proj.bias_cast",
                                                          "attn.proj",
                                                          "attn.residual",
                                                          "mlp.norm",
                                                          "mlp.fc1.input_cast",
                                                          "mlp.fc1.weight_cast",
                                                          "mlp.fc1.bias_cast",
                                                          "mlp.fc1",
                                                          "mlp.act",
                                                          "mlp.fc2.weight_cast",
                                                          "mlp.fc2.bias_cast",
                                                          "mlp.fc2",
                                                          "mlp.residual"}));
  // Backward gains a gradient cast per forward cast (10), a bias-gradient reduction per linear
  // (4) and a cast of the stream's gradient for each residual branch (2).
  EXPECT_EQ(ops.backward.size(), plain.backward.size() + 16);

  // Casts move 4 + 2 = 6 B an element. Forward: the two norm outputs (T·h = 6,291,456 each),
  // the weights (h·3h = 1,769,472; h² = 589,824; h·4h = 2,359,296 twice: 7,077,888) and biases
  // (3h + h + 4h + h = 6,912): (12,582,912 + 7,077,888 + 6,912) · 6 = 118,006,272 B. Backward:
  // the same back, and the two residual branches' gradients, 2 · T·h · 6 = 75,497,472 B more.
  EXPECT_DOUBLE_EQ(Bytes(ops.forward, OpKind::kCast), 118'006'272.0);
  EXPECT_DOUBLE_EQ(Bytes(ops.backward, OpKind::kCast), 118'006'272.0 + 75'497'472.0);
  // Bias gradients: each a bf16 read of its output gradient, T · 6,912 · 2 = 113,246,208 B.
  EXPECT_DOUBLE_EQ(Bytes(ops.backward, OpKind::kBias), 113'246'208.0);
  const Op& qkv_bias = Find(ops.backward, "attn.qkv.bias_grad");
  EXPECT_EQ(qkv_bias.signature.Key(), "bias_bwd bf16 columns=2304 elements=18874368");

  // Norms run in fp32: read 4 and write 4 B an element forward (T·h · 8 = 50,331,648), read
  // the gradient and input and write the gradient backward (T·h · 12 = 75,497,472); they keep
  // what they kept (the memory model widens it: models/memory.cc).
  const Op& norm = Find(ops.forward, "attn.norm");
  EXPECT_EQ(norm.dtype, DType::kFp32);
  EXPECT_DOUBLE_EQ(norm.bytes, 50'331'648.0);
  EXPECT_DOUBLE_EQ(Find(ops.backward, "attn.norm.bwd").bytes, 75'497'472.0);
  EXPECT_EQ(norm.saved_bytes, Find(plain.forward, "attn.norm").saved_bytes);
  // The residual add promotes: a bf16 branch and the fp32 stream in, fp32 out, 2 + 4 + 4 B an
  // element (62,914,560 B); its gradient accumulates in fp32, 3 · 4 B (75,497,472 B).
  EXPECT_DOUBLE_EQ(Find(ops.forward, "attn.residual").bytes, 62'914'560.0);
  EXPECT_DOUBLE_EQ(Find(ops.backward, "attn.residual.bwd").bytes, 75'497'472.0);
  // Measured as the fp32 add it is (the residual's own backward launches no kernel).
  EXPECT_EQ(Find(ops.backward, "attn.residual.bwd").signature.Key(),
            "elementwise fp32 elements=6291456");
  // The matmuls, attention and activation are the same kernels.
  for (const char* name : {"attn.qkv", "attn.core", "attn.proj", "mlp.fc1", "mlp.act", "mlp.fc2"}) {
    EXPECT_DOUBLE_EQ(Find(ops.forward, name).bytes, Find(plain.forward, name).bytes) << name;
    EXPECT_DOUBLE_EQ(Find(ops.forward, name).flops, Find(plain.forward, name).flops) << name;
  }
}

TEST(AutocastOpsTest, EmbeddingsStayFp32AndTheLossIsPyTorchs) {
  const TransformerSpec spec = PresetTransformer("gpt2-124m");
  const LayerOps embedding = EmbeddingOps(spec, Gpt2Shard(true));
  // The fp32 lookup reads a row and writes it (8 B an element of T·h) and the int64 ids
  // (8·T): 50,331,648 + 65,536. The table's gradient (V·h = 38,633,472) is zeroed and the rows
  // added (2 · 4 B over table + T·h: 359,399,424 B), then, tied, added to the output layer's
  // (3 · 4 B over the table: 463,601,664 B).
  EXPECT_DOUBLE_EQ(Find(embedding.forward, "embedding.lookup").bytes, 50'397'184.0);
  EXPECT_DOUBLE_EQ(Find(embedding.backward, "embedding.grad").bytes, 359'399'424.0);
  EXPECT_DOUBLE_EQ(Find(embedding.backward, "embedding.grad_accumulate").bytes, 463'601'664.0);

  const LayerOps plain = OutputOps(spec, Gpt2Shard(false));
  const LayerOps output = OutputOps(spec, Gpt2Shard(true));
  // The final norm's fp32 output is cast (T·h · 6 = 37,748,736 B), the tied table too (V·h · 6
  // = 231,800,832 B); no bias.
  EXPECT_DOUBLE_EQ(Find(output.forward, "output.logits.input_cast").bytes, 37'748'736.0);
  EXPECT_DOUBLE_EQ(Find(output.forward, "output.logits.weight_cast").bytes, 231'800'832.0);
  EXPECT_EQ(output.forward.size(), plain.forward.size() + 2);
  // F.cross_entropy(logits.float()) over T·V = 412,090,368 logits: 2 + 4 (the copy) + 4 + 4
  // (log_softmax) = 14 B a logit forward; 4 (nll_loss's dense gradient) + 12 (log_softmax's
  // backward) + 6 (the copy back) = 22 B backward. Megatron's fused loss: 6 and 6.
  const double logits = static_cast<double>(kTokens) * kVocab;
  EXPECT_DOUBLE_EQ(Find(output.forward, "output.cross_entropy").bytes, 14 * logits);
  EXPECT_DOUBLE_EQ(Find(output.backward, "output.cross_entropy.bwd").bytes, 22 * logits);
  EXPECT_DOUBLE_EQ(Find(plain.forward, "output.cross_entropy").bytes, 6 * logits);
  // PyTorch without autocast (FSDP2 computes in bf16 parameters) runs the same F.cross_entropy
  // over a copy: 14 and 22; compiled, two reads of the bf16 logits forward, a read and a write
  // backward: 4 and 4; in fp32 (no copy to make) and under loss_parallel the fused kernel's.
  TransformerShard fsdp = Gpt2Shard(false);
  fsdp.eager_modules = true;
  const LayerOps eager = OutputOps(spec, fsdp);
  EXPECT_DOUBLE_EQ(Find(eager.forward, "output.cross_entropy").bytes, 14 * logits);
  EXPECT_DOUBLE_EQ(Find(eager.backward, "output.cross_entropy.bwd").bytes, 22 * logits);
  fsdp.compiled_loss = true;
  const LayerOps compiled = OutputOps(spec, fsdp);
  EXPECT_DOUBLE_EQ(Find(compiled.forward, "output.cross_entropy").bytes, 4 * logits);
  EXPECT_DOUBLE_EQ(Find(compiled.backward, "output.cross_entropy.bwd").bytes, 4 * logits);
  fsdp.compiled_loss = false;
  fsdp.dtype = DType::kFp32;
  EXPECT_DOUBLE_EQ(Find(OutputOps(spec, fsdp).forward, "output.cross_entropy").bytes, 8 * logits);
}

}  // namespace
}  // namespace dtsim::models
