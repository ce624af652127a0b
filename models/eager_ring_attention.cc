#include "models/eager_ring_attention.h"

#include "sim/base/check.h"

namespace dtsim::models {

void RingAttention::Free(Handle& handle) {
  if (handle == -1) return;
  tensors_.FreeBuffer(handle);
  handle = -1;
}

Status RingAttention::FlashForward(int64_t queries, bool last, Handle& out, Handle& logsumexp,
                                   Handle& seed, Handle& offset) {
  // As aten::_scaled_dot_product_flash_attention allocates: philox seed and offset, the output,
  // the log-sum-exp, a 256 B scratch. The last step's seed and offset are the op's results.
  if (last) {
    DTSIM_RETURN_IF_ERROR(tensors_.Alloc(slots_.layer, slots_.seed, kFlashPhiloxBytes));
    DTSIM_RETURN_IF_ERROR(tensors_.Alloc(slots_.layer, slots_.offset, kFlashPhiloxBytes));
  } else {
    DTSIM_ASSIGN_OR_RETURN(seed, Buffer(kFlashPhiloxBytes));
    DTSIM_ASSIGN_OR_RETURN(offset, Buffer(kFlashPhiloxBytes));
  }
  DTSIM_ASSIGN_OR_RETURN(out, Buffer(queries));
  DTSIM_ASSIGN_OR_RETURN(logsumexp, Buffer(shape_.logsumexp * queries / shape_.queries));
  DTSIM_ASSIGN_OR_RETURN(Handle scratch, Buffer(kFlashScratchBytes));
  Free(scratch);
  return Status::Ok();
}

Status RingAttention::MergePartial(Handle& merged_out, Handle& merged_lse) {
  const int64_t q = shape_.queries, half_lse = shape_.logsumexp / 2;
  // step(): the block's output in fp32 (half the queries: t/2 · 4 B = Q).
  DTSIM_ASSIGN_OR_RETURN(Handle block_out, Buffer(q));
  // out - sigmoid(block_lse - lse) * (out - block_out) over the second half: the difference of
  // the log-sum-exps and its sigmoid, the outputs' difference, the product, the result.
  DTSIM_ASSIGN_OR_RETURN(Handle lse_difference, Buffer(half_lse));
  DTSIM_ASSIGN_OR_RETURN(Handle sigmoid, Buffer(half_lse));
  Free(lse_difference);
  DTSIM_ASSIGN_OR_RETURN(Handle out_difference, Buffer(q));
  DTSIM_ASSIGN_OR_RETURN(Handle product, Buffer(q));
  Free(sigmoid);
  Free(out_difference);
  DTSIM_ASSIGN_OR_RETURN(Handle out_half, Buffer(q));
  Free(product);
  // lse - logsigmoid(lse - block_lse) (log_sigmoid's buffer is empty on CUDA).
  DTSIM_ASSIGN_OR_RETURN(Handle difference, Buffer(half_lse));
  DTSIM_ASSIGN_OR_RETURN(Handle log_sigmoid, Buffer(half_lse));
  Free(difference);
  DTSIM_ASSIGN_OR_RETURN(Handle lse_half, Buffer(half_lse));
  Free(log_sigmoid);
  // _partial_update: torch.cat of the first half and the updated one, each a new tensor that
  // replaces the running one.
  DTSIM_ASSIGN_OR_RETURN(Handle lse, Buffer(shape_.logsumexp));
  Free(merged_lse);
  merged_lse = lse;
  DTSIM_ASSIGN_OR_RETURN(Handle out, Buffer(2 * q));
  Free(merged_out);
  merged_out = out;
  Free(lse_half);
  Free(out_half);
  Free(block_out);
  return Status::Ok();
}

Status RingAttention::Forward() {
  const int n = shape_.ranks;
  const int64_t q = shape_.queries;
  DTSIM_CHECK(n >= 2, "ring attention over fewer than two ranks");
  // key.contiguous(), value.contiguous(); step 0 sends torch.cat([k, v]) by one all-gather
  // (the concatenation dropped once it is launched).
  DTSIM_ASSIGN_OR_RETURN(Handle keys, Buffer(q));
  DTSIM_ASSIGN_OR_RETURN(Handle values, Buffer(q));
  DTSIM_ASSIGN_OR_RETURN(Handle concatenated, Buffer(2 * q));
  DTSIM_ASSIGN_OR_RETURN(Handle gathered, Buffer(2 * q * n));
  Free(concatenated);
  // Step 0: every local query with the local keys; the merger keeps the output in fp32 and the
  // op's log-sum-exp (fp32 already).
  Handle out = -1, logsumexp = -1, seed = -1, offset = -1;
  DTSIM_RETURN_IF_ERROR(FlashForward(q, false, out, logsumexp, seed, offset));
  DTSIM_ASSIGN_OR_RETURN(Handle merged_out, Buffer(2 * q));
  Handle merged_lse = logsumexp;
  logsumexp = -1;
  for (int i = 1; i < n; ++i) {
    // The step's keys and values are views of the gathered buffer; all but the last step
    // concatenate them to "send" (the all-gather rotater sends nothing more).
    if (i < n - 1) {
      DTSIM_ASSIGN_OR_RETURN(Handle next, Buffer(2 * q));
      Free(next);
    }
    if (i == 1) {  // k and v rebound: the contiguous copies go
      Free(keys);
      Free(values);
    }
    Handle step_out = -1, step_lse = -1, step_seed = -1, step_offset = -1;
    DTSIM_RETURN_IF_ERROR(
        FlashForward(q / 2, i == n - 1, step_out, step_lse, step_seed, step_offset));
    for (Handle* handle : {&out, &logsumexp, &seed, &offset}) Free(*handle);
    out = step_out;
    logsumexp = step_lse;
    seed = step_seed;
    offset = step_offset;
    DTSIM_RETURN_IF_ERROR(MergePartial(merged_out, merged_lse));
  }
  // results(): the merged output cast back to bf16; the log-sum-exp is the merger's.
  DTSIM_RETURN_IF_ERROR(tensors_.Alloc(slots_.layer, slots_.out, q));
  tensors_.AdoptBuffer(slots_.layer, slots_.logsumexp, merged_lse, shape_.logsumexp);
  for (Handle* handle : {&merged_out, &out, &logsumexp, &gathered}) Free(*handle);
  return Status::Ok();
}

Status RingAttention::Backward() {
  const int n = shape_.ranks;
  const int64_t q = shape_.queries, lse = shape_.logsumexp;
  DTSIM_CHECK(n >= 2, "ring attention over fewer than two ranks");
  // The gradients' fp32 accumulators (zeros_like), the contiguous keys and values, step 0's
  // concatenation (held by its variable: this loop never rebinds it to the send's result) and
  // the all-gather.
  DTSIM_ASSIGN_OR_RETURN(Handle grad_queries, Buffer(2 * q));
  DTSIM_ASSIGN_OR_RETURN(Handle grad_keys, Buffer(2 * q));
  DTSIM_ASSIGN_OR_RETURN(Handle grad_values, Buffer(2 * q));
  DTSIM_ASSIGN_OR_RETURN(Handle keys, Buffer(q));
  DTSIM_ASSIGN_OR_RETURN(Handle values, Buffer(q));
  DTSIM_ASSIGN_OR_RETURN(Handle concatenated, Buffer(2 * q));
  DTSIM_ASSIGN_OR_RETURN(Handle gathered, Buffer(2 * q * n));
  // Flash attention's backward over `queries` bytes of queries and every key: dq, dk, dv, the
  // workspace (dq's fp32 accumulator, the softmax's row sums, 256 B).
  Handle dq = -1, dk = -1, dv = -1;
  const auto flash_backward = [&](int64_t queries) -> Status {
    DTSIM_ASSIGN_OR_RETURN(const Handle new_dq, Buffer(queries));
    DTSIM_ASSIGN_OR_RETURN(const Handle new_dk, Buffer(q));
    DTSIM_ASSIGN_OR_RETURN(const Handle new_dv, Buffer(q));
    DTSIM_ASSIGN_OR_RETURN(Handle workspace,
                           Buffer(2 * queries + lse * queries / q + kFlashScratchBytes));
    Free(workspace);
    for (Handle* handle : {&dq, &dk, &dv}) Free(*handle);  // the step's variables rebound
    dq = new_dq;
    dk = new_dk;
    dv = new_dv;
    return Status::Ok();
  };
  DTSIM_RETURN_IF_ERROR(flash_backward(q));
  // Added in place into the accumulators; their concatenation (4Q) sent on by all-to-all into a
  // new buffer (received by the next step).
  DTSIM_ASSIGN_OR_RETURN(Handle sent, Buffer(4 * q));
  DTSIM_ASSIGN_OR_RETURN(Handle received, Buffer(4 * q));
  Handle previous = -1;  // the buffer received before, which the gradients still view
  Handle lse_half = -1;
  for (int i = 1; i < n; ++i) {
    if (i != n - 1) {
      DTSIM_ASSIGN_OR_RETURN(Handle next, Buffer(2 * q));
      Free(concatenated);
      concatenated = next;
    }
    // logsumexp.chunk(2)[1].contiguous(); k and v rebound at step 1 (the copies go).
    DTSIM_ASSIGN_OR_RETURN(Handle half, Buffer(lse / 2));
    if (i == 1) {
      Free(keys);
      Free(values);
    }
    Free(lse_half);
    lse_half = half;
    DTSIM_RETURN_IF_ERROR(flash_backward(q / 2));
    // The keys' and values' gradients become views of what was received: the concatenation
    // sent goes, and the accumulators (step 1) or the buffer received before.
    Free(sent);
    if (i == 1) {
      Free(grad_keys);
      Free(grad_values);
    } else {
      Free(previous);
    }
    previous = received;
    DTSIM_ASSIGN_OR_RETURN(sent, Buffer(4 * q));
    DTSIM_ASSIGN_OR_RETURN(received, Buffer(4 * q));
    // The queries' gradient: the second half updated in place, then torch.cat.
    DTSIM_ASSIGN_OR_RETURN(Handle queries, Buffer(2 * q));
    Free(grad_queries);
    grad_queries = queries;
  }
  // The queries' gradient to bf16; the last received buffer to bf16 (the keys' and values'
  // gradients are views of it), after which the sent concatenation and the buffer received
  // before go.
  DTSIM_RETURN_IF_ERROR(tensors_.Alloc(kEagerModel, slots_.grad_queries, q));
  Free(grad_queries);
  DTSIM_RETURN_IF_ERROR(tensors_.Alloc(kEagerModel, slots_.grad_keys_values, 2 * q));
  Free(sent);
  Free(previous);
  for (Handle* handle : {&concatenated, &gathered, &received, &lse_half, &dq, &dk, &dv}) {
    Free(*handle);
  }
  return Status::Ok();
}

}  // namespace dtsim::models
