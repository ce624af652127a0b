// The simulation config (docs/config.md): model, training, cluster with its GPU, parallel plan,
// an optional measured profile, and how to simulate. Read strictly from JSON; `--set` overrides
// any field by its dotted path before reading.
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/cost_model.h"
#include "models/gpu.h"
#include "models/memory.h"
#include "models/model_spec.h"
#include "models/ops.h"
#include "models/pipeline_schedules.h"
#include "network/cluster.h"
#include "network/network_models.h"
#include "sim/base/dtype.h"
#include "sim/base/json_reader.h"
#include "sim/base/status.h"
#include "sim/base/units.h"
#include "strategies/calibration.h"
#include "strategies/compression.h"
#include "strategies/diloco.h"
#include "strategies/time_to_train.h"

namespace dtsim::strategies {

// Bounds on what a config may ask for, far above any real run, that keep every product of
// them (tokens, ranks, bytes) inside 64-bit integers: 2^36 sequences a batch (68.7 billion),
// 2^24 tokens a sequence (16.8 million), 2^24 ranks.
inline constexpr int64_t kMaxGlobalBatch = int64_t{1} << 36;
inline constexpr int64_t kMaxSequenceLength = int64_t{1} << 24;
inline constexpr int64_t kMaxPlanRanks = int64_t{1} << 24;

// What torch.compile compiles (TrainingConfig::compile).
enum CompileComponent : uint8_t { kCompileModel = 1, kCompileLoss = 2 };
std::span<const std::string_view> CompileComponentNames();  // "model", "loss": bits 1, 2

struct TrainingConfig {
  int64_t global_batch = 0;  // sequences (samples) per iteration
  int64_t micro_batch = 1;
  int64_t seq_len = 0;              // 0: the model's max_seq
  DType dtype = DType::kBf16;       // activations ("fp8" keeps them in BF16); see param_dtype
  DType grad_dtype = DType::kFp32;  // Megatron keeps fp32 main gradients
  // How the parameters are stored ("param_precision", default the activations' dtype): bf16 or
  // fp16 weights with an fp32 master copy in the optimizer (Megatron), or fp32 weights and no
  // copy (PyTorch autocast; FSDP2's sharded parameters under a bf16 MixedPrecisionPolicy).
  DType param_dtype = DType::kBf16;
  // "param_precision": "fp8" (with "precision": "fp8"): the FP8 GEMMs' weights are stored
  // quantized, as Megatron-Core's --fp8-param-gather and NeMo's fp8_params keep them (the
  // rest in param_dtype, the activations'); the distributed optimizer gathers them in FP8.
  bool fp8_params = false;
  // "precision": "fp8": the linear layers' GEMMs in FP8 with this recipe ("fp8_recipe",
  // default "delayed"), as Transformer Engine runs them.
  models::Fp8Recipe fp8 = models::Fp8Recipe::kNone;
  models::Optimizer optimizer = models::Optimizer::kAdam;
  // "master_precision", "moment_precision": the optimizer state's dtypes (fp32 by default).
  models::OptimizerState optimizer_state;
  models::Recompute recompute = models::Recompute::kNone;
  // "recompute_modules": what "selective" re-runs (models::RecomputeModule bits; Megatron-Core's
  // --recompute-modules), by default the core attention.
  uint8_t recompute_modules = models::kRecomputeCoreAttn;
  // "recompute_every": n applies `recompute` to every n-th transformer layer only
  // (models::RecomputesLayer, torchtitan's per-layer checkpointing frequency); 1: every layer.
  int recompute_every = 1;
  bool flash_attention = false;
  bool dropout = true;
  // "expandable_segments": the CUDA caching allocator's expandable segments
  // (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, as torchtitan sets it), where dtsim
  // replays the loop's allocations (strategies::EagerLoopOf).
  bool expandable_segments = false;
  // "reshard_after_forward": FSDP2's (framework "pytorch", zero_stage 3): every block but the
  // last and the root free their gathered parameters after forward (torchtitan's default);
  // false: none does, each gathered once a step. Changes the replayed peak
  // (models/eager_fsdp.h).
  bool reshard_after_forward = true;
  // "compile": what torch.compile compiles (framework "pytorch"), torchtitan's
  // compile.components: "model" (each block) and "loss"; true, both (torchtitan's default), as
  // `--training.compile` meant from torchtitan bbb1b616e (April 2025; before, the blocks only).
  // The compiled loss is modelled (CompilesLoss, models::TransformerShard::compiled_loss); of the
  // compiled blocks only what the op policy keeps (TransformerShard::compiled_blocks): their
  // fused kernels run as eager in time and memory, which the result's warnings say.
  uint8_t compile = 0;  // CompileComponent bits
  // "activation_offload_layers": Megatron-Core's --cpu-offloading-num-layers N, the first N
  // layers' activations kept in host memory between their forward and backward
  // (Transformer Engine's handler, models/activation_offload.h; ActivationOffload prices the
  // copies); 0: none.
  int activation_offload_layers = 0;
  // "activation_offload_v1": Transformer Engine's handler before 2.10 (or NVTE_CPU_OFFLOAD_V1=1):
  // its windows, not the 2.10 synchronizer's anchors (models/activation_offload.h).
  bool activation_offload_v1 = false;
  // "deepspeed": DeepSpeed's ZeRO settings by their ds_config names (framework "deepspeed"):
  // its gradient bucket and how many gathered parameters ZeRO-3's coordinator keeps
  // (models::DeepSpeedZero; DeepSpeed's defaults where absent).
  models::DeepSpeedZero deepspeed;
  // "framework": whose memory behaviour the plan follows where frameworks differ
  // (models::Framework), and how ZeRO-3 gathers under pipelining (ParameterGathers): "megatron"
  // (default), "pytorch" (whose parameters default to fp32) or "deepspeed" (whose gradients
  // default to the activations' dtype, and whose ZeRO-3 before 0.5.5 ran synchronized
  // per-parameter collectives: strategies/deepspeed_zero3.h).
  models::Framework framework = models::Framework::kMegatron;
  // "framework_version": "MAJOR.MINOR.PATCH" of a deepspeed or pytorch framework; {0, 0, 0}: the
  // latest modelled.
  std::array<int, 3> framework_release = {0, 0, 0};
};

// How data-parallel replicas combine their gradients: collectives among themselves (an
// all-reduce, or ZeRO's reduce-scatter), or a push to parameter servers and a pull of the sums
// (BytePS; the cluster's `servers`, docs/network.md "Parameter servers").
enum class GradientSync { kAllReduce, kParameterServer };
std::string_view GradientSyncName(GradientSync sync);

// Where a DLRM's embedding tables live (TorchRec's sharding types; docs/strategies.md, "DLRM"):
// each table whole on one rank, its rows split over every rank, or a copy on every rank.
// Table-row-wise: each table on one node, its rows split over that node's ranks.
enum class EmbeddingSharding { kTableWise, kRowWise, kDataParallel, kTableRowWise };
std::span<const std::string_view> EmbeddingShardingNames();

// How 1D tensor-parallel collectives overlap the compute (docs/strategies.md, "Tensor-parallel
// overlap"): kNone, every one on the compute stream (Megatron-LM before its commit cf7efd4 of
// August 2021; PyTorch's DTensor); kAsync, the backward's input-gradient reduction (all-reduce,
// or the reduce-scatter under sequence parallelism) beside the weight-gradient GEMM after it
// (Megatron-LM since then, Megatron-Core, Transformer Engine's linears).
enum class TensorOverlap : uint8_t { kNone, kAsync };
std::span<const std::string_view> TensorOverlapNames();  // "none", "async"

// The parallel dimensions a rank's index is made of, for the placement order.
enum class PlanDimension : uint8_t { kTensor, kData, kPipeline };

struct ParallelPlan {
  int data = 1;
  int tensor = 1;  // ranks of a tensor-parallel group: t (1D), q² (2D) or q²·d (2.5D)
  models::TensorLayout tensor_layout = models::TensorLayout::k1D;
  int tensor_depth = 1;  // 2.5D: d
  int pipeline = 1;
  bool sequence_parallel = false;
  // `parallelism.tensor.overlap`; unset: TensorOverlapOf's default for the framework.
  std::optional<TensorOverlap> tensor_overlap;
  models::PipelineSchedule schedule = models::PipelineSchedule::kOneForwardOneBackward;
  int virtual_stages = 1;
  // Transformer layers per model chunk: L/(p·v) each (Megatron's default), balanced by cost
  // (one chunk per stage; Simulate chooses the counts; docs/strategies.md "Stage balancing"),
  // or given. The counts are in `chunk_layers` once known — given, derived from the uniform
  // split with the embedding and loss counted as layers, or balanced by Simulate — in model
  // order (chunk k runs on stage k mod p as its virtual stage k / p); empty while uniform.
  enum class LayerSplit { kUniform, kBalanced, kGiven };
  LayerSplit layer_split = LayerSplit::kUniform;
  std::vector<int> chunk_layers;
  // Megatron-Core's account_for_embedding_in_pipeline_split / ..._loss_...: with the uniform
  // split, the embedding (the loss) takes one layer's place on the first (last) chunk.
  bool embedding_as_layer = false;
  bool loss_as_layer = false;
  // Megatron-LM's scatter/gather of pipeline transfers (--scatter-gather-tensors-in-pipeline,
  // on from February 2021 until Megatron-Core's pipeline code replaced it in 2023): each
  // tensor-parallel peer sends 1/t of the replicated activations and the receivers all-gather
  // them. Off (Megatron-Core; Megatron-LM before it): every peer sends all of them. Moot under
  // sequence parallelism and on a 2D/2.5D grid, where each peer sends its own shard anyway.
  bool pipeline_scatter_gather = false;
  // Context parallelism (docs/strategies.md, "Context parallelism"): each sequence split over
  // `context` ranks that hold the same weights, their attention a p2p ring or a2a. Its peers are
  // adjacent just inside data parallelism (Megatron's tp-cp-dp-pp): the builder's data index
  // runs over data × context, index cp + context · dp.
  int context = 1;
  models::ContextComm context_comm = models::ContextComm::kP2p;
  // Expert parallelism, carved out of data (× context) parallelism as in Megatron: the experts
  // of each MoE layer split over `expert` consecutive data indices. With MoE parallel folding
  // (`expert_tensor` 1 under tensor parallelism, Megatron-Core's expert_tensor_parallel_size)
  // out of tensor × data × context: over `expert` consecutive expert indices tp + t·dp.
  int expert = 1;
  int expert_tensor = 0;  // each expert's FFN split this many ways; 0: `tensor`
  // Skewed routing: the busiest expert receives this many times the mean tokens (1: balanced;
  // at most `expert`). Changes time only with dropless routing (docs/moe.md).
  double expert_imbalance = 1.0;
  // Megatron-Core's --overlap-moe-expert-parallel-comm: in the steady state each forward chunk
  // pass runs beside a backward one layer by layer, each one's all-to-alls on an "ep" stream
  // behind the other's compute, after one more warm-up forward; `expert_delay_wgrad`
  // (--delay-wgrad-compute) also defers the experts' and attention's weight gradients behind
  // the all-to-alls (docs/moe.md, "All-to-all overlap").
  bool expert_overlap = false;
  bool expert_delay_wgrad = false;
  int zero_stage = 0;
  // DLRM: one sharding for every table, or one per table (`parallelism.embedding_sharding`);
  // empty: table-wise.
  std::vector<EmbeddingSharding> embedding_sharding;
  Bytes gradient_bucket = Bytes(25 * kMebi);  // PyTorch DDP's bucket_cap_mb default
  bool overlap_gradient_reduce = true;
  GradientSync gradient_sync = GradientSync::kAllReduce;
  // How ranks are numbered, innermost dimension first (`parallelism.order`, "tp-dp-pp" by
  // default: Megatron's order, tensor-parallel peers adjacent and so inside a node, then data,
  // then pipeline). Rank r runs on GPU r, node r / gpus_per_node.
  std::array<PlanDimension, 3> order = {PlanDimension::kTensor, PlanDimension::kData,
                                        PlanDimension::kPipeline};

  int world() const { return data * context * tensor * pipeline; }
  // The data indices of the rank order: data-parallel replicas times context-parallel peers.
  int DataIndices() const { return data * context; }
  // The ranks holding the same dense weights, over which their gradients are reduced and ZeRO
  // shards them: the data-parallel replicas and their context-parallel peers, times the depth
  // layers of a 2.5D grid (Tesseract's depth all-reduce folded into data parallelism).
  int WeightReplicas() const { return data * context * tensor_depth; }
  int grid() const { return models::TensorGrid(tensor_layout, tensor, tensor_depth); }
  bool on_grid() const { return tensor_layout != models::TensorLayout::k1D; }
  // Whether stage boundaries move 1/t of replicated activations that the receivers all-gather
  // (`pipeline_scatter_gather` where it has an effect: pipelined, 1D tensor parallelism
  // without SP, whose sequence shard is sent as it is).
  bool ScattersPipelineTransfers() const {
    return pipeline_scatter_gather && pipeline > 1 && tensor > 1 && !sequence_parallel &&
           !on_grid();
  }
  // The rank of (data index, stage, tensor index) in `order`: by default tp + t·(dp + D·pp),
  // with D = DataIndices() and dp = cp + c·(data-parallel index). On a 2D/2.5D grid, tensor
  // index tp = i + q·(j + q·k): column i, row j, depth k (ColossalAI's order: a row's q ranks
  // adjacent).
  int32_t Rank(int dp, int pp, int tp) const {
    const auto index = [&](PlanDimension d) {
      return d == PlanDimension::kTensor ? tp : d == PlanDimension::kData ? dp : pp;
    };
    const auto size = [&](PlanDimension d) {
      return d == PlanDimension::kTensor ? tensor
             : d == PlanDimension::kData ? DataIndices()
                                         : pipeline;
    };
    return index(order[0]) + size(order[0]) * (index(order[1]) + size(order[1]) * index(order[2]));
  }
  // Whether `other` numbers this plan's ranks as `order` does: the two differ only in where
  // dimensions of size 1 sit.
  bool NumbersLike(const std::array<PlanDimension, 3>& other) const;
  int ExpertTensor() const { return expert_tensor > 0 ? expert_tensor : tensor; }
  // MoE parallel folding: experts split fewer ways than the tensor-parallel group (1 < t).
  bool folded_experts() const { return ExpertTensor() != tensor; }
  // Whether the experts' weights are held by a group of ranks other than the dense weights'
  // (reduced, sharded and gathered over the expert-data-parallel group).
  bool experts_apart() const { return expert > 1 || folded_experts(); }
  // Ranks holding the same experts: t·D·C / (t_e·EP) (D·C/EP without folding).
  int ExpertData() const { return tensor * DataIndices() / (ExpertTensor() * expert); }
  // The expert-parallel group of data index `dp` (without folding): data indices first …
  // first + expert − 1.
  int ExpertGroupFirst(int dp) const { return dp / expert * expert; }
  // Under folding the expert index of (data index dp, tensor index tp): tp + t·dp, which
  // Megatron-Core's expert rank order (etp-ep-edp) splits into groups of `expert` consecutive.
  int ExpertIndex(int dp, int tp) const { return tp + tensor * dp; }
  // The context-parallel peers of data index `dp`: data indices first … first + context − 1.
  int ContextGroupFirst(int dp) const { return dp / context * context; }
};

// "tp-dp-pp": the plan's placement order as `parallelism.order` writes it.
std::string PlanOrderName(const ParallelPlan& plan);
// `parallelism.order`'s text: tp, dp and pp once each, innermost first; errors name `path`.
Expected<std::array<PlanDimension, 3>> ParsePlanOrder(std::string_view text,
                                                      const std::string& path);

enum class RanksMode { kFull, kSymmetric };

struct SimulationConfig {
  std::string source;  // the config file, for messages
  models::ModelSpec model;
  TrainingConfig training;
  models::GpuSpec gpu;
  network::ClusterSpec cluster;
  ParallelPlan plan;
  CompressionConfig compression;
  // "time_to_train": the training run the iteration is one of (strategies/time_to_train.h).
  std::optional<TimeToTrainConfig> time_to_train;
  // "diloco": data parallelism relaxed into replicas synchronized every few steps
  // (strategies/diloco.h); Simulate runs one replica's inner step and prices the rest.
  std::optional<DilocoConfig> diloco;
  std::string profile;  // an op-cost table file, or empty
  // "calibration" (strategies/calibration.h): where it came from (a file, "inline"; "" none)
  // and the constants it set on this config's GPU ("name=value").
  std::string calibration_source;
  std::vector<std::string> calibration;
  // The calibration's error band for this GPU and framework, when it has one.
  std::optional<ErrorBand> error_band;
  // The network model that prices communication (network/network_models.h).
  const network::NetworkModelEntry* network_model = &network::DefaultNetworkModel();
  // How ops are priced (models/cost_model.h).
  const models::CostModelEntry* cost_model = &models::DefaultCostModel();
  RanksMode ranks = RanksMode::kFull;
  // The memory a simulation may take (`--max-memory`), checked before its graph is built
  // (strategies/footprint.h); 0: three quarters of the machine's.
  int64_t max_memory = 0;

  int64_t Microbatches() const {
    return training.global_batch / (training.micro_batch * plan.data);
  }
};

// How one rank sees a transformer layer under the config's training and plan.
models::TransformerShard ShardOf(const SimulationConfig& config);
// Whether the loss runs compiled (training.compile "loss"): a transformer's, but not under 1D
// tensor parallelism, whose loss_parallel over vocabulary shards dtsim prices eager (and says so
// in the result's warnings).
bool CompilesLoss(const SimulationConfig& config);
// What torch.compile would do that the plan runs eager, for the result's warnings: the
// compiled blocks, a compiled loss dtsim prices eager; none: empty.
std::vector<std::string> UnmodelledCompile(const SimulationConfig& config);

// The plan's tensor-parallel overlap: `parallelism.tensor.overlap` where given, else async under
// the megatron and deepspeed frameworks (Megatron's linears, which Megatron-DeepSpeed keeps)
// and none under pytorch (DTensor's collectives are synchronous on the compute stream).
TensorOverlap TensorOverlapOf(const SimulationConfig& config);
// Whether the plan has 1D tensor parallelism whose collectives all run on the compute stream
// (TensorOverlap::kNone): what a launch file must ask for, or say it cannot.
bool SerialTensorCollectives(const SimulationConfig& config);

// Whether skewed expert routing changes time: a dropless MoE model, expert parallelism and an
// imbalance above 1 (with capacity padding the excess tokens are dropped instead).
bool SkewedRouting(const SimulationConfig& config);

// Applies "a.b.c=value" to `config`: value is parsed as JSON when it is valid JSON (numbers,
// true, objects) and taken as a string otherwise; null removes the key (its default applies).
// Creates missing objects on the way.
Status ApplyOverride(Json& config, std::string_view assignment);

// Whether an override of `key` replaces what an earlier override of `earlier` set: the same key,
// or one of its parents ("cluster" over "cluster.nodes"). Either may be a whole assignment
// ("a.b=1"): its key is what comes before the "=".
bool OverrideReplaces(std::string_view key, std::string_view earlier);

// A config that went through Resolve: its plan checked against the model, the training and
// the cluster, and what it left to defaults filled in. Only Resolve (so also ConfigFromJson and
// LoadConfig) makes one, so what takes one — the graph builders, the memory model, the pass
// times, Simulate — cannot be handed an unchecked config. Its fields stay public to read; a
// caller that changes the plan resolves again (how it is simulated — ranks, network model,
// max_memory — may be set on a resolved config).
class ResolvedConfig : public SimulationConfig {
 private:
  explicit ResolvedConfig(SimulationConfig config) : SimulationConfig(std::move(config)) {}
  friend Expected<ResolvedConfig> Resolve(const SimulationConfig& config);
};

// The config with its plan checked against the model, the training and the cluster
// (divisibility, sizes, combinations not built yet; not memory: StageMemory) and what it left
// to defaults filled in: the sequence length (the model's max_seq) and the cluster sized to
// the plan when given without nodes. `config` itself is not changed. Errors name the field
// and the value.
Expected<ResolvedConfig> Resolve(const SimulationConfig& config);

// Reads every section strictly without checking the plan against the rest (what `dtsim
// search` starts from: it chooses the plan). `also_allowed`: top-level keys another reader
// takes (the search section).
Expected<SimulationConfig> ReadConfigSections(const Json& value, const std::string& source,
                                              std::span<const std::string_view> also_allowed);

// Reads and checks a whole config (ReadConfigSections, then Resolve; a "search" section
// is left to SearchSpaceFromJson); errors name the file, the JSON path and the value.
Expected<ResolvedConfig> ConfigFromJson(const Json& value, const std::string& source);
// `document`, when given, receives the config's JSON after the overrides (for provenance).
Expected<ResolvedConfig> LoadConfig(const std::string& path,
                                    const std::vector<std::string>& overrides,
                                    Json* document = nullptr);

}  // namespace dtsim::strategies
