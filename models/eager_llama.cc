#include "models/eager_llama.h"

#include <fmt/format.h>

#include <string>
#include <utility>

#include "models/eager_llama_replay.h"

namespace dtsim::models {
namespace eager_llama {
namespace {

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

// torchtitan's tensor parallelism splits the heads, the key-value heads and the MLP's width
// over the ranks, and (sequence parallelism) the rank's part of the sequence (all of it but
// under context parallelism).
Status CheckTensorParallel(const TransformerSpec& spec, const EagerRun& run) {
  const int64_t ranks = run.tensor_ranks;  // positive: ReplayEagerTraining checked the run
  const int64_t tokens = run.seq_len / run.context_ranks;
  for (const auto& [what, count] : {std::pair<std::string_view, int64_t>{"heads", spec.heads},
                                    {"kv_heads", spec.kv_heads},
                                    {"ffn_hidden", spec.ffn_hidden},
                                    {"seq_len", tokens}}) {
    if (count % ranks != 0) {
      return Error(
          fmt::format("{} tensor-parallel ranks do not divide the {} {}", ranks, count, what),
          std::string(what), std::to_string(count));
    }
  }
  if (run.compiled_loss && ranks > 1) {
    return Error(
        "a compiled loss is replayed without tensor parallelism (whose loss_parallel "
        "dtsim replays eager)",
        "tensor_ranks", std::to_string(ranks));
  }
  return Status::Ok();
}

// torch.distributed.pipelining as torchtitan runs it: FSDP2 over each model chunk; every model
// chunk a block at least, the chunks' blocks the model's; an interleaved schedule's
// micro-batches a multiple of the stages; the rank's tensor slots within
// kMaxEagerReplayPipelineSlots, and its ring attention steps within kMaxEagerReplayRingSteps.
Status CheckPipeline(const TransformerSpec& spec, const EagerRun& run) {
  const EagerPipeline& pipeline = run.pipeline;
  if (pipeline.stages < 1 || pipeline.chunks < 1 || pipeline.rank < 0 ||
      pipeline.rank >= pipeline.stages) {
    return Error(fmt::format("a pipeline of {} stages of {} chunks has no rank {}", pipeline.stages,
                             pipeline.chunks, pipeline.rank),
                 "pipeline", std::to_string(pipeline.rank));
  }
  if (pipeline.stages == 1) return Status::Ok();
  if (run.fsdp_ranks == 0) {
    return Error("pipelining is replayed under FSDP2, as torchtitan runs it", "pipeline",
                 std::to_string(pipeline.stages));
  }
  const size_t chunks = static_cast<size_t>(pipeline.stages) * static_cast<size_t>(pipeline.chunks);
  int layers = 0;
  for (const int count : pipeline.chunk_layers) {
    if (count < 1) {
      return Error("every model chunk of a replayed pipeline holds a block",
                   "pipeline.chunk_layers", std::to_string(count));
    }
    layers += count;
  }
  if (pipeline.chunk_layers.size() != chunks || layers != spec.layers) {
    return Error(fmt::format("{} chunk layer counts summing to {}, for {} chunks of the model's "
                             "{} layers",
                             pipeline.chunk_layers.size(), layers, chunks, spec.layers),
                 "pipeline.chunk_layers", std::to_string(layers));
  }
  if (pipeline.chunks > 1 && run.micro_batches % pipeline.stages != 0) {
    return Error(fmt::format("an interleaved schedule runs micro-batches in multiples of its {} "
                             "stages",
                             pipeline.stages),
                 "micro_batches", std::to_string(run.micro_batches));
  }
  const std::vector<Chunk> rank_chunks = ChunksOf(spec, run);  // chunk_layers checked above
  const int blocks = rank_chunks.back().first + rank_chunks.back().blocks;
  const int64_t slots = int64_t{pipeline.chunks} * run.micro_batches * (blocks + 2);
  if (slots > kMaxEagerReplayPipelineSlots) {
    return Error(
        fmt::format("{} chunks × {} micro-batches × ({} blocks + 2) is more than the "
                    "replay keeps apart ({})",
                    pipeline.chunks, run.micro_batches, blocks, kMaxEagerReplayPipelineSlots),
        "micro_batches", std::to_string(run.micro_batches));
  }
  if (const int64_t steps = slots * run.context_ranks;
      run.context_ranks > 1 && steps > kMaxEagerReplayRingSteps) {
    return Error(fmt::format("{} tensor slots × {} context-parallel ranks is more ring attention "
                             "steps than the replay takes ({})",
                             slots, run.context_ranks, kMaxEagerReplayRingSteps),
                 "context_ranks", std::to_string(run.context_ranks));
  }
  return Status::Ok();
}

}  // namespace

std::vector<Chunk> ChunksOf(const TransformerSpec& spec, const EagerRun& run) {
  const EagerPipeline& pipeline = run.pipeline;
  if (pipeline.stages <= 1) return {Chunk{.blocks = spec.layers}};
  std::vector<Chunk> chunks;
  int first = 0;
  for (int chunk = 0; chunk < pipeline.chunks; ++chunk) {
    // Its place in the model (CheckPipeline: within chunk_layers).
    const size_t index = static_cast<size_t>(chunk) * static_cast<size_t>(pipeline.stages) +
                         static_cast<size_t>(pipeline.rank);
    const int blocks = pipeline.chunk_layers[index];
    chunks.push_back({.first = first,
                      .blocks = blocks,
                      .embedding = index == 0,
                      .head = index + 1 == pipeline.chunk_layers.size()});
    first += blocks;
  }
  return chunks;
}

Status Replay::Attention(int l, Mode mode) {
  const bool keep = mode == Mode::kSave || mode == Mode::kRecompute || mode == Mode::kOpRecompute;
  const bool op_forward = mode == Mode::kOpForward;
  const int64_t t = t_;
  DTSIM_RETURN_IF_ERROR(Norm(l, kN1, kN1Rstd, keep));
  // Under tensor parallelism the attention's input is gathered whole (PrepareModuleInput to
  // Replicate), and wq, wk and wv save that; the norm's sequence shard lives on in the caller's
  // frame until the attention returns.
  if (Tp()) DTSIM_RETURN_IF_ERROR(GatherSequence(l, kG1));
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
  if (!bf16_ || !keep || Tp()) Free(l, kN1);  // without autocast, wq, wk and wv saved it
  if (Tp() && !keep) Free(l, kG1);
  // wo's partial sums reduce-scattered onto the sequence (RowwiseParallel's Shard(1) output),
  // then the residual add (under autocast fp32 + bf16: fp32). torchtitan's op policy stores
  // the reduce-scatter's output (_c10d_functional.reduce_scatter_tensor is on its save list):
  // its recompute copies the partial sums into rank order and takes the output from the store.
  const bool stores_scatter = mode == Mode::kOpForward || mode == Mode::kOpRecompute;
  if (Tp() && mode == Mode::kOpRecompute) {
    DTSIM_RETURN_IF_ERROR(Alloc(kModel, kScatterIn, t_ * h_ * 2));
    Free(kModel, kScatterIn);
  } else if (Tp()) {
    DTSIM_RETURN_IF_ERROR(ReduceScatterSequence(l, kORs));
  }
  if (Tp()) Free(l, kO);
  DTSIM_RETURN_IF_ERROR(Alloc(l, kH, ts_ * h_ * act_));
  if (!Tp()) Free(l, kO);
  if (Tp() && !stores_scatter) Free(l, kORs);
  return Status::Ok();
}

Status Replay::Mlp(int l, Mode mode) {
  const bool keep = mode == Mode::kSave || mode == Mode::kRecompute || mode == Mode::kOpRecompute;
  const bool op_forward = mode == Mode::kOpForward;
  DTSIM_RETURN_IF_ERROR(Norm(l, kN2, kN2Rstd, keep));
  if (Tp()) DTSIM_RETURN_IF_ERROR(GatherSequence(l, kG2));  // saved by w1 and w3
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
    if (Tp()) Free(l, kN2);  // the early stop unwinds the frame that held it
    return Status::Ok();
  }
  DTSIM_RETURN_IF_ERROR(Linear(l, kW2, h_ * f_, -1, kO2, h_, keep));
  if (!keep) Free(l, kP);
  if (!bf16_ || !keep || Tp()) Free(l, kN2);
  if (Tp() && !keep) Free(l, kG2);
  // w2's partial sums (which the op policy stores) reduce-scattered onto the sequence, then the
  // residual add: the block's output.
  // Compiled, the partitioner saves neither (no backward reads them).
  const bool stores_output = op_forward && !run_.compiled_blocks;
  if (Tp()) {  // the op policy stores the scatter's output, as wo's
    DTSIM_RETURN_IF_ERROR(ReduceScatterSequence(l, kO2Rs));
    if (!stores_output) Free(l, kO2);
    DTSIM_RETURN_IF_ERROR(Alloc(l + 1, kX, ts_ * h_ * act_));
    if (!stores_output) Free(l, kO2Rs);
  } else {
    DTSIM_RETURN_IF_ERROR(Alloc(l + 1, kX, t_ * h_ * act_));
    if (!stores_output) Free(l, kO2);
  }
  if (!keep) Free(l, kH);
  return Status::Ok();
}

Status Replay::Forward(int chunk) {
  const Chunk& c = chunks_[static_cast<size_t>(chunk)];
  const int end = End(chunk);
  if (fsdp_) DTSIM_RETURN_IF_ERROR(fsdp_->PreForward(Root(chunk)));
  if (!c.embedding) {
    // The stage's input: its receive buffer for the micro-batch (which the first block saves).
    View(c.first, kX, received_[static_cast<size_t>(chunk)][static_cast<size_t>(microbatch_)]);
  } else if (Tp()) {
    // The embedding rowwise over the vocabulary: each rank looks up every token (those outside
    // its rows masked to zero), and the partial sums are reduce-scattered onto the sequence.
    // The masks and masked indices (a byte and 8 B a token) are left out.
    DTSIM_RETURN_IF_ERROR(Alloc(kModel, kEmbPartial, t_ * h_ * 2));
    DTSIM_RETURN_IF_ERROR(ReduceScatterSequence(0, kX));
    Free(kModel, kEmbPartial);
  } else {
    DTSIM_RETURN_IF_ERROR(Alloc(0, kX, t_ * h_ * act_));  // the embedding (fp32 under autocast)
  }
  for (int l = c.first; l < end; ++l) {
    if (fsdp_) DTSIM_RETURN_IF_ERROR(fsdp_->PreForward(l));
    DTSIM_RETURN_IF_ERROR(BlockForward(l, ForwardMode(l)));
    if (fsdp_) fsdp_->PostForward(l);
  }
  if (!c.head) {  // the stage's output (x of `end`), which the schedule keeps until its backward
    if (fsdp_) {
      fsdp_->PostForward(Root(chunk));
      fsdp_->FinishForward();
    }
    return Status::Ok();
  }
  DTSIM_RETURN_IF_ERROR(Norm(kModel, kNf, kNfRstd, true));
  // Under tensor parallelism the output layer's input gathered whole (ColwiseParallel from
  // Shard(1)), which it saves; its logits are the rank's part of the vocabulary.
  if (Tp()) DTSIM_RETURN_IF_ERROR(GatherSequence(kModel, kGf));
  DTSIM_RETURN_IF_ERROR(Linear(kModel, kWout, v_ * h_, kInOut, kLogits, v_, true));
  if (fsdp_) {  // the output layer saved the final norm's output (or its gathered copy)
    fsdp_->PostForward(Root(chunk));
    fsdp_->FinishForward();
  }
  if (!fsdp_ || Tp()) Free(kModel, kNf);
  // Leaving autocast empties its cast cache: the weight casts of checkpointed blocks go (their
  // recompute casts again); the others are saved by their backward.
  for (int l = 0; l < end && !bf16_; ++l) {
    if (!Checkpointed(l)) continue;
    for (const int weight : {kWq, kWk, kWv, kWo, kW1, kW3, kW2}) Free(l, weight);
  }
  if (run_.compiled_loss) return CompiledLossForward();
  // cross_entropy(logits.float()): the fp32 copy, log_softmax's output (saved), nll_loss's
  // loss and total weight; then the copy and (del logits) the bf16 logits go.
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kLogits32, t_ * v_ * 4));
  if (Tp()) {
    // loss_parallel's log_softmax over the vocabulary's shards (torch/distributed/tensor/
    // parallel/loss.py, _log_softmax): x − max, exp of it (summed, all-reduced, freed), then
    // x − max − log(sum) saved; the first freed as it returns (the per-token maxima and sums,
    // 4 B a token, left out).
    DTSIM_RETURN_IF_ERROR(Alloc(kModel, kShifted, t_ * v_ * 4));
    DTSIM_RETURN_IF_ERROR(Alloc(kModel, kExp, t_ * v_ * 4));
    Free(kModel, kExp);
  }
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kLogSoftmax, t_ * v_ * 4));
  if (Tp()) Free(kModel, kShifted);
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kLoss, 4));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kTotalWeight, 4));
  Free(kModel, kLogits32);
  if (pipelined_) return Status::Ok();  // the stage's output: the schedule keeps it
  Free(kModel, kLogits);
  NoteForwardEnd();
  return Status::Ok();
}

// The loss compiled (torch.compile of cross_entropy(logits.float())): AOTAutograd's
// partitioner keeps for the backward the graph's input (the bf16 logits, which del logits then
// leaves alive) and the reductions it will not recompute, each row's maximum and log-sum-exp
// (fp32, a value each a token); the log-softmax itself is recomputed in the backward's one
// fused kernel. Its output, the loss.
Status Replay::CompiledLossForward() {
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kLossStats, t_ * 2 * 4));
  DTSIM_RETURN_IF_ERROR(Alloc(kModel, kLoss, 4));
  if (!pipelined_) NoteForwardEnd();
  return Status::Ok();
}

Expected<EagerPeaks> Replay::RunPipeline() {
  // The stages' receive buffers, made for every micro-batch when the schedule first runs
  // (_prepare_forward_infra, _prepare_backward_infra): a chunk's input where it is not the
  // model's first, its output's gradient where not the last (the rank's part of the sequence
  // under tensor parallelism).
  const int64_t buffer = ts_ * h_ * act_;
  received_.resize(chunks_.size());
  for (size_t chunk = 0; chunk < chunks_.size(); ++chunk) {
    for (int64_t m = 0; m < run_.micro_batches && !chunks_[chunk].embedding; ++m) {
      DTSIM_ASSIGN_OR_RETURN(const CachingAllocator::Handle input, HoldPipelineBuffer(buffer));
      received_[chunk].push_back(input);
    }
    for (int64_t m = 0; m < run_.micro_batches && !chunks_[chunk].head; ++m) {
      DTSIM_RETURN_IF_ERROR(HoldPipelineBuffer(buffer));
    }
  }
  const EagerPipeline& pipeline = run_.pipeline;
  const std::vector<PipelineStep> schedule = StageSchedule(
      pipeline.schedule, pipeline.stages, pipeline.rank, run_.micro_batches, pipeline.chunks);
  EagerRun steps = run_;
  steps.micro_batches = 1;  // the schedule runs them all in one
  return RunSteps(
      steps,
      [&]() -> Status {
        if (Ring()) DTSIM_RETURN_IF_ERROR(EnterContextParallel());
        DTSIM_RETURN_IF_ERROR(RunSchedule(schedule));
        if (Ring()) ExitContextParallel();
        return Status::Ok();
      },
      [this]() {  // clear_runtime_states: the received inputs' gradients
        for (const CachingAllocator::Handle grad : input_grads_) FreeBuffer(grad);
        input_grads_.clear();
      });
}

Status Replay::RunSchedule(const std::vector<PipelineStep>& schedule) {
  std::vector<int64_t> backwards(chunks_.size(), 0);
  for (const PipelineStep& step : schedule) {
    microbatch_ = step.microbatch;
    SetContext(step.chunk * run_.micro_batches + static_cast<int>(step.microbatch));
    if (step.pass == Pass::kForward) {
      DTSIM_RETURN_IF_ERROR(Forward(step.chunk));
      continue;
    }
    DTSIM_RETURN_IF_ERROR(Backward(step.chunk));
    if (++backwards[static_cast<size_t>(step.chunk)] < run_.micro_batches || !fsdp_) continue;
    // The stage's last backward: every group's post-backward by hand, the root first, then the
    // root's final callback.
    DTSIM_RETURN_IF_ERROR(fsdp_->ReduceAccumulated(Root(step.chunk)));
    for (int l = chunks_[static_cast<size_t>(step.chunk)].first; l < End(step.chunk); ++l) {
      DTSIM_RETURN_IF_ERROR(fsdp_->ReduceAccumulated(l));
    }
    fsdp_->FinishBackward();
  }
  SetContext(0);
  if (output_chunks_.empty()) return Status::Ok();
  // step() returns the last stage's outputs merged (torch.cat over the micro-batches), which
  // torchtitan drops; then the schedule's outputs go.
  DTSIM_ASSIGN_OR_RETURN(
      const CachingAllocator::Handle merged,
      AllocBuffer(static_cast<int64_t>(output_chunks_.size()) * t_ * v_ * 2, FsdpGroups::kCompute));
  FreeBuffer(merged);
  for (const CachingAllocator::Handle output : output_chunks_) FreeBuffer(output);
  output_chunks_.clear();
  return Status::Ok();
}

}  // namespace eager_llama

bool IsLlamaStyle(const TransformerSpec& spec) {
  return spec.norm == Norm::kRmsNorm && spec.activation == Activation::kSwiGlu &&
         spec.position == PositionEmbedding::kRotary;
}

Expected<EagerPeaks> ReplayLlamaEager(const TransformerSpec& spec, const EagerRun& run) {
  DTSIM_RETURN_IF_ERROR(eager_llama::CheckSupported(spec));
  DTSIM_RETURN_IF_ERROR(eager_llama::CheckTensorParallel(spec, run));
  DTSIM_RETURN_IF_ERROR(eager_llama::CheckPipeline(spec, run));
  eager_llama::Replay replay(spec, run, eager_llama::ChunksOf(spec, run));
  return replay.Run();
}

}  // namespace dtsim::models
