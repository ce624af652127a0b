// FSDP2 (torch.distributed.fsdp.fully_shard) around an eager loop's tensors, as PyTorch 2.11
// runs it with MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32) and its defaults
// (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py and _fsdp_collectives.py; docs/
// allocator.md). Each parameter group — a transformer block, the root
// (embedding, final norm, output layer) — holds its fp32 parameters sharded on dim 0 (padded
// to a multiple of the ranks) and, around its use:
//
// - unshard: on the all-gather copy-in stream, the shards cast to bf16 into a flat input, then
//   the all-gather's output (the input × ranks), the input freed; on one rank, no all-gather;
// - wait for the unshard: each parameter's unsharded bf16 tensor on the compute stream (on one
//   rank cast from its shard through a copy); the all-gather's output freed — in forward only
//   after the next group's unshard (implicit prefetch: two outputs live), and at the end of
//   the forward by the root;
// - reshard: the unsharded tensors freed (after forward where reshard_after_forward, always
//   after backward);
// - in backward, the next group in reverse forward order unsharded ahead (backward prefetch);
// - post-backward: the group's bf16 gradients copied into an fp32 reduce-scatter input on the
//   compute stream (with chunk_cat's scratch), then freed; the output (input
//   / ranks) on the reduce-scatter stream becomes the sharded parameters' .grad (added into
//   it and freed when an earlier micro-batch made one); the input lives until the next
//   group's reduce-scatter, the last one's until the end of backward.
//
// Under pipelining (torch.distributed.pipelining's backward_maybe_with_nosync, PyTorch 2.5 and
// later) no micro-batch's backward syncs gradients nor reshards: each group's post-backward
// casts its bf16 gradients to fp32 (to_accumulated_grad_if_needed: the fp32 copy made, the bf16
// freed, parameter by parameter in module order) at the first micro-batch and adds them into
// those at the next (accumulate_unsharded_grad_if_needed, in place); after the stage's last
// backward the pipeline calls every group's post-backward by hand, the root first, with
// resharding and the reduce-scatter of the accumulated gradients (ReduceAccumulated).
//
// The streams' pools are apart in the caching allocator: what one caches the others cannot
// reuse.
#pragma once

#include <cstdint>
#include <vector>

#include "models/caching_allocator.h"
#include "models/eager_tensors.h"
#include "sim/base/status.h"

namespace dtsim::models {

// A parameter's shape: dim 0 (sharded) and the elements per row.
struct FsdpParameter {
  int64_t rows = 0;
  int64_t columns = 1;
};

struct FsdpGroupSpec {
  std::vector<FsdpParameter> parameters;
  bool reshard_after_forward = true;
};

class FsdpGroups {
 public:
  // The caching allocator's streams FSDP2 allocates on.
  static constexpr int kCompute = 0;
  static constexpr int kCopyIn = 1;
  static constexpr int kReduceScatter = 2;

  // `accumulate`: under pipelining (above). A group without parameters (a pipeline chunk's
  // root) does nothing.
  FsdpGroups(EagerTensors& tensors, int ranks, std::vector<FsdpGroupSpec> groups,
             bool accumulate = false);

  // The fp32 shard a rank holds of `parameter`.
  int64_t ShardBytes(const FsdpParameter& parameter) const { return ShardElements(parameter) * 4; }

  Status PreForward(int group);
  void PostForward(int group);
  // The root's post-forward: the last all-gather output freed.
  void FinishForward();
  // Unshards `group` unless it is unsharded or prefetched, and prefetches `prefetch` (none
  // where < 0).
  Status PreBackward(int group, int prefetch);
  // `gradient`, a buffer of `tensors` of `bytes`, is the bf16 gradient of `group`'s parameter
  // `parameter` (an index in module order).
  void AddGradient(int group, int parameter, CachingAllocator::Handle gradient, int64_t bytes);
  Status PostBackward(int group);
  // Under pipelining, after the last micro-batch's backward: `group` resharded and its
  // accumulated gradients reduce-scattered.
  Status ReduceAccumulated(int group);
  // The root's final callback: the last reduce-scatter input freed.
  void FinishBackward();

 private:
  int64_t ShardElements(const FsdpParameter& parameter) const;
  int64_t PaddedElements(const FsdpParameter& parameter) const;
  int64_t GroupPaddedElements(int group) const;
  int64_t ChunkCatScratch(int group) const;
  Status Unshard(int group);
  Status WaitForUnshard(int group, bool forward);
  void Reshard(int group);
  struct Gradient {
    int parameter = 0;
    CachingAllocator::Handle handle = -1;
    int64_t bytes = 0;
  };
  // The fp32 reduce-scatter of `gradients` (freed once copied in; `accumulated`: gradient
  // buffers) into the group's .grad.
  Status Reduce(int group, std::vector<Gradient>& gradients, bool accumulated);
  Status Accumulate(int group);

  EagerTensors& tensors_;
  int ranks_;
  bool accumulate_;
  std::vector<FsdpGroupSpec> groups_;
  // Per group: the unsharded parameters (empty while sharded), an unshard waited for not yet,
  // its all-gather output (-1 on one rank), its bf16 gradients, under pipelining its fp32
  // accumulated ones.
  std::vector<std::vector<CachingAllocator::Handle>> unsharded_;
  std::vector<bool> pending_;
  std::vector<CachingAllocator::Handle> gathered_;
  std::vector<std::vector<Gradient>> gradients_;
  std::vector<std::vector<Gradient>> accumulated_;
  // The last copy-out's all-gather output in forward (all_gather_state), the last
  // reduce-scatter's input (reduce_scatter_state).
  CachingAllocator::Handle forward_gathered_ = -1;
  CachingAllocator::Handle reduce_input_ = -1;
};

}  // namespace dtsim::models
