// What PyTorch's eager modules move through HBM where a fused kernel (Megatron-Core's,
// Transformer Engine's, inductor's compiled blocks) moves less (docs/models.md, "Ops": eager
// PyTorch's kernels): bytes an element, forward and backward, each kernel reading its inputs and
// writing its output once. models/transformer_ops.cc prices the blocks' ops with them.
#pragma once

#include <utility>

namespace dtsim::models {

struct StreamBytes {
  double forward = 0;
  double backward = 0;

  friend bool operator==(const StreamBytes&, const StreamBytes&) = default;
};

// An RMSNorm over an input of `e` bytes an element as torchtitan (9dec370) and Hugging Face's
// LlamaRMSNorm write it: x.float(), pow(2), mean, x·rsqrt(· + eps), type_as(x), ·weight; the
// casts are no-ops on an fp32 input (autocast), the row statistics left out:
//   forward  float e + 4 · pow 4 + 4 · mean 4 · ·rsqrt 4 + 4 · type_as 4 + e · ·weight e + e:
//            36 in bf16, 28 in fp32;
//   backward ·weight: g·w e + e, g·out e + e + e and its sum over the rows e · type_as e + 4 ·
//            ·rsqrt: g·r 4 + 4, g·x 4 + 4 + 4 and its sum 4 · mean's expanded gradient 4 ·
//            pow: x.pow(1) 4 + 4, ·2 4 + 4, ·g 4 + 4 + 4 · x.float()'s two gradients summed
//            4 + 4 + 4 · float e + 4: 92 in bf16 and in fp32.
// Fused: 2e and 3e.
StreamBytes RmsNormBytes(double e, bool eager);

// SwiGLU, silu(a) · b, an output element of `e` bytes. Fused: 3e (both halves in, the product
// out) and 5e (the gradient and both halves in, their gradients out). Eager, two kernels: silu
// e + e and the product 2e + e, 5e; their autograd, the product's two gradients (g·b, g·s:
// 2e + e each) and silu's (its gradient and a in, e out), 9e.
StreamBytes SwigluBytes(double e, bool eager);

// Rotary embeddings of the queries and keys, an element of `e` bytes. Fused (Megatron-Core's
// apply_rope_fusion, Transformer Engine's fused_apply_rotary_pos_emb, a compiled block): one
// kernel reads and writes each element, 2e a way (the s·d cos/sin table left out). Eager as
// torchtitan writes it (apply_rotary_emb: the fp32 copy, its complex product with freqs_cis,
// the cast back) three kernels, e + 4, 4 + 4 and 4 + e: 2e + 16 a way, its autograd the same.
StreamBytes RotaryBytes(double e, bool eager);

}  // namespace dtsim::models
