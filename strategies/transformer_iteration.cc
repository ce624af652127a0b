#include "strategies/transformer_iteration.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "models/memory.h"
#include "strategies/activation_offload.h"
#include "strategies/data_parallel_iteration.h"
#include "strategies/dlrm_iteration.h"
#include "strategies/footprint.h"
#include "strategies/layer_gradients.h"
#include "strategies/microbatch_layout.h"
#include "strategies/parameter_gathers.h"
#include "strategies/peer_group.h"
#include "strategies/priced_passes.h"
#include "strategies/stage_collectives.h"
#include "strategies/stage_memory.h"
#include "strategies/transformer_gradients.h"

namespace dtsim::strategies {
namespace {

using graph::CommKind;
using graph::StreamId;
using graph::TaskId;
using models::Op;
using models::Pass;

// Emits a pass's layout (MicrobatchLayout) as the peers' tasks: the graph's side of the one
// description the search's lower bound also reads. Compute lands in tasks named `name` (merged
// while the name stays); tensor-parallel collectives are named `tensor_name`.
class PassEmitter final : public LayoutSink {
 public:
  PassEmitter(PeerGroup& group, StageCollectives& collectives, std::string_view category,
              double expert_load, Bytes expert_bytes, int expert_parallel, int expert_gather)
      : group_(group),
        collectives_(collectives),
        category_(category),
        expert_load_(expert_load),
        expert_bytes_(expert_bytes),
        expert_parallel_(expert_parallel),
        expert_gather_(expert_gather) {}

  // The names of what follows (kept by the caller while the emitter lives); `layer` names the
  // expert all-to-alls.
  void Names(std::string_view name, std::string_view tensor_name,
             std::string_view context_name = {}, int layer = -1) {
    name_ = name;
    tensor_name_ = tensor_name;
    context_name_ = context_name;
    layer_ = layer;
  }

  void Compute(const PricedOp& op) override { group_.Add(Duration(op), name_, category_); }

  void Summa(const PricedOp& op, const std::vector<SummaStep>& steps) override {
    std::vector<PeerGroup::SummaStepComms> comms(steps.size());
    for (size_t s = 0; s < steps.size(); ++s) {
      for (const LayoutComm& comm : steps[s].before)
        comms[s].before.push_back(collectives_.Grid(comm));
      for (const LayoutComm& comm : steps[s].after)
        comms[s].after.push_back(collectives_.Grid(comm));
    }
    group_.Summa(Duration(op), name_, tensor_name_, category_, comms,
                 op.summa != Op::WeightGemm::kWgrad);
  }

  void Collective(const LayoutComm& comm) override {
    if (comm.group == CommGroup::kTensor) {
      group_.Collective(comm.kind, comm.bytes, tensor_name_);
    } else if (comm.group == CommGroup::kContext) {
      group_.Post(ContextComms(comm), context_name_, kContextCategory);
    } else {
      group_.Post(collectives_.Grid(comm), tensor_name_, kTensorCategory);
    }
  }

  void Ring(const PricedOp& op, const std::vector<LayoutComm>& shifts,
            const std::vector<LayoutComm>& trailing) override {
    std::vector<std::vector<graph::CommId>> steps;
    steps.reserve(shifts.size());
    for (const LayoutComm& shift : shifts) steps.push_back(ContextComms(shift));
    std::vector<graph::CommId> home;
    if (!trailing.empty()) home = ContextComms(trailing.front());
    group_.Ring(Duration(op), name_, context_name_, category_, steps, home);
  }

  void Overlapped(const PricedOp& op, const LayoutComm& comm) override {
    group_.Overlapped(comm.kind, comm.bytes, tensor_name_, Duration(op), name_, category_);
  }

  // Megatron-Core's all-to-all overlap: the token exchanges (the all-to-alls and the
  // expert-tensor collectives around them) go to each peer's "ep" stream beside the compute;
  // TakeAside() hands the last one's tasks, which the compute waits for where it needs them.
  void SetAside() { aside_ = true; }
  std::vector<TaskId> TakeAside() { return std::exchange(aside_tasks_, {}); }

  // Peer i of data index dp exchanges with peer i of the other data indices of its expert group.
  void ExpertAllToAll() override {
    if (expert_parallel_ < 2) return;
    const std::vector<graph::CommId> comms =
        collectives_.Matched(StageCollectives::Across::kExpert, CommKind::kAllToAll, expert_bytes_);
    const std::string name = fmt::format("layer{}.moe all-to-all", layer_);
    if (aside_) {
      aside_tasks_ = group_.PostAside(comms, name, kExpertCategory);
    } else {
      group_.Post(comms, name, kExpertCategory);
    }
  }

  // The expert-tensor group is the tensor group (expert_gather() > 1 only when they coincide):
  // each rank gives the all-gather the tokens its all-to-all brought, and reduce-scatters the
  // group's `gather` times as many back to them. Part of the token exchange: its category.
  void ExpertTensor(CommKind kind) override {
    const bool gather = kind == CommKind::kAllGather;
    const int64_t bytes = gather ? expert_bytes_.count() : expert_bytes_.count() * expert_gather_;
    const std::string name =
        fmt::format("layer{}.moe tp {}", layer_, gather ? "all-gather" : "reduce-scatter");
    if (!aside_) {
      group_.Collective(kind, Bytes(bytes), name, kExpertCategory);
      return;
    }
    std::vector<TaskId> tasks = group_.CollectiveAside(kind, Bytes(bytes), name, kExpertCategory);
    if (!tasks.empty()) aside_tasks_ = std::move(tasks);
  }

 private:
  // Per simulated peer, its part in a collective over its context-parallel peers.
  std::vector<graph::CommId> ContextComms(const LayoutComm& comm) {
    return collectives_.Matched(StageCollectives::Across::kContext, comm.kind, comm.bytes);
  }

  // An expert's work at the rank's routed-token load.
  DurationNs Duration(const PricedOp& op) const {
    if (!op.expert || expert_load_ == 1.0) return op.duration;
    return DurationNs(std::llround(static_cast<double>(op.duration.ns()) * expert_load_));
  }

  PeerGroup& group_;
  StageCollectives& collectives_;
  std::string_view category_;
  double expert_load_;
  Bytes expert_bytes_;
  int expert_parallel_;
  int expert_gather_;
  std::string_view name_, tensor_name_, context_name_;
  int layer_ = -1;
  bool aside_ = false;
  std::vector<TaskId> aside_tasks_;
};

class IterationBuilder {
 public:
  IterationBuilder(const ResolvedConfig& config, const models::OpCostModel& cost,
                   std::span<const models::MemoryBreakdown> stage_memory, CompressionPhase phase)
      : config_(config),
        spec_(config.model.transformer),
        plan_(config.plan),
        cost_(cost),
        phase_(phase),
        layout_(config),
        symmetric_(config.ranks == RanksMode::kSymmetric),
        simulated_data_(symmetric_ ? 1 : plan_.DataIndices()),
        simulated_tensor_(symmetric_ ? 1 : plan_.tensor),
        collectives_(builder_, plan_, simulated_data_, simulated_tensor_),
        gathers_(builder_, config, cost, collectives_),
        offload_(builder_, config) {
    for (int stage = 0; stage < plan_.pipeline; ++stage) {
      std::vector<std::vector<int>>& chunks = chunk_layers_.emplace_back();
      for (int chunk = 0; chunk < plan_.virtual_stages; ++chunk) {
        chunks.push_back(models::ChunkLayerIndices(spec_, plan_.pipeline, plan_.virtual_stages,
                                                   stage, chunk, plan_.chunk_layers));
      }
    }
    PlanMemoryTrack(stage_memory);
    offload_.DrawMemory(std::ssize(stage_memory) == plan_.pipeline);
  }

  Expected<IterationGraph> Build() {
    DTSIM_ASSIGN_OR_RETURN(model_, PriceModel(config_, cost_));
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
    DTSIM_RETURN_IF_ERROR(ReduceTransformerGradients(config_, cost_, phase_, collectives_, ready,
                                                     builder_, result_.sources));
    DTSIM_ASSIGN_OR_RETURN(graph::TaskGraph graph, std::move(builder_).Build());
    return IterationGraph{std::move(graph), std::move(result_)};
  }

 private:
  // The timeline's memory track (graph::MemoryChange): per stage, the persistent state at its
  // peak as each rank's base, and what the embedding, each layer and the output layer keep from
  // their forward to their backward (models::LayerKeptBytes, or the replay's where the loop is
  // replayed: MemoryBreakdown::replayed_layer_kept). Working sets are not drawn. All zero (no
  // track) without the stages' memory.
  struct StageMemoryTrack {
    int64_t base = 0;
    int64_t embedding = 0;
    int64_t output = 0;
    std::vector<int64_t> layers;  // by layer index
  };
  void PlanMemoryTrack(std::span<const models::MemoryBreakdown> stage_memory) {
    const bool known = std::ssize(stage_memory) == plan_.pipeline;
    for (int stage = 0; stage < plan_.pipeline; ++stage) {
      StageMemoryTrack& track = memory_tracks_.emplace_back();
      track.layers.assign(static_cast<size_t>(spec_.AllLayers()), 0);
      if (!known) continue;
      const models::MemoryBreakdown& memory = stage_memory[static_cast<size_t>(stage)];
      track.base = memory.total() - memory.activations - memory.temporary;
      if (const std::vector<int64_t>& kept = memory.replayed_layer_kept; !kept.empty()) {
        // A replayed loop (one stage): each block's tensors as the replay keeps them, the
        // embedding's output with the first block's, the last output with the output layer.
        for (size_t layer = 0; layer + 1 < kept.size() && layer < track.layers.size(); ++layer) {
          track.layers[layer] = kept[layer];
        }
        track.output = kept.back();
        continue;
      }
      const models::MemoryPlan memory_plan = MemoryPlanOf(config_, stage);
      track.embedding = models::EmbeddingKeptBytes(spec_, memory_plan);
      track.output = models::OutputKeptBytes(spec_, memory_plan);
      for (int chunk = 0; chunk < plan_.virtual_stages; ++chunk) {
        for (const int layer : ChunkLayers(stage, chunk)) {
          track.layers[static_cast<size_t>(layer)] =
              models::LayerKeptBytes(spec_, memory_plan, layer);
        }
      }
    }
  }
  const StageMemoryTrack& Track(int stage) const {
    return memory_tracks_[static_cast<size_t>(stage)];
  }
  // `bytes` more held on each peer once its last task so far ends.
  void HoldMemory(PeerGroup& group, int64_t bytes) {
    if (bytes == 0) return;
    group.Flush();
    for (size_t i = 0; i < group.ranks().size(); ++i) {
      if (const std::optional<TaskId> last = group.last(i)) builder_.AddMemoryChange(*last, bytes);
    }
  }

  PassEmitter Emitter(PeerGroup& group, std::string_view category, double expert_load) {
    return PassEmitter(group, collectives_, category, expert_load, ExpertBytes(), plan_.expert,
                       ShardOf(config_).expert_gather());
  }

  // A layer's pass: compute tasks named after the layer and segment ("layer3.attn fwd").
  void Emit(PeerGroup& group, const PricedPass& pass, int layer, std::string_view suffix,
            std::string_view category) {
    PassEmitter emitter = Emitter(group, category, expert_load_);
    std::string_view segment;
    for (const PricedOp& op : pass.ops) {
      if (op.segment != segment) {  // names change with the segment only
        segment = op.segment;
        const LayerNames& names = NamesOf(layer, op.segment, suffix);
        emitter.Names(names.compute, names.tensor, names.context, layer);
      }
      layout_.LayOut(op, emitter);
    }
  }

  // A layer segment's task names, formatted once per (layer, segment, suffix) and kept in one
  // place: every stage and micro-batch reuses them (the string table's recent cache hits them).
  struct LayerNames {
    std::string compute, tensor, context;
  };
  const LayerNames& NamesOf(int layer, const std::string& segment, std::string_view suffix) {
    // The segment's text lives in the priced model and the suffix is a literal: their
    // addresses identify them.
    const auto key = std::tuple{layer, segment.data(), suffix.data()};
    auto it = names_.find(key);
    if (it == names_.end()) {
      it = names_
               .emplace(key, LayerNames{fmt::format("layer{}.{} {}", layer, segment, suffix),
                                        fmt::format("layer{}.{} tp", layer, segment),
                                        fmt::format("layer{}.{} cp", layer, segment)})
               .first;
    }
    return it->second;
  }

  // The embedding's or the output layer's pass, under one name.
  void EmitWhole(PeerGroup& group, const PricedPass& pass, const std::string& name,
                 std::string_view tensor_name) {
    PassEmitter emitter = Emitter(group, kComputeCategory, 1.0);
    emitter.Names(name, tensor_name);
    for (const PricedOp& op : pass.ops) layout_.LayOut(op, emitter);
  }

  // Collectives outside a pass's ops (the embedding's, the output layer's).
  void EmitComms(PeerGroup& group, const std::vector<LayoutComm>& comms,
                 std::string_view tensor_name) {
    PassEmitter emitter = Emitter(group, kComputeCategory, 1.0);
    emitter.Names({}, tensor_name);
    for (const LayoutComm& comm : comms) emitter.Collective(comm);
  }

  // Bytes each rank sends in one expert all-to-all: its E·C tokens of h elements (C, the
  // capacity of the tokens it routes, is the balanced share when dropless; under sequence
  // parallelism those are the rank's sequence shard). With skewed dropless
  // routing in full mode, the rank of the busiest expert receives `imbalance` times its share and
  // every rank waits for it: priced as if every rank moved that much.
  Bytes ExpertBytes() const {
    const models::MoeSpec& moe = spec_.moe;
    const int64_t tokens = ShardOf(config_).moe_tokens();
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

  // The simulated tensor-parallel peers of (dp, stage), or all of them (`all`).
  std::vector<int32_t> Peers(int dp, int stage, bool all = false) const {
    const int peers = all ? plan_.tensor : simulated_tensor_;
    std::vector<int32_t> ranks;
    ranks.reserve(peers);
    for (int tp = 0; tp < peers; ++tp) {
      ranks.push_back(plan_.Rank(dp, stage, tp));
    }
    return ranks;
  }

  // What each tensor-parallel peer sends at a stage boundary (docs/strategies.md, "Pipeline
  // transfers"): its sequence shard under SP, its block on a grid, 1/t of the replicated
  // activations under Megatron-LM's scatter/gather; otherwise all of them, as Megatron-Core
  // (p2p_communication.py: the shape is seq × micro-batch × hidden unless SP) and Megatron-LM
  // before February 2021 send them from every peer.
  Bytes PipelineBytes() const {
    const int64_t bytes = layout_.ActivationBytes().count();
    const bool sharded =
        plan_.sequence_parallel || plan_.on_grid() || plan_.ScattersPipelineTransfers();
    return Bytes(sharded ? bytes / plan_.tensor : bytes);
  }
  // Megatron-LM's scatter/gather: the receivers all-gather the 1/t pieces on the compute
  // stream (gather_split_1d_tensor) before using them.
  void GatherPipelinePieces(PeerGroup& group, std::string_view name) {
    if (!plan_.ScattersPipelineTransfers()) return;
    group.Collective(CommKind::kAllGather, PipelineBytes(), name);
  }

  // The layers of chunk `chunk` of `stage`, in order (models::ChunkLayerIndices, which the
  // memory model and gradient layout use too).
  std::span<const int> ChunkLayers(int stage, int chunk) const {
    return chunk_layers_[static_cast<size_t>(stage)][static_cast<size_t>(chunk)];
  }
  // The pipeline tag of a transfer: unique per (micro-batch, chunk, direction).
  int64_t Tag(int64_t microbatch, int chunk, Pass pass) const {
    return (microbatch * plan_.virtual_stages + chunk) * 2 + (pass == Pass::kBackward ? 1 : 0);
  }
  bool HoldsEmbedding(int stage, int chunk) const { return stage == 0 && chunk == 0; }
  bool HoldsOutput(int stage, int chunk) const {
    return stage == plan_.pipeline - 1 && chunk == plan_.virtual_stages - 1;
  }

  // Chunk c of stage s receives from chunk c of stage s − 1, or from the last stage's chunk
  // c − 1 on the first stage (interleaving wraps around); sends the mirror way.
  void Forward(PeerGroup& group, int stage, int chunk, int64_t microbatch) {
    ForwardBegin(group, stage, chunk, microbatch);
    for (const int layer : ChunkLayers(stage, chunk)) ForwardLayer(group, stage, layer);
    ForwardEnd(group, stage, chunk, microbatch);
  }
  void ForwardBegin(PeerGroup& group, int stage, int chunk, int64_t microbatch) {
    if (!HoldsEmbedding(stage, chunk)) {
      const int from = stage > 0 ? stage - 1 : plan_.pipeline - 1;
      const int from_chunk = stage > 0 ? chunk : chunk - 1;
      group.Recv(Peers(group_dp_, from), Tag(microbatch, from_chunk, Pass::kForward),
                 PipelineBytes(), "recv activations");
      GatherPipelinePieces(group, "gather activations");
    } else {
      gathers_.Embedding(group, false);
      EmitWhole(group, model_.embedding.forward, "embedding fwd", "embedding tp");
      EmitComms(group, layout_.EmbeddingComms(Pass::kForward), "embedding tp");
      HoldMemory(group, Track(stage).embedding);
    }
  }
  void ForwardLayer(PeerGroup& group, int stage, int layer) {
    BeforeForwardLayer(group, layer);
    Emit(group, model_.Layer(spec_, layer).forward, layer, "fwd", kComputeCategory);
    AfterForwardLayer(group, stage, layer);
  }
  void BeforeForwardLayer(PeerGroup& group, int layer) {
    gathers_.Layer(group, layer, false);
    WeightCast(group, layer);
    offload_.BeforeForward(group, layer);
  }
  void AfterForwardLayer(PeerGroup& group, int stage, int layer) {
    HoldMemory(group, Track(stage).layers[static_cast<size_t>(layer)]);
    offload_.AfterForward(group, layer);
  }
  void ForwardEnd(PeerGroup& group, int stage, int chunk, int64_t microbatch) {
    const int last = plan_.pipeline - 1;
    AmaxReduction(group, stage, chunk, Pass::kForward);
    if (HoldsOutput(stage, chunk)) {
      gathers_.Output(group, stage, false);
      EmitComms(group, layout_.OutputComms(Pass::kForward), "output tp");
      EmitWhole(group, model_.output.forward, "output fwd", "output tp");
      HoldMemory(group, Track(stage).output);
    } else {
      group.Send(Peers(group_dp_, stage < last ? stage + 1 : 0),
                 Tag(microbatch, chunk, Pass::kForward), PipelineBytes(), Pass::kForward,
                 "send activations");
    }
    Account(stage, chunk, Pass::kForward);
  }

  void Backward(PeerGroup& group, int stage, int chunk, int64_t microbatch, GradientReady* ready) {
    BackwardBegin(group, stage, chunk, microbatch, ready);
    const std::span<const int> layers = ChunkLayers(stage, chunk);
    for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
      BackwardLayer(group, stage, *it, ready);
    }
    BackwardEnd(group, stage, chunk, microbatch, ready);
  }
  // Where gradients become final: DeepSpeed before 0.5.5 reduce-scatters each after every
  // micro-batch's backward; on a chunk's last backward (`ready`) they are handed to the
  // data-parallel reduction.
  void MarkGradients(PeerGroup& group, GradientReady* ready, GradientTensors tensors,
                     GradientTensors experts = {}, bool layer = false) {
    gathers_.ReduceEach(group, tensors, layer);
    if (ready == nullptr) return;
    group.Flush();
    for (size_t i = 0; i < group.ranks().size(); ++i) {
      ready->at[i].push_back(group.GradientsReady(i));
    }
    ready->tensors.push_back(std::move(tensors));
    ready->expert_tensors.push_back(std::move(experts));
  }
  void BackwardBegin(PeerGroup& group, int stage, int chunk, int64_t microbatch,
                     GradientReady* ready) {
    const int last = plan_.pipeline - 1;
    if (!HoldsOutput(stage, chunk)) {
      const int from = stage < last ? stage + 1 : 0;
      const int from_chunk = stage < last ? chunk : chunk + 1;
      group.Recv(Peers(group_dp_, from), Tag(microbatch, from_chunk, Pass::kBackward),
                 PipelineBytes(), "recv gradients");
      GatherPipelinePieces(group, "gather gradients");
    } else {
      gathers_.Output(group, stage, true);
      EmitWhole(group, model_.output.backward, "output bwd", "output tp");
      EmitComms(group, layout_.OutputComms(Pass::kBackward), "output tp");
      HoldMemory(group, -Track(stage).output);
      MarkGradients(group, ready, OutputGradients(spec_, plan_, stage));
    }
  }
  void BackwardLayer(PeerGroup& group, int stage, int layer, GradientReady* ready) {
    BeforeBackwardLayer(group, layer);
    Emit(group, model_.Layer(spec_, layer).recompute, layer, "recompute", kRecomputeCategory);
    Emit(group, model_.Layer(spec_, layer).backward, layer, "bwd", kComputeCategory);
    AfterBackwardLayer(group, stage, layer, ready);
  }
  void BeforeBackwardLayer(PeerGroup& group, int layer) {
    offload_.BeforeBackward(group, layer);
    gathers_.Layer(group, layer, true);
    WeightCast(group, layer);
  }
  void AfterBackwardLayer(PeerGroup& group, int stage, int layer, GradientReady* ready) {
    HoldMemory(group, -Track(stage).layers[static_cast<size_t>(layer)]);
    LayerGradientSplit gradients = LayerGradients(spec_, plan_, layer);
    MarkGradients(group, ready, std::move(gradients.dense), std::move(gradients.experts), true);
  }
  void BackwardEnd(PeerGroup& group, int stage, int chunk, int64_t microbatch,
                   GradientReady* ready) {
    const int last = plan_.pipeline - 1;
    AmaxReduction(group, stage, chunk, Pass::kBackward);
    if (HoldsEmbedding(stage, chunk)) {
      gathers_.Embedding(group, true);
      EmitComms(group, layout_.EmbeddingComms(Pass::kBackward), "embedding tp");
      EmitWhole(group, model_.embedding.backward, "embedding bwd", "embedding tp");
      HoldMemory(group, -Track(stage).embedding);
      MarkGradients(group, ready, EmbeddingGradients(spec_, plan_));
    } else {
      group.Send(Peers(group_dp_, stage > 0 ? stage - 1 : last),
                 Tag(microbatch, chunk, Pass::kBackward), PipelineBytes(), Pass::kBackward,
                 "send gradients");
    }
    group.Flush();
    Account(stage, chunk, Pass::kBackward);
  }

  // FP8 under ZeRO-3: the gathered BF16 weights of a layer are quantized (row- and
  // column-wise) before each use — its forward, and its recompute and backward — since they are
  // freed after it; without ZeRO-3 Transformer Engine caches them once per iteration.
  void WeightCast(PeerGroup& group, int layer) {
    const std::optional<models::OpCost>& cast = model_.Layer(spec_, layer).weight_cast;
    if (!cast || !ParameterGathers::Gathers(config_)) return;
    group.Add(cast->duration, fmt::format("layer{} fp8 weight cast", layer), kComputeCategory);
  }

  // FP8 with delayed scaling: Transformer Engine's fp8_autocast around a chunk's layers
  // (Megatron-Core's TransformerBlock) all-reduces (max) the amaxes of its FP8 tensors over the
  // amax reduction group — every tensor-, data- and context-parallel rank of the stage — when
  // the forward leaves it (3 per linear layer: input, weight, output) and once its backward is
  // done (2: the output and input gradients), 4 bytes each, on the compute stream.
  void AmaxReduction(PeerGroup& group, int stage, int chunk, Pass pass) {
    if (config_.training.fp8 != models::Fp8Recipe::kDelayed) return;
    int linears = 0;
    for (const int layer : ChunkLayers(stage, chunk))
      linears += model_.Layer(spec_, layer).fp8_linears;
    if (linears == 0 || plan_.tensor * plan_.DataIndices() < 2) return;
    const Bytes bytes(int64_t{linears} * (pass == Pass::kForward ? 3 : 2) * 4);
    group.Post(collectives_.Matched(StageCollectives::Across::kStage, CommKind::kAllReduce, bytes),
               "fp8 amax all-reduce", kDataCategory);
  }

  // FLOPs and cost sources of one micro-batch pass on the t peers of a stage.
  void Account(int stage, int chunk, Pass pass) {
    const bool backward = pass == Pass::kBackward;
    // Every tensor-parallel peer, and with symmetric ranks every data-parallel replica and
    // context-parallel peer, does the same work.
    // (Skewed routing moves expert work between ranks; the sums stay.)
    // Exact: simulated_data_ divides it.
    const int replicas = plan_.DataIndices() / simulated_data_;
    const double peers = static_cast<double>(plan_.tensor) * replicas;
    const auto count = static_cast<int64_t>(peers);
    double flops = 0;
    double recompute = 0;
    for (const int index : ChunkLayers(stage, chunk)) {
      const PiecePasses& layer = model_.Layer(spec_, index);
      flops += (backward ? layer.backward : layer.forward).model_flops;
      if (backward) recompute += layer.recompute.model_flops;
      Tally(layer, pass, count);
      if (layer.weight_cast && ParameterGathers::Gathers(config_)) {
        result_.sources.Add(*layer.weight_cast, count);  // WeightCast: once per pass
      }
    }
    const bool embedding = HoldsEmbedding(stage, chunk);
    const bool output = HoldsOutput(stage, chunk);
    if (embedding)
      flops += (backward ? model_.embedding.backward : model_.embedding.forward).model_flops;
    if (output) flops += (backward ? model_.output.backward : model_.output.forward).model_flops;
    result_.model_flops += peers * flops;
    result_.hardware_flops += peers * (flops + recompute);
    if (embedding) Tally(model_.embedding, pass, count);
    if (output) Tally(model_.output, pass, count);
  }

  // Cost sources: each priced op of the piece once per use (backward with its recompute).
  void Tally(const PiecePasses& piece, Pass pass, int64_t count) {
    const bool backward = pass == Pass::kBackward;
    const size_t forward_ops = piece.forward.ops.size();
    const size_t begin = backward ? forward_ops : 0;
    const size_t end = backward ? piece.sources.size() : forward_ops;
    for (size_t i = begin; i < end; ++i) result_.sources.Add(piece.sources[i], count);
  }

  GradientReady BuildStage(int stage, int dp, int64_t microbatches) {
    group_dp_ = dp;
    collectives_.Begin(dp, stage);
    gathers_.Begin();
    expert_load_ = ExpertLoad(dp);
    PeerGroup group(builder_, Peers(dp, stage), Peers(dp, stage, true));
    if (Track(stage).base != 0) {
      for (const int32_t rank : group.ranks()) builder_.SetMemoryBase(rank, Track(stage).base);
    }
    GradientReady ready;
    ready.at.resize(group.ranks().size());
    // Gradients are final in each chunk's last backward.
    const auto ready_of = [&](const models::PipelineStep& step) {
      return step.microbatch == microbatches - 1 ? &ready : nullptr;
    };
    const bool overlap = plan_.expert_overlap;
    const std::vector<models::PipelineStep> steps = models::StageSchedule(
        plan_.schedule, plan_.pipeline, stage, microbatches, plan_.virtual_stages, overlap ? 1 : 0);
    for (size_t i = 0; i < steps.size(); ++i) {
      const models::PipelineStep& step = steps[i];
      if (step.pass == Pass::kBackward) {
        Backward(group, stage, step.chunk, step.microbatch, ready_of(step));
      } else if (step.beside_next) {
        // The all-to-all overlap's steady state: this forward beside the next backward.
        ForwardBackward(group, stage, step, steps[i + 1], ready_of(steps[i + 1]));
        ++i;
      } else {
        Forward(group, stage, step.chunk, step.microbatch);
      }
    }
    return ready;
  }

  // Megatron-Core's combined 1F1B step under its all-to-all overlap (core_r0.14,
  // models/common/model_chunk_schedule_plan.py, TransformerModelChunkSchedulePlan.run): the
  // forward chunk pass `f` and the backward `b` begin (receives, the embedding's forward, the
  // output layer's backward), pair their layers — f's first with b's last — each pair
  // interleaved by ForwardBackwardLayer, run the unpaired rest alone, send, and end with the
  // output layer's forward and the embedding's backward.
  void ForwardBackward(PeerGroup& group, int stage, const models::PipelineStep& f,
                       const models::PipelineStep& b, GradientReady* ready) {
    ForwardBegin(group, stage, f.chunk, f.microbatch);
    BackwardBegin(group, stage, b.chunk, b.microbatch, ready);
    const std::span<const int> forward = ChunkLayers(stage, f.chunk);
    const std::span<const int> backward = ChunkLayers(stage, b.chunk);
    const size_t paired = std::min(forward.size(), backward.size());
    for (size_t i = 0; i < paired; ++i) {
      ForwardBackwardLayer(group, stage, forward[i], backward[backward.size() - 1 - i], ready);
    }
    for (size_t i = paired; i < backward.size(); ++i) {
      BackwardLayer(group, stage, backward[backward.size() - 1 - i], ready);
    }
    for (size_t i = paired; i < forward.size(); ++i) ForwardLayer(group, stage, forward[i]);
    const bool output = HoldsOutput(stage, f.chunk);
    const bool embedding = HoldsEmbedding(stage, b.chunk);
    if (!output) ForwardEnd(group, stage, f.chunk, f.microbatch);
    if (!embedding) BackwardEnd(group, stage, b.chunk, b.microbatch, ready);
    if (output) ForwardEnd(group, stage, f.chunk, f.microbatch);
    if (embedding) BackwardEnd(group, stage, b.chunk, b.microbatch, ready);
  }

  // One forward layer beside one backward layer (TransformerLayerSchedulePlan.run): each pass
  // is cut at its expert exchanges into three parts — forward: attention and router (F0),
  // experts (F1), combine (F2); backward: the combine's (B0), the experts' (B1), router and
  // attention (B2) — and the exchanges run on the "ep" stream in Megatron's order, each beside
  // the other pass's compute:
  //   ep:      combine bwd(B) | dispatch fwd(F), dispatch bwd(B) | combine fwd(F)
  //   compute: B0, F0, B's recompute, B1 (its expert weight gradients after the dispatch's
  //            all-to-all is issued under --delay-wgrad-compute), F1, B2, F2
  // each part waiting for the exchange before it. A dense layer is one part.
  void ForwardBackwardLayer(PeerGroup& group, int stage, int f_layer, int b_layer,
                            GradientReady* ready) {
    const PiecePasses& f = model_.Layer(spec_, f_layer);
    const PiecePasses& b = model_.Layer(spec_, b_layer);
    size_t f_next = 0;
    size_t b_next = 0;
    BeforeForwardLayer(group, f_layer);
    BeforeBackwardLayer(group, b_layer);
    // The backward layer's memory and gradients where its last part is emitted (a dense
    // layer's first).
    bool b_done = false;
    const auto b_part = [&](bool delay_wgrad) {
      std::vector<TaskId> exchanged = EmitPart(group, b.backward, b_next, b_layer, delay_wgrad);
      if (!b_done && b_next == b.backward.ops.size()) {
        b_done = true;
        AfterBackwardLayer(group, stage, b_layer, ready);
      }
      return exchanged;
    };
    const bool b_moe = std::any_of(b.backward.ops.begin(), b.backward.ops.end(), ExchangesAfter);
    if (!b_moe) Emit(group, b.recompute, b_layer, "recompute", kRecomputeCategory);
    const std::vector<TaskId> b_combined = b_part(false);
    const std::vector<TaskId> f_dispatched = EmitPart(group, f.forward, f_next, f_layer, false);
    if (b_moe) Emit(group, b.recompute, b_layer, "recompute", kRecomputeCategory);
    group.WaitBefore(b_combined);
    const std::vector<TaskId> b_dispatched = b_part(plan_.expert_delay_wgrad);
    group.WaitBefore(f_dispatched);
    const std::vector<TaskId> f_combined = EmitPart(group, f.forward, f_next, f_layer, false);
    // The forward layer's activations are made (the combine keeps little) before the backward
    // layer's are freed: the pair's peak (models::MemoryPlan::paired_passes).
    HoldMemory(group, Track(stage).layers[static_cast<size_t>(f_layer)]);
    group.WaitBefore(b_dispatched);
    b_part(false);
    group.WaitBefore(f_combined);
    EmitPart(group, f.forward, f_next, f_layer, false);
    offload_.AfterForward(group, f_layer);
  }

  static bool ExchangesAfter(const PricedOp& op) {
    return op.after == After::kExpertDispatch || op.after == After::kExpertCombine;
  }

  // Emits pass.ops from `next` through the first op followed by an expert exchange (or to the
  // end), the exchange on the "ep" stream; returns its tasks to wait for (none without one).
  // With `delay_wgrad` the part's weight-gradient GEMMs follow the exchange.
  std::vector<TaskId> EmitPart(PeerGroup& group, const PricedPass& pass, size_t& next, int layer,
                               bool delay_wgrad) {
    const bool backward = !pass.ops.empty() && pass.ops.front().pass == Pass::kBackward;
    const std::string_view suffix = backward ? "bwd" : "fwd";
    PassEmitter emitter = Emitter(group, kComputeCategory, expert_load_);
    emitter.SetAside();
    std::string_view segment;
    std::vector<PricedOp> deferred;
    const auto lay_out = [&](const PricedOp& op) {
      if (op.segment != segment) {
        segment = op.segment;
        const LayerNames& names = NamesOf(layer, op.segment, suffix);
        emitter.Names(names.compute, names.tensor, names.context, layer);
      }
      layout_.LayOut(op, emitter);
    };
    while (next < pass.ops.size()) {
      const PricedOp& op = pass.ops[next++];
      const bool last = ExchangesAfter(op);
      if (delay_wgrad && op.wgrad) {
        PricedOp exchange = op;  // what follows the GEMM stays in place
        exchange.duration = DurationNs::Zero();
        if (exchange.after != After::kNothing) lay_out(exchange);
        deferred.push_back(op);
        deferred.back().after = After::kNothing;
      } else {
        lay_out(op);
      }
      if (last) break;
    }
    std::vector<TaskId> exchanged = emitter.TakeAside();
    for (const PricedOp& op : deferred) lay_out(op);
    return exchanged;
  }

  const ResolvedConfig& config_;
  const models::TransformerSpec& spec_;
  const ParallelPlan& plan_;
  const models::OpCostModel& cost_;
  CompressionPhase phase_;
  MicrobatchLayout layout_;
  PricedModel model_;
  graph::TaskGraphBuilder builder_;
  IterationStats result_;
  bool symmetric_;
  int simulated_data_;
  int simulated_tensor_;
  StageCollectives collectives_;
  // Per stage, per virtual stage, its layers (ChunkLayerIndices).
  std::vector<std::vector<std::vector<int>>> chunk_layers_;
  std::map<std::tuple<int, const char*, const char*>, LayerNames> names_;  // NamesOf
  int group_dp_ = 0;
  ParameterGathers gathers_;
  ActivationOffload offload_;
  double expert_load_ = 1.0;
  std::vector<StageMemoryTrack> memory_tracks_;  // per stage
};

}  // namespace

Expected<IterationGraph> BuildTransformerIteration(
    const ResolvedConfig& config, const models::OpCostModel& cost,
    std::span<const models::MemoryBreakdown> stage_memory, CompressionPhase phase) {
  return IterationBuilder(config, cost, stage_memory, phase).Build();
}

Expected<IterationGraph> BuildIteration(const ResolvedConfig& config,
                                        const models::OpCostModel& cost, CompressionPhase phase) {
  DTSIM_ASSIGN_OR_RETURN(std::vector<models::MemoryBreakdown> memory, StageMemory(config));
  Expected<IterationGraph> built = Error("unreachable");
  switch (config.model.family) {
    case models::ModelFamily::kResNet:
      built = BuildDataParallelIteration(config, cost, phase);
      break;
    case models::ModelFamily::kDlrm:
      built = BuildDlrmIteration(config, cost);
      break;
    case models::ModelFamily::kTransformer:
      built = BuildTransformerIteration(config, cost, memory, phase);
      break;
  }
  DTSIM_ASSIGN_OR_RETURN(IterationGraph iteration, std::move(built));
  iteration.stats.stage_memory = std::move(memory);
  return iteration;
}

}  // namespace dtsim::strategies
