#include "strategies/transformer_iteration.h"

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <numeric>
#include <tuple>
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

// What follows an op in a pass: nothing, a tensor-parallel reduction or an expert-parallel
// all-to-all.
enum class After : uint8_t { kNothing, kTensor, kExpert };
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
};

struct PricedPass {
  std::vector<PricedOp> ops;
  double model_flops = 0;
};

class Pricer {
 public:
  explicit Pricer(const models::OpCostModel& cost) : cost_(cost) {}

  Expected<PricedPass> Price(const std::vector<Op>& ops, const Boundaries& boundaries) {
    PricedPass pass;
    for (const Op& op : ops) {
      const std::optional<models::OpCost> cost = cost_.Price(op);
      if (!cost) {
        return Error(fmt::format("cost model \"{}\" cannot price op {} ({})", cost_.name(),
                                 op.name, op.signature.Key()));
      }
      const std::string_view name = op.name;
      const auto boundary = boundaries.find(name);
      pass.ops.push_back({std::string(name.substr(0, name.find('.'))), cost->duration,
                          boundary != boundaries.end() ? boundary->second : After::kNothing,
                          name.starts_with("moe.expert.")});
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
  void ApplyWaits() {
    for (size_t i = 0; i < waits_.size(); ++i) builder_.AddDependency(*last_[i], waits_[i]);
    waits_.clear();
  }

  TaskGraphBuilder& builder_;
  std::vector<int32_t> ranks_;
  std::vector<int32_t> logical_;
  std::vector<TaskId> waits_;
  std::vector<StreamId> compute_, send_forward_, send_backward_;
  std::vector<std::optional<TaskId>> last_;
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

LayerGradientSplit LayerGradients(const models::TransformerSpec& spec, int t, int ep, int layer) {
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

// The last stage holds the output table unless it is tied to the first stage's embedding.
bool HoldsOutputTable(const models::TransformerSpec& spec, int stage) {
  return !spec.tied_embeddings || stage != 0;
}

// The gradients one rank of pipeline stage `stage` holds.
GradientTensors StageGradients(const SimulationConfig& config, int stage) {
  const models::TransformerSpec& spec = config.model.transformer;
  const ParallelPlan& plan = config.plan;
  GradientTensors tensors;
  if (stage == 0) tensors.Append(EmbeddingGradients(spec, plan.tensor));
  for (int index : models::StageLayerIndices(spec, plan.pipeline, plan.virtual_stages, stage)) {
    const LayerGradientSplit layer = LayerGradients(spec, plan.tensor, plan.expert, index);
    tensors.Append(layer.dense);
    tensors.Append(layer.experts);
  }
  if (stage == plan.pipeline - 1) {
    tensors.Append(OutputGradients(spec, plan.tensor, HoldsOutputTable(spec, stage)));
  }
  return tensors;
}

// Where each peer's gradients become ready in the last micro-batch's backward, in the order
// they do: the output layer (last stage), each layer from the last, the embedding (first).
struct GradientReady {
  std::vector<std::vector<TaskId>> at;           // per peer
  std::vector<GradientTensors> tensors;          // the gradients ready there
  std::vector<GradientTensors> expert_tensors;   // of which the experts'
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
            .sequence_parallel = plan_.sequence_parallel, .expert_parallel = plan_.expert,
            .flash_attention = config_.training.flash_attention,
            .dropout = config_.training.dropout};
  }

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
    DTSIM_ASSIGN_OR_RETURN(passes.recompute,
                           pricer_.Price(models::RecomputeOps(layer, config_.training.recompute),
                                         kForwardBoundaries));
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
    std::string name;
    for (const PricedOp& op : pass.ops) {
      if (op.segment != segment) {  // names change with the segment only: format them once
        segment = op.segment;
        name = fmt::format("layer{}.{} {}", layer, segment, suffix);
      }
      DurationNs duration = op.duration;
      if (op.expert && expert_load_ != 1.0) {
        duration = DurationNs(std::llround(static_cast<double>(duration.ns()) * expert_load_));
      }
      group.Add(duration, name, category);
      if (op.after == After::kTensor) {
        TensorReduce(group, fmt::format("layer{}.{} tp", layer, segment));
      } else if (op.after == After::kExpert) {
        ExpertAllToAll(group, fmt::format("layer{}.moe all-to-all", layer));
      }
    }
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
    group.Post(Matched(Across::kExpert, CommKind::kAllToAll, ExpertBytes()), name,
                       kExpertCategory);
  }

  // Collectives across data indices (the expert group, or all of data parallelism) of the
  // group's stage, one per simulated tensor-parallel peer i (over peer i of each data index).
  // Members build their stages one after another, so the first to reach the n-th such
  // collective of its program makes it and the others (same stage, same program) join it by
  // that index.
  enum class Across : uint8_t { kExpert, kData };
  std::vector<graph::CommId> Matched(Across across, CommKind kind, Bytes bytes) {
    const bool expert = across == Across::kExpert;
    const int first = expert ? plan_.ExpertGroupFirst(group_dp_) : 0;
    std::vector<int> dps(static_cast<size_t>(expert ? plan_.expert : plan_.data));
    std::iota(dps.begin(), dps.end(), first);
    std::vector<std::vector<graph::CommId>>& made = matched_[{across, group_stage_, first}];
    const size_t index = sequence_[static_cast<size_t>(across)]++;
    if (index == made.size()) {
      std::vector<graph::CommId> comms;
      for (int tp = 0; tp < simulated_tensor_; ++tp) {
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

  // Peer `tp` of data indices `dps` on `stage`: all of them (`logical`, what collectives are
  // priced over) and the simulated ones, with their data indices.
  struct RankGroup {
    std::vector<int32_t> logical, simulated;
    std::vector<int> simulated_dps;
  };
  RankGroup RanksOver(int stage, int tp, const std::vector<int>& dps) const {
    RankGroup group;
    for (int dp : dps) {
      group.logical.push_back(plan_.Rank(dp, stage, tp));
      if (dp < simulated_data_) {
        group.simulated.push_back(group.logical.back());
        group.simulated_dps.push_back(dp);
      }
    }
    return group;
  }

  // ZeRO-3: each layer's (embedding's, output's) parameter shards are all-gathered from the
  // data-parallel group before its forward and again before its backward, on the rank's
  // "zero" stream, one layer ahead: the gather for the next piece may start once the compute
  // before the current one has ended, and the piece's first task waits for its own gather.
  void GatherParameters(PeerGroup& group, int64_t parameters, std::string_view name) {
    if (plan_.zero_stage < 3 || plan_.data < 2) return;
    const int64_t shard = (parameters + plan_.data - 1) / plan_.data;
    const std::vector<graph::CommId> comms = Matched(
        Across::kData, CommKind::kAllGather, Bytes(shard * DTypeBytes(config_.training.dtype)));
    group.Flush();
    std::vector<TaskId> gathers;
    for (size_t i = 0; i < group.ranks().size(); ++i) {
      const TaskId gather = builder_.AddCollectiveTask(
          builder_.Stream(group.ranks()[i], "zero"), comms[i], name, kDataCategory);
      if (!gather_after_.empty() && gather_after_[i]) {
        builder_.AddDependency(gather, *gather_after_[i]);
      }
      gathers.push_back(gather);
    }
    gather_after_.clear();
    for (size_t i = 0; i < group.ranks().size(); ++i) gather_after_.push_back(group.last(i));
    group.WaitBefore(std::move(gathers));
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
      GatherParameters(group, EmbeddingParameters(), "embedding gather");
      EmitWhole(group, embedding_forward_, "embedding fwd");
      TensorReduce(group, "embedding tp");
    }
    for (int i = 0; i < LayersPerChunk(); ++i) {
      const int layer = FirstLayer(stage, chunk) + i;
      GatherParameters(group, LayerParameters(layer), fmt::format("layer{} gather", layer));
      Emit(group, Passes(layer).forward, layer, "fwd", kComputeCategory);
    }
    if (HoldsOutput(stage, chunk)) {
      GatherParameters(group, OutputParameters(stage), "output gather");
      EmitWhole(group, output_forward_, "output fwd");
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
      for (size_t i = 0; i < group.ranks().size(); ++i) ready->at[i].push_back(*group.last(i));
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
      EmitWhole(group, output_backward_, "output bwd");
      TensorReduce(group, "output tp");
      mark(OutputGradients(spec_, plan_.tensor, HoldsOutputTable(spec_, stage)));
    }
    for (int i = LayersPerChunk() - 1; i >= 0; --i) {
      const int layer = FirstLayer(stage, chunk) + i;
      GatherParameters(group, LayerParameters(layer), fmt::format("layer{} gather", layer));
      Emit(group, Passes(layer).recompute, layer, "recompute", kRecomputeCategory);
      Emit(group, Passes(layer).backward, layer, "bwd", kComputeCategory);
      LayerGradientSplit gradients = LayerGradients(spec_, plan_.tensor, plan_.expert, layer);
      mark(std::move(gradients.dense), std::move(gradients.experts));
    }
    if (HoldsEmbedding(stage, chunk)) {
      GatherParameters(group, EmbeddingParameters(), "embedding gather");
      EmitWhole(group, embedding_backward_, "embedding bwd");
      mark(EmbeddingGradients(spec_, plan_.tensor));
    } else {
      group.Send(Peers(group_dp_, stage > 0 ? stage - 1 : last), Tag(microbatch, chunk, true),
                 PipelineBytes(), false, "send gradients");
    }
    group.Flush();
    Account(stage, chunk, true);
  }

  // Parameters of one piece on one rank (as many as its gradients).
  int64_t LayerParameters(int layer) const {
    return models::LayerParameterCount(spec_, plan_.tensor, plan_.expert, layer);
  }
  int64_t EmbeddingParameters() const { return EmbeddingGradients(spec_, plan_.tensor).elements(); }
  int64_t OutputParameters(int stage) const {
    return OutputGradients(spec_, plan_.tensor, HoldsOutputTable(spec_, stage)).elements();
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
    for (int i = 0; i < LayersPerChunk(); ++i) {
      const LayerPasses& layer = Passes(FirstLayer(stage, chunk) + i);
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
    for (int stage = 0; stage < plan_.pipeline; ++stage) {
      const auto& stage_ready = ready[static_cast<size_t>(stage)];
      int64_t stage_params = 0;
      for (const GradientTensors& point : stage_ready.front().tensors) stage_params += point.elements();
      for (const GradientTensors& point : stage_ready.front().expert_tensors) {
        stage_params += point.elements();
      }
      for (int tp = 0; tp < simulated_tensor_; ++tp) {
        // Dense gradients over the whole data-parallel group; the experts' over the data
        // indices holding the same experts (expert-data parallelism, D/EP ranks).
        std::vector<int> all(static_cast<size_t>(plan_.data));
        std::iota(all.begin(), all.end(), 0);
        const RankGroup data = RanksOver(stage, tp, all);
        DTSIM_RETURN_IF_ERROR(ReduceOver(stage_ready, data, tp, false, waits));
        for (int first = 0; first < std::min(plan_.expert, simulated_data_); ++first) {
          std::vector<int> holders;
          for (int dp = first; dp < plan_.data; dp += plan_.expert) holders.push_back(dp);
          DTSIM_RETURN_IF_ERROR(
              ReduceOver(stage_ready, RanksOver(stage, tp, holders), tp, true, waits));
        }
        Optimizer(data.simulated, data.logical, stage_params, waits);
      }
    }
    return Status::Ok();
  }

  // Buckets the dense (or expert) gradients of one stage's tensor-parallel peer `tp` in the
  // order they become ready and reduces each over `ranks`.
  Status ReduceOver(const std::vector<GradientReady>& stage_ready, const RankGroup& ranks, int tp,
                    bool experts, std::map<int32_t, std::vector<TaskId>>& waits) {
    const int64_t grad_bytes = DTypeBytes(config_.training.grad_dtype);
    const bool compressed = phase_ == CompressionPhase::kCompressed && compression_->Compresses();
    const bool one_buffer = compressed && compression_->ReducesAtStep();
    const bool overlap = plan_.overlap_gradient_reduce && !one_buffer;
    if (ranks.logical.size() < 2) return Status::Ok();
    const std::vector<GradientTensors>& points =
        experts ? stage_ready.front().expert_tensors : stage_ready.front().tensors;
    GradientTensors bucket;
    for (size_t point = 0; point < points.size(); ++point) {
      bucket.Append(points[point]);
      const bool full = !one_buffer && bucket.elements() * grad_bytes >= plan_.gradient_bucket.count();
      if ((!full && point + 1 < points.size()) || bucket.elements() == 0) continue;
      const size_t at = overlap ? point : points.size() - 1;
      std::vector<TaskId> after;
      for (int dp : ranks.simulated_dps) {
        after.push_back(stage_ready[static_cast<size_t>(dp)].at[static_cast<size_t>(tp)][at]);
      }
      DTSIM_RETURN_IF_ERROR(
          ReduceBucket(bucket, ranks.simulated, ranks.logical, after, compressed, waits));
      bucket = {};
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
    // Every rank of the group runs it; with symmetric ranks, every rank of the stage.
    const int64_t represented = symmetric_ ? static_cast<int64_t>(plan_.data) * plan_.tensor
                                           : static_cast<int64_t>(group.size());
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
    // ZeRO-1/2 all-gather the updated shards after the step; ZeRO-3 gathers them per layer
    // before use instead.
    if (zero && plan_.zero_stage < 3 && logical.size() > 1) {
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
  LayerPasses dense_, moe_;
  PricedPass embedding_forward_, embedding_backward_, output_forward_, output_backward_;
  std::vector<models::OpCost> embedding_sources_, output_sources_;
  bool symmetric_;
  int simulated_data_;
  int simulated_tensor_;
  int group_dp_ = 0;
  int group_stage_ = 0;
  // Matched collectives made so far per (across, stage, first data index), each one comm per
  // simulated tensor-parallel peer; per kind, the index of the next in this stage's program.
  std::map<std::tuple<Across, int, int>, std::vector<std::vector<graph::CommId>>> matched_;
  std::array<size_t, 2> sequence_{};
  // ZeRO-3: per peer, the end of the compute before the last gathered piece.
  std::vector<std::optional<TaskId>> gather_after_;
  double expert_load_ = 1.0;
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
                  .expert_parallel = plan.expert,
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
