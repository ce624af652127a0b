#include "models/eager_fsdp.h"

#include <algorithm>
#include <utility>

#include "sim/base/check.h"

namespace dtsim::models {

FsdpGroups::FsdpGroups(EagerTensors& tensors, int ranks, std::vector<FsdpGroupSpec> groups,
                       bool accumulate)
    : tensors_(tensors),
      ranks_(ranks),
      accumulate_(accumulate),
      groups_(std::move(groups)),
      unsharded_(groups_.size()),
      pending_(groups_.size(), false),
      gathered_(groups_.size(), -1),
      gradients_(groups_.size()),
      accumulated_(groups_.size()) {
  DTSIM_CHECK(ranks_ >= 1, "FSDP over no ranks");
}

int64_t FsdpGroups::ShardElements(const FsdpParameter& parameter) const {
  return (parameter.rows + ranks_ - 1) / ranks_ * parameter.columns;
}

int64_t FsdpGroups::PaddedElements(const FsdpParameter& parameter) const {
  return ShardElements(parameter) * ranks_;
}

int64_t FsdpGroups::GroupPaddedElements(int group) const {
  int64_t elements = 0;
  for (const FsdpParameter& parameter : groups_[static_cast<size_t>(group)].parameters) {
    elements += PaddedElements(parameter);
  }
  return elements;
}

int64_t FsdpGroups::ChunkCatScratch(int group) const {
  // 16 B per 1,024 elements of each gradient and per tensor three more and one: the records'
  // 950,784 B for a block of nine tensors and 60,821,504 elements, 8,208,576 B for the root's
  // three and 525,338,624 (one rank's; the kernel's per-block and per-tensor metadata).
  const std::vector<FsdpParameter>& parameters = groups_[static_cast<size_t>(group)].parameters;
  int64_t entries = 1 + 3 * static_cast<int64_t>(parameters.size());
  for (const FsdpParameter& parameter : parameters) {
    entries += (PaddedElements(parameter) + 1023) / 1024;
  }
  return 16 * entries;
}

Status FsdpGroups::Unshard(int group) {
  const auto g = static_cast<size_t>(group);
  if (groups_[g].parameters.empty() || !unsharded_[g].empty() || pending_[g]) return Status::Ok();
  pending_[g] = true;
  if (ranks_ == 1) return Status::Ok();  // no all-gather: the copy-out casts the shards
  // foreach_all_gather on the copy-in stream: the bf16 shards, flat; the all-gather's output
  // (the input is a slice of it, copied in); the flat shards freed.
  const int64_t shards = GroupPaddedElements(group) / ranks_ * 2;
  DTSIM_ASSIGN_OR_RETURN(const CachingAllocator::Handle input,
                         tensors_.AllocBuffer(shards, kCopyIn));
  DTSIM_ASSIGN_OR_RETURN(gathered_[g], tensors_.AllocBuffer(shards * ranks_, kCopyIn));
  tensors_.FreeBuffer(input);
  return Status::Ok();
}

Status FsdpGroups::WaitForUnshard(int group, bool forward) {
  const auto g = static_cast<size_t>(group);
  if (!pending_[g]) return Status::Ok();
  pending_[g] = false;
  // Implicit forward prefetch: the previous group's all-gather output goes after this one's
  // all-gather was issued.
  if (forward && forward_gathered_ != -1) {
    tensors_.FreeBuffer(forward_gathered_);
    forward_gathered_ = -1;
  }
  const std::vector<FsdpParameter>& parameters = groups_[g].parameters;
  std::vector<CachingAllocator::Handle>& unsharded = unsharded_[g];
  if (ranks_ == 1) {
    // Each shard cast to bf16, copied into the unsharded tensor; the cast freed once the next
    // parameter's is made.
    CachingAllocator::Handle cast = -1;
    for (size_t i = 0; i < parameters.size(); ++i) {
      if (i == 0) {
        DTSIM_ASSIGN_OR_RETURN(cast,
                               tensors_.AllocBuffer(ShardElements(parameters[0]) * 2, kCompute));
      }
      DTSIM_ASSIGN_OR_RETURN(const CachingAllocator::Handle tensor,
                             tensors_.AllocBuffer(PaddedElements(parameters[i]) * 2, kCompute));
      unsharded.push_back(tensor);
      CachingAllocator::Handle next = -1;
      if (i + 1 < parameters.size()) {
        DTSIM_ASSIGN_OR_RETURN(
            next, tensors_.AllocBuffer(ShardElements(parameters[i + 1]) * 2, kCompute));
      }
      tensors_.FreeBuffer(cast);
      cast = next;
    }
    return Status::Ok();
  }
  // foreach_all_gather_copy_out: each parameter's all-gather output (its unsharded tensor).
  for (const FsdpParameter& parameter : parameters) {
    DTSIM_ASSIGN_OR_RETURN(const CachingAllocator::Handle tensor,
                           tensors_.AllocBuffer(PaddedElements(parameter) * 2, kCompute));
    unsharded.push_back(tensor);
  }
  if (forward) {
    forward_gathered_ = gathered_[g];
  } else {
    tensors_.FreeBuffer(gathered_[g]);
  }
  gathered_[g] = -1;
  return Status::Ok();
}

void FsdpGroups::Reshard(int group) {
  for (const CachingAllocator::Handle tensor : unsharded_[static_cast<size_t>(group)]) {
    tensors_.FreeBuffer(tensor);
  }
  unsharded_[static_cast<size_t>(group)].clear();
}

Status FsdpGroups::PreForward(int group) {
  DTSIM_RETURN_IF_ERROR(Unshard(group));
  return WaitForUnshard(group, true);
}

void FsdpGroups::PostForward(int group) {
  if (groups_[static_cast<size_t>(group)].reshard_after_forward) Reshard(group);
}

void FsdpGroups::FinishForward() {
  if (forward_gathered_ != -1) tensors_.FreeBuffer(forward_gathered_);
  forward_gathered_ = -1;
}

Status FsdpGroups::PreBackward(int group, int prefetch) {
  DTSIM_RETURN_IF_ERROR(Unshard(group));
  DTSIM_RETURN_IF_ERROR(WaitForUnshard(group, false));
  if (prefetch >= 0) DTSIM_RETURN_IF_ERROR(Unshard(prefetch));
  return Status::Ok();
}

void FsdpGroups::AddGradient(int group, int parameter, CachingAllocator::Handle gradient,
                             int64_t bytes) {
  gradients_[static_cast<size_t>(group)].push_back(
      {.parameter = parameter, .handle = gradient, .bytes = bytes});
}

Status FsdpGroups::PostBackward(int group) {
  if (accumulate_) return Accumulate(group);
  Reshard(group);
  return Reduce(group, gradients_[static_cast<size_t>(group)], false);
}

Status FsdpGroups::Accumulate(int group) {
  const auto g = static_cast<size_t>(group);
  std::vector<Gradient>& gradients = gradients_[g];
  std::vector<Gradient>& accumulated = accumulated_[g];
  if (!accumulated.empty()) {  // added into the fp32 gradients in place
    DTSIM_CHECK(accumulated.size() == gradients.size(), "a micro-batch's gradients differ");
    for (const Gradient& gradient : gradients) tensors_.FreeBuffer(gradient.handle);
    gradients.clear();
    return Status::Ok();
  }
  std::sort(gradients.begin(), gradients.end(),
            [](const Gradient& a, const Gradient& b) { return a.parameter < b.parameter; });
  for (const Gradient& gradient : gradients) {  // each cast to fp32, the bf16 freed
    DTSIM_ASSIGN_OR_RETURN(const CachingAllocator::Handle fp32,
                           tensors_.AllocGradientBuffer(gradient.bytes * 2, kCompute));
    tensors_.FreeBuffer(gradient.handle);
    accumulated.push_back(
        {.parameter = gradient.parameter, .handle = fp32, .bytes = gradient.bytes * 2});
  }
  gradients.clear();
  return Status::Ok();
}

Status FsdpGroups::ReduceAccumulated(int group) {
  Reshard(group);
  return Reduce(group, accumulated_[static_cast<size_t>(group)], true);
}

Status FsdpGroups::Reduce(int group, std::vector<Gradient>& gradients, bool accumulated) {
  if (gradients.empty()) return Status::Ok();
  if (reduce_input_ != -1) tensors_.FreeBuffer(reduce_input_);
  // foreach_reduce: the fp32 input on the compute stream, chunk_cat's scratch, the gradients
  // (bf16, or under pipelining the accumulated fp32) freed; the output on the reduce-scatter
  // stream.
  const int64_t elements = GroupPaddedElements(group);
  DTSIM_ASSIGN_OR_RETURN(reduce_input_, tensors_.AllocBuffer(elements * 4, kCompute));
  DTSIM_ASSIGN_OR_RETURN(const CachingAllocator::Handle scratch,
                         tensors_.AllocBuffer(ChunkCatScratch(group), kCompute));
  tensors_.FreeBuffer(scratch);
  for (const Gradient& gradient : gradients) {
    if (accumulated) {
      tensors_.FreeGradientBuffer(gradient.handle, gradient.bytes);
    } else {
      tensors_.FreeBuffer(gradient.handle);
    }
  }
  gradients.clear();
  const int64_t output_bytes = elements / ranks_ * 4;
  DTSIM_ASSIGN_OR_RETURN(const CachingAllocator::Handle output,
                         tensors_.AllocBuffer(output_bytes, kReduceScatter));
  if (!tensors_.KeepAsGrad(group, output, output_bytes)) tensors_.FreeBuffer(output);
  return Status::Ok();
}

void FsdpGroups::FinishBackward() {
  if (reduce_input_ != -1) tensors_.FreeBuffer(reduce_input_);
  reduce_input_ = -1;
}

}  // namespace dtsim::models
