#include "strategies/transformer_iteration.h"

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <set>
#include <string>

#include <fmt/format.h>

#include "models/parameters.h"
#include "sim/graph/builder.h"
#include "strategies/pipeline_schedule.h"

namespace dtsim::strategies {
namespace {

using graph::CommKind;
using graph::StreamId;
using graph::TaskGraphBuilder;
using graph::TaskId;
using graph::TaskKind;
using models::Op;

// Megatron's f/g operators: the tensor-parallel collective follows the row-parallel GEMM in the
// forward pass and the column-parallel GEMM's weight gradient (after its dgrad) in backward.
const std::set<std::string, std::less<>> kForwardBoundaries = {"attn.proj", "mlp.fc2"};
const std::set<std::string, std::less<>> kBackwardBoundaries = {"mlp.fc1.wgrad", "attn.qkv.wgrad"};

struct PricedOp {
  std::string segment;  // "attn" or "mlp": names the compute task the op lands in
  DurationNs duration;
  bool collective_after = false;
};

struct PricedPass {
  std::vector<PricedOp> ops;
  double model_flops = 0;
};

class Pricer {
 public:
  explicit Pricer(const models::OpCostModel& cost) : cost_(cost) {}

  Expected<PricedPass> Price(const std::vector<Op>& ops,
                             const std::set<std::string, std::less<>>& boundaries) {
    PricedPass pass;
    for (const Op& op : ops) {
      const std::optional<models::OpCost> cost = cost_.Price(op);
      if (!cost) {
        return Error(fmt::format("cost model \"{}\" cannot price op {} ({})", cost_.name(),
                                 op.name, op.signature.Key()));
      }
      const std::string_view name = op.name;
      pass.ops.push_back({std::string(name.substr(0, name.find('.'))), cost->duration,
                          boundaries.contains(name)});
      pass.model_flops += op.model_flops;
      sources_.push_back(*cost);
    }
    return pass;
  }

  // The costs priced since the last call (for tallying by use count).
  std::vector<models::OpCost> TakeSources() { return std::exchange(sources_, {}); }

 private:
  const models::OpCostModel& cost_;
  std::vector<models::OpCost> sources_;
};

// The t tensor-parallel peers of one (data index, stage): they run the same tasks, so each
// helper adds one task per peer, and collectives span the peers.
class PeerGroup {
 public:
  // `ranks` are the simulated peers; `logical` all of them (more when only one peer per class
  // of identical ranks is simulated): collectives are priced over `logical`.
  PeerGroup(TaskGraphBuilder& builder, std::vector<int32_t> ranks, std::vector<int32_t> logical)
      : builder_(builder), ranks_(std::move(ranks)), logical_(std::move(logical)) {
    for (int32_t rank : ranks_) {
      compute_.push_back(builder_.Stream(rank, kComputeStream));
      send_forward_.push_back(builder_.Stream(rank, "pp-send-fwd"));
      send_backward_.push_back(builder_.Stream(rank, "pp-send-bwd"));
      last_.emplace_back();
    }
  }

  const std::vector<int32_t>& ranks() const { return ranks_; }
  std::optional<TaskId> last(size_t peer) const { return last_[peer]; }

  void Add(DurationNs duration, const std::string& name, std::string_view category) {
    if (category != pending_category_ || name != pending_name_) {
      Flush();
      pending_name_ = name;
      pending_category_ = category;
    }
    pending_ += duration;
  }

  void Flush() {
    if (pending_ > DurationNs::Zero()) {
      for (size_t i = 0; i < ranks_.size(); ++i) {
        last_[i] = builder_.AddTask(compute_[i], TaskKind::kCompute, pending_name_,
                                    pending_category_, pending_);
      }
    }
    pending_ = DurationNs::Zero();
  }

  void Collective(CommKind kind, Bytes size, std::string_view name) {
    Flush();
    if (logical_.size() < 2) return;
    const graph::CommId comm = builder_.AddCollective(kind, size, ranks_);
    if (logical_.size() != ranks_.size()) builder_.PriceAs(comm, logical_);
    for (size_t i = 0; i < ranks_.size(); ++i) {
      last_[i] = builder_.AddCollectiveTask(compute_[i], comm, name, kTensorCategory);
    }
  }

  void Recv(const std::vector<int32_t>& peers, int64_t tag, Bytes size, std::string_view name) {
    Flush();
    for (size_t i = 0; i < ranks_.size(); ++i) {
      last_[i] = builder_.AddRecv(compute_[i], peers[i], tag, name, kPipelineCategory, size);
    }
  }

  void Send(const std::vector<int32_t>& peers, int64_t tag, Bytes size, bool forward,
            std::string_view name) {
    Flush();
    for (size_t i = 0; i < ranks_.size(); ++i) {
      const TaskId send = builder_.AddSend(forward ? send_forward_[i] : send_backward_[i], peers[i],
                                           size, tag, name, kPipelineCategory);
      if (last_[i]) builder_.AddDependency(send, *last_[i]);
    }
  }

 private:
  TaskGraphBuilder& builder_;
  std::vector<int32_t> ranks_;
  std::vector<int32_t> logical_;
  std::vector<StreamId> compute_, send_forward_, send_backward_;
  std::vector<std::optional<TaskId>> last_;
  DurationNs pending_;
  std::string pending_name_;
  std::string_view pending_category_;
};

// One layer's gradients on one rank: fused QKV (h × (q + 2·kv)/t), the output projection
// (q/t × h), the MLP (h × f/t, two of them fused for SwiGLU, and f/t × h) — per local expert and
// the router (h × E) in a MoE layer — and, as plain elements, the biases and norms.
GradientTensors LayerGradients(const models::TransformerSpec& spec, int t, int ep, int layer) {
  GradientTensors tensors;
  const int64_t h = spec.hidden;
  const int64_t q = spec.q_dim() / t;
  const int64_t kv = std::max<int64_t>(1, spec.kv_heads / t) * spec.head_dim();
  tensors.matrices.push_back({h, q + 2 * kv});
  tensors.matrices.push_back({q, h});
  const bool moe = spec.IsMoeLayer(layer);
  const int64_t ffn = (moe ? spec.MoeFfnHidden() : spec.ffn_hidden) / t;
  const int64_t up = spec.activation == models::Activation::kSwiGlu ? 2 * ffn : ffn;
  for (int expert = 0; expert < (moe ? spec.moe.experts / ep : 1); ++expert) {
    tensors.matrices.push_back({h, up});
    tensors.matrices.push_back({ffn, h});
  }
  if (moe) tensors.matrices.push_back({h, spec.moe.experts});
  tensors.vector_elements = models::LayerParameterCount(spec, t, ep, layer) - tensors.elements();
  return tensors;
}

// The first stage's embedding gradients: the token table's V/t rows, learned positions and
// segments; the embedding norm.
GradientTensors EmbeddingGradients(const models::TransformerSpec& spec, int t) {
  GradientTensors tensors;
  tensors.matrices.push_back({spec.PaddedVocab(t) / t, spec.hidden});
  if (spec.position == models::PositionEmbedding::kLearned) {
    tensors.matrices.push_back({spec.max_seq, spec.hidden});
  }
  if (spec.token_types > 0) tensors.matrices.push_back({spec.token_types, spec.hidden});
  if (spec.embedding_norm) tensors.vector_elements += models::NormParameters(spec);
  return tensors;
}

// The last stage's: the output layer (`holds_table`: untied, or tied on a stage other than the
// first, which keeps a copy), the final norm, BERT's pooler and MLM head transform with its
// V/t output bias.
GradientTensors OutputGradients(const models::TransformerSpec& spec, int t, bool holds_table) {
  GradientTensors tensors;
  const int64_t vocab = spec.PaddedVocab(t) / t;
  if (holds_table) tensors.matrices.push_back({vocab, spec.hidden});
  if (spec.final_norm) tensors.vector_elements += models::NormParameters(spec);
  if (spec.pooler) {
    tensors.matrices.push_back({spec.hidden, spec.hidden});
    tensors.vector_elements += spec.hidden;
  }
  if (spec.lm_head_transform) {
    tensors.matrices.push_back({spec.hidden, spec.hidden});
    tensors.vector_elements += spec.hidden + models::NormParameters(spec) + vocab;
  }
  return tensors;
}

// The gradients one rank of pipeline stage `stage` holds.
GradientTensors StageGradients(const SimulationConfig& config, int stage) {
  const models::TransformerSpec& spec = config.model.transformer;
  const ParallelPlan& plan = config.plan;
  GradientTensors tensors;
  if (stage == 0) tensors.Append(EmbeddingGradients(spec, plan.tensor));
  const int per_chunk = spec.layers / (plan.pipeline * plan.virtual_stages);
  for (int chunk = 0; chunk < plan.virtual_stages; ++chunk) {
    for (int i = 0; i < per_chunk; ++i) {
      tensors.Append(LayerGradients(spec, plan.tensor, 1, (chunk * plan.pipeline + stage) * per_chunk + i));
    }
  }
  if (stage == plan.pipeline - 1) {
    tensors.Append(OutputGradients(spec, plan.tensor, !spec.tied_embeddings || stage != 0));
  }
  return tensors;
}

// Where each peer's gradients become ready in the last micro-batch's backward, in the order
// they do: the output layer (last stage), each layer from the last, the embedding (first).
struct GradientReady {
  std::vector<std::vector<TaskId>> at;    // per peer
  std::vector<GradientTensors> tensors;  // the gradients ready there
};

class IterationBuilder {
 public:
  IterationBuilder(const SimulationConfig& config, const models::OpCostModel& cost,
                   CompressionPhase phase)
      : config_(config), spec_(config.model.transformer), plan_(config.plan), cost_(cost),
        pricer_(cost), compression_(MakeCompression(config.compression)), phase_(phase),
        symmetric_(config.ranks == RanksMode::kSymmetric),
        simulated_data_(symmetric_ ? 1 : plan_.data),
        simulated_tensor_(symmetric_ ? 1 : plan_.tensor) {}

  Expected<IterationGraph> Build() {
    DTSIM_RETURN_IF_ERROR(PricePasses());
    const int64_t microbatches = config_.Microbatches();
    std::vector<std::vector<GradientReady>> ready(static_cast<size_t>(plan_.pipeline));
    for (int stage = 0; stage < plan_.pipeline; ++stage) {
      for (int dp = 0; dp < simulated_data_; ++dp) {
        ready[static_cast<size_t>(stage)].push_back(BuildStage(stage, dp, microbatches));
      }
    }
    DTSIM_RETURN_IF_ERROR(ReduceGradients(ready));
    DTSIM_ASSIGN_OR_RETURN(graph::TaskGraph graph, std::move(builder_).Build());
    return IterationGraph{std::move(graph), std::move(result_)};
  }

 private:
  models::TransformerShard Shard() const {
    return {.micro_batch = config_.training.micro_batch, .seq_len = config_.training.seq_len,
            .dtype = config_.training.dtype, .tensor_parallel = plan_.tensor,
            .sequence_parallel = plan_.sequence_parallel, .expert_parallel = 1,
            .flash_attention = config_.training.flash_attention,
            .dropout = config_.training.dropout};
  }

  Status PricePasses() {
    const models::TransformerShard shard = Shard();
    const models::LayerOps layer = models::TransformerLayerOps(spec_, 0, shard);
    const models::LayerOps embedding = models::EmbeddingOps(spec_, shard);
    const models::LayerOps output = models::OutputOps(spec_, shard);
    const std::set<std::string, std::less<>> none;
    DTSIM_ASSIGN_OR_RETURN(layer_forward_, pricer_.Price(layer.forward, kForwardBoundaries));
    DTSIM_ASSIGN_OR_RETURN(layer_backward_, pricer_.Price(layer.backward, kBackwardBoundaries));
    DTSIM_ASSIGN_OR_RETURN(layer_recompute_,
                           pricer_.Price(models::RecomputeOps(layer, config_.training.recompute),
                                         kForwardBoundaries));
    layer_sources_ = pricer_.TakeSources();
    DTSIM_ASSIGN_OR_RETURN(embedding_forward_, pricer_.Price(embedding.forward, none));
    DTSIM_ASSIGN_OR_RETURN(embedding_backward_, pricer_.Price(embedding.backward, none));
    embedding_sources_ = pricer_.TakeSources();
    DTSIM_ASSIGN_OR_RETURN(output_forward_, pricer_.Price(output.forward, none));
    DTSIM_ASSIGN_OR_RETURN(output_backward_, pricer_.Price(output.backward, none));
    output_sources_ = pricer_.TakeSources();
    return Status::Ok();
  }

  Bytes ActivationBytes() const {
    return Bytes(config_.training.micro_batch * config_.training.seq_len * spec_.hidden *
                 DTypeBytes(config_.training.dtype));
  }

  // A tensor-parallel all-reduce of the b·s·h activations, or with sequence parallelism the
  // reduce-scatter and all-gather it splits into (same bytes; docs/strategies.md).
  void TensorReduce(PeerGroup& group, std::string_view name) {
    if (!plan_.sequence_parallel) {
      group.Collective(CommKind::kAllReduce, ActivationBytes(), name);
      return;
    }
    group.Collective(CommKind::kReduceScatter, ActivationBytes(), name);
    group.Collective(CommKind::kAllGather, Bytes(ActivationBytes().count() / plan_.tensor), name);
  }

  void Emit(PeerGroup& group, const PricedPass& pass, int layer, std::string_view suffix,
            std::string_view category) {
    std::string_view segment;
    std::string name;
    for (const PricedOp& op : pass.ops) {
      if (op.segment != segment) {  // names change with the segment only: format them once
        segment = op.segment;
        name = fmt::format("layer{}.{} {}", layer, segment, suffix);
      }
      group.Add(op.duration, name, category);
      if (op.collective_after) TensorReduce(group, fmt::format("layer{}.{} tp", layer, segment));
    }
  }

  void EmitWhole(PeerGroup& group, const PricedPass& pass, std::string name) {
    for (const PricedOp& op : pass.ops) group.Add(op.duration, name, kComputeCategory);
  }

  // The simulated tensor-parallel peers of (dp, stage), or all of them (`all`).
  std::vector<int32_t> Peers(int dp, int stage, bool all = false) const {
    std::vector<int32_t> ranks;
    for (int tp = 0; tp < (all ? plan_.tensor : simulated_tensor_); ++tp) {
      ranks.push_back(plan_.Rank(dp, stage, tp));
    }
    return ranks;
  }

  Bytes PipelineBytes() const {
    // Megatron's scatter/gather (or the sequence-parallel shard): each peer sends 1/t.
    return Bytes(ActivationBytes().count() / plan_.tensor);
  }

  int LayersPerChunk() const { return spec_.layers / (plan_.pipeline * plan_.virtual_stages); }
  int FirstLayer(int stage, int chunk) const {
    return (chunk * plan_.pipeline + stage) * LayersPerChunk();
  }
  // The pipeline tag of a transfer: unique per (micro-batch, chunk, direction).
  int64_t Tag(int64_t microbatch, int chunk, bool backward) const {
    return (microbatch * plan_.virtual_stages + chunk) * 2 + (backward ? 1 : 0);
  }
  bool HoldsEmbedding(int stage, int chunk) const { return stage == 0 && chunk == 0; }
  bool HoldsOutput(int stage, int chunk) const {
    return stage == plan_.pipeline - 1 && chunk == plan_.virtual_stages - 1;
  }

  // Chunk c of stage s receives from chunk c of stage s − 1, or from the last stage's chunk
  // c − 1 on the first stage (interleaving wraps around); sends the mirror way.
  void Forward(PeerGroup& group, int stage, int chunk, int64_t microbatch) {
    const int last = plan_.pipeline - 1;
    if (!HoldsEmbedding(stage, chunk)) {
      const int from = stage > 0 ? stage - 1 : last;
      const int from_chunk = stage > 0 ? chunk : chunk - 1;
      group.Recv(Peers(group_dp_, from), Tag(microbatch, from_chunk, false), PipelineBytes(),
                 "recv activations");
    } else {
      EmitWhole(group, embedding_forward_, "embedding fwd");
      TensorReduce(group, "embedding tp");
    }
    for (int i = 0; i < LayersPerChunk(); ++i) {
      Emit(group, layer_forward_, FirstLayer(stage, chunk) + i, "fwd", kComputeCategory);
    }
    if (HoldsOutput(stage, chunk)) {
      EmitWhole(group, output_forward_, "output fwd");
    } else {
      group.Send(Peers(group_dp_, stage < last ? stage + 1 : 0), Tag(microbatch, chunk, false),
                 PipelineBytes(), true, "send activations");
    }
    Account(stage, chunk, false);
  }

  void Backward(PeerGroup& group, int stage, int chunk, int64_t microbatch, GradientReady* ready) {
    const int last = plan_.pipeline - 1;
    auto mark = [&](GradientTensors tensors) {
      if (ready == nullptr) return;
      group.Flush();
      for (size_t i = 0; i < group.ranks().size(); ++i) ready->at[i].push_back(*group.last(i));
      ready->tensors.push_back(std::move(tensors));
    };
    if (!HoldsOutput(stage, chunk)) {
      const int from = stage < last ? stage + 1 : 0;
      const int from_chunk = stage < last ? chunk : chunk + 1;
      group.Recv(Peers(group_dp_, from), Tag(microbatch, from_chunk, true), PipelineBytes(),
                 "recv gradients");
    } else {
      EmitWhole(group, output_backward_, "output bwd");
      TensorReduce(group, "output tp");
      mark(OutputGradients(spec_, plan_.tensor, !spec_.tied_embeddings || stage != 0));
    }
    for (int i = LayersPerChunk() - 1; i >= 0; --i) {
      const int layer = FirstLayer(stage, chunk) + i;
      Emit(group, layer_recompute_, layer, "recompute", kRecomputeCategory);
      Emit(group, layer_backward_, layer, "bwd", kComputeCategory);
      mark(LayerGradients(spec_, plan_.tensor, 1, layer));
    }
    if (HoldsEmbedding(stage, chunk)) {
      EmitWhole(group, embedding_backward_, "embedding bwd");
      mark(EmbeddingGradients(spec_, plan_.tensor));
    } else {
      group.Send(Peers(group_dp_, stage > 0 ? stage - 1 : last), Tag(microbatch, chunk, true),
                 PipelineBytes(), false, "send gradients");
    }
    group.Flush();
    Account(stage, chunk, true);
  }

  // FLOPs and cost sources of one micro-batch pass on the t peers of a stage.
  void Account(int stage, int chunk, bool backward) {
    // Every tensor-parallel peer, and with symmetric ranks every data-parallel replica, does
    // the same work.
    const double peers = static_cast<double>(plan_.tensor) * (plan_.data / simulated_data_);
    const int layers = LayersPerChunk();
    const PricedPass& layer = backward ? layer_backward_ : layer_forward_;
    double flops = layers * layer.model_flops;
    const bool embedding = HoldsEmbedding(stage, chunk);
    const bool output = HoldsOutput(stage, chunk);
    if (embedding) flops += (backward ? embedding_backward_ : embedding_forward_).model_flops;
    if (output) flops += (backward ? output_backward_ : output_forward_).model_flops;
    result_.model_flops += peers * flops;
    result_.hardware_flops += peers * (flops + (backward ? layers * layer_recompute_.model_flops : 0));
    // Cost sources: each priced op once per use.
    const auto count = static_cast<int64_t>(peers);
    if (!backward) {
      size_t forward_ops = layer_forward_.ops.size();
      for (size_t i = 0; i < forward_ops; ++i) result_.sources.Add(layer_sources_[i], count * layers);
    } else {
      for (size_t i = layer_forward_.ops.size(); i < layer_sources_.size(); ++i) {
        result_.sources.Add(layer_sources_[i], count * layers);
      }
    }
    if (embedding) TallyPart(embedding_sources_, embedding_forward_.ops.size(), backward, count);
    if (output) TallyPart(output_sources_, output_forward_.ops.size(), backward, count);
  }

  void TallyPart(const std::vector<models::OpCost>& sources, size_t forward_ops, bool backward,
                 int64_t count) {
    const size_t begin = backward ? forward_ops : 0;
    const size_t end = backward ? sources.size() : forward_ops;
    for (size_t i = begin; i < end; ++i) result_.sources.Add(sources[i], count);
  }

  GradientReady BuildStage(int stage, int dp, int64_t microbatches) {
    group_dp_ = dp;
    PeerGroup group(builder_, Peers(dp, stage), Peers(dp, stage, true));
    GradientReady ready;
    ready.at.resize(group.ranks().size());
    for (const PipelineStep& step : StageSchedule(plan_.schedule, plan_.pipeline, stage,
                                                  microbatches, plan_.virtual_stages)) {
      if (step.forward) {
        Forward(group, stage, step.chunk, step.microbatch);
      } else {
        // Gradients are final in each chunk's last backward.
        const bool last = step.microbatch == microbatches - 1;
        Backward(group, stage, step.chunk, step.microbatch, last ? &ready : nullptr);
      }
    }
    return ready;
  }

  // Data-parallel gradient reduction: gradients fill buckets of plan.gradient_bucket bytes in the
  // order the last backward produces them; each bucket's reduction starts when its last
  // gradient is ready (overlapping the rest of the backward, as PyTorch DDP and Megatron's
  // overlap_grad_reduce do), or after the whole backward without overlap. ZeRO-1/2 reduce-
  // scatter instead and all-gather the updated parameters after the optimizer step. Compressed
  // (phase kCompressed), each bucket goes through the method's kernels and collectives; the
  // 1-bit optimizers reduce one buffer at the step.
  Status ReduceGradients(const std::vector<std::vector<GradientReady>>& ready) {
    std::map<int32_t, std::vector<TaskId>> waits = TiedEmbeddingReduce(ready);
    const int64_t grad_bytes = DTypeBytes(config_.training.grad_dtype);
    const bool compressed = phase_ == CompressionPhase::kCompressed && compression_->Compresses();
    const bool one_buffer = compressed && compression_->ReducesAtStep();
    const bool overlap = plan_.overlap_gradient_reduce && !one_buffer;
    for (int stage = 0; stage < plan_.pipeline; ++stage) {
      const auto& stage_ready = ready[static_cast<size_t>(stage)];
      const std::vector<GradientTensors>& points = stage_ready.front().tensors;
      for (int tp = 0; tp < simulated_tensor_; ++tp) {
        std::vector<int32_t> group, logical;
        for (int dp = 0; dp < plan_.data; ++dp) {
          logical.push_back(plan_.Rank(dp, stage, tp));
          if (dp < simulated_data_) group.push_back(logical.back());
        }
        GradientTensors bucket;
        int64_t stage_params = 0;
        for (size_t point = 0; point < points.size(); ++point) {
          bucket.Append(points[point]);
          stage_params += points[point].elements();
          const bool full = !one_buffer && bucket.elements() * grad_bytes >= plan_.gradient_bucket.count();
          if ((!full && point + 1 < points.size()) || logical.size() < 2) continue;
          const size_t at = overlap ? point : points.size() - 1;
          std::vector<TaskId> after;
          for (size_t i = 0; i < group.size(); ++i) {
            after.push_back(stage_ready[i].at[static_cast<size_t>(tp)][at]);
          }
          DTSIM_RETURN_IF_ERROR(ReduceBucket(bucket, group, logical, after, compressed, waits));
          bucket = {};
        }
        Optimizer(group, logical, stage_params, waits);
      }
    }
    return Status::Ok();
  }

  // One bucket's reduction on each rank's "dp" stream, after `after[i]`: the collective
  // (reduce-scatter under ZeRO, all-reduce otherwise), or the compression method's steps.
  Status ReduceBucket(const GradientTensors& bucket, const std::vector<int32_t>& group,
                      const std::vector<int32_t>& logical, const std::vector<TaskId>& after,
                      bool compressed, std::map<int32_t, std::vector<TaskId>>& waits) {
    const DType grad_dtype = config_.training.grad_dtype;
    const auto ranks = static_cast<int>(logical.size());
    std::vector<ReductionStep> steps;
    if (plan_.zero_stage >= 1) {
      steps.push_back({.name = "gradient reduce-scatter", .collective = CommKind::kReduceScatter,
                       .bytes = Bytes(bucket.elements() * DTypeBytes(grad_dtype)), .kernels = {}});
    } else {
      steps = compressed ? compression_->Reduce(bucket, ranks, grad_dtype)
                         : PlainAllReduce(bucket.elements(), grad_dtype);
    }
    // Every rank of the group, and with symmetric ranks every tensor-parallel peer, runs it.
    const int64_t represented =
        static_cast<int64_t>(logical.size()) * (plan_.tensor / simulated_tensor_);
    std::vector<std::optional<TaskId>> last(group.size());
    for (const ReductionStep& step : steps) {
      std::vector<TaskId> tasks;
      if (step.collective) {
        const graph::CommId comm = builder_.AddCollective(*step.collective, step.bytes, group);
        if (logical.size() != group.size()) builder_.PriceAs(comm, logical);
        for (int32_t rank : group) {
          tasks.push_back(builder_.AddCollectiveTask(builder_.Stream(rank, "dp"), comm, step.name,
                                                     kDataCategory));
        }
      } else {
        DurationNs duration;
        for (const Op& kernel : step.kernels) {
          const std::optional<models::OpCost> cost = cost_.Price(kernel);
          if (!cost) {
            return Error(fmt::format("cost model \"{}\" cannot price compression kernel {} ({})",
                                     cost_.name(), kernel.name, kernel.signature.Key()));
          }
          duration += cost->duration;
          result_.sources.Add(*cost, represented);
        }
        for (int32_t rank : group) {
          tasks.push_back(builder_.AddTask(builder_.Stream(rank, "dp"), TaskKind::kCompute,
                                           step.name, kDataCategory, duration));
        }
      }
      for (size_t i = 0; i < group.size(); ++i) {
        if (!last[i]) builder_.AddDependency(tasks[i], after[i]);
        last[i] = tasks[i];
      }
    }
    for (size_t i = 0; i < group.size(); ++i) {
      if (last[i]) waits[group[i]].push_back(*last[i]);
    }
    return Status::Ok();
  }

  // Megatron keeps a tied embedding on the first and the last stage and all-reduces its
  // gradient between the two before the step. Returns, per rank, what its step waits for.
  std::map<int32_t, std::vector<TaskId>> TiedEmbeddingReduce(
      const std::vector<std::vector<GradientReady>>& ready) {
    std::map<int32_t, std::vector<TaskId>> waits;
    if (!spec_.tied_embeddings || plan_.pipeline < 2) return waits;
    const int last = plan_.pipeline - 1;
    const int64_t bytes = spec_.PaddedVocab(plan_.tensor) / plan_.tensor * spec_.hidden *
                          DTypeBytes(config_.training.grad_dtype);
    for (int dp = 0; dp < simulated_data_; ++dp) {
      for (int tp = 0; tp < simulated_tensor_; ++tp) {
        const std::vector<int32_t> pair = {plan_.Rank(dp, 0, tp), plan_.Rank(dp, last, tp)};
        const graph::CommId comm = builder_.AddCollective(CommKind::kAllReduce, Bytes(bytes), pair);
        // Ready after the embedding's backward (first stage: the last gradient point) and the
        // output layer's (last stage: the first).
        const auto& first_at = ready.front()[static_cast<size_t>(dp)].at[static_cast<size_t>(tp)];
        const auto& last_at = ready.back()[static_cast<size_t>(dp)].at[static_cast<size_t>(tp)];
        const std::array<TaskId, 2> after = {first_at.back(), last_at.front()};
        for (size_t i = 0; i < 2; ++i) {
          const TaskId task = builder_.AddCollectiveTask(builder_.Stream(pair[i], "dp"), comm,
                                                         "tied embedding", kDataCategory);
          builder_.AddDependency(task, after[i]);
          waits[pair[i]].push_back(task);
        }
      }
    }
    return waits;
  }

  void Optimizer(const std::vector<int32_t>& group, const std::vector<int32_t>& logical,
                 int64_t stage_params, std::map<int32_t, std::vector<TaskId>>& waits) {
    const bool zero = plan_.zero_stage >= 1;
    const int64_t local = zero ? (stage_params + plan_.data - 1) / plan_.data : stage_params;
    const std::optional<models::OpCost> cost = cost_.Price(
        models::OptimizerOp(config_.training.optimizer, local, config_.training.grad_dtype));
    const models::OpCost step = cost.value_or(models::OpCost{});
    std::optional<graph::CommId> gather;
    if (zero && logical.size() > 1) {
      gather = builder_.AddCollective(
          CommKind::kAllGather, Bytes(local * DTypeBytes(config_.training.dtype)), group);
      if (logical.size() != group.size()) builder_.PriceAs(*gather, logical);
    }
    for (int32_t rank : group) {
      const TaskId task =
          builder_.AddTask(builder_.Stream(rank, kComputeStream), TaskKind::kCompute,
                           "optimizer step", kOptimizerCategory, step.duration);
      for (TaskId prerequisite : waits[rank]) builder_.AddDependency(task, prerequisite);
      if (gather) {
        const TaskId all_gather = builder_.AddCollectiveTask(
            builder_.Stream(rank, "dp"), *gather, "parameter all-gather", kDataCategory);
        builder_.AddDependency(all_gather, task);
      }
    }
    // One step per rank: the simulated ones stand for their class.
    result_.sources.Add(step, static_cast<int64_t>(logical.size()) * (plan_.tensor / simulated_tensor_));
  }

  const SimulationConfig& config_;
  const models::TransformerSpec& spec_;
  const ParallelPlan& plan_;
  const models::OpCostModel& cost_;
  Pricer pricer_;
  std::unique_ptr<GradientCompression> compression_;
  CompressionPhase phase_;
  TaskGraphBuilder builder_;
  IterationStats result_;
  PricedPass layer_forward_, layer_backward_, layer_recompute_;
  PricedPass embedding_forward_, embedding_backward_, output_forward_, output_backward_;
  std::vector<models::OpCost> layer_sources_, embedding_sources_, output_sources_;
  bool symmetric_;
  int simulated_data_;
  int simulated_tensor_;
  int group_dp_ = 0;
};

std::string GiB(int64_t bytes) { return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / kGibi); }

}  // namespace

Expected<std::vector<models::MemoryBreakdown>> StageMemory(const SimulationConfig& config) {
  const ParallelPlan& plan = config.plan;
  const std::unique_ptr<GradientCompression> compression = MakeCompression(config.compression);
  std::vector<models::MemoryBreakdown> stages;
  for (int stage = 0; stage < plan.pipeline; ++stage) {
    const models::MemoryPlan memory_plan{
        .shard = {.micro_batch = config.training.micro_batch, .seq_len = config.training.seq_len,
                  .dtype = config.training.dtype, .tensor_parallel = plan.tensor,
                  .sequence_parallel = plan.sequence_parallel,
                  .flash_attention = config.training.flash_attention,
                  .dropout = config.training.dropout},
        .recompute = config.training.recompute,
        .schedule = plan.schedule == ScheduleKind::kGpipe ? models::PipelineSchedule::kGpipe
                    : plan.schedule == ScheduleKind::kInterleaved
                        ? models::PipelineSchedule::kInterleaved
                        : models::PipelineSchedule::kOneForwardOneBackward,
        .pipeline_stages = plan.pipeline,
        .virtual_stages = plan.virtual_stages,
        .stage = stage,
        .microbatches = config.Microbatches(),
        .data_parallel = plan.data,
        .zero_stage = plan.zero_stage,
        .optimizer = config.training.optimizer,
        .param_dtype = config.training.dtype,
        .grad_dtype = config.training.grad_dtype};
    DTSIM_ASSIGN_OR_RETURN(models::MemoryBreakdown memory,
                           models::EstimateMemory(config.model, memory_plan));
    // Error-feedback residuals of gradient compression count as optimizer state.
    if (compression->Compresses() && plan.data > 1) {
      memory.optimizer_state += compression->StateBytes(StageGradients(config, stage), plan.data,
                                                        config.training.grad_dtype);
    }
    if (memory.total() > config.gpu.memory.count()) {
      return Error(fmt::format("the plan does not fit: pipeline stage {} needs {} per GPU, {} has "
                               "{} (parameters {}, gradients {}, optimizer state {}, activations "
                               "{}, temporary {})",
                               stage, GiB(memory.total()), config.gpu.name,
                               GiB(config.gpu.memory.count()), GiB(memory.parameters),
                               GiB(memory.gradients), GiB(memory.optimizer_state),
                               GiB(memory.activations), GiB(memory.temporary)),
                   "parallelism", GiB(memory.total()));
    }
    stages.push_back(memory);
  }
  return stages;
}

Expected<IterationGraph> BuildTransformerIteration(const SimulationConfig& config,
                                                   const models::OpCostModel& cost,
                                                   CompressionPhase phase) {
  DTSIM_ASSIGN_OR_RETURN(std::vector<models::MemoryBreakdown> memory, StageMemory(config));
  IterationBuilder builder(config, cost, phase);
  DTSIM_ASSIGN_OR_RETURN(IterationGraph iteration, builder.Build());
  iteration.stats.stage_memory = std::move(memory);
  return iteration;
}

}  // namespace dtsim::strategies
