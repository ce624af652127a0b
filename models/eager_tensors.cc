#include "models/eager_tensors.h"

#include <algorithm>
#include <utility>

#include "sim/base/check.h"

namespace dtsim::models {

std::string_view UnreplayedFeature(const TransformerSpec& spec) {
  if (spec.moe.enabled() || spec.mla.enabled()) return "MoE or MLA layers";
  if (spec.sliding_window > 0)
    return spec.chunked_attention ? "attention chunks" : "sliding windows";
  if (spec.qk_norm) return "QK norms";
  if (spec.post_norms) return "norms after the attention and the MLP";
  if (!spec.causal || spec.token_types > 0 || spec.embedding_norm || spec.pooler ||
      spec.lm_head_transform) {
    return "an encoder's embeddings or heads";
  }
  if (!spec.final_norm || spec.mtp_layers > 0) return "no final norm or MTP modules";
  return {};
}

EagerTensors::EagerTensors(const TransformerSpec& spec, const EagerRun& run, int kinds)
    : EagerTensors(run, kinds, spec.layers, 1) {}

EagerTensors::EagerTensors(const EagerRun& run, int kinds, int layers, int contexts)
    : kinds_(kinds),
      layers_(layers + 2),
      allocator_(AllocatorOptions{.expandable_segments = run.expandable_segments}),
      live_(
          static_cast<size_t>(contexts) * static_cast<size_t>(layers_) * static_cast<size_t>(kinds),
          -1),
      views_(live_.size(), false),
      clip_grad_norm_(run.clip_grad_norm),
      ddp_(run.ddp),
      live_bytes_(live_.size(), 0) {}

size_t EagerTensors::Slot(int layer, int tensor) const {
  return static_cast<size_t>((int64_t{context_} * layers_ + layer + 1) * kinds_ + tensor);
}

Status EagerTensors::Alloc(int layer, int tensor, int64_t bytes) {
  DTSIM_ASSIGN_OR_RETURN(const CachingAllocator::Handle handle, allocator_.Allocate(bytes));
  const size_t index = Slot(layer, tensor);
  CachingAllocator::Handle& slot = live_[index];
  DTSIM_CHECK(slot == -1, "a tensor allocated twice");
  slot = handle;
  ++live_count_;
  if (layer >= 0) {
    live_bytes_[index] = AllocatorBlockSize(bytes);
    block_bytes_ += live_bytes_[index];
  }
  NoteAllocation(bytes);
  return Status::Ok();
}

void EagerTensors::Free(int layer, int tensor) {
  const size_t index = Slot(layer, tensor);
  CachingAllocator::Handle& slot = live_[index];
  DTSIM_CHECK(slot != -1, "a tensor freed before it was allocated");
  if (views_[index]) {  // a held tensor's view: the tensor stays
    slot = -1;
    views_[index] = false;
    return;
  }
  allocator_.Free(slot);
  slot = -1;
  --live_count_;
  block_bytes_ -= live_bytes_[index];
  live_bytes_[index] = 0;
}

Status EagerTensors::Hold(int64_t bytes) {
  DTSIM_ASSIGN_OR_RETURN(const CachingAllocator::Handle handle, allocator_.Allocate(bytes));
  held_.push_back(handle);
  held_bytes_ += AllocatorBlockSize(bytes);
  NoteAllocation(bytes);
  return Status::Ok();
}

Expected<CachingAllocator::Handle> EagerTensors::HoldPipelineBuffer(int64_t bytes) {
  pipeline_buffer_bytes_ += AllocatorBlockSize(bytes);
  DTSIM_RETURN_IF_ERROR(Hold(bytes));
  return held_.back();
}

void EagerTensors::View(int layer, int tensor, CachingAllocator::Handle handle) {
  const size_t index = Slot(layer, tensor);
  DTSIM_CHECK(live_[index] == -1, "a tensor allocated twice");
  live_[index] = handle;
  views_[index] = true;
}

std::vector<int64_t> DdpBucketBytes(std::span<const int64_t> bytes) {
  constexpr int64_t kFirstBucket = int64_t{1} << 20;
  constexpr int64_t kBucketCap = int64_t{25} << 20;
  std::vector<int64_t> buckets;
  int64_t filling = 0;
  for (const int64_t size : bytes) {
    filling += size;
    if (filling >= (buckets.empty() ? kFirstBucket : kBucketCap)) {
      buckets.push_back(filling);
      filling = 0;
    }
  }
  if (filling > 0) buckets.push_back(filling);
  return buckets;
}

Status EagerTensors::HoldBuckets(const std::vector<int64_t>& buckets) {
  for (const CachingAllocator::Handle bucket : buckets_) allocator_.Free(bucket);
  buckets_.clear();
  held_bytes_ -= bucket_bytes_;
  bucket_bytes_ = 0;
  for (const int64_t bytes : buckets) {
    DTSIM_ASSIGN_OR_RETURN(const CachingAllocator::Handle bucket, allocator_.Allocate(bytes));
    buckets_.push_back(bucket);
    bucket_bytes_ += AllocatorBlockSize(bytes);
    held_bytes_ += AllocatorBlockSize(bytes);
    NoteAllocation(bytes);
  }
  return Status::Ok();
}

Status EagerTensors::RebuildBuckets() {
  // Reducer::rebuild_buckets at the second forward: the buckets assigned anew over the
  // parameters in the order their gradients became ready (the reverse of module order), the
  // old ones freed first (initialize_buckets).
  const std::vector<int64_t> ready(param_bytes_.rbegin(), param_bytes_.rend());
  return HoldBuckets(DdpBucketBytes(ready));
}

Status EagerTensors::HoldParameters(std::vector<int64_t> bytes) {
  param_bytes_ = std::move(bytes);
  for (const int64_t size : param_bytes_) {
    if (size > 0) DTSIM_RETURN_IF_ERROR(Hold(size));
  }
  if (ddp_) {
    // DDP's construction: buckets over the parameters in module order, which the reducer takes
    // last first (the order their gradients become ready).
    const std::vector<int64_t> buckets = DdpBucketBytes(param_bytes_);
    DTSIM_RETURN_IF_ERROR(HoldBuckets({buckets.rbegin(), buckets.rend()}));
  }
  grads_.assign(param_bytes_.size(), -1);
  return Status::Ok();
}

Status EagerTensors::NewGrad(int index) {
  const auto i = static_cast<size_t>(index);
  if (grads_[i] != -1) {
    DTSIM_ASSIGN_OR_RETURN(const CachingAllocator::Handle gradient,
                           allocator_.Allocate(param_bytes_[i]));
    accumulating_.push_back(gradient);
    NoteAllocation(param_bytes_[i]);
    return Status::Ok();
  }
  DTSIM_ASSIGN_OR_RETURN(grads_[i], allocator_.Allocate(param_bytes_[i]));
  grad_bytes_ += AllocatorBlockSize(param_bytes_[i]);
  NoteAllocation(param_bytes_[i]);
  return Status::Ok();
}

Status EagerTensors::Grad(int index, int from) {
  DTSIM_RETURN_IF_ERROR(NewGrad(index));
  Free(kEagerModel, from);
  FinishAccumulation();
  return Status::Ok();
}

void EagerTensors::NoteForwardEnd() {
  const auto layers = static_cast<size_t>(layers_ - 1);  // blocks and x_L
  layer_kept_.assign(layers, 0);
  for (size_t layer = 0; layer < layers; ++layer) {
    for (int tensor = 0; tensor < kinds_; ++tensor) {
      layer_kept_[layer] += live_bytes_[Slot(static_cast<int>(layer), tensor)];
    }
  }
}

void EagerTensors::FinishAccumulation() {
  for (const CachingAllocator::Handle gradient : accumulating_) allocator_.Free(gradient);
  accumulating_.clear();
}

Expected<CachingAllocator::Handle> EagerTensors::AllocBuffer(int64_t bytes, int stream) {
  DTSIM_ASSIGN_OR_RETURN(const CachingAllocator::Handle handle, allocator_.Allocate(bytes, stream));
  ++live_count_;
  NoteAllocation(bytes);
  return handle;
}

void EagerTensors::FreeBuffer(CachingAllocator::Handle handle) {
  allocator_.Free(handle);
  --live_count_;
}

Expected<CachingAllocator::Handle> EagerTensors::AllocGradientBuffer(int64_t bytes, int stream) {
  DTSIM_ASSIGN_OR_RETURN(const CachingAllocator::Handle handle, allocator_.Allocate(bytes, stream));
  ++live_count_;
  grad_bytes_ += AllocatorBlockSize(bytes);
  NoteAllocation(bytes);
  return handle;
}

void EagerTensors::FreeGradientBuffer(CachingAllocator::Handle handle, int64_t bytes) {
  grad_bytes_ -= AllocatorBlockSize(bytes);
  FreeBuffer(handle);
}

CachingAllocator::Handle EagerTensors::TakeBuffer(int layer, int tensor) {
  const size_t index = Slot(layer, tensor);
  const CachingAllocator::Handle handle = live_[index];
  DTSIM_CHECK(handle != -1, "a tensor taken before it was allocated");
  live_[index] = -1;
  block_bytes_ -= live_bytes_[index];
  live_bytes_[index] = 0;
  return handle;
}

void EagerTensors::AdoptBuffer(int layer, int tensor, CachingAllocator::Handle handle,
                               int64_t bytes) {
  const size_t index = Slot(layer, tensor);
  DTSIM_CHECK(live_[index] == -1, "a tensor allocated twice");
  live_[index] = handle;
  if (layer >= 0) {
    live_bytes_[index] = AllocatorBlockSize(bytes);
    block_bytes_ += live_bytes_[index];
  }
}

bool EagerTensors::KeepAsGrad(int group, CachingAllocator::Handle handle, int64_t bytes) {
  const auto index = static_cast<size_t>(group);
  if (index >= kept_grads_.size()) kept_grads_.resize(index + 1, -1);
  if (kept_grads_[index] != -1) return false;
  --live_count_;
  kept_grads_[index] = handle;
  grad_bytes_ += AllocatorBlockSize(bytes);
  return true;
}

Status EagerTensors::ClipGradNorm() {
  // _foreach_norm over every gradient: per gradient, a partial sum per chunk of 65,536
  // elements of the largest (the record of an FSDP2 run: 147 gradients × 4,008 chunks × 4 B).
  int64_t largest = 0;
  int64_t gradients = 0;
  for (const int64_t bytes : param_bytes_) {
    largest = std::max(largest, bytes / 4);
    gradients += bytes > 0 ? 1 : 0;
  }
  constexpr int64_t kChunk = 65536;
  const int64_t partials = gradients * ((largest + kChunk - 1) / kChunk) * 4;
  if (partials == 0) return Status::Ok();
  DTSIM_ASSIGN_OR_RETURN(const CachingAllocator::Handle scratch, AllocBuffer(partials, 0));
  FreeBuffer(scratch);
  return Status::Ok();
}

Status EagerTensors::OptimizerStep() {
  if (clip_grad_norm_) DTSIM_RETURN_IF_ERROR(ClipGradNorm());
  if (!optimizer_state_) {
    for (const int64_t bytes : param_bytes_) {
      if (bytes == 0) continue;
      for (const int64_t state : {int64_t{4}, bytes, bytes}) DTSIM_RETURN_IF_ERROR(Hold(state));
    }
    optimizer_state_ = true;
  }
  for (CachingAllocator::Handle& grad : grads_) {
    if (grad != -1) allocator_.Free(grad);
    grad = -1;
  }
  for (CachingAllocator::Handle& grad : kept_grads_) {
    if (grad != -1) allocator_.Free(grad);
    grad = -1;
  }
  grad_bytes_ = 0;
  return Status::Ok();
}

void EagerTensors::ResetPeaks() {
  allocator_.ResetPeaks();
  peak_ = -1;
  NotePeak();
}

void EagerTensors::NoteAllocation(int64_t bytes) {
  if (recording_) recorded_.push_back(bytes);
  NotePeak();
}

void EagerTensors::NotePeak() {
  if (allocator_.stats().allocated <= peak_) return;
  peak_ = allocator_.stats().allocated;
  held_at_peak_ = held_bytes_;
  grads_at_peak_ = grad_bytes_;
  blocks_at_peak_ = block_bytes_;
}

Expected<EagerPeaks> EagerTensors::RunSteps(const EagerRun& run,
                                            const std::function<Status()>& iteration,
                                            const std::function<void()>& step_start) {
  for (int step = 0; step < run.warmup_steps + run.steps; ++step) {
    if (step_start) step_start();
    if (step == run.warmup_steps) ResetPeaks();
    recording_ = run.record_last_step && step == run.warmup_steps + run.steps - 1;
    for (int micro_batch = 0; micro_batch < run.micro_batches; ++micro_batch) {
      if (ddp_ && step * run.micro_batches + micro_batch == 1) {
        DTSIM_RETURN_IF_ERROR(RebuildBuckets());
      }
      DTSIM_RETURN_IF_ERROR(iteration());
    }
    DTSIM_RETURN_IF_ERROR(OptimizerStep());
  }
  if (step_start) step_start();
  DTSIM_CHECK(live_count_ == 0 && accumulating_.empty(),
              "a tensor of the iteration was never freed");
  DTSIM_CHECK(peak_ == allocator_.stats().peak_allocated, "a peak not noted");
  return EagerPeaks{.allocated = allocator_.stats().peak_allocated,
                    .reserved = allocator_.stats().peak_reserved,
                    .held_at_peak = held_at_peak_,
                    .grads_at_peak = grads_at_peak_,
                    .bucket_bytes = bucket_bytes_,
                    .pipeline_buffer_bytes = pipeline_buffer_bytes_,
                    .blocks_at_peak = blocks_at_peak_,
                    .layer_kept = layer_kept_,
                    .last_step = recorded_,
                    .stats = allocator_.stats()};
}

}  // namespace dtsim::models
