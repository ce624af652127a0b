// `dtsim search` (docs/search.md): every parallel plan of a model on a cluster — data ×
// tensor × pipeline × expert factorizations, tensor mode (1D, 2D, 2.5D), sequence
// parallelism, schedule and virtual stages, micro-batch, ZeRO stage, recompute, gradient
// compression — checked for divisibility and memory, bounded from below by their compute, and
// the rest simulated with the analytical network model; the best re-simulated with the flow
// model. Plans whose lower bound is above the K-th best simulated time cannot enter the top K
// and are not simulated (branch and bound: the top K equals that of simulating every plan).
// With a time_to_train section the search may vary the global batch too, and ranks (and
// bounds) the whole run's wall clock instead of one iteration's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/cost_model.h"
#include "sim/base/json_reader.h"
#include "sim/base/status.h"
#include "sim/base/time.h"
#include "strategies/compression.h"
#include "strategies/config.h"
#include "strategies/pass_times.h"
#include "strategies/simulate.h"
#include "strategies/transformer_iteration.h"

namespace dtsim::strategies {

// The values each dimension of the plan may take (the config's "search" section).
struct SearchSpace {
  std::vector<int64_t> micro_batches = {1, 2, 4, 8, 16};
  std::vector<models::Recompute> recompute = {
      models::Recompute::kNone, models::Recompute::kSelective, models::Recompute::kFull};
  std::vector<int> zero_stages = {0, 1, 2, 3};
  std::vector<models::PipelineSchedule> schedules = {
      models::PipelineSchedule::kGpipe, models::PipelineSchedule::kOneForwardOneBackward,
      models::PipelineSchedule::kInterleaved};
  std::vector<models::TensorLayout> tensor_modes = {
      models::TensorLayout::k1D, models::TensorLayout::k2D, models::TensorLayout::k2p5D};
  std::vector<bool> sequence_parallel = {false, true};
  // Largest interleaving factor tried (every divisor of the layers per stage up to it).
  int max_virtual_stages = 8;
  // Gradient compression methods; by default only the config's own (compression changes
  // what is trained, so the search tries methods only when asked).
  std::vector<CompressionConfig> compression;
  // FP8 or not ("fp8": [false, true]; true is the config's recipe, else "delayed"); by default
  // only the config's own. Tried on 1D tensor layouts only.
  std::vector<models::Fp8Recipe> fp8;
  // Context-parallel sizes and their attention variants ("context": [1, 2, 4], "context_comm":
  // ["p2p", "a2a"]); by default only the config's own. A size that does not divide the GPUs
  // left by tensor × pipeline, or that the model or sequence cannot take, is skipped or
  // reported invalid like any other plan.
  std::vector<int> context;
  std::vector<models::ContextComm> context_comm;
  // Activation offloading's layer counts ("activation_offload_layers": [0, 20, 40];
  // training.activation_offload_layers); by default only the config's own. Tried where
  // Megatron-Core allows it (no pipeline, no recompute, fewer than the model's layers).
  std::vector<int> activation_offload;
  // Global batches in sequences ("global_batches": [1024, 2048, 4096]); by default only the
  // config's own. More than one needs a time_to_train section: plans of different batches are
  // ranked by the whole run's wall clock (their iterations differ, and past the critical batch
  // so do their tokens), not by the time of one iteration.
  std::vector<int64_t> global_batches;
  // A DLRM's table placements ("embedding_sharding": ["table_wise", "row_wise", [...]]: a name
  // for every table, or a list of one per table, as parallelism.embedding_sharding takes); by
  // default only the config's own.
  std::vector<std::vector<EmbeddingSharding>> embedding_shardings;
  // Rank orders ("orders": ["tp-dp-pp", "tp-pp-dp"]; parallelism.order): which groups stay
  // inside a node, a leaf or a pod (docs/network.md, "Switch tiers"); by default only the
  // config's own. Orders that number a plan's ranks alike (they differ only in dimensions of
  // size 1) are tried once.
  std::vector<std::array<PlanDimension, 3>> orders;
  // Memory a plan must leave free on each GPU beyond what the memory model counts (which has the
  // CUDA context, `runtime_bytes`, and NCCL's buffers, `nccl_bytes`, but the caching
  // allocator's reserve only for a one-GPU eager PyTorch loop, `allocator_reserve_bytes`):
  // "memory_headroom": "6 GiB", or `dtsim search --memory-headroom`.
  Bytes memory_headroom;
};

// Reads the config's "search" section (null: the defaults) for `base`, the config read without
// its plan checked; errors name the JSON path under "search".
Expected<SearchSpace> SearchSpaceFromJson(const Json* value, const SimulationConfig& base);

// One point of the space: the plan and the training settings the search varies.
struct PlanChoice {
  ParallelPlan plan;
  int64_t micro_batch = 1;
  models::Recompute recompute = models::Recompute::kNone;
  int compression = 0;  // index into SearchSpace::compression
  models::Fp8Recipe fp8 = models::Fp8Recipe::kNone;
  int activation_offload = 0;  // layers (training.activation_offload_layers)
  int64_t global_batch = 0;    // sequences; 0: the config's own (a search file before 1.6)
  int embedding_sharding = 0;  // index into SearchSpace::embedding_shardings (DLRM)
};

// "DP 8 × TP 8 (1d, SP) × PP 16 (1f1b) · mb 1 · ZeRO 1 · recompute selective".
std::string PlanLabel(const PlanChoice& choice, const SearchSpace& space);
// A DLRM plan's table placement (empty: table-wise, or a search file before 1.6).
std::vector<EmbeddingSharding> EmbeddingShardingOf(const PlanChoice& choice,
                                                   const SearchSpace& space);

// The most plans one search enumerates. Each holds about 1 kB while the search runs (178,200
// plans: 194 MB) and 280 bytes of its result file; the shipped examples' default spaces have
// 40,000-210,000 plans, and 2 M is about 2 GB. Past it, a space of long lists (5,000
// micro-batch sizes on 16 GPUs: 4.5 M plans) is an error before any plan is evaluated, not
// minutes of work or a process the kernel kills.
inline constexpr size_t kMaxSearchPlans = 2'000'000;

// Every plan of the space for the base config's model and cluster, in a fixed order; it stops
// once it holds more than `limit`.
std::vector<PlanChoice> EnumeratePlans(const SimulationConfig& base, const SearchSpace& space,
                                       size_t limit = SIZE_MAX);

// `base` with `choice` applied (not yet checked).
SimulationConfig ConfigFor(const SimulationConfig& base, const SearchSpace& space,
                           const PlanChoice& choice);

// A lower bound on the iteration time of a checked transformer config from the work its
// streams must serialize (PassTimes): stage s cannot start before the first micro-batch's
// forward through stages 0…s−1, then its compute stream (and a grid's "tp" stream) runs m
// micro-batches of all its chunks, and the last micro-batch's backward must still pass back
// through stages s−1…0 (chunk 0 each). Sends, other collectives, the optimizer and every wait
// only add to it (tests/strategies/search_test.cc checks it against simulation).
DurationNs IterationLowerBound(const ResolvedConfig& config, const PassTimes& times);

enum class PlanStatus { kSimulated, kBounded, kOutOfMemory, kInvalid, kFailed };
std::string_view PlanStatusName(PlanStatus status);

// What one simulation of a plan showed.
struct PlanFigures {
  DurationNs iteration_time;
  DurationNs average_iteration_time;  // with a compression warm-up, over the run
  double samples_per_second = 0;      // from the average iteration time
  double tokens_per_second = 0;
  double mfu = 0;
  TimeBreakdown breakdown;  // the mean over pipeline stages (adds up to the iteration time)
  std::optional<DurationNs> flow_iteration_time;  // re-simulated with the flow model
  std::optional<DurationNs> flow_average_iteration_time;
  std::optional<TimeBreakdown> flow_breakdown;  // the flow model's (not in search files)
  // With a time_to_train section: the run's iterations and wall clock (failures and checkpoints
  // included), and the wall clock at the flow model's iteration time where re-simulated.
  std::optional<int64_t> train_iterations;
  std::optional<double> time_to_train_s;
  std::optional<double> flow_time_to_train_s;
};

// What the search ranks a simulated plan by, in ns: the whole run's wall clock where the config
// has a time_to_train section (its plans may differ in global batch, so in iterations), else
// the run's average iteration time; `flow`: the flow model's figure where the plan has one.
int64_t RankingNs(const PlanFigures& figures, bool flow);

// The figures of one simulation (`dtsim sweep` tabulates them too).
PlanFigures FiguresOf(const SimulationResult& result);

struct EvaluatedPlan {
  size_t index = 0;  // in the enumeration
  PlanChoice choice;
  PlanStatus status = PlanStatus::kInvalid;
  // kInvalid: the JSON path of the check that failed ("parallelism.tensor"); kOutOfMemory:
  // "memory"; kFailed: "simulation". `detail`: the check's whole message.
  std::string reason;
  std::string detail;
  int64_t memory_bytes = 0;  // the largest pipeline stage's, per GPU (0: not estimated)
  // The caching allocator's reserve counted in memory_bytes, where dtsim replays the plan's loop
  // (strategies::EagerLoopOf); none where it is not modelled and so not counted.
  std::optional<int64_t> allocator_reserve;
  // A pipelined plan whose loop dtsim replays (strategies::ReplaysPipelinedLoop): checked on the
  // analytic estimate first, replayed (and found out of memory, or not) only when the search
  // reaches it to simulate it — a pipeline's replay is every stage's every micro-batch.
  bool memory_replay_pending = false;
  DurationNs lower_bound;  // 0: not computed
  std::optional<PlanFigures> figures;
  // Set by RankPlans when this plan simulated exactly as a better-ranked one (the same times,
  // breakdown and memory: recompute `selective` and `none` under flash attention, say): that
  // plan's enumeration index. Such a plan is left out of the ranking; its row names the plan
  // it duplicates, and that plan's row lists it (SameAsLabels).
  std::optional<size_t> same_as;
};

struct SearchOptions {
  int top = 10;     // plans ranked and printed
  int rerank = 3;   // of those, re-simulated with the flow model (0: none)
  int threads = 0;  // 0: every core
  int shard = 1;    // this process evaluates every shards-th plan from shard − 1
  int shards = 1;
  RanksMode ranks = RanksMode::kSymmetric;
  size_t max_plans = kMaxSearchPlans;  // the most plans the space may have (all shards)
  // Called from any thread as work completes; `phase` names the step.
  std::function<void(std::string_view phase, size_t done, size_t total)> progress;
};

struct SearchResult {
  size_t enumerated = 0;             // the whole space (all shards)
  std::vector<EvaluatedPlan> plans;  // this shard's, in enumeration order
  // Simulated plans best first by RankingNs: the best `rerank` by the flow model's figure, then
  // the rest by the analytical model's (the average iteration with a compression warm-up, or
  // with a time_to_train section the run's wall clock); indices into `plans`.
  std::vector<size_t> ranking;
  double seconds = 0;

  size_t Count(PlanStatus status) const;
  // Pruned plans per reason, most first.
  std::vector<std::pair<std::string, size_t>> PrunedByReason() const;
};

Expected<SearchResult> Search(const SimulationConfig& base, const SearchSpace& space,
                              const SearchOptions& options);

// Orders the simulated plans of `result` (Search does; a merge of shards does again): a plan
// that simulated exactly as a better one is marked `same_as` it and left out of the ranking.
void RankPlans(SearchResult& result, int rerank);

// What each plan marked `same_as` the ranked plan `ranked` (an index into result.plans) changes
// in its label, in enumeration order: "recompute selective" for the two recompute settings
// that simulate alike under flash attention; empty when no plan duplicates it.
std::vector<std::string> SameAsLabels(const SearchResult& result, size_t ranked,
                                      const SearchSpace& space);

// When nothing was simulated: which constraints emptied the space, as an error.
Status ExplainEmptySearch(const SearchResult& result, const SimulationConfig& base);

}  // namespace dtsim::strategies
