// Context parallelism's ring attention inside an eager loop's tensors (models/eager_tensors.h),
// as PyTorch runs it for torchtitan (torch.distributed.tensor.experimental.context_parallel,
// torch/distributed/tensor/experimental/_attention.py, the same algorithm in 2.6 and 2.11) with
// its defaults: keys and values rotated by one all-gather (_AllGatherRotater), the keys' and
// values' gradients by all-to-all (_AllToAllRotater), round-robin load balancing under the causal
// mask, and the partial outputs merged in fp32 (_SDPAMerger). The replay is the first rank of the
// context-parallel group: from the second step on it attends with the second half of its
// queries to every key of the step (`partial`).
//
// Sizes in bytes over the rank's tokens t (its 1/ranks of the sequence): Q = t·heads·head_dim·2
// (the queries in bf16; the repeated keys and values are as large), L = flash attention's
// log-sum-exp (fp32, t·heads). Every temporary lives on the compute stream.
//
// Forward (flash attention's op replaced): the keys and values made contiguous (2 × Q), their
// concatenation (2Q) all-gathered (ranks × 2Q, held to the end); per step flash attention's
// output, log-sum-exp, philox seed and offset and scratch (at half the queries after the first
// step), the output cast to fp32 and merged with the running one (sigmoid and log-sigmoid
// temporaries, then torch.cat of the updated half into a new running output and log-sum-exp);
// at the end the merged output cast back to bf16. The op's results — output (Q), log-sum-exp (the
// merger's, L), the last step's seed and offset — go into the caller's slots.
//
// Backward: fp32 accumulators for the queries', keys' and values' gradients (3 × 2Q), the
// contiguous keys and values and the all-gather again; per step flash attention's backward (its
// three gradients and workspace), the log-sum-exp's half made contiguous, the keys' and values'
// gradients concatenated (4Q) and sent on by all-to-all (4Q received), the queries' half added
// by torch.cat (2Q); at the end the queries' gradient (Q) and the received keys' and values'
// gradients (one buffer, 2Q) cast to bf16 into the caller's slots.
#pragma once

#include <cstdint>

#include "models/eager_tensors.h"
#include "sim/base/status.h"

namespace dtsim::models {

struct RingAttentionShape {
  int ranks = 2;          // the context-parallel group (at least 2)
  int64_t queries = 0;    // Q
  int64_t logsumexp = 0;  // L
};

// Where the ring's results go: slots of `layer` (EagerTensors::Alloc) for the forward's output,
// log-sum-exp, seed and offset; slots around the blocks (kEagerModel) for the backward's query
// gradient (Q) and the keys' and values' gradients (one 2Q buffer).
struct RingAttentionSlots {
  int layer = 0;
  int out = 0;
  int logsumexp = 0;
  int seed = 0;
  int offset = 0;
  int grad_queries = 0;
  int grad_keys_values = 0;
};

class RingAttention {
 public:
  RingAttention(EagerTensors& tensors, RingAttentionShape shape, RingAttentionSlots slots)
      : tensors_(tensors), shape_(shape), slots_(slots) {}

  Status Forward();
  Status Backward();

 private:
  using Handle = CachingAllocator::Handle;
  Expected<Handle> Buffer(int64_t bytes) { return tensors_.AllocBuffer(bytes, /*stream=*/0); }
  void Free(Handle& handle);
  // One flash attention forward over `queries` bytes of queries: seed, offset, output,
  // log-sum-exp, scratch (freed); the last step's seed and offset into the caller's slots.
  Status FlashForward(int64_t queries, bool last, Handle& out, Handle& logsumexp, Handle& seed,
                      Handle& offset);
  // _SDPAMerger's step for a partial block (the second half of the queries): the updated half,
  // then torch.cat into a new running output and log-sum-exp.
  Status MergePartial(Handle& merged_out, Handle& merged_lse);

  EagerTensors& tensors_;
  RingAttentionShape shape_;
  RingAttentionSlots slots_;
};

}  // namespace dtsim::models
