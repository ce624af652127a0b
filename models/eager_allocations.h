// A PyTorch-eager training loop on one GPU, tensor by tensor, replayed through the caching
// allocator (models/caching_allocator.h): what torch.cuda.max_memory_allocated and
// max_memory_reserved report for it (docs/allocator.md).
//
// The loop is the one tools/gpu_checks/gpt2_step.py runs, as PyTorch 2.x runs it:
//
//   with torch.autocast("cuda", dtype=torch.bfloat16): loss = model(inputs, targets)
//   loss.backward(); optimizer.step(); optimizer.zero_grad(set_to_none=True)
//
// over a GPT-style decoder (LayerNorm, a GeLU MLP, biases, learned positions, the output layer
// tied to the embedding) with fp32 parameters, flash attention (scaled_dot_product_attention),
// no dropout, the loss as cross_entropy over logits.float(), and fused AdamW; activation
// checkpointing per block as torch.utils.checkpoint (non-reentrant, with its early stop) runs
// it — `full` on every n-th block, `selective_op` as torchtitan's op policy (save the outputs of
// the attention kernel and of every second matmul, recompute the rest). Every tensor is
// allocated when the op making it runs and freed when its last user is done: an op's output
// once consumed, a tensor autograd saved once its backward ran, autocast's weight and bias
// casts at the end of the autocast region unless saved, a weight gradient at zero_grad.
// A Llama-style decoder (RMSNorm, SwiGLU, rotary) runs llama_step.py's loop instead
// (models/eager_llama.h).
#pragma once

#include <cstdint>
#include <vector>

#include "models/caching_allocator.h"
#include "models/model_spec.h"
#include "models/ops.h"
#include "models/pipeline_schedules.h"
#include "sim/base/status.h"

namespace dtsim::models {

// The deepest model the replay takes: 1,024 layers replay in about 0.2 s (each layer's ~100
// allocations and frees, five iterations).
inline constexpr int kMaxEagerReplayLayers = 1024;
// Micro-batches past the third repeat its allocations on the allocator's state it left: a step
// of more has the peaks of three (strategies::EagerLoopOf replays at most that many).
inline constexpr int kMaxEagerReplayMicroBatches = 3;
// Ring attention replays each of its steps for every layer (about 60 us a layer and step over
// the five iterations): at most this many layers × context-parallel ranks (2 s), 32 layers on
// 1,024 ranks or 128 on 256; past it a plan keeps the analytic estimate.
inline constexpr int64_t kMaxEagerReplayRingSteps = int64_t{1} << 15;

// Past this many slots per tensor role — model chunks × micro-batches × (the rank's blocks + 2),
// what a pipeline rank's replay keeps apart — a plan keeps the analytic estimate. A rank's
// replay costs about 65 µs a slot (measured on a 405B stage of 16 blocks under TP 8: 0.29 s at
// 256 micro-batches, 4,608 slots), so 16,384 is about 1 s a rank.
inline constexpr int64_t kMaxEagerReplayPipelineSlots = int64_t{1} << 14;

// One rank of a pipeline (torch.distributed.pipelining as torchtitan splits a decoder: each
// model chunk a deep copy holding its blocks, the embedding in the first, the final norm and
// output layer in the last, FSDP2 over each chunk).
struct EagerPipeline {
  int stages = 1;  // pipeline ranks; 1: no pipeline
  int rank = 0;
  PipelineSchedule schedule = PipelineSchedule::kOneForwardOneBackward;
  int chunks = 1;  // model chunks per rank (virtual stages); chunk k runs on rank k mod stages
  std::vector<int> chunk_layers;  // blocks of each of the stages × chunks model chunks, in order
  // The last stage keeps every micro-batch's output (its logits) for step()'s merge, made at
  // the step's end (torch.cat) and dropped: PyTorch before 2.10, whose step() has no
  // return_outputs=False (pytorch/pytorch#165822; torchtitan passes it since e5ef99a, October
  // 2025). Else each output goes with its micro-batch's backward.
  bool merge_outputs = false;
};

struct EagerRun {
  int64_t micro_batch = 1;
  int64_t seq_len = 0;
  Recompute recompute = Recompute::kNone;  // none, full or selective_op
  int recompute_every = 1;                 // the policy on blocks n, 2n, … (RecomputesLayer)
  // Micro-batches per step, their gradients accumulated into .grad (the first makes it, each
  // later one's gradient is made and added in) before the optimizer's step; under a pipeline
  // the schedule's, all of them.
  int micro_batches = 1;
  // PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (models/caching_allocator.h)
  bool expandable_segments = false;
  // FSDP2 (fully_shard, models/eager_fsdp.h) over this many ranks, each block and the root
  // a parameter group, bf16 parameters gathered and fp32 gradients reduce-scattered, no
  // autocast (llama_step.py --mode fsdp2; a Llama-style decoder only); 0: no sharding, the
  // fp32 parameters under bf16 autocast.
  int fsdp_ranks = 0;
  // FSDP2's reshard_after_forward as torchtitan sets it: every block but the last and the root
  // free their gathered parameters after forward; false: none does (gathered once a step).
  bool reshard_after_forward = true;
  // PyTorch before 2.8 kept the root's parameters gathered after forward whatever
  // reshard_after_forward said (pytorch/pytorch#154704 made an explicit true hold for it).
  bool fsdp_root_kept = false;
  // Context parallelism over this many of the FSDP2 ranks (models/eager_ring_attention.h):
  // each rank trains on 1/context_ranks of every sequence (seq_len the whole), its attention
  // PyTorch's ring attention, inside torchtitan's context_parallel() around forward and
  // backward; 1: none.
  int context_ranks = 1;
  // Tensor parallelism over this many ranks (within each FSDP2 rank's group; a Llama-style
  // decoder under FSDP2 only; beside context parallelism on the rank's part of the sequence,
  // its ring attention over the rank's heads), as torchtitan's apply_tp lays out the
  // decoder with DTensor: the embedding rowwise over the vocabulary, every norm and the residual
  // stream sharded on the sequence (sequence parallelism), the attention's and MLP's inputs
  // all-gathered and saved whole by their column-parallel linears, the row-parallel outputs
  // reduce-scattered back onto the sequence, the output layer column-parallel into a
  // vocabulary-sharded loss (loss_parallel); 1: none.
  int tensor_ranks = 1;
  // Pipeline parallelism (under FSDP2, with or without tensor and context parallelism): this
  // rank's stages run the schedule's passes over every micro-batch (inside one
  // context_parallel() under CP), each micro-batch's input a receive buffer made up front and
  // its gradient kept as the buffer's .grad until the next step, the last stage's outputs kept
  // for the step's merge, and FSDP2 neither resharding nor syncing gradients until the stage's
  // last backward (eager_fsdp.h).
  EagerPipeline pipeline;
  // clip_grad_norm_(foreach=True) before the optimizer's step, as torchtitan runs it.
  bool clip_grad_norm = false;
  // The loss compiled (torch.compile of cross_entropy(logits.float()), torchtitan's
  // compile.components "loss"; not under tensor parallelism's loss_parallel): one graph whose
  // forward keeps the bf16 logits and two fp32 values a token for its backward, which writes
  // the logits' bf16 gradient in one kernel (eager_llama.cc, Replay::CompiledLossForward).
  bool compiled_loss = false;
  // The blocks compiled (torchtitan's compile.components "model"): under the op policy, w2's
  // stored output (and under tensor parallelism its reduce-scatter's), which no backward
  // reads, is not kept — AOTAutograd's partitioner saves only what the backward reads. The
  // blocks' fused kernels are not replayed: their other tensors are eager's.
  bool compiled_blocks = false;
  // DistributedDataParallel (gradient_as_bucket_view=False, its defaults): the gradient
  // buckets, one flat fp32 tensor each, held from its construction (models/eager_tensors.h).
  bool ddp = false;
  // Iterations before the peaks are reset (torch.cuda.reset_peak_memory_stats) and after:
  // the optimizer's state is allocated in the first, and what the allocator caches carries on.
  int warmup_steps = 2;
  int steps = 3;
  // Keep the sizes of the last step's allocations (EagerPeaks::last_step), to set beside the
  // allocator's own record of a run (torch.cuda.memory._record_memory_history).
  bool record_last_step = false;
};

struct EagerPeaks {
  int64_t allocated = 0;  // max_memory_allocated over the steps after warm-up
  int64_t reserved = 0;   // max_memory_reserved over them
  // What `allocated` held at its peak: what outlives the iterations (the parameters, the
  // optimizer's state, the batch, buffers), the parameters' .grad, and of the iteration's
  // tensors those of the blocks (what they keep for their backward: saved activations,
  // autocast's weight casts, recomputed ones); the rest is the working set around the blocks
  // (the loss, gradients in flight).
  int64_t held_at_peak = 0;
  int64_t grads_at_peak = 0;
  // Of what outlives the iterations, DDP's gradient buckets and a pipeline stage's receive
  // buffers (blocks).
  int64_t bucket_bytes = 0;
  int64_t pipeline_buffer_bytes = 0;
  int64_t blocks_at_peak = 0;
  // What each block keeps from its forward to its backward: its tensors (as blocks) live at the
  // end of the last forward, by layer; index `layers` the last block's output.
  std::vector<int64_t> layer_kept;
  // With EagerRun::record_last_step: the bytes each allocation of the last step asked for, in
  // order.
  std::vector<int64_t> last_step;
  AllocatorStats stats;  // at the end
};

// Errors name the first thing the model or run has that this loop does not: another norm,
// activation or position embedding, no biases, grouped-query attention, MoE, MLA, sliding
// windows, an encoder, untied embeddings, Megatron's selective recompute — or more than
// kMaxEagerReplayLayers layers.
Expected<EagerPeaks> ReplayEagerTraining(const TransformerSpec& spec, const EagerRun& run);

}  // namespace dtsim::models
