// The backward of the Llama replay (models/eager_llama_replay.h): the loss, each block's MLP and
// attention in reverse, the embedding.
#include <algorithm>
#include <array>
#include <tuple>

#include "models/eager_llama_replay.h"

namespace dtsim::models::eager_llama {

Status Replay::LinearBackward(int l, int grad_out, int grad_in, int64_t in_features,
                              int64_t out_features, int weight, int in, int grad_in32, int param) {
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGWeight, in_features * out_features * 2));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, grad_in, t_ * in_features * 2));
  if (grad_out >= 0) Free(kModel, grad_out);
  if (!bf16_) Free(l, weight);
  if (in >= 0) Free(l, in);
  if (grad_in32 >= 0) {
    DTSIM_RETURN_IF_ERROR(Alloc(kModel, grad_in32, t_ * in_features * 4));
    Free(kModel, grad_in);
    if (grad_in32 == kGIn32) Free(kModel, kGIn32);
  }
  if (!fsdp_) return Grad(param, kGWeight);
  fsdp_->AddGradient(GroupOf(param), param, TakeBuffer(kModel, kGWeight),
                     in_features * out_features * 2);
  return Status::Ok();
}

Status Replay::NormBackward(int l, int grad_out, int rstd, int input_layer, int input, int param) {
  if (Tp()) {  // the gathered input's gradient (partial sums) reduce-scattered onto the sequence
    DTSIM_RETURN_IF_ERROR(ReduceScatterSequence(kModel, kGScattered));
    Free(kModel, grad_out);
    grad_out = kGScattered;
  }
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGNorm, ts_ * h_ * act_));
  DTSIM_RETURN_IF_ERROR(ParamGrad(param, h_));
  Free(kModel, grad_out);
  Free(input_layer, input);
  Free(l, rstd);
  if (residual_grad_pending_) {
    // The first sum into the residual's gradient, a received buffer's (which autograd cannot
    // add into) and the norm's input gradient, is made in place in the latter: it is the
    // residual's gradient from now on.
    const int64_t bytes = ts_ * h_ * act_;
    AdoptBuffer(kModel, kGRes, TakeBuffer(kModel, kGNorm), bytes);
    residual_grad_pending_ = false;
  } else {
    Free(kModel, kGNorm);  // added into the residual's gradient
  }
  FinishAccumulation();
  return Status::Ok();
}

Status Replay::MlpBackward(int l) {
  const int64_t t = t_, h = h_, f = f_;
  // w2 (under autocast from the residual's gradient's bf16 cast, else from it); S·b (grads for
  // b, then for S); w3; silu; w1 (its input's gradient added into w3's: under autocast into the
  // fp32 cast of w3's, else summed into a new tensor).
  // Under tensor parallelism w2's output gradient is the residual's gathered whole (the
  // backward of its reduce-scatter).
  if (Tp()) DTSIM_RETURN_IF_ERROR(GatherSequence(kModel, kGGathered));
  const int grad_out = Tp() ? kGGathered : bf16_ ? -1 : kGO2;
  DTSIM_RETURN_IF_ERROR(LinearBackward(l, grad_out, kGP, f, h, kW2, kP, -1, Param(l, kW2Weight)));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGB, t * f * 2));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGS, t * f * 2));
  Free(kModel, kGP);
  Free(l, kB);
  Free(l, kS);
  if (bf16_) {
    DTSIM_RETURN_IF_ERROR(LinearBackward(l, kGB, kGN2, h, f, kW3, -1, -1, Param(l, kW3Weight)));
  } else {
    DTSIM_RETURN_IF_ERROR(LinearBackward(l, kGB, kGIn, h, f, kW3, kIn3, kGN2, Param(l, kW3Weight)));
  }
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGA, t * f * 2));
  Free(kModel, kGS);
  Free(l, kA);
  if (bf16_) {
    DTSIM_RETURN_IF_ERROR(
        LinearBackward(l, kGA, kGIn, h, f, kW1, Tp() ? kG2 : kN2, -1, Param(l, kW1Weight)));
    DTSIM_RETURN_IF_ERROR(SumInputGradients(kGN2));
    return NormBackward(l, kGSum, kN2Rstd, l, kH, Param(l, kFfnNorm));
  }
  DTSIM_RETURN_IF_ERROR(LinearBackward(l, kGA, kGIn, h, f, kW1, kIn1, kGIn32, Param(l, kW1Weight)));
  return NormBackward(l, kGN2, kN2Rstd, l, kH, Param(l, kFfnNorm));
}

Status Replay::RotaryBackward() {
  const int64_t t = t_;
  // type_as's backward (k, then q) to fp32; the complex products' (each with the table's
  // conjugate made); float()'s back to bf16.
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGKf, t * kv_ * 4));
  if (!Ring() || repeats_ > 1) Free(kModel, kGKr);  // else a view of ring attention's kGV
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGQf, t * q_ * 4));
  Free(kModel, kDq);
  const int64_t table = seq_ * spec_.head_dim() * 4;  // the rank's part under CP
  for (const auto& [from, to, width] : {std::tuple{kGKf, kGKc, kv_}, {kGQf, kGQc, q_}}) {
    DTSIM_RETURN_IF_ERROR(Alloc(kModel, kConj, table));
    DTSIM_RETURN_IF_ERROR(Alloc(kModel, to, t * width * 4));
    Free(kModel, kConj);
    Free(kModel, from);
  }
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGK, t * kv_ * 2));
  Free(kModel, kGKc);
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGQ, t * q_ * 2));
  Free(kModel, kGQc);
  return Status::Ok();
}

Status Replay::AttentionBackward(int l) {
  const int64_t t = t_;
  if (!bf16_) DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGO, t * h_ * 2));    // the residual's, cast
  if (Tp()) DTSIM_RETURN_IF_ERROR(GatherSequence(kModel, kGGathered));  // as w2's
  const int grad_out = Tp() ? kGGathered : bf16_ ? -1 : kGO;
  DTSIM_RETURN_IF_ERROR(LinearBackward(l, grad_out, kGAtt, q_, h_, kWo,
                                       Ring() ? kAttContiguous : -1, -1, Param(l, kWoWeight)));
  // Flash attention's backward: dq, dk, dv over every head, and one workspace (dq's fp32
  // accumulator and the softmax's row sums, and 256 B more: the size the record shows). With one
  // head per key-value head, dk and dv are the k and v gradients; else repeat_kv's backward sums
  // them back per key-value head. Ring attention's dk and dv are views of one buffer, kept in
  // the slot freed last (dk's, or with one head per key-value head v's).
  const bool repeated = repeats_ > 1;
  if (Ring()) {
    DTSIM_RETURN_IF_ERROR(RingOf(l).Backward());
  } else {
    for (const int grad : {kDq, repeated ? kDk : kGKr, repeated ? kDv : kGV}) {
      DTSIM_RETURN_IF_ERROR(Alloc(kModel, grad, t * q_ * 2));
    }
    DTSIM_RETURN_IF_ERROR(Alloc(kModel, kWorkspace, t * q_ * 4 + lse_ + kFlashScratchBytes));
    Free(kModel, kWorkspace);
  }
  Free(kModel, kGAtt);
  for (const int tensor : {kQr, kLse, kAtt, kSeed, kOffset}) Free(l, tensor);
  const std::array<int, 2> keys_values =
      repeated ? std::array<int, 2>{kKeys, kValues} : std::array<int, 2>{kKr, kV};
  for (const int tensor : keys_values) Free(l, tensor);
  if (repeated) {
    DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGV, t * kv_ * 2));
    if (!Ring()) Free(kModel, kDv);
    DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGKr, t * kv_ * 2));
    Free(kModel, kDk);
  }
  DTSIM_RETURN_IF_ERROR(RotaryBackward());
  if (bf16_) {
    // wv, wk, wq: the first two inputs' gradients summed, wq's added into the sum.
    DTSIM_RETURN_IF_ERROR(LinearBackward(l, kGV, kGN1, h_, kv_, kWv, -1, -1, Param(l, kWvWeight)));
    DTSIM_RETURN_IF_ERROR(LinearBackward(l, kGK, kGIn, h_, kv_, kWk, -1, -1, Param(l, kWkWeight)));
    DTSIM_RETURN_IF_ERROR(SumInputGradients(kGN1));
    DTSIM_RETURN_IF_ERROR(
        LinearBackward(l, kGQ, kGIn, h_, q_, kWq, Tp() ? kG1 : kN1, -1, Param(l, kWqWeight)));
    Free(kModel, kGIn);
    return NormBackward(l, kGSum, kN1Rstd, l, kX, Param(l, kAttentionNorm));
  }
  // wv, wk, wq: their inputs' gradients added up in fp32.
  DTSIM_RETURN_IF_ERROR(
      LinearBackward(l, kGV, kGIn, h_, kv_, kWv, kInV, kGN1, Param(l, kWvWeight)));
  DTSIM_RETURN_IF_ERROR(
      LinearBackward(l, kGK, kGIn, h_, kv_, kWk, kInK, kGIn32, Param(l, kWkWeight)));
  DTSIM_RETURN_IF_ERROR(
      LinearBackward(l, kGQ, kGIn, h_, q_, kWq, kInQ, kGIn32, Param(l, kWqWeight)));
  return NormBackward(l, kGN1, kN1Rstd, l, kX, Param(l, kAttentionNorm));
}

Status Replay::EmbeddingBackward() {
  // embedding_dense_backward (CUDA): sorted and original indices and their counts (int64,
  // one per token), the weight's .grad, and partial sums per segment of at most 10 tokens:
  // at most tokens / 10 + min(tokens, vocabulary) rows (a few kilobytes of sort scratch left
  // out). Under tensor parallelism over the gathered gradient of the embedding's output (the
  // backward of its reduce-scatter) and the rank's rows of the vocabulary.
  if (Tp()) DTSIM_RETURN_IF_ERROR(GatherSequence(kModel, kGGathered));
  const int64_t index = t_ * 8;
  for (const int tensor : {kSort1, kSort2, kSort3}) {
    DTSIM_RETURN_IF_ERROR(Alloc(kModel, tensor, index));
  }
  Free(kModel, kSort3);
  DTSIM_RETURN_IF_ERROR(ParamGrad(0, v_ * h_));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kSort4, index));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kSortSeed, 8));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kSort5, index));
  Free(kModel, kSort5);
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kSort6, index));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kSort7, index));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kSortSeed2, 8));
  const int64_t partial_rows = t_ / 10 + std::min(t_, v_);
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kPartial, partial_rows * h_ * 4));
  for (const int tensor :
       {kPartial, kSortSeed2, kSort7, kSort6, kSortSeed, kSort4, kSort2, kSort1}) {
    Free(kModel, tensor);
  }
  if (Tp()) Free(kModel, kGGathered);
  return Status::Ok();
}

Status Replay::Backward(int chunk) {
  const Chunk& c = chunks_[static_cast<size_t>(chunk)];
  const int end = End(chunk);
  if (c.head) {
    DTSIM_RETURN_IF_ERROR(HeadBackward(chunk));
  } else {
    // The output's gradient is the micro-batch's receive buffer; FSDP2's root pre-backward.
    if (fsdp_) DTSIM_RETURN_IF_ERROR(fsdp_->PreBackward(Root(chunk), end - 1));
    residual_grad_pending_ = true;
  }
  for (int l = end - 1; l >= c.first; --l) {
    // FSDP2's pre-backward (the block's output's gradient made) unshards the block and
    // prefetches the one before. Under autocast, the residual's gradient cast to bf16 for w2's
    // output. A checkpointed block is recomputed as its first saved tensor is asked for.
    if (fsdp_) DTSIM_RETURN_IF_ERROR(fsdp_->PreBackward(l, l > c.first ? l - 1 : -1));
    if (!bf16_) DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGO2, t_ * h_ * 2));
    if (Checkpointed(l)) {
      DTSIM_RETURN_IF_ERROR(BlockForward(l, OpPolicy() ? Mode::kOpRecompute : Mode::kRecompute));
    }
    DTSIM_RETURN_IF_ERROR(MlpBackward(l));
    DTSIM_RETURN_IF_ERROR(AttentionBackward(l));
    // w2's stored output, which no backward reads, goes with the checkpoint's frame (and under
    // tensor parallelism the stored outputs of wo's and w2's reduce-scatters).
    if (Checkpointed(l) && OpPolicy()) {
      if (!run_.compiled_blocks) Free(l, kO2);
      if (Tp()) Free(l, kORs);
      if (Tp() && !run_.compiled_blocks) Free(l, kO2Rs);
    }
    if (fsdp_) DTSIM_RETURN_IF_ERROR(fsdp_->PostBackward(l));
  }
  if (c.embedding) {
    DTSIM_RETURN_IF_ERROR(EmbeddingBackward());
    Free(kModel, kGRes);
  } else {  // the received input's gradient: its buffer's .grad until the next step
    input_grads_.push_back(TakeBuffer(kModel, kGRes));
  }
  FinishAccumulation();  // the embedding's
  if (fsdp_) {           // the root's post-backward, from the final callback
    DTSIM_RETURN_IF_ERROR(fsdp_->PostBackward(Root(chunk)));
    fsdp_->FinishBackward();
  }
  if (!c.head) {  // the stage's output, dropped with the schedule's record of the micro-batch
    Free(end, kX);
    return Status::Ok();
  }
  Free(kModel, kGLoss);
  Free(kModel, kLoss);  // read by .item() after the optimizer's step: 4 B, freed here
  if (pipelined_ && run_.pipeline.merge_outputs) {  // kept in output_chunks for the merge
    output_chunks_.push_back(TakeBuffer(kModel, kLogits));
  } else if (pipelined_) {  // dropped with the schedule's record of the micro-batch
    Free(kModel, kLogits);
  }
  return Status::Ok();
}

Status Replay::HeadBackward(int chunk) {
  const int64_t t = t_, v = v_;
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGLoss, 4));
  if (run_.compiled_loss) {
    // Compiled: one kernel writes the logits' bf16 gradient from the kept logits and row
    // statistics, which the graph's node then releases (the schedule keeps a stage's output).
    DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGLogits, t * v * 2));
    Free(kModel, kLossStats);
    if (!pipelined_) Free(kModel, kLogits);
    return OutputLayerBackward(chunk);
  }
  // The loss: nll_loss's dense gradient, log_softmax's, the cast back to bf16.
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGNll, t * v * 4));
  if (Tp()) {
    // loss_parallel fuses the two (_nll_loss_and_log_softmax_backward): (zeros with −1 at the
    // targets + exp(log_softmax)) × the loss's gradient; exp's output freed once added, the
    // sum and the zeros as it returns. log_softmax's backward passes the result on.
    DTSIM_RETURN_IF_ERROR(Alloc(kModel, kExp, t * v * 4));
    DTSIM_RETURN_IF_ERROR(Alloc(kModel, kShifted, t * v * 4));
    Free(kModel, kExp);
    DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGLsm, t * v * 4));
    Free(kModel, kShifted);
    Free(kModel, kGNll);
    Free(kModel, kTotalWeight);
  } else {
    Free(kModel, kTotalWeight);
    DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGLsm, t * v * 4));
    Free(kModel, kGNll);
  }
  Free(kModel, kLogSoftmax);
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGLogits, t * v * 2));
  Free(kModel, kGLsm);
  return OutputLayerBackward(chunk);
}

// From the logits' gradient: the output layer's backward, the final norm's, the residual
// stream's gradient begun.
Status Replay::OutputLayerBackward(int chunk) {
  const int64_t h = h_, v = v_;
  const int end = End(chunk);
  // FSDP2: the root's pre-backward (the logits' gradient made) unshards it and prefetches the
  // last block (which kept its parameters).
  if (fsdp_) DTSIM_RETURN_IF_ERROR(fsdp_->PreBackward(Root(chunk), end - 1));
  const int output = OutputParam();
  if (bf16_) {
    DTSIM_RETURN_IF_ERROR(
        LinearBackward(kModel, kGLogits, kGNf, h, v, kWout, Tp() ? kGf : kNf, -1, output));
  } else {
    DTSIM_RETURN_IF_ERROR(
        LinearBackward(kModel, kGLogits, kGIn, h, v, kWout, kInOut, kGNf, output));
  }
  // The final norm's backward starts the residual's gradient (under tensor parallelism from
  // the gathered input's gradient reduce-scattered onto the sequence).
  int grad_norm = kGNf;
  if (Tp()) {
    DTSIM_RETURN_IF_ERROR(ReduceScatterSequence(kModel, kGScattered));
    Free(kModel, kGNf);
    grad_norm = kGScattered;
  }
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGRes, ts_ * h * act_));
  DTSIM_RETURN_IF_ERROR(ParamGrad(output - 1, h));
  Free(kModel, grad_norm);
  Free(end, kX);
  Free(kModel, kNfRstd);
  FinishAccumulation();
  return Status::Ok();
}

}  // namespace dtsim::models::eager_llama
