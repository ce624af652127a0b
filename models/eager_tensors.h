// The tensors of an eager PyTorch training loop as the replays (eager_allocations.cc,
// eager_llama.cc) make and free them through the caching allocator: the iteration's tensors by
// layer and role, the parameters and their .grad, what outlives the iterations (the batch,
// buffers, the optimizer's state), and the fused AdamW step with zero_grad(set_to_none=True).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "models/caching_allocator.h"
#include "models/eager_allocations.h"
#include "models/model_spec.h"
#include "sim/base/status.h"

namespace dtsim::models {

// The layer index of the tensors around the blocks (embeddings, final norm, loss, gradients in
// flight); layers + 1 holds the last block's output.
inline constexpr int kEagerModel = -1;

// DistributedDataParallel's gradient buckets over parameters of `bytes` (one dtype, in module
// order), as torch/csrc/distributed/c10d/reducer.cpp's compute_bucket_assignment_by_size
// assigns them: consecutive parameters until a bucket reaches its limit — 1 MiB for the first
// (_DEFAULT_FIRST_BUCKET_BYTES), 25 MiB (bucket_cap_mb) after — the rest in a last bucket; each
// bucket one flat tensor as large as its parameters.
std::vector<int64_t> DdpBucketBytes(std::span<const int64_t> bytes);

// What aten::_scaled_dot_product_flash_attention allocates besides its output and log-sum-exp,
// as the allocator's record of H200 runs shows (tests/data/measured/allocator_history): the
// philox seed and offset (8 B each), a 256 B scratch freed at once; its backward's workspace
// (dq's fp32 accumulator and the softmax's row sums) is 256 B more than those.
inline constexpr int64_t kFlashPhiloxBytes = 8;
inline constexpr int64_t kFlashScratchBytes = 256;

// What neither replay takes — MoE or MLA layers, sliding windows, an encoder's embeddings or
// heads, no final norm, MTP modules: the first the model has, or empty.
std::string_view UnreplayedFeature(const TransformerSpec& spec);

class EagerTensors {
 public:
  // `kinds`: how many tensor roles a layer of `spec` has; the allocator configured as `run` says.
  EagerTensors(const TransformerSpec& spec, const EagerRun& run, int kinds);
  // … of `layers` blocks (a pipeline rank's), each tensor slot `contexts` times over (one per
  // model chunk and micro-batch a pipeline keeps in flight: SetContext).
  EagerTensors(const EagerRun& run, int kinds, int layers, int contexts);

  // The tensors Alloc, Free, View and TakeBuffer name from now on are those of `context`.
  void SetContext(int context) { context_ = context; }

  // Tensor `tensor` of layer `layer` (kEagerModel: around the blocks), made and freed.
  Status Alloc(int layer, int tensor, int64_t bytes);
  void Free(int layer, int tensor);
  // A tensor that outlives the iterations.
  Status Hold(int64_t bytes);
  // … kept as a pipeline stage's receive buffer (EagerPeaks::pipeline_buffer_bytes), which View
  // lends to the iteration.
  Expected<CachingAllocator::Handle> HoldPipelineBuffer(int64_t bytes);
  // Held tensor `handle` seen as tensor `tensor` of `layer` (a block's input that is a
  // pipeline's receive buffer) until Free, which then releases the view only.
  void View(int layer, int tensor, CachingAllocator::Handle handle);
  // The parameters (fp32), in module order, made once (none where 0 bytes: a pipeline rank's
  // absent embedding or output layer); under DDP then its gradient buckets
  // (DdpBucketBytes over the parameters in module order; at the second forward, as the
  // reducer rebuilds them, over the reverse).
  Status HoldParameters(std::vector<int64_t> bytes);
  // Parameter `index`'s .grad (as large as the parameter), made by its backward; where an
  // earlier micro-batch made it, this one's gradient, added into it by FinishAccumulation.
  Status NewGrad(int index);
  // … from a lower-precision gradient `from` (around the blocks), which is then freed.
  Status Grad(int index, int from);
  // The gradients NewGrad made for accumulation added into their .grad and freed.
  void FinishAccumulation();
  // At the end of a forward: what each block keeps now (EagerPeaks::layer_kept; the last
  // forward's is reported).
  void NoteForwardEnd();
  // Fused AdamW's step: its state, made at the first in parameter order (the step count, an
  // fp32 scalar on the device, exp_avg and exp_avg_sq); then zero_grad(set_to_none=True).
  // With run.clip_grad_norm, clip_grad_norm_(foreach=True) first: _foreach_norm's partial sums
  // (one fp32 per 65,536 elements of the largest gradient, for every gradient).
  Status OptimizerStep();

  const AllocatorStats& allocator_stats() const { return allocator_.stats(); }

  // Buffers outside the layer/role slots (FSDP2's, models/eager_fsdp.h): a block of `bytes`
  // on `stream`, and its free.
  Expected<CachingAllocator::Handle> AllocBuffer(int64_t bytes, int stream);
  void FreeBuffer(CachingAllocator::Handle handle);
  // … of a gradient (FSDP2's unsharded ones accumulated under pipelining): counted with .grad.
  Expected<CachingAllocator::Handle> AllocGradientBuffer(int64_t bytes, int stream);
  void FreeGradientBuffer(CachingAllocator::Handle handle, int64_t bytes);
  // Live tensor `tensor` of `layer` handed over as a buffer (an unsharded gradient).
  CachingAllocator::Handle TakeBuffer(int layer, int tensor);
  // Buffer `handle` of `bytes` (from AllocBuffer) kept as tensor `tensor` of `layer`: the
  // inverse of TakeBuffer (a result an op made before it was known as one).
  void AdoptBuffer(int layer, int tensor, CachingAllocator::Handle handle, int64_t bytes);
  // Buffer `handle` of `bytes` kept as the .grad of parameter group `group` (a reduce-scatter's
  // output the sharded parameters' gradients are views of) until the optimizer's step; false
  // where the group has one already (the caller adds into it and frees `handle`).
  bool KeepAsGrad(int group, CachingAllocator::Handle handle, int64_t bytes);

  // run.warmup_steps + run.steps steps of run.micro_batches `iteration`s (forward and
  // backward) and the optimizer's step, the peaks reset after the warm-up; `step_start` (if
  // any) before each step and once after the last (what a step keeps until the next one's
  // start is freed there); every tensor of the iterations must have been freed.
  Expected<EagerPeaks> RunSteps(const EagerRun& run, const std::function<Status()>& iteration,
                                const std::function<void()>& step_start = {});

 private:
  size_t Slot(int layer, int tensor) const;
  Status ClipGradNorm();
  // DDP's gradient buckets of `buckets` bytes each, in that order, in place of any before.
  Status HoldBuckets(const std::vector<int64_t>& buckets);
  Status RebuildBuckets();
  void ResetPeaks();
  // After an allocation of `bytes`: its size recorded, and the composition of a new peak.
  void NoteAllocation(int64_t bytes);
  void NotePeak();

  int kinds_;
  int layers_;  // slots per context: the blocks, the tensors around them, the last output
  int context_ = 0;
  CachingAllocator allocator_;
  // The iteration's tensors by Slot; -1 where none is live; whether a slot is a View.
  std::vector<CachingAllocator::Handle> live_;
  std::vector<bool> views_;
  int64_t live_count_ = 0;
  std::vector<int64_t> param_bytes_;
  std::vector<CachingAllocator::Handle> held_;
  std::vector<CachingAllocator::Handle> grads_;
  std::vector<CachingAllocator::Handle> accumulating_;
  std::vector<CachingAllocator::Handle> kept_grads_;  // KeepAsGrad's by group; -1: none
  bool clip_grad_norm_ = false;
  bool ddp_ = false;
  bool optimizer_state_ = false;
  // The blocks (AllocatorBlockSize) held and of .grad now, and at the peak since ResetPeaks.
  int64_t held_bytes_ = 0;
  int64_t grad_bytes_ = 0;
  int64_t peak_ = 0;
  bool recording_ = false;
  std::vector<int64_t> recorded_;
  int64_t held_at_peak_ = 0;
  int64_t grads_at_peak_ = 0;
  // The blocks' tensors (layer >= 0) live now, by slot and in all, and at the peak.
  std::vector<int64_t> live_bytes_;
  std::vector<int64_t> layer_kept_;
  std::vector<CachingAllocator::Handle> buckets_;  // DDP's, counted in held_bytes_
  int64_t bucket_bytes_ = 0;
  int64_t pipeline_buffer_bytes_ = 0;  // HoldPipelineBuffer's, counted in held_bytes_
  int64_t block_bytes_ = 0;
  int64_t blocks_at_peak_ = 0;
};

}  // namespace dtsim::models
