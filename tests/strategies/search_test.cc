// `dtsim search` against brute force: simulating every plan of a small space must give the
// same top plans as the search, whose lower bound must never exceed a plan's simulated time.
#include "strategies/search.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "strategies/pass_times.h"
#include "strategies/plan_config.h"
#include "strategies/stage_memory.h"
#include "tests/testing/search_setup.h"

namespace dtsim::strategies {
namespace {

// A small transformer on 16 GPUs in nodes of 4 (tensor groups of 8 cross nodes), with a GPU
// small enough that memory prunes plans, and a space covering every dimension the search
// varies: 1D/2D/2.5D, SP, the three schedules with interleaving, ZeRO, micro-batch, recompute
// and compression.
Json SmallSearch() {
  return Json::parse(R"json({
    "model": {"family": "transformer", "layers": 8, "hidden": 1024, "heads": 16,
              "vocab": 8192, "max_seq": 512},
    "training": {"global_batch": 32, "seq_len": 512, "precision": "bf16"},
    "cluster": {"preset": "dgx-a100", "nodes": 4, "gpus_per_node": 4,
                "gpu": {"preset": "a100-sxm4-80gb", "memory": "2 GiB"}},
    "search": {"micro_batches": [1, 2, 4], "zero_stages": [0, 1, 3],
               "max_virtual_stages": 4, "compression": ["none", "fp16"]}
  })json");
}

using testing_support::SearchSetup;

SearchSetup Read(const Json& json) { return testing_support::ReadSearchSetup(json); }

// What the search compares to call two plans alike (RankPlans): the times, the breakdown and
// the largest stage's memory.
using Alike = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                         int64_t, int64_t, int64_t, int64_t>;

Alike AlikeKey(const SimulationResult& result, int64_t memory) {
  const PlanFigures f = FiguresOf(result);
  const TimeBreakdown& b = f.breakdown;
  return {f.average_iteration_time.ns(),
          f.iteration_time.ns(),
          memory,
          b.compute.ns(),
          b.recompute.ns(),
          b.tensor.ns(),
          b.expert.ns(),
          b.context.ns(),
          b.pipeline.ns(),
          b.data_exposed.ns(),
          b.optimizer.ns(),
          b.idle.ns()};
}

// Every plan that passes the checks and fits, simulated (symmetric ranks, analytical model):
// (average iteration time, enumeration index), best first, a plan alike a better one (the same
// times, breakdown and memory) left out as the search leaves it out. Checks each plan's lower
// bound.
std::vector<std::pair<int64_t, size_t>> BruteForce(const SearchSetup& setup, size_t& fitting) {
  const std::vector<PlanChoice> plans = EnumeratePlans(setup.base, setup.space);
  Expected<ConfigCostModel> cost = LoadCostModel(setup.base);
  EXPECT_TRUE(cost.ok());
  std::vector<std::pair<int64_t, size_t>> times;
  std::vector<std::pair<Alike, size_t>> keys;
  fitting = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    Expected<ResolvedConfig> resolved = Resolve(ConfigFor(setup.base, setup.space, plans[i]));
    if (!resolved.ok() || !StageMemory(*resolved).ok()) continue;
    int64_t memory = 0;
    const Expected<std::vector<models::MemoryBreakdown>> stages = EstimateStageMemory(*resolved);
    for (const models::MemoryBreakdown& stage : *stages) memory = std::max(memory, stage.total());
    ResolvedConfig config = *resolved;
    ++fitting;
    config.ranks = RanksMode::kSymmetric;
    Expected<SimulationResult> result = Simulate(config, *cost->model);
    EXPECT_TRUE(result.ok()) << PlanLabel(plans[i], setup.space) << ": "
                             << result.error().ToString();
    if (!result.ok()) continue;
    Expected<PassTimes> passes = PricePassTimes(config, *cost->model);
    EXPECT_TRUE(passes.ok());
    EXPECT_LE(IterationLowerBound(config, *passes), result->iteration_time)
        << PlanLabel(plans[i], setup.space);
    keys.emplace_back(AlikeKey(*result, memory), i);
  }
  std::sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) {
    return std::tuple(std::get<0>(a.first), a.second) < std::tuple(std::get<0>(b.first), b.second);
  });
  std::vector<Alike> kept;
  for (const auto& [key, index] : keys) {
    if (std::find(kept.begin(), kept.end(), key) != kept.end()) continue;
    kept.push_back(key);
    times.emplace_back(std::get<0>(key), index);
  }
  return times;
}

// The search's best 3 (symmetric, analytical) are brute force's.
Expected<SearchResult> SearchTopThreeAsBruteForce(const SearchSetup& setup) {
  size_t fitting = 0;
  const std::vector<std::pair<int64_t, size_t>> brute = BruteForce(setup, fitting);
  Expected<SearchResult> result =
      Search(setup.base, setup.space, {.top = 3, .rerank = 0, .threads = 2});
  if (!result.ok()) return result;
  EXPECT_GE(result->ranking.size(), 3u);
  for (size_t k = 0; k < std::min<size_t>(3, result->ranking.size()); ++k) {
    EXPECT_EQ(result->plans[result->ranking[k]].index, brute[k].second) << "rank " << k + 1;
  }
  return result;
}

// Every priced plan's bound is the one its own config gives (the search shares pass times
// between plans that agree on what they depend on).
void ExpectOwnBounds(const SearchSetup& setup, const SearchResult& result) {
  Expected<ConfigCostModel> cost = LoadCostModel(setup.base);
  ASSERT_TRUE(cost.ok());
  for (const EvaluatedPlan& plan : result.plans) {
    if (plan.status != PlanStatus::kSimulated && plan.status != PlanStatus::kBounded) continue;
    const Expected<ResolvedConfig> config =
        Resolve(ConfigFor(setup.base, setup.space, plan.choice));
    ASSERT_TRUE(config.ok());
    const Expected<PassTimes> passes = PricePassTimes(*config, *cost->model);
    ASSERT_TRUE(passes.ok());
    EXPECT_EQ(plan.lower_bound, IterationLowerBound(*config, *passes))
        << PlanLabel(plan.choice, setup.space);
  }
}

TEST(SearchTest, TopPlansEqualBruteForceAndTheBoundHolds) {
  const SearchSetup setup = Read(SmallSearch());
  size_t fitting = 0;
  const std::vector<std::pair<int64_t, size_t>> brute = BruteForce(setup, fitting);
  ASSERT_GE(brute.size(), 50u);

  Expected<SearchResult> result =
      Search(setup.base, setup.space, {.top = 5, .rerank = 0, .threads = 2});
  ASSERT_TRUE(result.ok()) << result.error().ToString();
  const SearchResult& r = *result;
  EXPECT_EQ(r.enumerated, EnumeratePlans(setup.base, setup.space).size());
  EXPECT_EQ(r.Count(PlanStatus::kSimulated) + r.Count(PlanStatus::kBounded), fitting);
  // Memory and divisibility pruned plans, and the bound spared simulations.
  EXPECT_GT(r.Count(PlanStatus::kOutOfMemory), 0u);
  EXPECT_GT(r.Count(PlanStatus::kInvalid), 0u);
  EXPECT_GT(r.Count(PlanStatus::kBounded), fitting / 4);
  ASSERT_GE(r.ranking.size(), 5u);
  for (size_t k = 0; k < 5; ++k) {
    const EvaluatedPlan& plan = r.plans[r.ranking[k]];
    EXPECT_EQ(plan.index, brute[k].second)
        << "rank " << k + 1 << ": " << PlanLabel(plan.choice, setup.space);
    EXPECT_EQ(plan.figures->average_iteration_time.ns(), brute[k].first);
  }
  // The space did hold grids, SP, interleaving, ZeRO-3 and compression among the plans that
  // fit and were priced (simulated, or bounded out; BruteForce simulated every one of them).
  bool grid = false, sequence = false, interleaved = false, zero3 = false, compressed = false;
  for (const EvaluatedPlan& plan : r.plans) {
    if (plan.status != PlanStatus::kSimulated && plan.status != PlanStatus::kBounded) continue;
    grid |= plan.choice.plan.on_grid();
    sequence |= plan.choice.plan.sequence_parallel;
    interleaved |= plan.choice.plan.virtual_stages > 1;
    zero3 |= plan.choice.plan.zero_stage == 3;
    compressed |= plan.choice.compression == 1;
  }
  EXPECT_TRUE(grid);
  EXPECT_TRUE(sequence);
  EXPECT_TRUE(interleaved);
  EXPECT_TRUE(zero3);
  EXPECT_TRUE(compressed);
}

// Issue 35: under flash attention Megatron's `selective` recompute (the attention core)
// recomputes and keeps what `none` does, so the two simulated alike and filled half of a top 10.
// A plan alike a better one is marked same_as it, out of the ranking, and named in its row (so
// is sequence parallelism at TP 1, which splits nothing).
TEST(SearchTest, PlansThatSimulateAlikeAreOneRow) {
  Json json = SmallSearch();
  json["training"]["flash_attention"] = true;
  json["search"]["recompute"] = {"none", "selective"};
  json["search"].erase("compression");
  const SearchSetup setup = Read(json);
  Expected<SearchResult> result =
      Search(setup.base, setup.space, {.top = 10, .rerank = 0, .threads = 2});
  ASSERT_TRUE(result.ok()) << result.error().ToString();
  const SearchResult& r = *result;
  ASSERT_GE(r.ranking.size(), 10u);
  size_t twins = 0;
  for (size_t k = 0; k < 10; ++k) {
    const EvaluatedPlan& kept = r.plans[r.ranking[k]];
    EXPECT_FALSE(kept.same_as);
    for (size_t j = 0; j < k; ++j) {  // no two ranked plans alike
      const EvaluatedPlan& other = r.plans[r.ranking[j]];
      EXPECT_FALSE(other.figures->average_iteration_time == kept.figures->average_iteration_time &&
                   other.memory_bytes == kept.memory_bytes &&
                   other.figures->breakdown.compute == kept.figures->breakdown.compute)
          << PlanLabel(kept.choice, setup.space);
    }
    const std::vector<std::string> same = SameAsLabels(r, r.ranking[k], setup.space);
    if (same.empty()) continue;
    ++twins;
    EXPECT_THAT(same, testing::Contains(kept.choice.recompute == models::Recompute::kNone
                                            ? "recompute selective"
                                            : "recompute none"));
  }
  EXPECT_GE(twins, 5u);  // every ranked plan of this space has its recompute twin
  // Each marked plan names a plan that is not itself marked, simulated to the same time (one
  // shard: a plan's enumeration index is its place in `plans`).
  for (const EvaluatedPlan& plan : r.plans) {
    if (!plan.same_as) continue;
    ASSERT_LT(*plan.same_as, r.plans.size());
    const EvaluatedPlan& kept = r.plans[*plan.same_as];
    EXPECT_FALSE(kept.same_as);
    EXPECT_EQ(kept.figures->average_iteration_time, plan.figures->average_iteration_time);
    // Recompute under flash attention, or sequence parallelism at TP 1 (which splits nothing).
    EXPECT_NE(PlanLabel(kept.choice, setup.space), PlanLabel(plan.choice, setup.space));
  }
}

// Issue 35: a plan using 77.4 of 80 GiB ranked in a top 5. A headroom keeps memory free for
// what the model does not count; plans that do not leave it are out of memory, saying why.
TEST(SearchTest, AMemoryHeadroomIsKeptFree) {
  const SearchSetup plain = Read(SmallSearch());
  Json json = SmallSearch();
  json["search"]["memory_headroom"] = "0.5 GiB";
  const SearchSetup kept = Read(json);
  EXPECT_EQ(kept.space.memory_headroom.count(), int64_t{1} << 29);
  const SearchOptions options{.top = 3, .rerank = 0, .threads = 2};
  Expected<SearchResult> without = Search(plain.base, plain.space, options);
  Expected<SearchResult> with = Search(kept.base, kept.space, options);
  ASSERT_TRUE(without.ok() && with.ok());
  EXPECT_GT(with->Count(PlanStatus::kOutOfMemory), without->Count(PlanStatus::kOutOfMemory));
  bool named = false;
  for (const EvaluatedPlan& plan : with->plans) {
    if (plan.status == PlanStatus::kSimulated || plan.status == PlanStatus::kBounded) {
      EXPECT_LE(plan.memory_bytes + (int64_t{1} << 29), int64_t{2} << 30);  // the 2 GiB GPU
    }
    named |= plan.detail.find("and the search keeps 0.5 GiB free") != std::string::npos;
  }
  EXPECT_TRUE(named);
}

TEST(SearchTest, Fp8IsADimensionOnOneDimensionalTensorLayouts) {
  // The small search on H100s with and without FP8: the top plans still equal brute force
  // (the bound holds for FP8 plans too) and FP8 plans are enumerated only on 1D layouts. (At
  // this size — hidden 1,024, 512 tokens — FP8 does not win: the GEMMs are small enough for
  // the curves' 5 µs ramp and the casts' launches to outweigh the doubled peak.)
  Json json = SmallSearch();
  json["cluster"] = Json::parse(R"({"preset": "dgx-h100", "nodes": 4, "gpus_per_node": 4,
                                    "gpu": {"preset": "h100-sxm5-80gb", "memory": "2 GiB"}})");
  json["search"] = Json::parse(R"({"micro_batches": [1, 2], "zero_stages": [0, 1],
                                   "recompute": ["selective"], "fp8": [false, true]})");
  const SearchSetup setup = Read(json);
  ASSERT_EQ(setup.space.fp8.size(), 2U);
  EXPECT_EQ(setup.space.fp8[1], models::Fp8Recipe::kDelayed);
  size_t fp8_plans = 0;
  for (const PlanChoice& plan : EnumeratePlans(setup.base, setup.space)) {
    if (plan.fp8 == models::Fp8Recipe::kNone) continue;
    ++fp8_plans;
    EXPECT_FALSE(plan.plan.on_grid()) << PlanLabel(plan, setup.space);
  }
  EXPECT_GT(fp8_plans, 0U);
  const Expected<SearchResult> result = SearchTopThreeAsBruteForce(setup);
  ASSERT_TRUE(result.ok()) << result.error().ToString();
  // FP8 plans were priced (simulated or bounded out), and are labelled so.
  size_t priced = 0;
  for (const EvaluatedPlan& plan : result->plans) {
    if (plan.choice.fp8 == models::Fp8Recipe::kNone) continue;
    if (plan.status == PlanStatus::kSimulated || plan.status == PlanStatus::kBounded) ++priced;
    EXPECT_THAT(PlanLabel(plan.choice, setup.space), testing::HasSubstr("· FP8 (delayed)"));
  }
  EXPECT_GT(priced, 0U);
}

TEST(SearchTest, ActivationOffloadingIsADimensionWhereMegatronAllowsIt) {
  // The small search (8 layers, 16 GPUs) with 0, 4 and 8 offloaded layers and recompute none
  // or full: 4 is tried on plans without pipelining or recompute, 8 (the model's layers) never,
  // and every other plan runs without offloading once. The top plans still equal brute force
  // (the bound holds: offloading only adds waits), and the offloading plans are labelled.
  Json json = SmallSearch();
  json["cluster"]["gpu"]["memory"] = "80 GiB";
  json["search"] = Json::parse(R"({"micro_batches": [1, 2], "zero_stages": [0, 1],
                                   "recompute": ["none", "full"], "tensor_modes": ["1d"],
                                   "activation_offload_layers": [0, 4, 8]})");
  const SearchSetup setup = Read(json);
  size_t offloading = 0;
  size_t without = 0;
  for (const PlanChoice& plan : EnumeratePlans(setup.base, setup.space)) {
    const std::string label = PlanLabel(plan, setup.space);
    EXPECT_NE(plan.activation_offload, 8) << label;
    if (plan.activation_offload == 0) {
      ++without;
      continue;
    }
    ++offloading;
    EXPECT_EQ(plan.plan.pipeline, 1) << label;
    EXPECT_EQ(plan.recompute, models::Recompute::kNone) << label;
    EXPECT_THAT(label, testing::EndsWith("· offload 4 layers"));
    const SimulationConfig config = ConfigFor(setup.base, setup.space, plan);
    EXPECT_EQ(config.training.activation_offload_layers, 4);
  }
  EXPECT_GT(offloading, 0U);
  EXPECT_GT(without, offloading);
  const Expected<SearchResult> result = SearchTopThreeAsBruteForce(setup);
  ASSERT_TRUE(result.ok()) << result.error().ToString();
}

TEST(SearchTest, ExpertOverlapStaysOnThePlansMegatronRunsItOn) {
  // The small search's model with 8 experts (top-2) and the config's all-to-all overlap: it
  // stays on every plan with expert parallelism, no pipeline or an interleaved one and no full
  // recompute (labelled, and in the config the plan simulates), and is dropped on the others,
  // which are still searched. The top plans equal brute force: the bound leaves the all-to-alls
  // out, so hiding them keeps it a bound.
  Json json = SmallSearch();
  json["model"]["moe"] = {{"experts", 8}, {"top_k", 2}, {"dropless", true}};
  json["cluster"]["gpu"]["memory"] = "80 GiB";
  json["parallelism"] = {{"expert", {{"size", 1}, {"overlap", true}}}};
  json["search"] = Json::parse(R"({"micro_batches": [1], "zero_stages": [0],
                                   "recompute": ["none", "full"], "tensor_modes": ["1d"]})");
  const SearchSetup setup = Read(json);
  size_t overlapped = 0;
  size_t without = 0;
  for (const PlanChoice& plan : EnumeratePlans(setup.base, setup.space)) {
    const std::string label = PlanLabel(plan, setup.space);
    const ParallelPlan& p = plan.plan;
    const bool allowed = p.expert > 1 && plan.recompute != models::Recompute::kFull &&
                         (p.pipeline == 1 ? p.schedule != models::PipelineSchedule::kGpipe
                                          : p.schedule == models::PipelineSchedule::kInterleaved);
    EXPECT_EQ(p.expert_overlap, allowed) << label;
    EXPECT_EQ(label.find("(a2a overlapped)") != std::string::npos, allowed) << label;
    EXPECT_EQ(ConfigFor(setup.base, setup.space, plan).plan.expert_overlap, allowed) << label;
    ++(allowed ? overlapped : without);
  }
  EXPECT_GT(overlapped, 0U);
  EXPECT_GT(without, 0U);
  const Expected<SearchResult> result = SearchTopThreeAsBruteForce(setup);
  ASSERT_TRUE(result.ok()) << result.error().ToString();
}

TEST(SearchTest, PyTorchPlansTrySelectiveAsTheirOwnSelectiveCheckpointing) {
  // Under framework pytorch, "selective" in the space is PyTorch's selective activation
  // checkpointing (selective_op, torchtitan's "selective" op policy), not Megatron-Core's
  // attention-core recompute; listed twice it is tried once. Megatron plans keep theirs.
  Json json = SmallSearch();
  json["search"] = Json::parse(R"({"micro_batches": [1], "zero_stages": [0],
                                   "recompute": ["none", "selective", "selective_op"],
                                   "tensor_modes": ["1d"]})");
  const SearchSetup megatron = Read(json);
  json["training"]["framework"] = "pytorch";
  const SearchSetup pytorch = Read(json);
  std::map<models::Recompute, size_t> tried;
  for (const PlanChoice& plan : EnumeratePlans(pytorch.base, pytorch.space))
    ++tried[plan.recompute];
  EXPECT_EQ(tried.count(models::Recompute::kSelective), 0U);
  EXPECT_GT(tried[models::Recompute::kSelectiveOp], 0U);
  EXPECT_EQ(tried[models::Recompute::kSelectiveOp], tried[models::Recompute::kNone]);
  size_t megatron_selective = 0;
  for (const PlanChoice& plan : EnumeratePlans(megatron.base, megatron.space)) {
    megatron_selective += plan.recompute == models::Recompute::kSelective ? 1 : 0;
  }
  EXPECT_EQ(megatron_selective, tried[models::Recompute::kNone]);
}

TEST(SearchTest, PipelinedFsdp2PlansAreReplayedWhenReached) {
  // FSDP2 plans of a Llama-style model under PyTorch: the search checks a pipelined one on the
  // analytic estimate and replays its loop (every stage's rank, every micro-batch) only when it
  // reaches it to simulate it, out of memory then if the replay says so; the top plans are
  // still brute force's, which replays every plan.
  Json json = SmallSearch();
  json["model"] = Json{{"family", "transformer"}, {"layers", 8},
                       {"hidden", 1024},          {"heads", 16},
                       {"kv_heads", 8},           {"ffn_hidden", 2816},
                       {"vocab", 8192},           {"max_seq", 512},
                       {"norm", "rmsnorm"},       {"activation", "swiglu"},
                       {"position", "rotary"},    {"linear_bias", false},
                       {"tied_embeddings", false}};
  json["training"]["framework"] = "pytorch";
  json["training"]["flash_attention"] = true;
  json["training"]["dropout"] = false;
  json["cluster"]["gpu"]["memory"] = "1.6 GiB";
  json["search"] = Json::parse(R"({"micro_batches": [1, 2], "zero_stages": [3],
                                   "tensor_modes": ["1d"], "sequence_parallel": [true],
                                   "recompute": ["none", "full"], "max_virtual_stages": 2})");
  const SearchSetup setup = Read(json);
  const Expected<SearchResult> result = SearchTopThreeAsBruteForce(setup);
  ASSERT_TRUE(result.ok()) << result.error().ToString();
  size_t replayed = 0;
  size_t pending = 0;
  for (const EvaluatedPlan& plan : result->plans) {
    // (Data parallelism of 1 runs without ZeRO, no FSDP2 loop to replay.)
    if (plan.choice.plan.pipeline == 1 || plan.choice.plan.zero_stage != 3) continue;
    if (plan.status == PlanStatus::kSimulated) {
      EXPECT_FALSE(plan.memory_replay_pending);
      EXPECT_TRUE(plan.allocator_reserve.has_value()) << PlanLabel(plan.choice, setup.space);
      ++replayed;
    }
    if (plan.memory_replay_pending) {
      EXPECT_EQ(plan.status, PlanStatus::kBounded);
      EXPECT_FALSE(plan.allocator_reserve.has_value());
      ++pending;
    }
  }
  EXPECT_GT(replayed, 0U);
  EXPECT_GT(pending, 0U);
}

TEST(SearchTest, ContextParallelismIsADimension) {
  // 8,192-token sequences on 16 H100s with 2.75 GiB each: the search over CP 1, 2, 4 with both
  // variants (and FP8 or not) still equals brute force (the bound holds for ring and all-to-all
  // attention), CP sizes only where they divide what tensor × pipeline leave. DP 16 needs
  // 3.7 GiB with FP8 (a whole sequence's activations, the loss's working set and the 0.75 GiB
  // CUDA context), so the best plan splits the sequence: DP 8 × CP 2 (p2p, FP8) at 2.7 GiB
  // beats DP 8 × TP 2 with SP (FP8, 2.3 GiB) by 19.6 against 22.7 ms.
  Json json = SmallSearch();
  json["model"]["max_seq"] = 8192;
  json["training"] = Json::parse(R"({"global_batch": 16, "seq_len": 8192, "precision": "bf16",
                                     "flash_attention": true, "dropout": false})");
  json["cluster"] = Json::parse(R"({"preset": "dgx-h100", "nodes": 4, "gpus_per_node": 4,
                                    "gpu": {"preset": "h100-sxm5-80gb", "memory": "2.75 GiB"}})");
  json["search"] = Json::parse(R"({"micro_batches": [1], "zero_stages": [1],
                                   "recompute": ["none"], "schedules": ["1f1b"],
                                   "tensor_modes": ["1d"], "context": [1, 2, 4],
                                   "context_comm": ["p2p", "a2a"], "fp8": [false, true]})");
  const SearchSetup setup = Read(json);
  size_t context_plans = 0;
  for (const PlanChoice& plan : EnumeratePlans(setup.base, setup.space)) {
    const ParallelPlan& p = plan.plan;
    EXPECT_EQ(p.world(), 16) << PlanLabel(plan, setup.space);
    if (p.context > 1) ++context_plans;
  }
  EXPECT_GT(context_plans, 0U);
  const Expected<SearchResult> result = SearchTopThreeAsBruteForce(setup);
  ASSERT_TRUE(result.ok()) << result.error().ToString();
  ASSERT_FALSE(result->ranking.empty());
  const EvaluatedPlan& best = result->plans[result->ranking[0]];
  EXPECT_EQ(best.choice.plan.context, 2) << PlanLabel(best.choice, setup.space);
  // Each plan's bound is its own: the search prices pass times once per kind of shard and
  // shares them, so the sharing key must hold everything they depend on (CP, FP8, …).
  ExpectOwnBounds(setup, *result);
  size_t priced = 0;
  for (const EvaluatedPlan& plan : result->plans) {
    if (plan.choice.plan.context == 1) continue;
    if (plan.status == PlanStatus::kSimulated || plan.status == PlanStatus::kBounded) ++priced;
    EXPECT_THAT(PlanLabel(plan.choice, setup.space), testing::HasSubstr(" × CP "));
  }
  EXPECT_GT(priced, 0U);
}

TEST(SearchTest, TheEmbeddingAndLossMayCountAsPipelineLayers) {
  // 6 layers with the embedding and the loss counted as layers (Megatron-Core's
  // account_for_embedding/loss_in_pipeline_split): 8 slots, so 2, 4 and 8 stages split them
  // (6 layers alone: only 2 of the GPU count's divisors). The search still equals brute force,
  // each plan's bound is its own (the first and last chunks hold a layer fewer), and a plan
  // written out keeps the flags.
  Json json = SmallSearch();
  json["model"]["layers"] = 6;
  json["parallelism"] = {{"pipeline", {{"embedding_as_layer", true}, {"loss_as_layer", true}}}};
  json["search"] = Json::parse(R"({"micro_batches": [1, 2], "zero_stages": [1],
                                   "recompute": ["none"], "tensor_modes": ["1d"],
                                   "max_virtual_stages": 2})");
  const SearchSetup setup = Read(json);
  std::set<int> pipelines;
  for (const PlanChoice& plan : EnumeratePlans(setup.base, setup.space)) {
    if (Resolve(ConfigFor(setup.base, setup.space, plan)).ok()) {
      pipelines.insert(plan.plan.pipeline);
    }
  }
  EXPECT_EQ(pipelines, (std::set<int>{1, 2, 4, 8}));
  const Expected<SearchResult> result = SearchTopThreeAsBruteForce(setup);
  ASSERT_TRUE(result.ok()) << result.error().ToString();
  ExpectOwnBounds(setup, *result);
  bool deep = false;
  for (const EvaluatedPlan& plan : result->plans) {
    const bool priced =
        plan.status == PlanStatus::kSimulated || plan.status == PlanStatus::kBounded;
    deep |= priced && plan.choice.plan.pipeline >= 4;
  }
  EXPECT_TRUE(deep);
  const EvaluatedPlan& best = result->plans[result->ranking[0]];
  const Json written = PlanConfigJson(json, best.choice, nullptr, 4, RanksMode::kSymmetric);
  EXPECT_EQ(written["parallelism"]["pipeline"]["embedding_as_layer"], true);
  EXPECT_EQ(written["parallelism"]["pipeline"]["loss_as_layer"], true);
}

TEST(SearchTest, RecomputePoliciesPerLayerKeepTheBound) {
  // The base config recomputes every 2nd layer only (training.recompute_every), and the space
  // adds selective op checkpointing (on 1D layouts only): each plan's bound sums the recompute
  // of the layers that have one, as much of it as the policy re-runs, so it still never exceeds
  // the simulated time, and the search's top plans are brute force's.
  Json json = SmallSearch();
  json["training"]["recompute"] = "full";
  json["training"]["recompute_every"] = 2;
  json["search"] = Json::parse(R"({"micro_batches": [1, 2], "zero_stages": [0, 1],
                                   "recompute": ["none", "full", "selective_op"],
                                   "max_virtual_stages": 1,
                                   "compression": ["none"]})");
  const SearchSetup setup = Read(json);
  EXPECT_EQ(setup.base.training.recompute_every, 2);
  size_t selective_op = 0;
  for (const PlanChoice& plan : EnumeratePlans(setup.base, setup.space)) {
    if (plan.recompute != models::Recompute::kSelectiveOp) continue;
    ++selective_op;
    EXPECT_EQ(plan.plan.tensor_layout, models::TensorLayout::k1D);
  }
  EXPECT_GT(selective_op, 0U);
  const Expected<SearchResult> result = SearchTopThreeAsBruteForce(setup);
  ASSERT_TRUE(result.ok()) << result.error().ToString();
}

TEST(SearchTest, ShardsTogetherHoldTheWholeSearch) {
  const SearchSetup setup = Read(SmallSearch());
  Expected<SearchResult> whole = Search(setup.base, setup.space, {.top = 3, .rerank = 0});
  ASSERT_TRUE(whole.ok());
  std::vector<std::pair<int64_t, size_t>> best;
  size_t plans = 0;
  for (int shard = 1; shard <= 3; ++shard) {
    Expected<SearchResult> part =
        Search(setup.base, setup.space, {.top = 3, .rerank = 0, .shard = shard, .shards = 3});
    ASSERT_TRUE(part.ok());
    plans += part->plans.size();
    for (size_t i : part->ranking) {
      best.emplace_back(part->plans[i].figures->average_iteration_time.ns(), part->plans[i].index);
    }
  }
  EXPECT_EQ(plans, whole->enumerated);
  std::sort(best.begin(), best.end());
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(best[k].second, whole->plans[whole->ranking[k]].index);
}

TEST(SearchTest, FlowModelReranksTheBest) {
  const SearchSetup setup = Read(SmallSearch());
  Expected<SearchResult> result = Search(setup.base, setup.space, {.top = 4, .rerank = 2});
  ASSERT_TRUE(result.ok());
  const auto& plans = result->plans;
  const auto& ranking = result->ranking;
  for (size_t k = 0; k < ranking.size(); ++k) {
    EXPECT_EQ(plans[ranking[k]].figures->flow_iteration_time.has_value(), k < 2) << k;
  }
  EXPECT_LE(*plans[ranking[0]].figures->flow_average_iteration_time,
            *plans[ranking[1]].figures->flow_average_iteration_time);
}

TEST(SearchTest, EmptySpaceSaysWhichConstraintEmptiedIt) {
  Json json = SmallSearch();
  json["search"]["micro_batches"] = {3};  // 32 sequences never divide into micro-batches of 3
  SearchSetup setup = Read(json);
  Expected<SearchResult> result = Search(setup.base, setup.space, {});
  ASSERT_TRUE(result.ok());
  const std::string error = ExplainEmptySearch(*result, setup.base).error().ToString();
  EXPECT_NE(error.find("no plan survives"), std::string::npos) << error;
  EXPECT_NE(error.find("training.global_batch"), std::string::npos) << error;
  EXPECT_NE(error.find("global batch (32) is not divisible"), std::string::npos) << error;

  json = SmallSearch();
  json["cluster"]["gpu"]["memory"] = "64 MiB";
  setup = Read(json);
  result = Search(setup.base, setup.space, {});
  ASSERT_TRUE(result.ok());
  const std::string memory = ExplainEmptySearch(*result, setup.base).error().ToString();
  EXPECT_NE(memory.find("do not fit in memory (the smallest needs"), std::string::npos) << memory;
}

TEST(SearchTest, BadSearchSectionsNameThePath) {
  const SearchSetup setup = Read(SmallSearch());
  const auto error = [&setup](const char* text) {
    const Json section = Json::parse(text);
    Expected<SearchSpace> space = SearchSpaceFromJson(&section, setup.base);
    return space.ok() ? std::string() : space.error().ToString();
  };
  EXPECT_EQ(error(R"({"recompute": ["selectiv"]})"),
            "search.recompute[0]: unknown value (did you mean \"selective\"?); known: \"none\", "
            "\"selective\", \"full\", \"selective_op\", got \"selectiv\"");
  EXPECT_EQ(error(R"({"micro_batches": []})"),
            "search.micro_batches: expected a non-empty array, got []");
  EXPECT_EQ(error(R"({"zero_stages": [4]})").substr(0, 21), "search.zero_stages[0]");
  EXPECT_NE(error(R"({"micro_batch": [1]})").find("did you mean \"micro_batches\""),
            std::string::npos);
  EXPECT_NE(error(R"({"compression": ["zip"]})").find("search.compression[0]"), std::string::npos);
}

TEST(SearchTest, SearchNeedsTheClusterSize) {
  Json json = SmallSearch();
  json["cluster"].erase("nodes");
  const SearchSetup setup = Read(json);
  Expected<SearchResult> result = Search(setup.base, setup.space, {});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().location(), "cluster.nodes");
}

// A space past the limit is an error before its plans are evaluated (kMaxSearchPlans), and
// enumeration stops soon after the limit instead of laying out the whole space.
TEST(SearchTest, ASpacePastThePlanLimitIsAnError) {
  const SearchSetup setup = Read(SmallSearch());
  const size_t all = EnumeratePlans(setup.base, setup.space).size();
  ASSERT_GT(all, 1000u);
  const std::vector<PlanChoice> some = EnumeratePlans(setup.base, setup.space, 100);
  // One layout's training choices at most past the limit: 3 micro-batches × 3 ZeRO stages ×
  // 3 recompute policies × 2 compression methods.
  EXPECT_GT(some.size(), 100u);
  EXPECT_LE(some.size(), 100u + 3 * 3 * 3 * 2);
  for (size_t i = 0; i < some.size(); i += 7) {
    EXPECT_EQ(PlanLabel(some[i], setup.space),
              PlanLabel(EnumeratePlans(setup.base, setup.space)[i], setup.space));
  }
  Expected<SearchResult> result =
      Search(setup.base, setup.space, {.rerank = 0, .threads = 1, .max_plans = 100});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().ToString(),
            "search: the search space has more than 100 plans (each parallel layout × 3 "
            "micro-batches × 3 ZeRO stages × 3 recompute policies × 2 compression methods): "
            "give shorter lists, or fewer GPUs");
  EXPECT_TRUE(Search(setup.base, setup.space, {.top = 1, .rerank = 0, .max_plans = all}).ok());
  EXPECT_EQ(SearchOptions().max_plans, kMaxSearchPlans);
}

}  // namespace
}  // namespace dtsim::strategies
