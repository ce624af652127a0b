#include "models/eager_llama.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "models/eager_fsdp.h"
#include "models/eager_ring_attention.h"
#include "models/eager_tensors.h"

namespace dtsim::models {
namespace {
namespace llama {  // apart from eager_allocations.cc's names in a unity build

constexpr int kModel = kEagerModel;

// The tensors of one block (layer l) or around the blocks (kModel), by role.
enum Tensor : int {
  // a block's forward: its input x (fp32), the attention norm's output and 1/rms, the weight
  // casts (W…) and input casts (In…) of the seven linear layers, their outputs (q, k, v, o, a =
  // w1 x, b = w3 x, o2), the rotary steps (fp32 copies, complex products, bf16 results), the
  // repeated keys and values, flash attention's philox seed and offset, output and log-sum-exp,
  // the residual h between attention and MLP, silu(a) (S) and S·b (P)
  kX,
  kN1,
  kN1Rstd,
  kWq,
  kInQ,
  kQ,
  kWk,
  kInK,
  kK,
  kWv,
  kInV,
  kV,
  kQf,
  kKf,
  kQc,
  kKc,
  kQr,
  kKr,
  kKeys,
  kValues,
  kSeed,
  kOffset,
  kAtt,
  kLse,
  kAttContiguous,  // under context parallelism, the merged output made contiguous for wo
  kScratch,
  kWo,
  kO,
  kH,
  kN2,
  kN2Rstd,
  kW1,
  kIn1,
  kA,
  kS,
  kW3,
  kIn3,
  kB,
  kP,
  kW2,
  kO2,
  // around the blocks
  kNf,
  kNfRstd,
  kWout,
  kInOut,
  kLogits,
  kLogits32,
  kLogSoftmax,
  kLoss,
  kTotalWeight,
  // gradients in flight (G…) and the backward's buffers
  kGLoss,
  kGNll,
  kGLsm,
  kGLogits,
  kGWeight,  // a linear layer's weight gradient in bf16, before its .grad
  kGIn,      // its input's gradient in bf16
  kGIn32,    // … cast back to fp32 (autocast's input cast) and added into another at once
  kGSum,     // without autocast, the first two input gradients of a shared input summed
  kGNf,      // the final norm's output's gradient
  kGRes,     // the residual stream's gradient, which every norm's backward adds into
  kGNorm,
  kGO2,
  kGP,
  kGB,
  kGS,
  kGA,
  kGN2,
  kGO,
  kGAtt,
  kDq,
  kDk,
  kDv,
  kWorkspace,
  kGV,
  kGKr,
  kGKf,
  kGQf,
  kConj,
  kGKc,
  kGQc,
  kGK,
  kGQ,
  kGN1,
  kSort1,  // embedding_dense_backward's index buffers and partial sums
  kSort2,
  kSort3,
  kSort4,
  kSort5,
  kSort6,
  kSort7,
  kSortSeed,
  kSortSeed2,
  kPartial,
  // context_parallel(): the rotation table's copy to restore, the three buffers' shards (inputs,
  // labels, table) and the last one's clone
  kCpTable,
  kCpInputs,
  kCpLabels,
  kCpFreqs,
  kCpClone,
  kTensorKinds
};

// Parameters in module order: the embedding, each block's nine, the final norm, the output.
enum BlockParameter : int {
  kAttentionNorm,
  kWqWeight,
  kWkWeight,
  kWvWeight,
  kWoWeight,
  kFfnNorm,
  kW1Weight,
  kW2Weight,
  kW3Weight,
  kBlockParameters
};

// How a block's forward runs: saving what its backward needs, checkpointed (keeping nothing
// but its input), under torchtitan's op policy (keeping the outputs it must save), or the
// recompute in backward of either (saving, up to the last saved tensor:
// torch.utils.checkpoint's early stop; the op policy's outputs come from its store).
enum class Mode { kSave, kCheckpoint, kOpForward, kRecompute, kOpRecompute };

// The op policy's stored outputs (gpt2_step.op_policy_contexts, counting the block's seven
// matmuls): wq's, wv's, w1's and w2's (the odd ones) and flash attention's.
bool OpStored(int tensor) {
  return tensor == kQ || tensor == kV || tensor == kA || tensor == kO2 || tensor == kAtt ||
         tensor == kLse || tensor == kSeed || tensor == kOffset;
}

Status Unsupported(std::string_view what) {
  return Error(
      fmt::format("the eager PyTorch loop dtsim replays through the caching allocator takes a "
                  "Llama-style decoder (RMSNorm, SwiGLU, rotary positions, no biases, an "
                  "untied output layer); this model has {}",
                  what));
}

Status CheckSupported(const TransformerSpec& spec) {
  if (spec.linear_bias) return Unsupported("biases");
  if (spec.kv_heads < 1 || spec.heads % spec.kv_heads != 0) {
    return Unsupported("key-value heads that do not divide the heads");
  }
  if (const std::string_view what = UnreplayedFeature(spec); !what.empty()) {
    return Unsupported(what);
  }
  if (spec.tied_embeddings) return Unsupported("a tied output layer");
  return Status::Ok();
}

class Replay : private EagerTensors {
 public:
  Replay(const TransformerSpec& spec, const EagerRun& run)
      : EagerTensors(spec, run, kTensorKinds),
        spec_(spec),
        run_(run),
        h_(spec.hidden),
        q_(spec.q_dim()),
        kv_(spec.kv_dim()),
        f_(spec.ffn_hidden),
        v_(spec.PaddedVocab(1)),
        seq_(run.seq_len / run.context_ranks),
        t_(run.micro_batch * seq_),
        lse_(run.micro_batch * spec.heads * seq_ * 4),
        repeats_(spec.heads / spec.kv_heads),
        bf16_(run.fsdp_ranks > 0),
        act_(bf16_ ? 2 : 4) {
    if (bf16_) {
      fsdp_ = std::make_unique<FsdpGroups>(static_cast<EagerTensors&>(*this), run.fsdp_ranks,
                                           FsdpGroupSpecs());
    }
  }

  Expected<EagerPeaks> Run() {
    DTSIM_RETURN_IF_ERROR(Parameters());
    // The rotation table (seq × head_dim/2 complex64), the token ids, inputs and targets.
    DTSIM_RETURN_IF_ERROR(Hold(run_.seq_len * spec_.head_dim() * 4));
    DTSIM_RETURN_IF_ERROR(Hold(run_.micro_batch * (run_.seq_len + 1) * 8));
    for (int tensor = 0; tensor < 2; ++tensor) {
      DTSIM_RETURN_IF_ERROR(Hold(run_.micro_batch * run_.seq_len * 8));
    }
    return RunSteps(run_, [this]() -> Status {
      if (Ring()) DTSIM_RETURN_IF_ERROR(EnterContextParallel());
      DTSIM_RETURN_IF_ERROR(Forward());
      DTSIM_RETURN_IF_ERROR(Backward());
      if (Ring()) ExitContextParallel();
      return Status::Ok();
    });
  }

 private:
  int Param(int layer, int which) const { return 1 + layer * kBlockParameters + which; }
  bool Ring() const { return run_.context_ranks > 1; }
  RingAttention RingOf(int layer) {
    return RingAttention(static_cast<EagerTensors&>(*this),
                         {.ranks = run_.context_ranks, .queries = t_ * q_ * 2, .logsumexp = lse_},
                         {.layer = layer,
                          .out = kAtt,
                          .logsumexp = kLse,
                          .seed = kSeed,
                          .offset = kOffset,
                          .grad_queries = kDq,
                          .grad_keys_values = repeats_ > 1 ? kDk : kGV});
  }
  // torchtitan's context_parallel(cp_mesh, buffers=[inputs, labels, freqs_cis], no restore for
  // the first two) around forward and backward: the table cloned (restored at the exit), each
  // buffer's load-balanced shard made and cloned into it (resized in place: its storage stays);
  // the shards and the last clone live in the context manager's frame until the exit.
  Status EnterContextParallel() {
    const int64_t head = spec_.head_dim();
    DTSIM_RETURN_IF_ERROR(Alloc(kModel, kCpTable, run_.seq_len * head * 4));
    DTSIM_RETURN_IF_ERROR(Alloc(kModel, kCpInputs, t_ * 8));
    DTSIM_RETURN_IF_ERROR(Alloc(kModel, kCpLabels, t_ * 8));
    DTSIM_RETURN_IF_ERROR(Alloc(kModel, kCpFreqs, seq_ * head * 4));
    for (const int64_t bytes : {t_ * 8, t_ * 8}) {
      DTSIM_RETURN_IF_ERROR(Alloc(kModel, kCpClone, bytes));
      Free(kModel, kCpClone);
    }
    return Alloc(kModel, kCpClone, seq_ * head * 4);
  }
  void ExitContextParallel() {
    for (const int tensor : {kCpTable, kCpInputs, kCpLabels, kCpFreqs, kCpClone}) {
      Free(kModel, tensor);
    }
  }
  int Root() const { return spec_.layers; }  // the root's FSDP parameter group

  // The parameters' shapes (dim 0, elements per row) in module order.
  std::vector<FsdpParameter> Shapes() const {
    const int64_t h = h_;
    std::vector<FsdpParameter> shapes = {{v_, h}};
    for (int layer = 0; layer < spec_.layers; ++layer) {
      for (const FsdpParameter shape : std::initializer_list<FsdpParameter>{
               {h, 1}, {q_, h}, {kv_, h}, {kv_, h}, {h, q_}, {h, 1}, {f_, h}, {h, f_}, {f_, h}}) {
        shapes.push_back(shape);
      }
    }
    shapes.push_back({h, 1});
    shapes.push_back({v_, h});
    return shapes;
  }
  // FSDP2 as torchtitan applies it: each block a group (resharded after forward but the last),
  // then the root (the embedding, the final norm, the output layer).
  std::vector<FsdpGroupSpec> FsdpGroupSpecs() const {
    const std::vector<FsdpParameter> shapes = Shapes();
    std::vector<FsdpGroupSpec> groups;
    for (int layer = 0; layer < spec_.layers; ++layer) {
      FsdpGroupSpec group{.reshard_after_forward =
                              run_.reshard_after_forward && layer + 1 < spec_.layers};
      for (int which = 0; which < kBlockParameters; ++which) {
        group.parameters.push_back(shapes[static_cast<size_t>(Param(layer, which))]);
      }
      groups.push_back(std::move(group));
    }
    groups.push_back({.parameters = {shapes.front(), shapes[shapes.size() - 2], shapes.back()},
                      .reshard_after_forward = run_.reshard_after_forward && !run_.fsdp_root_kept});
    return groups;
  }
  int GroupOf(int param) const {
    const int last = 1 + spec_.layers * kBlockParameters + 1;
    return param == 0 || param >= last - 1 ? Root() : (param - 1) / kBlockParameters;
  }

  Status Parameters() {
    std::vector<int64_t> bytes;
    for (const FsdpParameter& shape : Shapes()) {
      bytes.push_back(fsdp_ ? fsdp_->ShardBytes(shape) : shape.rows * shape.columns * 4);
    }
    return HoldParameters(std::move(bytes));
  }
  // Parameter `param`'s gradient as its backward makes it: under autocast its fp32 .grad;
  // under FSDP2 the unsharded parameter's bf16 gradient, `elements` large, which the group's
  // post-backward reduces.
  Status ParamGrad(int param, int64_t elements) {
    if (!fsdp_) return NewGrad(param);
    DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGWeight, elements * 2));
    fsdp_->AddGradient(GroupOf(param), TakeBuffer(kModel, kGWeight));
    return Status::Ok();
  }

  bool Checkpointed(int layer) const {
    return run_.recompute != Recompute::kNone && RecomputesLayer(run_.recompute_every, layer);
  }
  bool OpPolicy() const { return run_.recompute == Recompute::kSelectiveOp; }
  Mode ForwardMode(int layer) const {
    if (!Checkpointed(layer)) return Mode::kSave;
    return OpPolicy() ? Mode::kOpForward : Mode::kCheckpoint;
  }

  // A linear layer under autocast: its weight's cast, its fp32 input's cast (none where
  // `in` < 0: a bf16 input), its output; the input's cast freed at once unless kept.
  // The output is not made where the op policy's recompute has it stored (`mode`).
  Status Linear(int l, int weight, int64_t weight_elements, int in, int out, int64_t out_features,
                bool keep, Mode mode = Mode::kSave) {
    if (bf16_) in = -1;  // bf16 parameters and inputs: no casts
    if (!bf16_) DTSIM_RETURN_IF_ERROR(Alloc(l, weight, weight_elements * 2));
    if (in >= 0) DTSIM_RETURN_IF_ERROR(Alloc(l, in, t_ * h_ * 2));
    if (mode != Mode::kOpRecompute || !OpStored(out)) {
      DTSIM_RETURN_IF_ERROR(Alloc(l, out, t_ * out_features * 2));
    }
    if (in >= 0 && !keep) Free(l, in);
    return Status::Ok();
  }
  Status Norm(int l, int out, int rstd, bool keep) {
    DTSIM_RETURN_IF_ERROR(Alloc(l, out, t_ * h_ * act_));
    DTSIM_RETURN_IF_ERROR(Alloc(l, rstd, t_ * 4));
    if (!keep) Free(l, rstd);
    return Status::Ok();
  }

  Status Attention(int l, Mode mode);
  Status Mlp(int l, Mode mode);
  Status BlockForward(int l, Mode mode) {
    DTSIM_RETURN_IF_ERROR(Attention(l, mode));
    return Mlp(l, mode);
  }
  Status Forward();
  // A linear layer's backward: its weight's gradient (bf16) and its input's (`grad_in`, bf16,
  // of `in_features`); then the output's gradient `grad_out`, the weight's cast and the input's
  // saved input `in` (none where < 0) freed; the input's gradient cast to fp32 into `grad_in32`
  // (none where < 0: a bf16 input; kGIn32: added at once into the gradient another consumer
  // of the input began), and the weight's .grad.
  Status LinearBackward(int l, int grad_out, int grad_in, int64_t in_features, int64_t out_features,
                        int weight, int in, int grad_in32, int param);
  // An RMSNorm's backward: its input's gradient, added into the residual's, and its weight's
  // .grad; the output's gradient, the saved input and 1/rms freed.
  Status NormBackward(int l, int grad_out, int rstd, int input_layer, int input, int param);
  // Without autocast: input gradients `first` and kGIn (bf16) summed into kGSum, both freed.
  Status SumInputGradients(int first) {
    DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGSum, t_ * h_ * 2));
    Free(kModel, first);
    Free(kModel, kGIn);
    return Status::Ok();
  }
  Status MlpBackward(int l);
  Status AttentionBackward(int l);
  Status RotaryBackward();
  Status EmbeddingBackward();
  Status Backward();

  const TransformerSpec& spec_;
  const EagerRun& run_;
  // seq_: the tokens of a sequence on this rank (all but under context parallelism)
  const int64_t h_, q_, kv_, f_, v_, seq_, t_, lse_;
  const int repeats_;
  // FSDP2's loop: bf16 parameters gathered per group, bf16 activations (2 B; autocast's
  // residual stream and norms are fp32: 4 B).
  const bool bf16_;
  const int64_t act_;
  std::unique_ptr<FsdpGroups> fsdp_;
};

Status Replay::Attention(int l, Mode mode) {
  const bool keep = mode == Mode::kSave || mode == Mode::kRecompute || mode == Mode::kOpRecompute;
  const bool op_forward = mode == Mode::kOpForward;
  const int64_t t = t_;
  DTSIM_RETURN_IF_ERROR(Norm(l, kN1, kN1Rstd, keep));
  DTSIM_RETURN_IF_ERROR(Linear(l, kWq, q_ * h_, kInQ, kQ, q_, keep, mode));
  DTSIM_RETURN_IF_ERROR(Linear(l, kWk, kv_ * h_, kInK, kK, kv_, keep, mode));
  DTSIM_RETURN_IF_ERROR(Linear(l, kWv, kv_ * h_, kInV, kV, kv_, keep, mode));
  // apply_rotary_emb: q and k in fp32, their complex products, cast back to bf16.
  for (const auto& [tensor, width] : {std::pair{kQf, q_}, {kKf, kv_}, {kQc, q_}, {kKc, kv_}}) {
    DTSIM_RETURN_IF_ERROR(Alloc(l, tensor, t * width * 4));
  }
  DTSIM_RETURN_IF_ERROR(Alloc(l, kQr, t * q_ * 2));
  DTSIM_RETURN_IF_ERROR(Alloc(l, kKr, t * kv_ * 2));
  for (const int tensor : {kQf, kKf, kQc, kKc}) Free(l, tensor);
  if (!op_forward) Free(l, kQ);
  Free(l, kK);
  // repeat_kv copies the keys and values to every head (none with one head per key-value
  // head); flash attention: philox seed and offset, output, log-sum-exp, a scratch buffer
  // (none in the op policy's recompute, which has them stored).
  if (repeats_ > 1) {
    DTSIM_RETURN_IF_ERROR(Alloc(l, kKeys, t * q_ * 2));
    DTSIM_RETURN_IF_ERROR(Alloc(l, kValues, t * q_ * 2));
  }
  if (mode != Mode::kOpRecompute && Ring()) {
    DTSIM_RETURN_IF_ERROR(RingOf(l).Forward());
  } else if (mode != Mode::kOpRecompute) {
    DTSIM_RETURN_IF_ERROR(Alloc(l, kSeed, kFlashPhiloxBytes));
    DTSIM_RETURN_IF_ERROR(Alloc(l, kOffset, kFlashPhiloxBytes));
    DTSIM_RETURN_IF_ERROR(Alloc(l, kAtt, t * q_ * 2));
    DTSIM_RETURN_IF_ERROR(Alloc(l, kLse, lse_));
    DTSIM_RETURN_IF_ERROR(Alloc(l, kScratch, kFlashScratchBytes));
    Free(l, kScratch);
  }
  if (mode == Mode::kCheckpoint) {
    for (const int tensor : {kLse, kSeed, kOffset}) Free(l, tensor);
  }
  // Ring attention's output is contiguous in (batch, head, token): transpose(1, 2).contiguous()
  // copies it for wo, which saves the copy (flash attention's own output needs no copy).
  if (Ring()) DTSIM_RETURN_IF_ERROR(Alloc(l, kAttContiguous, t * q_ * 2));
  DTSIM_RETURN_IF_ERROR(Linear(l, kWo, h_ * q_, -1, kO, h_, keep));
  if (Ring() && !keep) Free(l, kAttContiguous);
  // Attention.forward returns: its locals go, but what flash attention saved (or the op
  // policy stored).
  if (!keep) Free(l, kQr);
  if (repeats_ > 1 || !keep) {  // with one head per key-value head, flash attention saved them
    Free(l, kKr);
    if (!op_forward) Free(l, kV);
  }
  if (!keep && repeats_ > 1) {
    Free(l, kKeys);
    Free(l, kValues);
  }
  if (mode == Mode::kCheckpoint) Free(l, kAtt);
  if (!bf16_ || !keep) Free(l, kN1);                   // without autocast, wq, wk and wv saved it
  DTSIM_RETURN_IF_ERROR(Alloc(l, kH, t * h_ * act_));  // under autocast fp32 + bf16: fp32
  Free(l, kO);
  return Status::Ok();
}

Status Replay::Mlp(int l, Mode mode) {
  const bool keep = mode == Mode::kSave || mode == Mode::kRecompute || mode == Mode::kOpRecompute;
  const bool op_forward = mode == Mode::kOpForward;
  DTSIM_RETURN_IF_ERROR(Norm(l, kN2, kN2Rstd, keep));
  DTSIM_RETURN_IF_ERROR(Linear(l, kW1, f_ * h_, kIn1, kA, f_, keep, mode));
  DTSIM_RETURN_IF_ERROR(Alloc(l, kS, t_ * f_ * 2));
  if (!keep && !op_forward) Free(l, kA);
  DTSIM_RETURN_IF_ERROR(Linear(l, kW3, f_ * h_, kIn3, kB, f_, keep));
  DTSIM_RETURN_IF_ERROR(Alloc(l, kP, t_ * f_ * 2));
  if (!keep) {
    Free(l, kS);
    Free(l, kB);
  }
  if (mode == Mode::kRecompute || mode == Mode::kOpRecompute) {
    // The last tensor the backward needs is w2's weight cast (its output is not needed, or
    // stored); without autocast, its input S·b.
    if (!bf16_) {
      DTSIM_RETURN_IF_ERROR(Alloc(l, kW2, h_ * f_ * 2));
      Free(l, kN2);
    }
    return Status::Ok();
  }
  DTSIM_RETURN_IF_ERROR(Linear(l, kW2, h_ * f_, -1, kO2, h_, keep));
  if (!keep) Free(l, kP);
  if (!bf16_ || !keep) Free(l, kN2);
  DTSIM_RETURN_IF_ERROR(Alloc(l + 1, kX, t_ * h_ * act_));
  if (!op_forward) Free(l, kO2);
  if (!keep) Free(l, kH);
  return Status::Ok();
}

Status Replay::Forward() {
  if (fsdp_) DTSIM_RETURN_IF_ERROR(fsdp_->PreForward(Root()));
  DTSIM_RETURN_IF_ERROR(Alloc(0, kX, t_ * h_ * act_));  // the embedding (fp32 under autocast)
  for (int l = 0; l < spec_.layers; ++l) {
    if (fsdp_) DTSIM_RETURN_IF_ERROR(fsdp_->PreForward(l));
    DTSIM_RETURN_IF_ERROR(BlockForward(l, ForwardMode(l)));
    if (fsdp_) fsdp_->PostForward(l);
  }
  DTSIM_RETURN_IF_ERROR(Norm(kModel, kNf, kNfRstd, true));
  DTSIM_RETURN_IF_ERROR(Linear(kModel, kWout, v_ * h_, kInOut, kLogits, v_, true));
  if (fsdp_) {  // the output layer saved the final norm's output
    fsdp_->PostForward(Root());
    fsdp_->FinishForward();
  } else {
    Free(kModel, kNf);
  }
  // Leaving autocast empties its cast cache: the weight casts of checkpointed blocks go (their
  // recompute casts again); the others are saved by their backward.
  for (int l = 0; l < spec_.layers && !bf16_; ++l) {
    if (!Checkpointed(l)) continue;
    for (const int weight : {kWq, kWk, kWv, kWo, kW1, kW3, kW2}) Free(l, weight);
  }
  // cross_entropy(logits.float()): the fp32 copy, log_softmax's output (saved), nll_loss's
  // loss and total weight; then the copy and (del logits) the bf16 logits go.
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kLogits32, t_ * v_ * 4));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kLogSoftmax, t_ * v_ * 4));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kLoss, 4));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kTotalWeight, 4));
  Free(kModel, kLogits32);
  Free(kModel, kLogits);
  NoteForwardEnd();
  return Status::Ok();
}

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
  fsdp_->AddGradient(GroupOf(param), TakeBuffer(kModel, kGWeight));
  return Status::Ok();
}

Status Replay::NormBackward(int l, int grad_out, int rstd, int input_layer, int input, int param) {
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGNorm, t_ * h_ * act_));
  DTSIM_RETURN_IF_ERROR(ParamGrad(param, h_));
  Free(kModel, grad_out);
  Free(input_layer, input);
  Free(l, rstd);
  Free(kModel, kGNorm);  // added into the residual's gradient
  FinishAccumulation();
  return Status::Ok();
}

Status Replay::MlpBackward(int l) {
  const int64_t t = t_, h = h_, f = f_;
  // w2 (under autocast from the residual's gradient's bf16 cast, else from it); S·b (grads for
  // b, then for S); w3; silu; w1 (its input's gradient added into w3's: under autocast into the
  // fp32 cast of w3's, else summed into a new tensor).
  DTSIM_RETURN_IF_ERROR(
      LinearBackward(l, bf16_ ? -1 : kGO2, kGP, f, h, kW2, kP, -1, Param(l, kW2Weight)));
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
    DTSIM_RETURN_IF_ERROR(LinearBackward(l, kGA, kGIn, h, f, kW1, kN2, -1, Param(l, kW1Weight)));
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
  if (!bf16_) DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGO, t * h_ * 2));  // the residual's, cast
  DTSIM_RETURN_IF_ERROR(LinearBackward(l, bf16_ ? -1 : kGO, kGAtt, q_, h_, kWo,
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
    DTSIM_RETURN_IF_ERROR(LinearBackward(l, kGQ, kGIn, h_, q_, kWq, kN1, -1, Param(l, kWqWeight)));
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
  // out).
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
  return Status::Ok();
}

Status Replay::Backward() {
  const int64_t t = t_, h = h_, v = v_;
  const int layers = spec_.layers;
  // The loss: nll_loss's dense gradient, log_softmax's, the cast back to bf16.
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGLoss, 4));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGNll, t * v * 4));
  Free(kModel, kTotalWeight);
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGLsm, t * v * 4));
  Free(kModel, kGNll);
  Free(kModel, kLogSoftmax);
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGLogits, t * v * 2));
  Free(kModel, kGLsm);
  // FSDP2: the root's pre-backward (the logits' gradient made) unshards it and prefetches the
  // last block (which kept its parameters).
  if (fsdp_) DTSIM_RETURN_IF_ERROR(fsdp_->PreBackward(Root(), layers - 1));
  const int output = 1 + layers * kBlockParameters + 1;
  if (bf16_) {
    DTSIM_RETURN_IF_ERROR(LinearBackward(kModel, kGLogits, kGNf, h, v, kWout, kNf, -1, output));
  } else {
    DTSIM_RETURN_IF_ERROR(
        LinearBackward(kModel, kGLogits, kGIn, h, v, kWout, kInOut, kGNf, output));
  }
  // The final norm's backward starts the residual's gradient.
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGRes, t * h * act_));
  DTSIM_RETURN_IF_ERROR(ParamGrad(output - 1, h));
  Free(kModel, kGNf);
  Free(layers, kX);
  Free(kModel, kNfRstd);
  FinishAccumulation();
  for (int l = layers - 1; l >= 0; --l) {
    // FSDP2's pre-backward (the block's output's gradient made) unshards the block and
    // prefetches the one before. Under autocast, the residual's gradient cast to bf16 for w2's
    // output. A checkpointed block is recomputed as its first saved tensor is asked for.
    if (fsdp_) DTSIM_RETURN_IF_ERROR(fsdp_->PreBackward(l, l - 1));
    if (!bf16_) DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGO2, t * h * 2));
    if (Checkpointed(l)) {
      DTSIM_RETURN_IF_ERROR(BlockForward(l, OpPolicy() ? Mode::kOpRecompute : Mode::kRecompute));
    }
    DTSIM_RETURN_IF_ERROR(MlpBackward(l));
    DTSIM_RETURN_IF_ERROR(AttentionBackward(l));
    // w2's stored output, which no backward reads, goes with the checkpoint's frame.
    if (Checkpointed(l) && OpPolicy()) Free(l, kO2);
    if (fsdp_) DTSIM_RETURN_IF_ERROR(fsdp_->PostBackward(l));
  }
  DTSIM_RETURN_IF_ERROR(EmbeddingBackward());
  Free(kModel, kGRes);
  FinishAccumulation();  // the embedding's
  if (fsdp_) {           // the root's post-backward, from the final callback
    DTSIM_RETURN_IF_ERROR(fsdp_->PostBackward(Root()));
    fsdp_->FinishBackward();
  }
  Free(kModel, kGLoss);
  Free(kModel, kLoss);  // read by .item() after the optimizer's step: 4 B, freed here
  return Status::Ok();
}

}  // namespace llama
}  // namespace

bool IsLlamaStyle(const TransformerSpec& spec) {
  return spec.norm == Norm::kRmsNorm && spec.activation == Activation::kSwiGlu &&
         spec.position == PositionEmbedding::kRotary;
}

Expected<EagerPeaks> ReplayLlamaEager(const TransformerSpec& spec, const EagerRun& run) {
  DTSIM_RETURN_IF_ERROR(llama::CheckSupported(spec));
  llama::Replay replay(spec, run);
  return replay.Run();
}

}  // namespace dtsim::models
