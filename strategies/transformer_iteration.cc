#include "strategies/transformer_iteration.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <span>
#include <string>
#include <tuple>

#include "models/parameters.h"
#include "network/collective_algorithms.h"
#include "sim/base/quantity.h"
#include "sim/graph/builder.h"
#include "strategies/data_parallel_iteration.h"
#include "strategies/footprint.h"
#include "strategies/gradient_reduction.h"
#include "strategies/pipeline_schedule.h"

namespace dtsim::strategies {
namespace {

using graph::CommKind;
using graph::StreamId;
using graph::TaskGraphBuilder;
using graph::TaskId;
using graph::TaskKind;
using models::Op;

// What follows an op in a pass: nothing, a tensor-parallel reduction, an expert-parallel
// all-to-all, or (2D/2.5D) the all-reduces of a norm's row statistics.
enum class After : uint8_t { kNothing, kTensor, kExpert, kRowStats };
using Boundaries = std::map<std::string, After, std::less<>>;

// Megatron's f/g operators: the tensor-parallel collective follows the row-parallel GEMM in the
// forward pass and the column-parallel GEMM's weight gradient (after its dgrad) in backward —
// in a MoE layer, the combine and the router's backward. Tokens go to their experts by an
// all-to-all after the dispatch and come back after the last expert GEMM; backward mirrors it.
const Boundaries kForwardBoundaries = {{"attn.proj", After::kTensor},
                                       {"mlp.fc2", After::kTensor},
                                       {"moe.dispatch", After::kExpert},
                                       {"moe.expert.fc2", After::kExpert},
                                       {"moe.combine", After::kTensor}};
const Boundaries kBackwardBoundaries = {{"mlp.fc1.wgrad", After::kTensor},
                                        {"attn.qkv.wgrad", After::kTensor},
                                        {"moe.combine.bwd", After::kExpert},
                                        {"moe.expert.fc1.wgrad", After::kExpert},
                                        {"moe.router.wgrad", After::kTensor}};

struct PricedOp {
  std::string segment;  // "attn", "mlp" or "moe": names the compute task the op lands in
  DurationNs duration;
  After after = After::kNothing;
  bool expert = false;  // an expert's GEMM or activation: scales with the rank's routed tokens
  // On a 2D/2.5D grid: a weight GEMM run as SUMMA steps, and its operand blocks (elements).
  Op::WeightGemm summa = Op::WeightGemm::kNone;
  int64_t activation_block = 0;
  int64_t weight_block = 0;
};

struct PricedPass {
  std::vector<PricedOp> ops;
  double model_flops = 0;
};

// On a 2D/2.5D grid the Megatron boundaries do not exist: weight GEMMs become SUMMA steps and
// LayerNorm2D all-reduces its row statistics in forward and backward (as does the loss).
bool RowStatistics(const Op& op) {
  return op.kind == models::OpKind::kNorm ||
         (op.kind == models::OpKind::kCrossEntropy && op.pass == models::Pass::kForward);
}

class Pricer {
 public:
  Pricer(const models::OpCostModel& cost, bool grid) : cost_(cost), grid_(grid) {}

  Expected<PricedPass> Price(const std::vector<Op>& ops, const Boundaries& boundaries) {
    PricedPass pass;
    for (const Op& op : ops) {
      DTSIM_ASSIGN_OR_RETURN(const models::OpCost cost, cost_.PriceOrError(op));
      const std::string_view name = op.name;
      const auto boundary = boundaries.find(name);
      PricedOp& priced =
          pass.ops.emplace_back(std::string(name.substr(0, name.find('.'))), cost.duration,
                                boundary != boundaries.end() ? boundary->second : After::kNothing,
                                name.starts_with("moe.expert."));
      if (grid_) {
        priced.after = RowStatistics(op) ? After::kRowStats : After::kNothing;
        priced.summa = op.weight_gemm;
        priced.activation_block = op.activation_block;
        priced.weight_block = op.weight_block;
      }
      pass.model_flops += op.model_flops;
      sources_.push_back(cost);
    }
    return pass;
  }

  // The costs priced since the last call (for tallying by use count).
  std::vector<models::OpCost> TakeSources() { return std::exchange(sources_, {}); }

 private:
  const models::OpCostModel& cost_;
  bool grid_;
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
      tensor_.push_back(builder_.Stream(rank, "tp"));
      send_forward_.push_back(builder_.Stream(rank, "pp-send-fwd"));
      send_backward_.push_back(builder_.Stream(rank, "pp-send-bwd"));
      last_.emplace_back();
      tensor_tail_.emplace_back();
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
      ApplyWaits();
    }
    pending_ = DurationNs::Zero();
  }

  // The next task of each peer also waits for waits[i] (a parameter gather on another stream).
  void WaitBefore(std::vector<TaskId> waits) {
    Flush();
    waits_ = std::move(waits);
  }

  void Collective(CommKind kind, Bytes size, std::string_view name) {
    Flush();
    if (logical_.size() < 2) return;
    const graph::CommId comm = builder_.AddCollective(kind, size, ranks_);
    if (logical_.size() != ranks_.size()) builder_.PriceAs(comm, logical_);
    Post(std::vector<graph::CommId>(ranks_.size(), comm), name, kTensorCategory);  // applies waits
  }

  // Each peer's part in a collective made elsewhere: comms[i] for peer i, on the compute stream.
  void Post(const std::vector<graph::CommId>& comms, std::string_view name,
            std::string_view category) {
    Flush();
    for (size_t i = 0; i < ranks_.size(); ++i) {
      last_[i] = builder_.AddCollectiveTask(compute_[i], comms[i], name, category);
    }
    ApplyWaits();
  }

  // One weight GEMM as SUMMA steps (Optimus; Tesseract per depth layer): step s's broadcasts
  // (before[c][peer]) run on the peer's "tp" stream, double-buffered — once the GEMM chunk of
  // step s − 2 (the op before, for the first two) has ended — and its 1/q of the GEMM waits for
  // them; its reduces (after[c][peer]) follow the chunk. When they reduce the op's output
  // (`output_reduced`, dgrad), the next task waits for the last of them; a weight gradient's
  // (wgrad) only gates the gradient's reduction (GradientsReady).
  struct SummaStep {
    std::vector<std::vector<graph::CommId>> before, after;
  };
  void Summa(DurationNs duration, const std::string& name, std::string_view comm_name,
             std::string_view category, const std::vector<SummaStep>& steps, bool output_reduced) {
    Flush();
    const auto count = static_cast<int64_t>(steps.size());
    std::vector<TaskId> reduced;
    for (size_t i = 0; i < ranks_.size(); ++i) {
      const std::optional<TaskId> start = last_[i];
      std::vector<TaskId> chunks;
      for (int64_t s = 0; s < count; ++s) {
        const SummaStep& step = steps[static_cast<size_t>(s)];
        const std::optional<TaskId> buffer_free =
            s >= 2 ? chunks[static_cast<size_t>(s - 2)] : start;
        std::vector<TaskId> inputs;
        for (const std::vector<graph::CommId>& comms : step.before) {
          inputs.push_back(TensorTask(i, comms[i], comm_name));
          if (buffer_free) builder_.AddDependency(inputs.back(), *buffer_free);
        }
        // Chunks that add up to the GEMM exactly.
        const DurationNs part(duration.ns() * (s + 1) / count - duration.ns() * s / count);
        chunks.push_back(builder_.AddTask(compute_[i], TaskKind::kCompute, name, category, part));
        for (TaskId input : inputs) builder_.AddDependency(chunks.back(), input);
        if (s == 0 && output_reduced && i < waits_.size()) {
          builder_.AddDependency(chunks.back(), waits_[i]);
        }
        for (const std::vector<graph::CommId>& comms : step.after) {
          builder_.AddDependency(TensorTask(i, comms[i], comm_name), chunks.back());
        }
      }
      last_[i] = chunks.back();
      if (output_reduced && !steps.back().after.empty()) reduced.push_back(*tensor_tail_[i]);
    }
    if (output_reduced) waits_ = std::move(reduced);
  }

  // Where a peer's gradients so far are final: its last task, or, once SUMMA reduces run on
  // its "tp" stream, a point after both that and the stream's last reduce.
  TaskId GradientsReady(size_t peer) {
    Flush();
    if (!tensor_tail_[peer]) return *last_[peer];
    const TaskId join =
        builder_.AddTask(builder_.Stream(ranks_[peer], "tp-join"), TaskKind::kCompute,
                         "gradients ready", kTensorCategory, DurationNs::Zero());
    builder_.AddDependency(join, *last_[peer]);
    builder_.AddDependency(join, *tensor_tail_[peer]);
    return join;
  }

  void Recv(const std::vector<int32_t>& peers, int64_t tag, Bytes size, std::string_view name) {
    Flush();
    for (size_t i = 0; i < ranks_.size(); ++i) {
      last_[i] = builder_.AddRecv(compute_[i], peers[i], tag, name, kPipelineCategory, size);
    }
    ApplyWaits();
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
  TaskId TensorTask(size_t peer, graph::CommId comm, std::string_view name) {
    tensor_tail_[peer] = builder_.AddCollectiveTask(tensor_[peer], comm, name, kTensorCategory);
    return *tensor_tail_[peer];
  }

  void ApplyWaits() {
    for (size_t i = 0; i < waits_.size(); ++i) builder_.AddDependency(*last_[i], waits_[i]);
    waits_.clear();
  }

  TaskGraphBuilder& builder_;
  std::vector<int32_t> ranks_;
  std::vector<int32_t> logical_;
  std::vector<TaskId> waits_;
  std::vector<StreamId> compute_, tensor_, send_forward_, send_backward_;
  std::vector<std::optional<TaskId>> last_, tensor_tail_;
  DurationNs pending_;
  std::string pending_name_;
  std::string_view pending_category_;
};

// One layer's gradients on one rank: fused QKV (h × (q + 2·kv)/t), the output projection
// (q/t × h), the MLP (h × f/t, two of them fused for SwiGLU, and f/t × h) and, as plain
// elements, the biases and norms. In a MoE layer the local experts' MLPs are apart (they are
// reduced over the expert-data-parallel group only) and the router (h × E) stays dense.
struct LayerGradientSplit {
  GradientTensors dense;
  GradientTensors experts;
};

LayerGradientSplit OneDLayerGradients(const models::TransformerSpec& spec, int t, int ep,
                                      int layer) {
  LayerGradientSplit split;
  const int64_t h = spec.hidden;
  const int64_t q = spec.q_dim() / t;
  const int64_t kv = std::max<int64_t>(1, spec.kv_heads / t) * spec.head_dim();
  split.dense.matrices.push_back({h, q + 2 * kv});
  split.dense.matrices.push_back({q, h});
  const bool moe = spec.IsMoeLayer(layer);
  const int64_t ffn = (moe ? spec.MoeFfnHidden() : spec.ffn_hidden) / t;
  const int64_t up = spec.activation == models::Activation::kSwiGlu ? 2 * ffn : ffn;
  GradientTensors& mlp = moe ? split.experts : split.dense;
  for (int expert = 0; expert < (moe ? spec.moe.experts / ep : 1); ++expert) {
    mlp.matrices.push_back({h, up});
    mlp.matrices.push_back({ffn, h});
    // Expert biases: fc1's f/t (2f/t for SwiGLU) and fc2's h.
    if (moe && spec.linear_bias) mlp.vector_elements += up + h;
  }
  if (moe) split.dense.matrices.push_back({h, spec.moe.experts});
  split.dense.vector_elements = models::LayerParameterCount(spec, t, ep, layer) -
                                split.dense.elements() - split.experts.elements();
  return split;
}

// On a 2D/2.5D grid a rank holds the q×q block of every matrix and 1/q² of every vector
// (Optimus; ColossalAI's Linear2D, LayerNorm2D).
GradientTensors OnGrid(GradientTensors whole, int q) {
  for (std::array<int64_t, 2>& matrix : whole.matrices) matrix = {matrix[0] / q, matrix[1] / q};
  whole.vector_elements = (whole.vector_elements + q * q - 1) / (q * q);
  return whole;
}

// The 1D split of t ways, or the q×q block of the unsplit layer on a grid.
LayerGradientSplit LayerGradients(const models::TransformerSpec& spec, const ParallelPlan& plan,
                                  int layer) {
  if (!plan.on_grid()) return OneDLayerGradients(spec, plan.tensor, plan.expert, layer);
  LayerGradientSplit whole = OneDLayerGradients(spec, 1, 1, layer);
  return {OnGrid(std::move(whole.dense), plan.grid()),
          OnGrid(std::move(whole.experts), plan.grid())};
}

// The vocabulary rows of a rank's table before a grid cuts it q×q: V/t (1D), or all of V
// padded to a multiple of 128·q.
int64_t VocabRows(const models::TransformerSpec& spec, const ParallelPlan& plan) {
  if (plan.on_grid()) return spec.PaddedVocab(plan.grid());
  return spec.PaddedVocab(plan.tensor) / plan.tensor;
}

// The first stage's embedding gradients: the token table's V/t rows, learned positions and
// segments; the embedding norm.
GradientTensors EmbeddingGradients(const models::TransformerSpec& spec, const ParallelPlan& plan) {
  GradientTensors tensors;
  tensors.matrices.push_back({VocabRows(spec, plan), spec.hidden});
  if (spec.position == models::PositionEmbedding::kLearned) {
    tensors.matrices.push_back({spec.max_seq, spec.hidden});
  }
  if (spec.token_types > 0) tensors.matrices.push_back({spec.token_types, spec.hidden});
  if (spec.embedding_norm) tensors.vector_elements += models::NormParameters(spec);
  return plan.on_grid() ? OnGrid(std::move(tensors), plan.grid()) : tensors;
}

// The last stage's: the output layer (`holds_table`: untied, or tied on a stage other than the
// first, which keeps a copy), the final norm, BERT's pooler and MLM head transform with its
// V/t output bias.
GradientTensors OutputGradients(const models::TransformerSpec& spec, const ParallelPlan& plan,
                                bool holds_table) {
  GradientTensors tensors;
  const int64_t vocab = VocabRows(spec, plan);
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
  return plan.on_grid() ? OnGrid(std::move(tensors), plan.grid()) : tensors;
}

// The last stage holds the output table unless it is tied to the first stage's embedding.
bool HoldsOutputTable(const models::TransformerSpec& spec, int stage) {
  return !spec.tied_embeddings || stage != 0;
}

// The gradients one rank of pipeline stage `stage` holds.
GradientTensors StageGradients(const SimulationConfig& config, int stage) {
  const models::TransformerSpec& spec = config.model.transformer;
  const ParallelPlan& plan = config.plan;
  GradientTensors tensors;
  if (stage == 0) tensors.Append(EmbeddingGradients(spec, plan));
  for (int index : models::StageLayerIndices(spec, plan.pipeline, plan.virtual_stages, stage,
                                             plan.stage_layers)) {
    const LayerGradientSplit layer = LayerGradients(spec, plan, index);
    tensors.Append(layer.dense);
    tensors.Append(layer.experts);
  }
  if (stage == plan.pipeline - 1) {
    tensors.Append(OutputGradients(spec, plan, HoldsOutputTable(spec, stage)));
  }
  return tensors;
}

// The gradients one rank of `stage` holds, of any model.
GradientTensors ModelGradients(const SimulationConfig& config, int stage) {
  if (config.model.family != models::ModelFamily::kResNet) return StageGradients(config, stage);
  GradientTensors tensors;
  for (const GradientTensors& point : ResNetGradientPoints(config.model.resnet)) {
    tensors.Append(point);
  }
  return tensors;
}

// Where each peer's gradients become ready in the last micro-batch's backward, in the order
// they do: the output layer (last stage), each layer from the last, the embedding (first).
struct GradientReady {
  std::vector<std::vector<TaskId>> at;          // per peer
  std::vector<GradientTensors> tensors;         // the gradients ready there
  std::vector<GradientTensors> expert_tensors;  // of which the experts'
};

class IterationBuilder {
 public:
  IterationBuilder(const SimulationConfig& config, const models::OpCostModel& cost,
                   CompressionPhase phase)
      : config_(config),
        spec_(config.model.transformer),
        plan_(config.plan),
        cost_(cost),
        pricer_(cost, config.plan.on_grid()),
        phase_(phase),
        symmetric_(config.ranks == RanksMode::kSymmetric),
        simulated_data_(symmetric_ ? 1 : plan_.data),
        simulated_tensor_(symmetric_ ? 1 : plan_.tensor) {
    for (int stage = 0; stage < plan_.pipeline; ++stage) {
      stage_layers_.push_back(models::StageLayerIndices(spec_, plan_.pipeline, plan_.virtual_stages,
                                                        stage, plan_.stage_layers));
    }
  }

  Expected<IterationGraph> Build() {
    DTSIM_RETURN_IF_ERROR(PricePasses());
    const int64_t microbatches = config_.Microbatches();
    std::vector<std::vector<GradientReady>> ready(static_cast<size_t>(plan_.pipeline));
    // EstimateFootprint is a lower bound: the graph may still outgrow the memory allowed.
    const double max_memory =
        static_cast<double>(config_.max_memory > 0 ? config_.max_memory : DefaultMaxMemory());
    for (int stage = 0; stage < plan_.pipeline; ++stage) {
      for (int dp = 0; dp < simulated_data_; ++dp) {
        ready[static_cast<size_t>(stage)].push_back(BuildStage(stage, dp, microbatches));
        const double bytes = static_cast<double>(builder_.task_count()) * kBytesPerTask;
        if (bytes > max_memory) {
          return Error(
              fmt::format("the graph outgrew the {:.3g} GiB allowed (--max-memory) "
                          "at {} tasks, while building pipeline stage {} of {}",
                          max_memory / (1 << 30), builder_.task_count(), stage + 1, plan_.pipeline),
              "simulation");
        }
      }
    }
    DTSIM_RETURN_IF_ERROR(ReduceGradients(ready));
    DTSIM_ASSIGN_OR_RETURN(graph::TaskGraph graph, std::move(builder_).Build());
    return IterationGraph{std::move(graph), std::move(result_)};
  }

  // The work the graph would hold per piece and micro-batch, priced without building it.
  Expected<PassTimes> Times() {
    DTSIM_RETURN_IF_ERROR(PricePasses());
    const auto piece = [&](const PricedPass& forward, const PricedPass& backward,
                           const PricedPass& recompute) -> Expected<PieceTimes> {
      PieceTimes times;
      DTSIM_RETURN_IF_ERROR(PassWork(forward, times.forward, times.forward_grid));
      DTSIM_RETURN_IF_ERROR(PassWork(backward, times.backward, times.backward_grid));
      DTSIM_RETURN_IF_ERROR(PassWork(recompute, times.recompute, times.recompute_grid));
      return times;
    };
    PassTimes times;
    DTSIM_ASSIGN_OR_RETURN(times.dense, piece(dense_.forward, dense_.backward, dense_.recompute));
    DTSIM_ASSIGN_OR_RETURN(times.moe, piece(moe_.forward, moe_.backward, moe_.recompute));
    const PricedPass none;
    DTSIM_ASSIGN_OR_RETURN(times.embedding, piece(embedding_forward_, embedding_backward_, none));
    DTSIM_ASSIGN_OR_RETURN(times.output, piece(output_forward_, output_backward_, none));
    // The output layer's backward ends in a 1D reduction (Backward); the embedding's
    // collectives are left out.
    if (!plan_.on_grid()) {
      DTSIM_ASSIGN_OR_RETURN(const DurationNs reduce, TensorReduceTime());
      times.output.backward += reduce;
    }
    return times;
  }

 private:
  models::TransformerShard Shard() const { return ShardOf(config_); }

  // The passes of one kind of layer (dense, or MoE) and the costs they were priced from.
  struct LayerPasses {
    PricedPass forward, backward, recompute;
    std::vector<models::OpCost> sources;
  };

  const LayerPasses& Passes(int layer) const { return spec_.IsMoeLayer(layer) ? moe_ : dense_; }

  Status PriceLayer(int index, LayerPasses& passes) {
    const models::LayerOps layer = models::TransformerLayerOps(spec_, index, Shard());
    DTSIM_ASSIGN_OR_RETURN(passes.forward, pricer_.Price(layer.forward, kForwardBoundaries));
    DTSIM_ASSIGN_OR_RETURN(passes.backward, pricer_.Price(layer.backward, kBackwardBoundaries));
    DTSIM_ASSIGN_OR_RETURN(
        passes.recompute,
        pricer_.Price(models::RecomputeOps(layer, config_.training.recompute), kForwardBoundaries));
    passes.sources = pricer_.TakeSources();
    return Status::Ok();
  }

  Status PricePasses() {
    const models::TransformerShard shard = Shard();
    // The first dense and the first MoE layer stand for all of their kind.
    for (int index = 0; index < spec_.layers; ++index) {
      LayerPasses& passes = spec_.IsMoeLayer(index) ? moe_ : dense_;
      if (passes.sources.empty()) DTSIM_RETURN_IF_ERROR(PriceLayer(index, passes));
    }
    const models::LayerOps embedding = models::EmbeddingOps(spec_, shard);
    const models::LayerOps output = models::OutputOps(spec_, shard);
    const Boundaries none;
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
    std::string name, tensor_name;
    for (const PricedOp& op : pass.ops) {
      if (op.segment != segment) {  // names change with the segment only: format them once
        segment = op.segment;
        name = fmt::format("layer{}.{} {}", layer, segment, suffix);
        tensor_name = fmt::format("layer{}.{} tp", layer, segment);
      }
      DurationNs duration = op.duration;
      if (op.expert && expert_load_ != 1.0) {
        duration = DurationNs(std::llround(static_cast<double>(duration.ns()) * expert_load_));
      }
      EmitOp(group, op, duration, name, tensor_name, category);
      if (op.after == After::kTensor) {
        TensorReduce(group, tensor_name);
      } else if (op.after == After::kExpert) {
        ExpertAllToAll(group, fmt::format("layer{}.moe all-to-all", layer));
      }
    }
  }

  // An op's compute, as SUMMA steps on a grid, and the row statistics' all-reduces after it.
  void EmitOp(PeerGroup& group, const PricedOp& op, DurationNs duration, const std::string& name,
              std::string_view tensor_name, std::string_view category) {
    if (op.summa != Op::WeightGemm::kNone) {
      SummaGemm(group, op, duration, name, tensor_name, category);
    } else {
      group.Add(duration, name, category);
    }
    if (op.after == After::kRowStats) {
      // LayerNorm2D: the per-token sum and sum of squares, one all-reduce each over the ROW
      // group, in forward and backward (the loss: its max and sum of exponentials).
      const Bytes bytes(GridTokens() * DTypeBytes(config_.training.dtype));
      for (int i = 0; i < 2; ++i) {
        group.Post(GridComms(CommKind::kAllReduce, bytes, Axis::kRow), tensor_name,
                   kTensorCategory);
      }
    }
  }

  // Tokens on one rank of a grid: the micro-batch's b·s split q·d ways.
  int64_t GridTokens() const {
    return config_.training.micro_batch / Shard().batch_split() * config_.training.seq_len;
  }

  // SUMMA (ColossalAI's Matmul_AB/ABT/ATB_2D, per depth layer for 2.5D), q steps each:
  // forward C = XW broadcasts the X block over ROW and the W block over COL; dgrad dX = dY·Wᵀ
  // broadcasts W over COL and reduces the partial dX block over ROW; wgrad dW = Xᵀ·dY
  // broadcasts X over ROW and reduces the partial dW block over COL (docs/strategies.md).
  void SummaGemm(PeerGroup& group, const PricedOp& op, DurationNs duration, const std::string& name,
                 std::string_view tensor_name, std::string_view category) {
    const int64_t e = DTypeBytes(config_.training.dtype);
    const Bytes activation(op.activation_block * e);
    const Bytes weight(op.weight_block * e);
    std::vector<PeerGroup::SummaStep> steps(static_cast<size_t>(plan_.grid()));
    for (int s = 0; s < plan_.grid(); ++s) {  // step s: blocks from (to) row/column s
      PeerGroup::SummaStep& step = steps[static_cast<size_t>(s)];
      switch (op.summa) {
        case Op::WeightGemm::kForward:
          step.before = {GridComms(CommKind::kBroadcast, activation, Axis::kRow, s),
                         GridComms(CommKind::kBroadcast, weight, Axis::kColumn, s)};
          break;
        case Op::WeightGemm::kDgrad:
          step.before = {GridComms(CommKind::kBroadcast, weight, Axis::kColumn, s)};
          step.after = {GridComms(CommKind::kReduce, activation, Axis::kRow, s)};
          break;
        case Op::WeightGemm::kWgrad:
          step.before = {GridComms(CommKind::kBroadcast, activation, Axis::kRow, s)};
          step.after = {GridComms(CommKind::kReduce, weight, Axis::kColumn, s)};
          break;
        case Op::WeightGemm::kNone:
          break;
      }
    }
    group.Summa(duration, name, tensor_name, category, steps, op.summa != Op::WeightGemm::kWgrad);
  }

  // The grid's groups inside one depth layer: ROW, the q ranks of a grid row (tensor indices
  // i + q·(j + q·k) for i = 0..q−1, adjacent), and COL, those of a grid column (j varies).
  enum class Axis : uint8_t { kRow, kColumn };

  // One collective over `ranks` as the analytical network model prices it (its cheapest
  // algorithm for the group's placement).
  Expected<DurationNs> CollectiveTime(CommKind kind, Bytes bytes, const std::vector<int32_t>& ranks,
                                      int32_t root) const {
    const network::GroupShape shape = network::ShapeOfGroup(ranks, config_.cluster);
    DTSIM_ASSIGN_OR_RETURN(const network::AlgorithmChoice choice,
                           network::ChooseCollectiveAlgorithm({.kind = kind,
                                                               .size = bytes,
                                                               .shape = shape,
                                                               .cluster = &config_.cluster,
                                                               .ranks = ranks,
                                                               .root = root},
                                                              ""));
    return choice.time;
  }

  // TensorReduce's time on the first tensor-parallel group.
  Expected<DurationNs> TensorReduceTime() const {
    if (plan_.tensor < 2) return DurationNs::Zero();
    std::vector<int32_t> ranks;
    for (int tp = 0; tp < plan_.tensor; ++tp) ranks.push_back(plan_.Rank(0, 0, tp));
    if (!plan_.sequence_parallel) {
      return CollectiveTime(CommKind::kAllReduce, ActivationBytes(), ranks, ranks.front());
    }
    DTSIM_ASSIGN_OR_RETURN(
        const DurationNs scatter,
        CollectiveTime(CommKind::kReduceScatter, ActivationBytes(), ranks, ranks.front()));
    DTSIM_ASSIGN_OR_RETURN(
        const DurationNs gather,
        CollectiveTime(CommKind::kAllGather, Bytes(ActivationBytes().count() / plan_.tensor), ranks,
                       ranks.front()));
    return scatter + gather;
  }

  // A grid collective of the first ROW (COL) group rooted at member `root` — the cheaper of
  // that and member 0, as a rank may be priced either way (GridComms).
  Expected<DurationNs> GridTime(CommKind kind, Bytes bytes, Axis axis, int root) const {
    const int q = plan_.grid();
    std::vector<int32_t> ranks;
    for (int c = 0; c < q; ++c) ranks.push_back(plan_.Rank(0, 0, c * (axis == Axis::kRow ? 1 : q)));
    DTSIM_ASSIGN_OR_RETURN(const DurationNs at_root,
                           CollectiveTime(kind, bytes, ranks, ranks[static_cast<size_t>(root)]));
    DTSIM_ASSIGN_OR_RETURN(const DurationNs at_first,
                           CollectiveTime(kind, bytes, ranks, ranks.front()));
    return std::min(at_root, at_first);
  }

  // One pass's work on a rank's compute stream (ops, 1D reductions, a grid's row-statistics
  // all-reduces) and on its "tp" stream (SUMMA's broadcasts and reduces), as Emit lays it out.
  Status PassWork(const PricedPass& pass, DurationNs& compute, DurationNs& grid) const {
    const int64_t e = DTypeBytes(config_.training.dtype);
    for (const PricedOp& op : pass.ops) {
      compute += op.duration;
      if (op.after == After::kTensor) {
        DTSIM_ASSIGN_OR_RETURN(const DurationNs reduce, TensorReduceTime());
        compute += reduce;
      } else if (op.after == After::kRowStats) {
        DTSIM_ASSIGN_OR_RETURN(
            const DurationNs stats,
            GridTime(CommKind::kAllReduce, Bytes(GridTokens() * e), Axis::kRow, 0));
        compute += stats + stats;
      }
      if (op.summa == Op::WeightGemm::kNone) continue;
      const Bytes activation(op.activation_block * e);
      const Bytes weight(op.weight_block * e);
      for (int step = 0; step < plan_.grid(); ++step) {
        std::vector<std::tuple<CommKind, Bytes, Axis>> comms;
        switch (op.summa) {
          case Op::WeightGemm::kForward:
            comms = {{CommKind::kBroadcast, activation, Axis::kRow},
                     {CommKind::kBroadcast, weight, Axis::kColumn}};
            break;
          case Op::WeightGemm::kDgrad:
            comms = {{CommKind::kBroadcast, weight, Axis::kColumn},
                     {CommKind::kReduce, activation, Axis::kRow}};
            break;
          case Op::WeightGemm::kWgrad:
            comms = {{CommKind::kBroadcast, activation, Axis::kRow},
                     {CommKind::kReduce, weight, Axis::kColumn}};
            break;
          case Op::WeightGemm::kNone:
            break;
        }
        for (const auto& [kind, bytes, axis] : comms) {
          DTSIM_ASSIGN_OR_RETURN(const DurationNs time, GridTime(kind, bytes, axis, step));
          grid += time;
        }
      }
    }
    return Status::Ok();
  }

  // One collective per ROW (COL) group of the current (data index, stage), over the group's
  // simulated members and priced over all q: per simulated peer, the one it takes part in.
  // A broadcast's or reduce's root is the member at `root` along the axis (with symmetric
  // ranks, the simulated member: by the grid's symmetry it costs the same).
  std::vector<graph::CommId> GridComms(CommKind kind, Bytes bytes, Axis axis, int root = 0) {
    const int q = plan_.grid();
    const int stride = axis == Axis::kRow ? 1 : q;
    std::vector<graph::CommId> comms;
    std::vector<std::optional<graph::CommId>> made(static_cast<size_t>(simulated_tensor_));
    for (int tp = 0; tp < simulated_tensor_; ++tp) {
      const int first = tp - (tp / stride % q) * stride;
      std::optional<graph::CommId>& comm = made[static_cast<size_t>(first)];
      if (!comm) {
        std::vector<int32_t> logical, simulated;
        for (int c = 0; c < q; ++c) {
          const int member = first + c * stride;
          logical.push_back(plan_.Rank(group_dp_, group_stage_, member));
          if (member < simulated_tensor_) simulated.push_back(logical.back());
        }
        const int32_t root_rank = first + root * stride < simulated_tensor_
                                      ? logical[static_cast<size_t>(root)]
                                      : simulated.front();
        comm = builder_.AddCollective(kind, bytes, simulated, {}, {}, root_rank);
        if (simulated.size() != logical.size()) builder_.PriceAs(*comm, logical);
      }
      comms.push_back(*comm);
    }
    return comms;
  }

  // The embedding's tensor-parallel collective: 1D, the all-reduce (reduce-scatter) of the
  // vocabulary-parallel lookup in forward; on a grid, VocabParallelEmbedding2D's reduce-scatter
  // over COL of the depth layer's B/d tokens × h/q in forward and its all-gather in backward.
  void EmbeddingCollective(PeerGroup& group, bool backward) {
    if (!plan_.on_grid()) {
      if (!backward) TensorReduce(group, "embedding tp");
      return;
    }
    const Bytes bytes(GridTokens() * spec_.hidden * DTypeBytes(config_.training.dtype));
    group.Post(
        GridComms(backward ? CommKind::kAllGather : CommKind::kReduceScatter, bytes, Axis::kColumn),
        "embedding tp", kTensorCategory);
  }

  // Bytes each rank sends in one expert all-to-all: its E·C tokens of h elements (C, the
  // capacity, is the balanced share when dropless). With skewed dropless routing in full
  // mode, the rank of the busiest expert receives `imbalance` times its share and every rank
  // waits for it: priced as if every rank moved that much.
  Bytes ExpertBytes() const {
    const models::MoeSpec& moe = spec_.moe;
    const int64_t tokens = config_.training.micro_batch * config_.training.seq_len;
    const double bytes = static_cast<double>(moe.experts * moe.Capacity(tokens) * spec_.hidden *
                                             DTypeBytes(config_.training.dtype));
    return Bytes(std::llround(bytes * (Skewed() ? plan_.expert_imbalance : 1.0)));
  }

  // Whether ranks differ by the tokens their experts get (full ranks only).
  bool Skewed() const { return !symmetric_ && SkewedRouting(config_); }

  // The routed-token load of data index `dp`'s experts relative to the mean: the busiest
  // expert sits on the first rank of each expert-parallel group, the others share the rest.
  double ExpertLoad(int dp) const {
    if (!Skewed()) return 1.0;
    const double s = plan_.expert_imbalance;
    return dp % plan_.expert == 0 ? s : (plan_.expert - s) / (plan_.expert - 1);
  }

  // The expert-parallel all-to-all of the group's tensor-parallel peers: peer i of data index
  // dp exchanges with peer i of the other data indices of its expert group.
  void ExpertAllToAll(PeerGroup& group, std::string_view name) {
    if (plan_.expert < 2) return;
    group.Post(Matched(Across::kExpert, CommKind::kAllToAll, ExpertBytes()), name, kExpertCategory);
  }

  // Collectives across data indices (the expert group; all of data parallelism; or the expert
  // data-parallel group, the D/EP indices holding the same experts as the group's) of the
  // group's stage, one per simulated tensor-parallel peer i (over peer i of each data index).
  // Members build their stages one after another, so the first to reach the n-th such
  // collective of its program makes it and the others (same stage, same program) join it by
  // that index.
  enum class Across : uint8_t { kExpert, kData, kExpertData };
  std::vector<graph::CommId> Matched(Across across, CommKind kind, Bytes bytes) {
    int first = 0;
    std::vector<int> dps;
    switch (across) {
      case Across::kExpert:
        first = plan_.ExpertGroupFirst(group_dp_);
        dps.resize(static_cast<size_t>(plan_.expert));
        std::iota(dps.begin(), dps.end(), first);
        break;
      case Across::kData:
        dps.resize(static_cast<size_t>(plan_.data));
        std::iota(dps.begin(), dps.end(), 0);
        break;
      case Across::kExpertData:
        first = group_dp_ % plan_.expert;
        for (int dp = first; dp < plan_.data; dp += plan_.expert) dps.push_back(dp);
        break;
    }
    std::vector<std::vector<graph::CommId>>& made = matched_[{across, group_stage_, first}];
    const size_t index = sequence_[static_cast<size_t>(across)]++;
    if (index == made.size()) {
      // On a 2.5D grid peer tp shares its weights with tp ± q² (the other depth layers): one
      // collective spans them all (RanksOver), and each depth layer's peer joins it.
      std::vector<graph::CommId> comms;
      for (int tp = 0; tp < simulated_tensor_; ++tp) {
        if (tp >= WeightPeers()) {
          comms.push_back(comms[static_cast<size_t>(tp % WeightPeers())]);
          continue;
        }
        const RankGroup ranks = RanksOver(group_stage_, tp, dps);
        comms.push_back(builder_.AddCollective(kind, bytes, ranks.simulated));
        if (ranks.simulated.size() != ranks.logical.size()) {
          builder_.PriceAs(comms.back(), ranks.logical);
        }
      }
      made.push_back(std::move(comms));
    }
    return made[index];
  }

  // Peer `tp` of data indices `dps` on `stage` — with 2.5D, at every depth layer, which hold
  // the same weights: all of them (`logical`, what collectives are priced over) and the
  // simulated ones, with their (data index, tensor index).
  struct RankGroup {
    std::vector<int32_t> logical, simulated;
    std::vector<std::pair<int, int>> simulated_at;
  };
  RankGroup RanksOver(int stage, int tp, const std::vector<int>& dps) const {
    RankGroup group;
    for (int dp : dps) {
      for (int member = tp; member < plan_.tensor; member += WeightPeers()) {
        group.logical.push_back(plan_.Rank(dp, stage, member));
        if (dp < simulated_data_ && member < simulated_tensor_) {
          group.simulated.push_back(group.logical.back());
          group.simulated_at.emplace_back(dp, member);
        }
      }
    }
    return group;
  }

  // Tensor-parallel ranks with distinct weights: all t, or the q² of one 2.5D depth layer.
  int WeightPeers() const { return plan_.tensor / plan_.tensor_depth; }

  // ZeRO-3: each layer's (embedding's, output's) parameter shards are all-gathered from the
  // data-parallel group before its forward and again before its backward, on the rank's
  // "zero" stream, one layer ahead: the gather for the next piece may start once the compute
  // before the current one has ended, and the piece's first task waits for its own gather.
  // With expert parallelism a MoE layer's local experts (`expert_parameters` of `parameters`)
  // are sharded over their expert-data-parallel group instead (D/EP ranks, as ZeRO-1/2 shard
  // their optimizer state and gradients): a second gather over that group follows the dense
  // one on the same stream.
  void GatherParameters(PeerGroup& group, int64_t parameters, std::string_view name,
                        int64_t expert_parameters = 0) {
    const int replicas = plan_.WeightReplicas();
    if (plan_.zero_stage < 3 || replicas < 2) return;
    const int64_t dense = parameters - expert_parameters;
    const int64_t element_bytes = DTypeBytes(config_.training.dtype);
    std::vector<std::vector<graph::CommId>> pieces;
    pieces.push_back(Matched(Across::kData, CommKind::kAllGather,
                             Bytes((dense + replicas - 1) / replicas * element_bytes)));
    const int expert_data = plan_.data / plan_.expert;
    if (expert_parameters > 0 && expert_data > 1) {
      pieces.push_back(
          Matched(Across::kExpertData, CommKind::kAllGather,
                  Bytes((expert_parameters + expert_data - 1) / expert_data * element_bytes)));
    }
    group.Flush();
    std::vector<TaskId> gathers;
    for (size_t i = 0; i < group.ranks().size(); ++i) {
      const StreamId stream = builder_.Stream(group.ranks()[i], "zero");
      const TaskId gather =
          builder_.AddCollectiveTask(stream, pieces.front()[i], name, kDataCategory);
      if (!gather_after_.empty() && gather_after_[i]) {
        builder_.AddDependency(gather, *gather_after_[i]);
      }
      // The experts' gather runs after the dense one on the same stream: waiting for it is
      // waiting for both.
      gathers.push_back(pieces.size() > 1 ? builder_.AddCollectiveTask(
                                                stream, pieces.back()[i],
                                                fmt::format("{} experts", name), kDataCategory)
                                          : gather);
    }
    gather_after_.clear();
    for (size_t i = 0; i < group.ranks().size(); ++i) gather_after_.push_back(group.last(i));
    group.WaitBefore(std::move(gathers));
  }

  // A layer's gather; its parameter counts and name are worked out only under ZeRO-3.
  void GatherLayer(PeerGroup& group, int layer) {
    if (plan_.zero_stage < 3) return;
    GatherParameters(group, LayerParameters(layer), fmt::format("layer{} gather", layer),
                     LayerExpertParameters(layer));
  }

  void EmitWhole(PeerGroup& group, const PricedPass& pass, const std::string& name,
                 std::string_view tensor_name) {
    for (const PricedOp& op : pass.ops) {
      EmitOp(group, op, op.duration, name, tensor_name, kComputeCategory);
    }
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

  // The layers of chunk `chunk` of `stage`, in order: the stage's layers
  // (models::StageLayerIndices, which the memory model and gradient layout use too) split into
  // its equal chunks (uneven stages have one chunk each).
  std::span<const int> ChunkLayers(int stage, int chunk) const {
    const std::vector<int>& layers = stage_layers_[static_cast<size_t>(stage)];
    const size_t per_chunk = layers.size() / static_cast<size_t>(plan_.virtual_stages);
    return std::span<const int>(layers).subspan(static_cast<size_t>(chunk) * per_chunk, per_chunk);
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
      GatherParameters(group, EmbeddingParameters(), "embedding gather");
      EmitWhole(group, embedding_forward_, "embedding fwd", "embedding tp");
      EmbeddingCollective(group, false);
    }
    for (const int layer : ChunkLayers(stage, chunk)) {
      GatherLayer(group, layer);
      Emit(group, Passes(layer).forward, layer, "fwd", kComputeCategory);
    }
    if (HoldsOutput(stage, chunk)) {
      GatherParameters(group, OutputParameters(stage), "output gather");
      EmitWhole(group, output_forward_, "output fwd", "output tp");
    } else {
      group.Send(Peers(group_dp_, stage < last ? stage + 1 : 0), Tag(microbatch, chunk, false),
                 PipelineBytes(), true, "send activations");
    }
    Account(stage, chunk, false);
  }

  void Backward(PeerGroup& group, int stage, int chunk, int64_t microbatch, GradientReady* ready) {
    const int last = plan_.pipeline - 1;
    auto mark = [&](GradientTensors tensors, GradientTensors experts = {}) {
      if (ready == nullptr) return;
      group.Flush();
      for (size_t i = 0; i < group.ranks().size(); ++i) {
        ready->at[i].push_back(group.GradientsReady(i));
      }
      ready->tensors.push_back(std::move(tensors));
      ready->expert_tensors.push_back(std::move(experts));
    };
    if (!HoldsOutput(stage, chunk)) {
      const int from = stage < last ? stage + 1 : 0;
      const int from_chunk = stage < last ? chunk : chunk + 1;
      group.Recv(Peers(group_dp_, from), Tag(microbatch, from_chunk, true), PipelineBytes(),
                 "recv gradients");
    } else {
      GatherParameters(group, OutputParameters(stage), "output gather");
      EmitWhole(group, output_backward_, "output bwd", "output tp");
      if (!plan_.on_grid()) TensorReduce(group, "output tp");
      mark(OutputGradients(spec_, plan_, HoldsOutputTable(spec_, stage)));
    }
    const std::span<const int> layers = ChunkLayers(stage, chunk);
    for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
      const int layer = *it;
      GatherLayer(group, layer);
      Emit(group, Passes(layer).recompute, layer, "recompute", kRecomputeCategory);
      Emit(group, Passes(layer).backward, layer, "bwd", kComputeCategory);
      LayerGradientSplit gradients = LayerGradients(spec_, plan_, layer);
      mark(std::move(gradients.dense), std::move(gradients.experts));
    }
    if (HoldsEmbedding(stage, chunk)) {
      GatherParameters(group, EmbeddingParameters(), "embedding gather");
      EmbeddingCollective(group, true);
      EmitWhole(group, embedding_backward_, "embedding bwd", "embedding tp");
      mark(EmbeddingGradients(spec_, plan_));
    } else {
      group.Send(Peers(group_dp_, stage > 0 ? stage - 1 : last), Tag(microbatch, chunk, true),
                 PipelineBytes(), false, "send gradients");
    }
    group.Flush();
    Account(stage, chunk, true);
  }

  // Parameters of one piece on one rank (as many as its gradients).
  int64_t LayerParameters(int layer) const {
    if (plan_.on_grid()) return LayerGradients(spec_, plan_, layer).dense.elements();
    return models::LayerParameterCount(spec_, plan_.tensor, plan_.expert, layer);
  }
  // Of those, the local experts' when expert parallelism shards them (0 otherwise).
  int64_t LayerExpertParameters(int layer) const {
    return plan_.expert > 1 ? LayerGradients(spec_, plan_, layer).experts.elements() : 0;
  }
  int64_t EmbeddingParameters() const { return EmbeddingGradients(spec_, plan_).elements(); }
  int64_t OutputParameters(int stage) const {
    return OutputGradients(spec_, plan_, HoldsOutputTable(spec_, stage)).elements();
  }

  // FLOPs and cost sources of one micro-batch pass on the t peers of a stage.
  void Account(int stage, int chunk, bool backward) {
    // Every tensor-parallel peer, and with symmetric ranks every data-parallel replica, does
    // the same work.
    // (Skewed routing moves expert work between ranks; the sums stay.)
    const double peers = static_cast<double>(plan_.tensor) * (plan_.data / simulated_data_);
    const auto count = static_cast<int64_t>(peers);
    double flops = 0;
    double recompute = 0;
    for (const int index : ChunkLayers(stage, chunk)) {
      const LayerPasses& layer = Passes(index);
      flops += (backward ? layer.backward : layer.forward).model_flops;
      if (backward) recompute += layer.recompute.model_flops;
      // Cost sources: each priced op once per use (backward with its recompute).
      const size_t forward_ops = layer.forward.ops.size();
      const size_t begin = backward ? forward_ops : 0;
      const size_t end = backward ? layer.sources.size() : forward_ops;
      for (size_t op = begin; op < end; ++op) result_.sources.Add(layer.sources[op], count);
    }
    const bool embedding = HoldsEmbedding(stage, chunk);
    const bool output = HoldsOutput(stage, chunk);
    if (embedding) flops += (backward ? embedding_backward_ : embedding_forward_).model_flops;
    if (output) flops += (backward ? output_backward_ : output_forward_).model_flops;
    result_.model_flops += peers * flops;
    result_.hardware_flops += peers * (flops + recompute);
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
    group_stage_ = stage;
    sequence_ = {};
    gather_after_.clear();
    expert_load_ = ExpertLoad(dp);
    PeerGroup group(builder_, Peers(dp, stage), Peers(dp, stage, true));
    GradientReady ready;
    ready.at.resize(group.ranks().size());
    for (const PipelineStep& step :
         StageSchedule(plan_.schedule, plan_.pipeline, stage, microbatches, plan_.virtual_stages)) {
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

  // Data-parallel gradient reduction (GradientReducer) of each stage's gradients, bucketed in
  // the order the last backward produces them; then, as Megatron's finalize step does, the
  // tied embedding's all-reduce between the first and last stages (queued behind the buckets,
  // so that waiting for the embedding's gradient, the first stage's last, holds none of them
  // back); then the optimizer step.
  Status ReduceGradients(const std::vector<std::vector<GradientReady>>& ready) {
    GradientReducer reducer(config_, cost_, phase_, builder_, result_.sources);
    StepWaits waits;
    struct StepArgs {
      ReductionGroup data;
      int64_t parameters = 0;
      int64_t expert_parameters = 0;
      std::vector<ReductionGroup> expert_groups;
    };
    std::vector<StepArgs> steps;
    for (int stage = 0; stage < plan_.pipeline; ++stage) {
      const auto& stage_ready = ready[static_cast<size_t>(stage)];
      int64_t stage_params = 0;
      int64_t expert_params = 0;
      for (const GradientTensors& point : stage_ready.front().tensors)
        stage_params += point.elements();
      for (const GradientTensors& point : stage_ready.front().expert_tensors) {
        expert_params += point.elements();
      }
      stage_params += expert_params;
      for (int tp = 0; tp < std::min(simulated_tensor_, WeightPeers()); ++tp) {
        // Dense gradients over the whole data-parallel group (with 2.5D, of every depth layer:
        // Tesseract's depth all-reduce of weight gradients, folded into data parallelism); the
        // experts' over the data indices holding the same experts (expert-data parallelism,
        // D/EP ranks).
        std::vector<int> all(static_cast<size_t>(plan_.data));
        std::iota(all.begin(), all.end(), 0);
        StepArgs& step = steps.emplace_back();
        step.data = Reduction(stage_ready, RanksOver(stage, tp, all));
        step.parameters = stage_params;
        step.expert_parameters = plan_.expert > 1 ? expert_params : 0;
        DTSIM_RETURN_IF_ERROR(reducer.Reduce(stage_ready.front().tensors, step.data, waits));
        for (int first = 0; first < std::min(plan_.expert, simulated_data_); ++first) {
          std::vector<int> holders;
          for (int dp = first; dp < plan_.data; dp += plan_.expert) holders.push_back(dp);
          step.expert_groups.push_back(Reduction(stage_ready, RanksOver(stage, tp, holders)));
          DTSIM_RETURN_IF_ERROR(
              reducer.Reduce(stage_ready.front().expert_tensors, step.expert_groups.back(), waits));
        }
      }
    }
    TiedEmbeddingReduce(ready, waits);
    for (const StepArgs& step : steps) {
      reducer.Step(step.data, step.parameters, waits, step.expert_parameters, step.expert_groups);
    }
    return Status::Ok();
  }

  // `ranks` with, per simulated member, where each gradient point is ready in its stage's last
  // backward; every rank of the group runs each reduction (with symmetric ranks, every rank of
  // the stage).
  ReductionGroup Reduction(const std::vector<GradientReady>& stage_ready,
                           const RankGroup& ranks) const {
    ReductionGroup group{.simulated = ranks.simulated,
                         .logical = ranks.logical,
                         .ready = {},
                         .represented = symmetric_ ? static_cast<int64_t>(plan_.data) * plan_.tensor
                                                   : static_cast<int64_t>(ranks.simulated.size())};
    for (const auto& [dp, member] : ranks.simulated_at) {
      group.ready.emplace_back(
          stage_ready[static_cast<size_t>(dp)].at[static_cast<size_t>(member)]);
    }
    return group;
  }

  // Megatron keeps a tied embedding on the first and the last stage and all-reduces its
  // gradient between the two before the step. Adds to `waits`, per rank, what its step waits for.
  void TiedEmbeddingReduce(const std::vector<std::vector<GradientReady>>& ready, StepWaits& waits) {
    if (!spec_.tied_embeddings || plan_.pipeline < 2) return;
    const int last = plan_.pipeline - 1;
    const std::array<int64_t, 2> table = EmbeddingGradients(spec_, plan_).matrices.front();
    const int64_t bytes = table[0] * table[1] * DTypeBytes(config_.training.grad_dtype);
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
  }

  const SimulationConfig& config_;
  const models::TransformerSpec& spec_;
  const ParallelPlan& plan_;
  const models::OpCostModel& cost_;
  Pricer pricer_;
  CompressionPhase phase_;
  TaskGraphBuilder builder_;
  IterationStats result_;
  LayerPasses dense_, moe_;
  PricedPass embedding_forward_, embedding_backward_, output_forward_, output_backward_;
  std::vector<models::OpCost> embedding_sources_, output_sources_;
  bool symmetric_;
  int simulated_data_;
  int simulated_tensor_;
  std::vector<std::vector<int>> stage_layers_;  // per stage, its layers (StageLayerIndices)
  int group_dp_ = 0;
  int group_stage_ = 0;
  // Matched collectives made so far per (across, stage, first data index), each one comm per
  // simulated tensor-parallel peer; per kind, the index of the next in this stage's program.
  std::map<std::tuple<Across, int, int>, std::vector<std::vector<graph::CommId>>> matched_;
  std::array<size_t, 3> sequence_{};
  // ZeRO-3: per peer, the end of the compute before the last gathered piece.
  std::vector<std::optional<TaskId>> gather_after_;
  double expert_load_ = 1.0;
};

}  // namespace

Expected<std::vector<models::MemoryBreakdown>> EstimateStageMemory(const SimulationConfig& config) {
  const ParallelPlan& plan = config.plan;
  if (plan.layer_split == ParallelPlan::LayerSplit::kBalanced && plan.stage_layers.empty()) {
    return Error("balanced stages have no layer counts until Simulate balances them",
                 "parallelism.pipeline.layers", "balanced");
  }
  const std::unique_ptr<GradientCompression> compression = MakeCompression(config.compression);
  std::vector<models::MemoryBreakdown> stages;
  for (int stage = 0; stage < plan.pipeline; ++stage) {
    const models::MemoryPlan memory_plan{.shard = ShardOf(config),
                                         .recompute = config.training.recompute,
                                         .schedule = plan.schedule,
                                         .pipeline_stages = plan.pipeline,
                                         .virtual_stages = plan.virtual_stages,
                                         .stage = stage,
                                         .microbatches = config.Microbatches(),
                                         .data_parallel = plan.data,
                                         .zero_stage = plan.zero_stage,
                                         .optimizer = config.training.optimizer,
                                         .param_dtype = config.training.dtype,
                                         .grad_dtype = config.training.grad_dtype,
                                         .stage_layers = plan.stage_layers};
    DTSIM_ASSIGN_OR_RETURN(models::MemoryBreakdown memory,
                           models::EstimateMemory(config.model, memory_plan));
    // Error-feedback residuals of gradient compression count as optimizer state.
    if (compression->Compresses() && plan.data > 1) {
      memory.optimizer_state += compression->StateBytes(ModelGradients(config, stage), plan.data,
                                                        config.training.grad_dtype);
    }
    stages.push_back(memory);
  }
  return stages;
}

Expected<std::vector<models::MemoryBreakdown>> StageMemory(const SimulationConfig& config) {
  DTSIM_ASSIGN_OR_RETURN(std::vector<models::MemoryBreakdown> stages, EstimateStageMemory(config));
  for (size_t stage = 0; stage < stages.size(); ++stage) {
    const models::MemoryBreakdown& memory = stages[stage];
    if (memory.total() > config.gpu.memory.count()) {
      return Error(fmt::format("the plan does not fit: pipeline stage {} needs {} per GPU, {} has "
                               "{} (parameters {}, gradients {}, optimizer state {}, activations "
                               "{}, temporary {})",
                               stage, FormatGiB(memory.total()), config.gpu.name,
                               FormatGiB(config.gpu.memory.count()), FormatGiB(memory.parameters),
                               FormatGiB(memory.gradients), FormatGiB(memory.optimizer_state),
                               FormatGiB(memory.activations), FormatGiB(memory.temporary)),
                   "parallelism", FormatGiB(memory.total()));
    }
  }
  return stages;
}

Expected<PassTimes> PricePassTimes(const SimulationConfig& config,
                                   const models::OpCostModel& cost) {
  return IterationBuilder(config, cost, CompressionPhase::kCompressed).Times();
}

// Contiguous layers per stage minimizing the slowest stage's work per micro-batch (its
// forward, backward and recompute on the compute stream plus a grid's SUMMA traffic), the
// embedding on the first stage and the output layer on the last: the linear partition problem,
// solved exactly by dynamic programming over (stage, layers so far), O(p·L²). Each stage gets at
// least one layer; among equally slow splits the one giving earlier stages fewer layers wins
// (under 1F1B they hold more micro-batches' activations).
Expected<std::vector<int>> BalanceStageLayers(const SimulationConfig& config,
                                              const models::OpCostModel& cost) {
  const models::TransformerSpec& spec = config.model.transformer;
  const int p = config.plan.pipeline;
  const int layers = spec.layers;
  if (p > layers) {
    return Error(fmt::format("{} pipeline stages need at least as many layers ({})", p, layers),
                 "parallelism.pipeline.layers", "balanced");
  }
  SimulationConfig uniform = config;
  uniform.plan.layer_split = ParallelPlan::LayerSplit::kUniform;
  uniform.plan.stage_layers.clear();
  DTSIM_ASSIGN_OR_RETURN(const PassTimes times, PricePassTimes(uniform, cost));
  const auto work = [](const PieceTimes& piece) {
    return (piece.forward + piece.backward + piece.recompute + piece.forward_grid +
            piece.backward_grid + piece.recompute_grid)
        .ns();
  };
  std::vector<int64_t> prefix(static_cast<size_t>(layers) + 1, 0);
  for (int i = 0; i < layers; ++i) {
    prefix[static_cast<size_t>(i) + 1] =
        prefix[static_cast<size_t>(i)] + work(times.Layer(spec, i));
  }
  const int64_t embedding = work(times.embedding);
  const int64_t output = work(times.output);
  // slowest[s][i]: the least possible slowest stage when stages 0..s hold layers [0, i);
  // cut[s][i]: where stage s starts in that split.
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  const auto n = static_cast<size_t>(layers) + 1;
  std::vector<std::vector<int64_t>> slowest(static_cast<size_t>(p), std::vector<int64_t>(n, kNone));
  std::vector<std::vector<int>> cut(static_cast<size_t>(p), std::vector<int>(n, 0));
  const auto stage_work = [&](int s, int from, int to) {
    return prefix[static_cast<size_t>(to)] - prefix[static_cast<size_t>(from)] +
           (s == 0 ? embedding : 0) + (s == p - 1 ? output : 0);
  };
  for (int i = 1; i <= layers; ++i) slowest[0][static_cast<size_t>(i)] = stage_work(0, 0, i);
  for (int s = 1; s < p; ++s) {
    for (int i = s + 1; i <= layers - (p - 1 - s); ++i) {
      for (int j = s; j < i; ++j) {  // stage s holds [j, i); the first j wins a tie
        const int64_t before = slowest[static_cast<size_t>(s - 1)][static_cast<size_t>(j)];
        if (before == kNone) continue;
        const int64_t slow = std::max(before, stage_work(s, j, i));
        if (slow < slowest[static_cast<size_t>(s)][static_cast<size_t>(i)]) {
          slowest[static_cast<size_t>(s)][static_cast<size_t>(i)] = slow;
          cut[static_cast<size_t>(s)][static_cast<size_t>(i)] = j;
        }
      }
    }
  }
  std::vector<int> counts(static_cast<size_t>(p));
  int end = layers;
  for (int s = p - 1; s > 0; --s) {
    const int start = cut[static_cast<size_t>(s)][static_cast<size_t>(end)];
    counts[static_cast<size_t>(s)] = end - start;
    end = start;
  }
  counts[0] = end;
  return counts;
}

Expected<IterationGraph> BuildTransformerIteration(const SimulationConfig& config,
                                                   const models::OpCostModel& cost,
                                                   CompressionPhase phase) {
  return IterationBuilder(config, cost, phase).Build();
}

Expected<IterationGraph> BuildIteration(const SimulationConfig& config,
                                        const models::OpCostModel& cost, CompressionPhase phase) {
  DTSIM_ASSIGN_OR_RETURN(std::vector<models::MemoryBreakdown> memory, StageMemory(config));
  DTSIM_ASSIGN_OR_RETURN(IterationGraph iteration,
                         config.model.family == models::ModelFamily::kResNet
                             ? BuildDataParallelIteration(config, cost, phase)
                             : BuildTransformerIteration(config, cost, phase));
  iteration.stats.stage_memory = std::move(memory);
  return iteration;
}

}  // namespace dtsim::strategies
