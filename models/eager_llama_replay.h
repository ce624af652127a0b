// The replay of models/eager_llama.h, shared by eager_llama.cc (its setup and forward) and
// eager_llama_backward.cc (its backward): the tensors of a block by role, the parameters, how a
// block's forward runs, and the replay itself. Internal to those two files.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "models/eager_allocations.h"
#include "models/eager_fsdp.h"
#include "models/eager_ring_attention.h"
#include "models/eager_tensors.h"
#include "models/model_spec.h"
#include "models/pipeline_schedules.h"
#include "sim/base/status.h"

namespace dtsim::models::eager_llama {

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
  kLossStats,  // a compiled loss's row maxima and log-sum-exps, kept for its backward
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
  // tensor parallelism (DTensor): the attention's, MLP's and output layer's inputs gathered
  // whole, an all-gather's output before it is put in sequence order, a reduce-scatter's input
  // put in rank order, wo's and w2's outputs reduce-scattered onto the sequence, the embedding's
  // partial output; loss_parallel's shifted logits and exponentials (in backward: its sum of
  // the one-hot and the softmax); an output's gradient gathered whole, an input's
  // reduce-scattered
  kG1,
  kG2,
  kGf,
  kGatherOut,
  kScatterIn,
  kORs,
  kO2Rs,
  kEmbPartial,
  kShifted,
  kExp,
  kGGathered,
  kGScattered,
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

// A model chunk of the rank: its blocks (the rank's first … first + blocks − 1, each chunk's
// tensors apart by micro-batch), whether it holds the embedding (the model's first chunk) and
// the final norm, output layer and loss (its last). Without a pipeline, one chunk of them all.
struct Chunk {
  int first = 0;
  int blocks = 0;
  bool embedding = true;
  bool head = true;
};
// The chunks of the rank `run` describes (a checked pipeline: eager_llama.cc).
std::vector<Chunk> ChunksOf(const TransformerSpec& spec, const EagerRun& run);

// The op policy's stored outputs (gpt2_step.op_policy_contexts, counting the block's seven
// matmuls): wq's, wv's, w1's and w2's (the odd ones) and flash attention's.
inline bool OpStored(int tensor) {
  return tensor == kQ || tensor == kV || tensor == kA || tensor == kO2 || tensor == kAtt ||
         tensor == kLse || tensor == kSeed || tensor == kOffset;
}

class Replay : private EagerTensors {
 public:
  Replay(const TransformerSpec& spec, const EagerRun& run, std::vector<Chunk> chunks)
      : EagerTensors(
            run, kTensorKinds, chunks.back().first + chunks.back().blocks,
            run.pipeline.stages > 1 ? static_cast<int>(chunks.size()) * run.micro_batches : 1),
        spec_(spec),
        run_(run),
        chunks_(std::move(chunks)),
        blocks_(chunks_.back().first + chunks_.back().blocks),
        pipelined_(run.pipeline.stages > 1),
        tp_(run.tensor_ranks),
        h_(spec.hidden),
        q_(spec.q_dim() / tp_),
        kv_(spec.kv_dim() / tp_),
        f_(spec.ffn_hidden / tp_),
        v_((spec.PaddedVocab(1) + tp_ - 1) / tp_),
        seq_(run.seq_len / run.context_ranks),
        t_(run.micro_batch * seq_),
        ts_(t_ / tp_),
        lse_(run.micro_batch * (spec.heads / tp_) * seq_ * 4),
        repeats_(spec.heads / spec.kv_heads),
        bf16_(run.fsdp_ranks > 0),
        act_(bf16_ ? 2 : 4) {
    if (bf16_) {
      fsdp_ = std::make_unique<FsdpGroups>(static_cast<EagerTensors&>(*this), run.fsdp_ranks,
                                           FsdpGroupSpecs(), pipelined_);
    }
  }

  Expected<EagerPeaks> Run() {
    DTSIM_RETURN_IF_ERROR(Parameters());
    // Each chunk's rotation table (seq × head_dim/2 complex64); the token ids, inputs and
    // targets of the step's micro-batches (a pipeline's schedule splits them into views).
    for (size_t chunk = 0; chunk < chunks_.size(); ++chunk) {
      DTSIM_RETURN_IF_ERROR(Hold(run_.seq_len * spec_.head_dim() * 4));
    }
    const int64_t batch = run_.micro_batch * (pipelined_ ? run_.micro_batches : 1);
    DTSIM_RETURN_IF_ERROR(Hold(batch * (run_.seq_len + 1) * 8));
    for (int tensor = 0; tensor < 2; ++tensor) {
      DTSIM_RETURN_IF_ERROR(Hold(batch * run_.seq_len * 8));
    }
    if (pipelined_) return RunPipeline();
    return RunSteps(run_, [this]() -> Status {
      if (Ring()) DTSIM_RETURN_IF_ERROR(EnterContextParallel());
      DTSIM_RETURN_IF_ERROR(Forward(0));
      DTSIM_RETURN_IF_ERROR(Backward(0));
      if (Ring()) ExitContextParallel();
      return Status::Ok();
    });
  }

 private:
  // Under a pipeline (eager_llama.cc).
  Expected<EagerPeaks> RunPipeline();
  Status RunSchedule(const std::vector<PipelineStep>& schedule);
  // A chunk's end: the first block of the next one, or (the last chunk) the final norm's input.
  int End(int chunk) const {
    const Chunk& c = chunks_[static_cast<size_t>(chunk)];
    return c.first + c.blocks;
  }

  int Param(int layer, int which) const { return 1 + layer * kBlockParameters + which; }
  bool Ring() const { return run_.context_ranks > 1; }
  bool Tp() const { return tp_ > 1; }
  // DTensor's Shard(1) → Replicate (funcol.all_gather_tensor on the sequence dimension):
  // all_gather_into_tensor's output, rank-major, copied by torch.cat into sequence order as
  // tensor `to` of layer `l` (t × h, bf16); the first freed.
  Status GatherSequence(int l, int to) {
    DTSIM_RETURN_IF_ERROR(Alloc(kModel, kGatherOut, t_ * h_ * 2));
    DTSIM_RETURN_IF_ERROR(Alloc(l, to, t_ * h_ * 2));
    Free(kModel, kGatherOut);
    return Status::Ok();
  }
  // Partial → Shard(1) (funcol.reduce_scatter_tensor on the sequence dimension): the partial
  // sums (t × h, the caller's to free) copied by torch.cat into rank order, reduce-scattered
  // into tensor `to` of layer `l` (the rank's t/tp tokens); the copy freed.
  Status ReduceScatterSequence(int l, int to) {
    DTSIM_RETURN_IF_ERROR(Alloc(kModel, kScatterIn, t_ * h_ * 2));
    DTSIM_RETURN_IF_ERROR(Alloc(l, to, ts_ * h_ * 2));
    Free(kModel, kScatterIn);
    return Status::Ok();
  }
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
  // torchtitan's context_parallel(cp_mesh, buffers=[inputs, labels] + each chunk's freqs_cis,
  // no restore for the first two) around forward and backward (under a pipeline around the
  // schedule's step, over its micro-batches' inputs and labels): the tables cloned (restored at
  // the exit), each buffer's load-balanced shard made and cloned into it (resized in place: its
  // storage stays); the shards and the last clone live in the context manager's frame until
  // the exit.
  Status EnterContextParallel() {
    const int64_t head = spec_.head_dim();
    const int64_t batch = t_ * 8 * (pipelined_ ? run_.micro_batches : 1);
    const auto hold = [this](int64_t bytes) -> Status {
      DTSIM_ASSIGN_OR_RETURN(const CachingAllocator::Handle handle,
                             AllocBuffer(bytes, FsdpGroups::kCompute));
      context_parallel_.push_back(handle);
      return Status::Ok();
    };
    for (size_t chunk = 0; chunk < chunks_.size(); ++chunk) {
      DTSIM_RETURN_IF_ERROR(hold(run_.seq_len * head * 4));
    }
    DTSIM_RETURN_IF_ERROR(hold(batch));
    DTSIM_RETURN_IF_ERROR(hold(batch));
    for (size_t chunk = 0; chunk < chunks_.size(); ++chunk) {
      DTSIM_RETURN_IF_ERROR(hold(seq_ * head * 4));
    }
    std::vector<int64_t> clones = {batch, batch};
    clones.insert(clones.end(), chunks_.size(), seq_ * head * 4);
    for (size_t clone = 0; clone + 1 < clones.size(); ++clone) {
      DTSIM_ASSIGN_OR_RETURN(const CachingAllocator::Handle handle,
                             AllocBuffer(clones[clone], FsdpGroups::kCompute));
      FreeBuffer(handle);
    }
    return hold(clones.back());
  }
  void ExitContextParallel() {
    for (const CachingAllocator::Handle handle : context_parallel_) FreeBuffer(handle);
    context_parallel_.clear();
  }
  // Chunk `chunk`'s root FSDP parameter group (fully_shard over the chunk: its embedding, final
  // norm and output layer, where it has them).
  int Root(int chunk) const { return blocks_ + chunk; }

  // The parameters' shapes (dim 0, elements per row) in module order; under tensor parallelism
  // the rank's part (the embedding and the column-parallel weights split on dim 0, the
  // row-parallel ones on dim 1, the norms whole), which FSDP2 shards further on dim 0. Under a
  // pipeline the rank's blocks, and the embedding, final norm and output layer (else no rows)
  // where its chunks hold them.
  std::vector<FsdpParameter> Shapes() const {
    const int64_t h = h_;
    const bool embedding = chunks_.front().embedding;
    const bool head = chunks_.back().head;
    std::vector<FsdpParameter> shapes = {{embedding ? v_ : 0, h}};
    for (int layer = 0; layer < blocks_; ++layer) {
      for (const FsdpParameter shape : std::initializer_list<FsdpParameter>{
               {h, 1}, {q_, h}, {kv_, h}, {kv_, h}, {h, q_}, {h, 1}, {f_, h}, {h, f_}, {f_, h}}) {
        shapes.push_back(shape);
      }
    }
    shapes.push_back({head ? h : 0, 1});
    shapes.push_back({head ? v_ : 0, h});
    return shapes;
  }
  // FSDP2 as torchtitan applies it: each block a group (resharded after forward but the last;
  // under a pipeline none), then each chunk's root (the embedding, the final norm, the output
  // layer where it has them).
  std::vector<FsdpGroupSpec> FsdpGroupSpecs() const {
    const std::vector<FsdpParameter> shapes = Shapes();
    std::vector<FsdpGroupSpec> groups;
    for (int layer = 0; layer < blocks_; ++layer) {
      FsdpGroupSpec group{.reshard_after_forward =
                              !pipelined_ && run_.reshard_after_forward && layer + 1 < blocks_};
      for (int which = 0; which < kBlockParameters; ++which) {
        group.parameters.push_back(shapes[static_cast<size_t>(Param(layer, which))]);
      }
      groups.push_back(std::move(group));
    }
    for (const Chunk& chunk : chunks_) {
      FsdpGroupSpec root{.reshard_after_forward =
                             !pipelined_ && run_.reshard_after_forward && !run_.fsdp_root_kept};
      if (chunk.embedding) root.parameters.push_back(shapes.front());
      if (chunk.head) {
        root.parameters.push_back(shapes[shapes.size() - 2]);
        root.parameters.push_back(shapes.back());
      }
      groups.push_back(std::move(root));
    }
    return groups;
  }
  int OutputParam() const { return 1 + blocks_ * kBlockParameters + 1; }
  int GroupOf(int param) const {
    if (param == 0) return Root(0);
    if (param >= OutputParam() - 1) return Root(static_cast<int>(chunks_.size()) - 1);
    return (param - 1) / kBlockParameters;
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
    fsdp_->AddGradient(GroupOf(param), param, TakeBuffer(kModel, kGWeight), elements * 2);
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
  // An RMSNorm over the rank's tokens (under sequence parallelism its part of the sequence).
  Status Norm(int l, int out, int rstd, bool keep) {
    DTSIM_RETURN_IF_ERROR(Alloc(l, out, ts_ * h_ * act_));
    DTSIM_RETURN_IF_ERROR(Alloc(l, rstd, ts_ * 4));
    if (!keep) Free(l, rstd);
    return Status::Ok();
  }

  Status Attention(int l, Mode mode);
  Status Mlp(int l, Mode mode);
  Status BlockForward(int l, Mode mode) {
    DTSIM_RETURN_IF_ERROR(Attention(l, mode));
    return Mlp(l, mode);
  }
  // Chunk `chunk`'s forward of the current micro-batch: its input (the embedding's output, or
  // its receive buffer), its blocks, and in the last the loss.
  Status Forward(int chunk);
  Status CompiledLossForward();  // the loss under torch.compile (EagerRun::compiled_loss)
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
  // The loss's and output layer's backward and the final norm's (the residual's gradient
  // begun), in chunk `chunk`, the model's last; from the logits' gradient on, the latter two.
  Status HeadBackward(int chunk);
  Status OutputLayerBackward(int chunk);
  // Chunk `chunk`'s backward of the current micro-batch: from the loss, or from its output's
  // received gradient, through its blocks to the embedding or its input's gradient.
  Status Backward(int chunk);

  const TransformerSpec& spec_;
  const EagerRun& run_;
  const std::vector<Chunk> chunks_;
  const int blocks_;  // the rank's
  const bool pipelined_;
  // Under a pipeline: the micro-batch running; each chunk's receive buffer per micro-batch
  // (none for the model's first chunk); the received inputs' gradients (their buffers' .grad
  // until the next step's clear_runtime_states); the last stage's outputs (output_chunks,
  // merged at the step's end); the residual's gradient not begun (a chunk's backward starts from
  // its receive buffer: the first sum autograd makes is it).
  int64_t microbatch_ = 0;
  std::vector<std::vector<CachingAllocator::Handle>> received_;
  std::vector<CachingAllocator::Handle> input_grads_;
  std::vector<CachingAllocator::Handle> output_chunks_;
  // context_parallel()'s tables, shards and last clone (EnterContextParallel).
  std::vector<CachingAllocator::Handle> context_parallel_;
  bool residual_grad_pending_ = false;
  // tp_: tensor-parallel ranks; q_, kv_, f_, v_: the rank's part of the query, key-value, MLP
  // and vocabulary widths; seq_: the tokens of a sequence on this rank (all but under context
  // parallelism); t_: the micro-batch's tokens on this rank, ts_: its part of them under
  // sequence parallelism (the norms' and the residual stream's)
  const int64_t tp_, h_, q_, kv_, f_, v_, seq_, t_, ts_, lse_;
  const int repeats_;
  // FSDP2's loop: bf16 parameters gathered per group, bf16 activations (2 B; autocast's
  // residual stream and norms are fp32: 4 B).
  const bool bf16_;
  const int64_t act_;
  std::unique_ptr<FsdpGroups> fsdp_;
};

}  // namespace dtsim::models::eager_llama
