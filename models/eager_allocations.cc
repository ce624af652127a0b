#include "models/eager_allocations.h"

#include <fmt/format.h>

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "models/eager_llama.h"
#include "models/eager_tensors.h"
#include "sim/base/check.h"

namespace dtsim::models {
namespace {

// The tensors of one block (layer l) or of the model around the blocks (kModel), by role.
enum Tensor : int {
  // a block's forward: its input x, the norms' outputs and statistics, autocast's input,
  // weight (W) and bias (B) casts, the GEMMs' outputs, flash attention's output and
  // log-sum-exp, the residual stream between attention and MLP (Xm), GeLU's output
  kX,
  kLn1,
  kLn1Mean,
  kLn1Rstd,
  kQkvIn,
  kQkvW,
  kQkvB,
  kQkvOut,
  kAtt,
  kLse,
  kProjW,
  kProjB,
  kProjOut,
  kXm,
  kLn2,
  kLn2Mean,
  kLn2Rstd,
  kFc1In,
  kFc1W,
  kFc1B,
  kFc1Out,
  kGelu,
  kFc2W,
  kFc2B,
  kFc2Out,
  // around the blocks
  kPositions,
  kTok,
  kPos,
  kLnf,
  kLnfMean,
  kLnfRstd,
  kHeadIn,
  kHeadW,
  kLogits,
  kLogits32,
  kLogSoftmax,
  kLoss,
  kTotalWeight,
  // gradients in flight (G…) and flash attention's backward buffers
  kGLoss,
  kGWeight,  // a linear layer's weight and bias gradients in bf16, before their .grad
  kGBias,
  kGNll,
  kGLsm,
  kGLogits,
  kGHeadIn,
  kGHeadW,
  kGLnfOut,
  kGX,
  kGFc2Out,
  kGGelu,
  kGFc1Out,
  kGFc1In,
  kGLn2Out,
  kGLn2In,
  kGXm,
  kGProjOut,
  kGAtt,
  kDq,
  kDk,
  kDv,
  kSoftmaxD,
  kDqAccum,
  kGQkv,
  kGQkvIn,
  kGLn1Out,
  kGLn1In,
  kGPos,
  kGWte,
  kTensorKinds
};
constexpr int kModel = kEagerModel;

// Parameters in module order: the embedding, the positions, each block's twelve, the final
// norm's two. A block's, from its first index:
enum BlockParameter : int {
  kLn1Weight,
  kLn1Bias,
  kQkvWeight,
  kQkvBias,
  kProjWeight,
  kProjBias,
  kLn2Weight,
  kLn2Bias,
  kFc1Weight,
  kFc1Bias,
  kFc2Weight,
  kFc2Bias,
  kBlockParameters
};

// How a block's forward runs: saving what its backward needs (no checkpoint, or the
// recompute in backward), checkpointed (keeping nothing), under the op policy (keeping its
// must-save outputs), or the op policy's recompute (the rest).
enum class Mode { kSave, kCheckpoint, kOpForward, kRecompute, kOpRecompute };

Status Unsupported(std::string_view what) {
  return Error(
      fmt::format("the eager PyTorch loop dtsim replays through the caching allocator "
                  "takes a GPT-style decoder (LayerNorm, GeLU, biases, learned positions, "
                  "tied embeddings) or a Llama-style one (RMSNorm, SwiGLU, rotary "
                  "positions); this model has {}",
                  what));
}

Status CheckSupported(const TransformerSpec& spec) {
  if (spec.norm != Norm::kLayerNorm) return Unsupported("another norm");
  if (spec.activation != Activation::kGelu) return Unsupported("another activation");
  if (spec.position != PositionEmbedding::kLearned) return Unsupported("rotary positions");
  if (!spec.linear_bias) return Unsupported("no biases");
  if (spec.kv_heads != spec.heads) return Unsupported("grouped-query attention");
  if (const std::string_view what = UnreplayedFeature(spec); !what.empty()) {
    return Unsupported(what);
  }
  if (!spec.tied_embeddings) return Unsupported("an untied output layer");
  return Status::Ok();
}

class Replay : private EagerTensors {
 public:
  Replay(const TransformerSpec& spec, const EagerRun& run)
      : EagerTensors(spec, run, kTensorKinds),
        spec_(spec),
        run_(run),
        h_(spec.hidden),
        f_(spec.ffn_hidden),
        v_(spec.PaddedVocab(1)),
        t_(run.micro_batch * run.seq_len),
        lse_(run.micro_batch * spec.heads * run.seq_len * 4) {}

  Expected<EagerPeaks> Run() {
    DTSIM_RETURN_IF_ERROR(Parameters());
    // the batch's token ids and targets (int64)
    for (int tensor = 0; tensor < 2; ++tensor) DTSIM_RETURN_IF_ERROR(Hold(t_ * 8));
    return RunSteps(run_, [this]() -> Status {
      DTSIM_RETURN_IF_ERROR(Forward());
      return Backward();
    });
  }

 private:
  int BlockParameterIndex(int layer, int which) const {
    return 2 + layer * kBlockParameters + which;
  }

  Status Parameters() {
    const int64_t h = h_;
    std::vector<int64_t> bytes = {v_ * h * 4, spec_.max_seq * h * 4};
    for (int layer = 0; layer < spec_.layers; ++layer) {
      for (const int64_t elements :
           {h, h, 3 * h * h, 3 * h, h * h, h, h, h, f_ * h, f_, h * f_, h}) {
        bytes.push_back(elements * 4);
      }
    }
    bytes.push_back(h * 4);
    bytes.push_back(h * 4);
    return HoldParameters(std::move(bytes));
  }

  bool Checkpointed(int layer) const {
    return run_.recompute != Recompute::kNone && RecomputesLayer(run_.recompute_every, layer);
  }

  // A linear layer under autocast: its input cast to bf16 (from an fp32 tensor `from`, freed
  // once cast), its weight and bias casts, its output.
  Status Linear(int layer, int from, int in, int weight, int bias, int64_t in_features,
                int64_t out_features) {
    if (from >= 0) {
      DTSIM_RETURN_IF_ERROR(Alloc(layer, in, t_ * in_features * 2));
      Free(layer, from);
    }
    DTSIM_RETURN_IF_ERROR(Alloc(layer, weight, in_features * out_features * 2));
    if (bias >= 0) DTSIM_RETURN_IF_ERROR(Alloc(layer, bias, out_features * 2));
    return Status::Ok();
  }

  Status Norm(int layer, int out, int mean, int rstd, bool keep) {
    DTSIM_RETURN_IF_ERROR(Alloc(layer, out, t_ * h_ * 4));  // fp32 under autocast
    DTSIM_RETURN_IF_ERROR(Alloc(layer, mean, t_ * 4));
    DTSIM_RETURN_IF_ERROR(Alloc(layer, rstd, t_ * 4));
    if (!keep) {
      Free(layer, mean);
      Free(layer, rstd);
    }
    return Status::Ok();
  }

  Status BlockForward(int l, Mode mode);
  Status BlockBackward(int l);
  // A linear layer's backward under autocast: its input's gradient `grad_in` (of `in_bytes`)
  // and its weight's and bias's in bf16; then the output's gradient `grad_out`, the tensors
  // the layer saved (`saved`, of block l) and its weight cast freed; the weight's and bias's
  // gradients cast to their fp32 .grad (parameters `weight` and `weight` + 1).
  Status LinearBackward(int l, int grad_out, int grad_in, int64_t in_bytes, int64_t in_features,
                        int64_t out_features, std::initializer_list<int> saved, int weight_cast,
                        int weight);
  // A layer norm's backward: the input's gradient `grad_in` (fp32) and the weight's and bias's
  // .grad (parameters `weight` and `weight` + 1); then the output's gradient `grad_out`, the
  // statistics (`mean`, `rstd` of block l) and the saved input (`input` of block input_layer)
  // freed.
  Status NormBackward(int l, int grad_out, int grad_in, int mean, int rstd, int input_layer,
                      int input, int weight);
  Status Forward();
  Status Backward();

  const TransformerSpec& spec_;
  const EagerRun& run_;
  const int64_t h_, f_, v_, t_, lse_;
};

Status Replay::BlockForward(int l, Mode mode) {
  const bool keep = mode == Mode::kSave || mode == Mode::kRecompute || mode == Mode::kOpRecompute;
  const bool recomputing = mode == Mode::kRecompute || mode == Mode::kOpRecompute;
  // The op policy's must-save outputs: the attention kernel's, the first and third matmul's.
  const auto op_saved = [](int t) {
    return t == kQkvOut || t == kAtt || t == kLse || t == kFc1Out;
  };
  const auto kept = [&](int t) { return keep || (mode == Mode::kOpForward && op_saved(t)); };
  const auto have = [&](int t) { return mode == Mode::kOpRecompute && op_saved(t); };
  const auto drop = [&](int t) {
    if (!kept(t)) Free(l, t);
  };
  DTSIM_RETURN_IF_ERROR(Norm(l, kLn1, kLn1Mean, kLn1Rstd, keep));
  DTSIM_RETURN_IF_ERROR(Linear(l, kLn1, kQkvIn, kQkvW, kQkvB, h_, 3 * h_));
  if (!have(kQkvOut)) DTSIM_RETURN_IF_ERROR(Alloc(l, kQkvOut, t_ * 3 * h_ * 2));
  drop(kQkvIn);
  if (!have(kAtt)) {
    DTSIM_RETURN_IF_ERROR(Alloc(l, kAtt, t_ * h_ * 2));
    DTSIM_RETURN_IF_ERROR(Alloc(l, kLse, lse_));
  }
  drop(kQkvOut);
  drop(kLse);
  DTSIM_RETURN_IF_ERROR(Linear(l, -1, -1, kProjW, kProjB, h_, h_));
  DTSIM_RETURN_IF_ERROR(Alloc(l, kProjOut, t_ * h_ * 2));
  drop(kAtt);
  DTSIM_RETURN_IF_ERROR(Alloc(l, kXm, t_ * h_ * 4));  // fp32 + bf16 promotes to fp32
  Free(l, kProjOut);
  DTSIM_RETURN_IF_ERROR(Norm(l, kLn2, kLn2Mean, kLn2Rstd, keep));
  DTSIM_RETURN_IF_ERROR(Linear(l, kLn2, kFc1In, kFc1W, kFc1B, h_, f_));
  if (!have(kFc1Out)) DTSIM_RETURN_IF_ERROR(Alloc(l, kFc1Out, t_ * f_ * 2));
  drop(kFc1In);
  DTSIM_RETURN_IF_ERROR(Alloc(l, kGelu, t_ * f_ * 2));
  drop(kFc1Out);
  DTSIM_RETURN_IF_ERROR(Linear(l, -1, -1, kFc2W, kFc2B, f_, h_));
  DTSIM_RETURN_IF_ERROR(Alloc(l, kFc2Out, t_ * h_ * 2));
  if (!keep) Free(l, kGelu);
  if (recomputing) {
    Free(l, kFc2Out);  // the recompute stops once the last saved tensor is back
    return Status::Ok();
  }
  if (mode != Mode::kSave) Free(l, kXm);
  DTSIM_RETURN_IF_ERROR(Alloc(l + 1, kX, t_ * h_ * 4));
  Free(l, kFc2Out);
  return Status::Ok();
}

Status Replay::Forward() {
  const int layers = spec_.layers;
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kPositions, run_.seq_len * 8));  // torch.arange
  // Token and position embeddings (fp32: autocast leaves embedding lookups alone), summed.
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kTok, t_ * h_ * 4));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kPos, run_.seq_len * h_ * 4));
  DTSIM_RETURN_IF_ERROR(Alloc(0, kX, t_ * h_ * 4));
  Free(kModel, kTok);
  Free(kModel, kPos);
  for (int l = 0; l < layers; ++l) {
    Mode mode = Mode::kSave;
    if (Checkpointed(l)) {
      mode = run_.recompute == Recompute::kSelectiveOp ? Mode::kOpForward : Mode::kCheckpoint;
    }
    DTSIM_RETURN_IF_ERROR(BlockForward(l, mode));
  }
  DTSIM_RETURN_IF_ERROR(Norm(kModel, kLnf, kLnfMean, kLnfRstd, true));
  DTSIM_RETURN_IF_ERROR(Linear(kModel, kLnf, kHeadIn, kHeadW, -1, h_, v_));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kLogits, t_ * v_ * 2));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kLogits32, t_ * v_ * 4));  // logits.float()
  Free(kModel, kLogits);
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kLogSoftmax, t_ * v_ * 4));  // saved for backward
  Free(kModel, kLogits32);
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kLoss, 4));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kTotalWeight, 4));
  // Leaving autocast empties its cast cache: bias casts (no backward saves them) go, and the
  // weight casts of checkpointed blocks, which their recompute casts again.
  for (int l = 0; l < layers; ++l) {
    for (const int bias : {kQkvB, kProjB, kFc1B, kFc2B}) Free(l, bias);
    if (!Checkpointed(l)) continue;
    for (const int weight : {kQkvW, kProjW, kFc1W, kFc2W}) Free(l, weight);
  }
  NoteForwardEnd();
  return Status::Ok();
}

Status Replay::LinearBackward(int l, int grad_out, int grad_in, int64_t in_bytes,
                              int64_t in_features, int64_t out_features,
                              std::initializer_list<int> saved, int weight_cast, int weight) {
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, grad_in, in_bytes));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGWeight, in_features * out_features * 2));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGBias, out_features * 2));
  Free(kModel, grad_out);
  for (const int tensor : saved) Free(l, tensor);
  Free(l, weight_cast);
  DTSIM_RETURN_IF_ERROR(Grad(weight, kGWeight));
  return Grad(weight + 1, kGBias);
}

Status Replay::NormBackward(int l, int grad_out, int grad_in, int mean, int rstd, int input_layer,
                            int input, int weight) {
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, grad_in, t_ * h_ * 4));
  DTSIM_RETURN_IF_ERROR(NewGrad(weight));
  DTSIM_RETURN_IF_ERROR(NewGrad(weight + 1));
  Free(kModel, grad_out);
  Free(l, mean);
  Free(l, rstd);
  Free(input_layer, input);
  FinishAccumulation();
  return Status::Ok();
}

Status Replay::BlockBackward(int l) {
  const int64_t t = t_, h = h_, f = f_;
  const auto p = [&](int which) { return BlockParameterIndex(l, which); };
  if (Checkpointed(l)) {
    DTSIM_RETURN_IF_ERROR(BlockForward(
        l, run_.recompute == Recompute::kSelectiveOp ? Mode::kOpRecompute : Mode::kRecompute));
    for (const int bias : {kQkvB, kProjB, kFc1B, kFc2B}) Free(l, bias);
  }
  // The MLP: the residual's gradient cast to bf16 for fc2, then fc2, GeLU, fc1, the norm.
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGFc2Out, t * h * 2));
  DTSIM_RETURN_IF_ERROR(
      LinearBackward(l, kGFc2Out, kGGelu, t * f * 2, f, h, {}, kFc2W, p(kFc2Weight)));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGFc1Out, t * f * 2));
  Free(kModel, kGGelu);
  Free(l, kGelu);
  DTSIM_RETURN_IF_ERROR(LinearBackward(l, kGFc1Out, kGFc1In, t * h * 2, h, f, {kFc1Out, kFc1In},
                                       kFc1W, p(kFc1Weight)));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGLn2Out, t * h * 4));
  Free(kModel, kGFc1In);
  DTSIM_RETURN_IF_ERROR(
      NormBackward(l, kGLn2Out, kGLn2In, kLn2Mean, kLn2Rstd, l, kXm, p(kLn2Weight)));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGXm, t * h * 4));  // the two paths' gradients summed
  Free(kModel, kGX);
  Free(kModel, kGLn2In);
  // Attention: the projection, flash attention's backward (dq, dk, dv and its fp32 buffers),
  // the q, k, v gradients joined for the fused projection, the norm.
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGProjOut, t * h * 2));
  DTSIM_RETURN_IF_ERROR(
      LinearBackward(l, kGProjOut, kGAtt, t * h * 2, h, h, {}, kProjW, p(kProjWeight)));
  for (const int grad : {kDq, kDk, kDv}) DTSIM_RETURN_IF_ERROR(Alloc(kModel, grad, t * h * 2));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kSoftmaxD, lse_));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kDqAccum, t * h * 4));
  Free(kModel, kDqAccum);
  Free(kModel, kSoftmaxD);
  Free(kModel, kGAtt);
  Free(l, kAtt);
  Free(l, kLse);
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGQkv, t * 3 * h * 2));
  for (const int grad : {kDq, kDk, kDv}) Free(kModel, grad);
  Free(l, kQkvOut);
  DTSIM_RETURN_IF_ERROR(
      LinearBackward(l, kGQkv, kGQkvIn, t * h * 2, h, 3 * h, {kQkvIn}, kQkvW, p(kQkvWeight)));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGLn1Out, t * h * 4));
  Free(kModel, kGQkvIn);
  DTSIM_RETURN_IF_ERROR(
      NormBackward(l, kGLn1Out, kGLn1In, kLn1Mean, kLn1Rstd, l, kX, p(kLn1Weight)));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGX, t * h * 4));
  Free(kModel, kGXm);
  Free(kModel, kGLn1In);
  return Status::Ok();
}

Status Replay::Backward() {
  const int64_t t = t_, h = h_, v = v_;
  // The loss: nll_loss's dense gradient, log_softmax's, the cast back to bf16.
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGLoss, 4));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGNll, t * v * 4));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGLsm, t * v * 4));
  Free(kModel, kGNll);
  Free(kModel, kLogSoftmax);
  Free(kModel, kGLoss);
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGLogits, t * v * 2));
  Free(kModel, kGLsm);
  // The output layer (the embedding's weight): the input's and the weight's gradients.
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGHeadIn, t * h * 2));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGHeadW, v * h * 2));
  Free(kModel, kGLogits);
  Free(kModel, kHeadIn);
  Free(kModel, kHeadW);
  DTSIM_RETURN_IF_ERROR(Grad(0, kGHeadW));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGLnfOut, t * h * 4));
  Free(kModel, kGHeadIn);
  DTSIM_RETURN_IF_ERROR(NormBackward(kModel, kGLnfOut, kGX, kLnfMean, kLnfRstd, spec_.layers, kX,
                                     BlockParameterIndex(spec_.layers, 0)));
  for (int l = spec_.layers - 1; l >= 0; --l) DTSIM_RETURN_IF_ERROR(BlockBackward(l));
  // The embeddings: the positions' gradient summed over the batch; the tokens' dense gradient
  // added into the output layer's (tied), the positions' table gradient.
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGPos, run_.seq_len * h * 4));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGWte, v * h * 4));
  Free(kModel, kGWte);
  Free(kModel, kGX);
  DTSIM_RETURN_IF_ERROR(NewGrad(1));
  Free(kModel, kGPos);
  FinishAccumulation();
  Free(kModel, kPositions);
  Free(kModel, kLoss);
  Free(kModel, kTotalWeight);
  return Status::Ok();
}

}  // namespace

Expected<EagerPeaks> ReplayEagerTraining(const TransformerSpec& spec, const EagerRun& run) {
  if (run.micro_batch < 1 || run.seq_len < 1 || run.recompute_every < 1 || run.steps < 1 ||
      run.warmup_steps < 1 || run.micro_batches < 1) {
    return Error(
        "micro-batch, sequence, recompute_every, micro-batches, steps and warm-up steps must "
        "be positive");
  }
  if (spec.layers > kMaxEagerReplayLayers) {
    return Error(fmt::format("more than {} layers: the replay's cost grows with them and no "
                             "model trained on one GPU has as many",
                             kMaxEagerReplayLayers),
                 "layers", std::to_string(spec.layers));
  }
  if (run.recompute == Recompute::kSelective) {
    return Error(
        "Megatron's selective recompute is not a PyTorch checkpoint policy: use full "
        "or selective_op");
  }
  if (run.fsdp_ranks < 0) {
    return Error("FSDP ranks must be positive (0: no FSDP)", "fsdp_ranks",
                 std::to_string(run.fsdp_ranks));
  }
  if (run.fsdp_ranks > 0 && run.ddp) return Error("a loop runs under FSDP2 or DDP, not both");
  if (run.context_ranks < 1) {
    return Error("context-parallel ranks must be positive (1: none)", "context_ranks",
                 std::to_string(run.context_ranks));
  }
  if (run.context_ranks > 1) {
    // torchtitan shards FSDP2 over the data × context ranks, and load balancing cuts every
    // sequence into 2 × context_ranks chunks.
    if (run.fsdp_ranks == 0 || run.fsdp_ranks % run.context_ranks != 0) {
      return Error(fmt::format("context parallelism is replayed under FSDP2 over a multiple of "
                               "its {} ranks (FSDP ranks: {})",
                               run.context_ranks, run.fsdp_ranks),
                   "context_ranks", std::to_string(run.context_ranks));
    }
    if (int64_t{spec.layers} * run.context_ranks > kMaxEagerReplayRingSteps) {
      return Error(fmt::format("{} layers × {} context-parallel ranks is more ring attention "
                               "steps than the replay takes ({})",
                               spec.layers, run.context_ranks, kMaxEagerReplayRingSteps),
                   "context_ranks", std::to_string(run.context_ranks));
    }
    if (run.seq_len % (2 * int64_t{run.context_ranks}) != 0) {
      return Error(fmt::format("ring attention's load balancing cuts a sequence into 2 × {} "
                               "equal chunks; {} tokens do not divide",
                               run.context_ranks, run.seq_len),
                   "seq_len", std::to_string(run.seq_len));
    }
  }
  if (run.tensor_ranks < 1) {
    return Error("tensor-parallel ranks must be positive (1: none)", "tensor_ranks",
                 std::to_string(run.tensor_ranks));
  }
  if (run.tensor_ranks > 1 && run.fsdp_ranks == 0) {
    return Error("tensor parallelism is replayed under FSDP2, as torchtitan's 2D layout runs it",
                 "tensor_ranks", std::to_string(run.tensor_ranks));
  }
  if (run.pipeline.stages != 1 && run.fsdp_ranks == 0) {
    return Error("pipelining is replayed under FSDP2, as torchtitan runs it", "pipeline",
                 std::to_string(run.pipeline.stages));
  }
  if (IsLlamaStyle(spec)) return ReplayLlamaEager(spec, run);
  if (run.fsdp_ranks > 0) {
    return Error(
        "dtsim replays FSDP2 around a Llama-style decoder (RMSNorm, SwiGLU, rotary positions) "
        "only");
  }
  DTSIM_RETURN_IF_ERROR(CheckSupported(spec));
  Replay replay(spec, run);
  return replay.Run();
}

}  // namespace dtsim::models
