#include "tools/cli/search_command.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "sim/base/atomic_file.h"
#include "sim/base/input_files.h"
#include "sim/base/json_reader.h"
#include "tests/testing/search_setup.h"
#include "tests/testing/temp_dir.h"
#include "tools/cli/simulate_command.h"
#include "tools/results/search_results.h"

namespace dtsim::cli {
namespace {

using results::ReadSearchFile;
using results::SearchFile;
using testing::HasSubstr;

const std::string kSmall = DTSIM_EXAMPLES_DIR "/gpt3_1.3b_16gpu.json";

class SearchCommandTest : public testing_support::TempDirTest {
 protected:
  CommandOutcome Search(std::vector<std::string> args) {
    output_.str("");
    return SearchCommand(args, output_);
  }
  // The search of the small example on 16 GPUs, narrowed to keep the test quick.
  std::vector<std::string> SmallSearch(std::vector<std::string> more) {
    std::vector<std::string> args = {kSmall,
                                     "--gpus",
                                     "16",
                                     "--set",
                                     "search.micro_batches=[2,4]",
                                     "--set",
                                     "search.zero_stages=[0,1]",
                                     "--top",
                                     "3",
                                     "--rerank",
                                     "1"};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }
  // `dtsim simulate STEM.json -o STEM.result.json` of an emitted plan: the result (null when it
  // failed, which fails the test).
  static Json SimulateEmitted(const std::string& stem) {
    ForgetInputFiles();
    std::ostringstream ignored;
    const std::vector<std::string> args = {stem + ".json", "-o", stem + ".result.json", "-q"};
    const CommandOutcome simulated = SimulateCommand(args, ignored);
    EXPECT_EQ(simulated.kind, CommandOutcome::Kind::kOk)
        << (simulated.error ? simulated.error->ToString() : "");
    if (simulated.kind != CommandOutcome::Kind::kOk) return Json();
    return *ReadJsonFile(stem + ".result.json");
  }
  std::ostringstream output_;
};

TEST_F(SearchCommandTest, PrintsTheTopPlansAndWritesEveryPlan) {
  const CommandOutcome outcome = Search(SmallSearch({"-o", Path("all")}));
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  const std::string text = output_.str();
  EXPECT_THAT(text, HasSubstr("gpt3-1.3b on 16 × a100-sxm4-80gb (dgx-a100); symmetric ranks"));
  EXPECT_THAT(text, HasSubstr("why #1 wins over #2 (they differ in "));
  EXPECT_THAT(text, HasSubstr("   1  DP "));
  // Megatron's loop is not replayed through the caching allocator: no plan's memory has its
  // reserve, and the table says so.
  EXPECT_THAT(text, HasSubstr("memory: the largest stage's, per GPU, without the caching "
                              "allocator's reserve, which dtsim replays for PyTorch eager, DDP "
                              "and FSDP2 loops only (docs/models.md): --memory-headroom keeps "
                              "room for it)"));
  Expected<SearchFile> file = ReadSearchFile(Path("all.json"));
  ASSERT_TRUE(file.ok()) << file.error().ToString();
  EXPECT_EQ(file->result.plans.size(), file->result.enumerated);
  ASSERT_GE(file->result.ranking.size(), 3u);
  EXPECT_TRUE(file->result.plans[file->result.ranking[0]].figures->flow_iteration_time);
  // The CSV holds a header and one row per plan.
  std::ifstream csv(Path("all.csv"));
  std::string header;
  std::getline(csv, header);
  EXPECT_EQ(header.substr(0, 45), "rank,plan,index,status,reason,data,tensor,ten");
  size_t rows = 0;
  for (std::string line; std::getline(csv, line);) ++rows;
  EXPECT_EQ(rows, file->result.enumerated);
}

// GPT-2 124M on two GPUs under PyTorch: DDP's eager loop is replayed through the caching
// allocator (its reserve in the memory, kept in the search file), tensor parallelism on a
// GPT-style decoder is not, and the table marks its rows.
TEST_F(SearchCommandTest, RowsSayWhetherTheirMemoryHoldsTheAllocatorsReserve) {
  const CommandOutcome outcome = Search(
      {DTSIM_EXAMPLES_DIR "/gpt2_124m_1h100.json", "--set", "cluster.gpus_per_node=2", "--set",
       "training.global_batch=16", "--set", "search.recompute=[\"none\"]", "--set",
       "search.micro_batches=[8]", "--set", "search.zero_stages=[0]", "--set",
       "search.tensor_modes=[\"1d\"]", "--top", "3", "--rerank", "0", "-o", Path("reserve")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("; * without the caching allocator's reserve"));
  EXPECT_THAT(output_.str(), HasSubstr(" GiB*\n"));
  const Expected<SearchFile> file = ReadSearchFile(Path("reserve.json"));
  ASSERT_TRUE(file.ok()) << file.error().ToString();
  ASSERT_GE(file->result.ranking.size(), 3u);  // every plan simulated, in order
  int replayed = 0;
  for (const size_t index : file->result.ranking) {
    const strategies::EvaluatedPlan& plan = file->result.plans[index];
    const bool ddp = plan.choice.plan.data == 2;
    EXPECT_EQ(plan.allocator_reserve.has_value(), ddp);
    if (ddp) {
      ++replayed;
      EXPECT_GT(*plan.allocator_reserve, 0);
      EXPECT_LT(*plan.allocator_reserve, plan.memory_bytes);
    }
  }
  EXPECT_EQ(replayed, 1);
}

// An --emit directory that cannot be one is named before the search runs, not after it.
TEST_F(SearchCommandTest, AnUnusableEmitDirectoryIsRefusedBeforeTheSearch) {
  ASSERT_TRUE(WriteFileAtomically(Path("plans"), "a file").ok());
  CommandOutcome outcome = Search(SmallSearch({"--emit", Path("plans")}));
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_EQ(outcome.error->ToString(), Path("plans") + ": exists and is not a directory");
  EXPECT_EQ(output_.str(), "");
  outcome = Search(SmallSearch({"--emit", "/dev/null"}));
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_EQ(outcome.error->ToString(),
            "/dev/null: --emit is a directory of files, not a device, a pipe or a /dev or /proc "
            "path");
}

// --emit DIR writes DIR/plan-K.json and its siblings: the search's own output or an input
// among them would be replaced after the search (the output silently), so both are refused
// before it runs.
TEST_F(SearchCommandTest, EmittedPlansMayNotReplaceTheOutputOrAnInput) {
  ASSERT_TRUE(std::filesystem::create_directory(Path("plans")));
  CommandOutcome outcome =
      Search(SmallSearch({"--emit", Path("plans"), "-o", Path("plans/plan-1")}));
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_EQ(outcome.error->ToString(),
            Path("plans/plan-1.json") + ": --emit " + Path("plans") +
                " writes plan #1's files here, over the search's output (-o): give --emit "
                "another directory");
  EXPECT_EQ(output_.str(), "");
  // A config named like plan #2's DeepSpeed file, reached through "..": the same file.
  const std::string config = Path("plans/plan-2.ds_config.json");
  std::filesystem::copy_file(kSmall, config);
  std::vector<std::string> args = SmallSearch({"--emit", Path("plans/../plans")});
  args.front() = config;
  outcome = Search(args);
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(),
              HasSubstr(config + ": --emit " + Path("plans/../plans") +
                        " writes plan #2's files here, over an input of the command"));
  // Past the top K, or not a name --emit writes: no collision.
  ForgetInputFiles();
  args = SmallSearch({"--emit", Path("plans"), "-o", Path("plans/plan-4"), "-q"});
  outcome = Search(args);
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_TRUE(ReadSearchFile(Path("plans/plan-4.json")).ok());  // --top 3: not replaced
  EXPECT_TRUE(ReadJsonFile(Path("plans/plan-3.json")).ok());
}

// Issue 35, plans out: each top plan as a config that simulates to the search's time, and as
// Megatron-LM flags for its parallelism (with what no flag expresses named).
TEST_F(SearchCommandTest, EmittedPlansSimulateToTheSearchsFigures) {
  const CommandOutcome outcome =
      Search(SmallSearch({"-o", Path("all"), "--emit", Path("plans"), "--set",
                          "search.tensor_modes=[\"1d\",\"2d\"]"}));
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("plans out      " + Path("plans") + "/plan-1.json"));
  Expected<SearchFile> file = ReadSearchFile(Path("all.json"));
  ASSERT_TRUE(file.ok());
  ASSERT_GE(file->result.ranking.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    const std::string stem = Path("plans") + "/plan-" + std::to_string(k + 1);
    const Json result = SimulateEmitted(stem);
    ASSERT_FALSE(result.is_null());
    const strategies::EvaluatedPlan& plan = file->result.plans[file->result.ranking[k]];
    EXPECT_EQ(result["compression"]["average_iteration_time_ns"].get<int64_t>(),
              plan.figures->average_iteration_time.ns())
        << stem;
    const std::string megatron = *ReadFile(stem + ".megatron.txt");
    EXPECT_THAT(megatron, HasSubstr("Megatron-LM core_v0.14 pretrain_gpt.py flags"));
    EXPECT_THAT(megatron, HasSubstr(fmt::format("--tensor-model-parallel-size {} \\\n",
                                                plan.choice.plan.tensor)));
    EXPECT_THAT(megatron, HasSubstr("--num-layers 24 \\\n--hidden-size 2048"));  // GPT-3 1.3B
    // A grid plan in the top 3 names what Megatron-LM cannot run (launch_arguments_test
    // checks it on a 2D plan directly).
    if (plan.choice.plan.tensor_layout != models::TensorLayout::k1D) {
      EXPECT_THAT(megatron, HasSubstr("# not expressed: 2d tensor parallelism"));
    }
    // Megatron-DeepSpeed's flags name the plan's DeepSpeed config, written beside them.
    const std::string deepspeed = *ReadFile(stem + ".deepspeed.txt");
    EXPECT_THAT(deepspeed,
                HasSubstr(fmt::format("--deepspeed_config plan-{}.ds_config.json\n", k + 1)));
    EXPECT_THAT(deepspeed,
                HasSubstr(fmt::format("--zero-stage {} \\\n", plan.choice.plan.zero_stage)));
    const Json ds_config = *ReadJsonFile(stem + ".ds_config.json");
    EXPECT_EQ(ds_config["train_batch_size"],
              (*ReadJsonFile(stem + ".json"))["training"]["global_batch"]);
    EXPECT_EQ(ds_config["train_micro_batch_size_per_gpu"], plan.choice.micro_batch);
    EXPECT_EQ(ds_config["zero_optimization"]["stage"], plan.choice.plan.zero_stage);
    // Megatron-Bridge: run_recipe.py overrides, one a line.
    const std::string bridge = *ReadFile(stem + ".bridge.txt");
    EXPECT_THAT(bridge, HasSubstr(fmt::format("model.tensor_model_parallel_size={} \\\n",
                                              plan.choice.plan.tensor)));
    EXPECT_THAT(bridge, HasSubstr("model.num_layers=24 \\\nmodel.hidden_size=2048"));
  }
  EXPECT_FALSE(std::filesystem::exists(Path("plans") + "/plan-4.json"));  // --top 3
}

// Several global batches with a time_to_train section: the table gains the run's wall clock, by
// which it ranks; the files keep each plan's batch, iterations and run; an emitted plan
// simulates to the same run and launches for as many iterations.
TEST_F(SearchCommandTest, GlobalBatchesAreRankedByTimeToTrain) {
  const CommandOutcome outcome = Search(
      SmallSearch({"-o", Path("all"), "--emit", Path("plans"), "--set",
                   "search.global_batches=[32,64,128]", "--set", "time_to_train.tokens=1e10"}));
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  const std::string text = output_.str();
  EXPECT_THAT(text, HasSubstr("MFU    to train      memory"));
  EXPECT_THAT(text, HasSubstr("ranked by time to train: the run's wall clock with failures and "
                              "checkpoints"));
  EXPECT_THAT(text, HasSubstr("    iterations   "));
  Expected<SearchFile> file = ReadSearchFile(Path("all.json"));
  ASSERT_TRUE(file.ok()) << file.error().ToString();
  EXPECT_THAT(file->space.global_batches, testing::ElementsAre(32, 64, 128));
  ASSERT_GE(file->result.ranking.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    const strategies::EvaluatedPlan& plan = file->result.plans[file->result.ranking[k]];
    const strategies::PlanFigures& f = *plan.figures;
    // 10^10 tokens at the plan's batch of 2,048-token sequences, rounded up.
    const auto iterations = static_cast<int64_t>(
        std::ceil(1e10 / static_cast<double>(plan.choice.global_batch * 2048)));
    EXPECT_EQ(f.train_iterations, iterations);
    ASSERT_TRUE(f.time_to_train_s);
    EXPECT_THAT(strategies::PlanLabel(plan.choice, file->space),
                HasSubstr(fmt::format(" · batch {} · ", plan.choice.global_batch)));
    if (k > 0) {
      const strategies::PlanFigures& before =
          *file->result.plans[file->result.ranking[k - 1]].figures;
      EXPECT_LE(strategies::RankingNs(before, false), strategies::RankingNs(f, false));
    }
  }
  const strategies::EvaluatedPlan& best = file->result.plans[file->result.ranking[0]];
  const std::string stem = Path("plans") + "/plan-1";
  EXPECT_EQ((*ReadJsonFile(stem + ".json"))["training"]["global_batch"], best.choice.global_batch);
  EXPECT_THAT(*ReadFile(stem + ".megatron.txt"),
              HasSubstr(fmt::format("--train-iters {} \\\n", *best.figures->train_iterations)));
  const Json result = SimulateEmitted(stem);
  ASSERT_FALSE(result.is_null());
  EXPECT_DOUBLE_EQ(result["time_to_train"]["wall_s"].get<double>(), *best.figures->time_to_train_s);
  // The CSV has the run in seconds, as the sweep's.
  std::ifstream csv(Path("all.csv"));
  std::string header;
  std::getline(csv, header);
  EXPECT_THAT(header, HasSubstr(",global_batch,"));
  EXPECT_THAT(header, HasSubstr(",train_iterations,time_to_train_s,flow_time_to_train_s,"));
}

// Where #1 and #2 differ in batch, the batch says why #2 trains longer, not the parts of one
// iteration: on one GPU, 10^9 tokens at 64 × 2,048 tokens are ceil(7,629.4) = 7,630 iterations
// and at 16 × 2,048, 30,518; the batch of 16 pays the optimizer step four times as often.
TEST_F(SearchCommandTest, TwoBatchesSayWhyTheSlowerRunTrainsLonger) {
  const CommandOutcome outcome = Search(
      {kSmall, "--set", "cluster.gpus_per_node=1", "--gpus", "1", "--set",
       "search.micro_batches=[2]", "--set", "search.recompute=[\"none\"]", "--set",
       "search.global_batches=[16,64]", "--set", "time_to_train.tokens=1e9", "--rerank", "0"});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  const std::string text = output_.str();
  EXPECT_THAT(text, HasSubstr("they differ in global batch 64 vs 16;"));
  EXPECT_THAT(text, HasSubstr("    iterations         7630      30518\n"));
  EXPECT_THAT(text, testing::ContainsRegex(
                        "#2 trains [0-9.]+% longer: its batch of 16 sequences takes 30518 "
                        "iterations of [0-9.]+ s where #1's of 64 takes 7630 of [0-9.]+ s "
                        "\\(1.00× the tokens\\)"));
  EXPECT_THAT(text, testing::Not(HasSubstr("#2 loses most to")));
}

// A DLRM's plans: its own micro-batch at ZeRO 0 (no plan refused for a ZeRO stage its dense
// part cannot take) and each table placement listed, emitted as dtsim configs with their
// placement and without Megatron or DeepSpeed flags.
TEST_F(SearchCommandTest, ADlrmsTablePlacementsAreSearchedAndEmitted) {
  const CommandOutcome outcome = Search(
      {DTSIM_EXAMPLES_DIR "/dlrm_mlperf_8h100.json", "--emit", Path("plans"), "-o", Path("all"),
       "--rerank", "0", "--set", "search.embedding_sharding=[\"row_wise\", \"table_wise\"]"});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  const std::string text = output_.str();
  EXPECT_THAT(text, HasSubstr("no launch flags: Megatron-LM, DeepSpeed and "
                              "Megatron-Bridge train transformers, not a dlrm"));
  // On one DGX H100 table-wise wins (docs/strategies.md, "DLRM": 4.16 against 7.99 ms).
  EXPECT_THAT(text, HasSubstr("DP 8 × TP 1 × PP 1 · mb 8192 · ZeRO 0 · recompute none · tables "
                              "table-wise"));
  EXPECT_THAT(text, HasSubstr("they differ in tables table-wise vs row-wise;"));
  Expected<SearchFile> file = ReadSearchFile(Path("all.json"));
  ASSERT_TRUE(file.ok()) << file.error().ToString();
  EXPECT_EQ(file->result.enumerated, 2u);  // DP 8, mb 8,192, ZeRO 0, two placements
  ASSERT_EQ(file->result.ranking.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    const strategies::EvaluatedPlan& plan = file->result.plans[file->result.ranking[k]];
    const std::string stem = Path("plans") + "/plan-" + std::to_string(k + 1);
    EXPECT_EQ((*ReadJsonFile(stem + ".json"))["parallelism"]["embedding_sharding"],
              k == 0 ? "table_wise" : "row_wise");
    const Json result = SimulateEmitted(stem);
    ASSERT_FALSE(result.is_null());
    EXPECT_EQ(result["compression"]["average_iteration_time_ns"].get<int64_t>(),
              plan.figures->average_iteration_time.ns());
    EXPECT_FALSE(std::filesystem::exists(stem + ".megatron.txt"));
  }
}

// A tensor overlap the config gives is kept in the emitted 1D plans (a grid refuses the key),
// which still simulate to the search's figures.
TEST_F(SearchCommandTest, EmittedPlansKeepTheTensorOverlap) {
  const CommandOutcome outcome =
      Search(SmallSearch({"-o", Path("all"), "--emit", Path("plans"), "-q", "--set",
                          "parallelism.tensor.overlap=none"}));
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  Expected<SearchFile> file = ReadSearchFile(Path("all.json"));
  ASSERT_TRUE(file.ok());
  const std::string stem = Path("plans") + "/plan-1";
  const Json emitted = *ReadJsonFile(stem + ".json");
  EXPECT_EQ(emitted["parallelism"]["tensor"]["overlap"], "none");
  const Json result = SimulateEmitted(stem);
  ASSERT_FALSE(result.is_null());
  const strategies::EvaluatedPlan& plan = file->result.plans[file->result.ranking[0]];
  EXPECT_EQ(result["compression"]["average_iteration_time_ns"],
            plan.figures->average_iteration_time.ns());
}

// Rank orders searched on a cluster of pods (docs/network.md, "Switch tiers"): each plan's order
// is in its row and in its emitted config, which simulates to the search's figures; the
// Megatron-LM and Bridge launches carry the tp-pp-dp mapping; a file written before the order
// had a column reads its plans in the config's order.
TEST_F(SearchCommandTest, RankOrdersAreSearchedEmittedAndReadBack) {
  const std::string config = Path("pods.json");
  Json pods = testing_support::PodsSearchConfig(Json::array({"tp-dp-pp", "tp-pp-dp"}));
  pods["parallelism"] = {{"order", "tp-pp-dp"}};
  ASSERT_TRUE(WriteFileAtomically(config, pods.dump()).ok());
  const CommandOutcome outcome = Search(
      {config, "-o", Path("all"), "--emit", Path("plans"), "--top", "10", "--rerank", "0", "-q"});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  Expected<SearchFile> file = ReadSearchFile(Path("all.json"));
  ASSERT_TRUE(file.ok()) << file.error().ToString();
  ASSERT_EQ(file->space.orders.size(), 2u);
  std::set<std::string> orders;
  for (size_t k = 0; k < std::min<size_t>(10, file->result.ranking.size()); ++k) {
    const strategies::EvaluatedPlan& plan = file->result.plans[file->result.ranking[k]];
    const std::string order = strategies::PlanOrderName(plan.choice.plan);
    orders.insert(order);
    const std::string stem = Path("plans") + "/plan-" + std::to_string(k + 1);
    EXPECT_EQ((*ReadJsonFile(stem + ".json"))["parallelism"]["order"], order) << stem;
    const Json result = SimulateEmitted(stem);
    ASSERT_FALSE(result.is_null());
    EXPECT_EQ(result["compression"]["average_iteration_time_ns"],
              plan.figures->average_iteration_time.ns())
        << stem;
    const bool mapped = plan.choice.plan.NumbersLike({strategies::PlanDimension::kTensor,
                                                      strategies::PlanDimension::kPipeline,
                                                      strategies::PlanDimension::kData});
    const bool default_order = plan.choice.plan.NumbersLike(strategies::ParallelPlan{}.order);
    EXPECT_EQ(ReadFile(stem + ".megatron.txt")->find("--use-tp-pp-dp-mapping") != std::string::npos,
              mapped && !default_order)
        << stem;
    EXPECT_EQ(
        ReadFile(stem + ".bridge.txt")->find("dist.use_tp_pp_dp_mapping=true") != std::string::npos,
        mapped && !default_order)
        << stem;
  }
  EXPECT_EQ(orders.size(), 2u);  // both orders among the best 10 (tp-pp-dp first at 9)
  // Without the order column (a 1.6 file) every plan is read in the config's order.
  Json json = *ReadJsonFile(Path("all.json"));
  const auto column = std::find(json["columns"].begin(), json["columns"].end(), "order");
  ASSERT_NE(column, json["columns"].end());
  const auto at = static_cast<size_t>(column - json["columns"].begin());
  json["columns"].erase(at);
  for (Json& row : json["plans"]) row.erase(at);
  json["version"] = "1.6";
  const Expected<SearchFile> old = results::SearchFileFromJson(json, "old.json");
  ASSERT_TRUE(old.ok()) << old.error().ToString();
  for (const strategies::EvaluatedPlan& plan : old->result.plans) {
    EXPECT_EQ(strategies::PlanOrderName(plan.choice.plan), "tp-pp-dp");
  }
}

TEST_F(SearchCommandTest, MergedShardsEqualTheWholeSearch) {
  ASSERT_EQ(Search(SmallSearch({"-o", Path("whole"), "-q"})).kind, CommandOutcome::Kind::kOk);
  for (const char* shard : {"1/2", "2/2"}) {
    const std::string name = Path(std::string("part") + shard[0]);
    const CommandOutcome outcome = Search(SmallSearch({"--shard", shard, "-o", name, "-q"}));
    ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  }
  const CommandOutcome merged =
      Search({"--merge", Path("part2.json"), Path("part1.json"), "-o", Path("merged")});
  ASSERT_EQ(merged.kind, CommandOutcome::Kind::kOk) << merged.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("(merged from 2 shards)"));
  const Expected<SearchFile> whole = ReadSearchFile(Path("whole.json"));
  const Expected<SearchFile> both = ReadSearchFile(Path("merged.json"));
  ASSERT_TRUE(whole.ok() && both.ok());
  ASSERT_EQ(whole->result.plans.size(), both->result.plans.size());
  for (size_t k = 0; k < 3; ++k) {
    const auto& a = whole->result.plans[whole->result.ranking[k]];
    const auto& b = both->result.plans[both->result.ranking[k]];
    EXPECT_EQ(a.index, b.index);
    EXPECT_EQ(a.figures->average_iteration_time, b.figures->average_iteration_time);
    EXPECT_EQ(a.figures->flow_average_iteration_time, b.figures->flow_average_iteration_time);
  }
  // What sets up a search was ignored beside --merge (the shards' settings hold).
  for (const std::vector<std::string>& extra : {std::vector<std::string>{"--gpus", "32"},
                                                {"--rerank", "5"},
                                                {"--shard", "1/2"},
                                                {"--set", "training.micro_batch=2"}}) {
    std::vector<std::string> args = {"--merge", Path("part1.json"), Path("part2.json")};
    args.insert(args.end(), extra.begin(), extra.end());
    const CommandOutcome refused = Search(args);
    EXPECT_EQ(refused.kind, CommandOutcome::Kind::kUsage) << extra.front();
    EXPECT_THAT(refused.error->ToString(),
                HasSubstr(extra.front() + " sets up a search, and --merge combines"));
  }
}

TEST_F(SearchCommandTest, BadInputIsNamed) {
  CommandOutcome outcome = Search(SmallSearch({"--shard", "3/2"}));
  EXPECT_EQ(outcome.kind, CommandOutcome::Kind::kUsage);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("--shard: expected K/N with 1 ≤ K ≤ N"));

  outcome = Search(SmallSearch({"--set", "search.micro_batches=[3]"}));
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(),
              HasSubstr("gpt3_1.3b_16gpu.json: search: no plan survives"));
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("training.global_batch"));

  outcome = Search(SmallSearch({"--set", "search.schedule=[\"gpipe\"]"}));
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("did you mean \"schedules\""));

  outcome = Search({kSmall, "--gpus", "12"});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("--gpus: not a multiple of the cluster's 8"));
  // 0 read as "not given" and was answered "give cluster.nodes (or --gpus)".
  outcome = Search({kSmall, "--gpus", "0"});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kUsage);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("--gpus: must be at least 1, got 0"));

  EXPECT_EQ(Search({}).kind, CommandOutcome::Kind::kUsage);

  // Merging: an unreadable file, something that is not a search, a missing shard.
  outcome = Search({"--merge", Path("absent.json")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("absent.json"));
  ASSERT_TRUE(
      WriteFileAtomically(Path("other.json"), R"({"format": "dtsim.simulate_result"})").ok());
  outcome = Search({"--merge", Path("other.json")});
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("other.json: format: not a search result"));
  ASSERT_TRUE(WriteFileAtomically(Path("columns.json"), R"({"format": "dtsim.search", "version": 1,
      "settings": {"space": {"compression": ["none"]}}, "shard": 1, "shards": 1,
      "enumerated": 0, "seconds": 0, "columns": [7], "plans": []})")
                  .ok());
  outcome = Search({"--merge", Path("columns.json")});
  EXPECT_THAT(outcome.error->ToString(),
              HasSubstr("columns.json: columns[0]: expected a column name"));
  ASSERT_EQ(Search(SmallSearch({"--shard", "1/2", "-o", Path("half"), "-q"})).kind,
            CommandOutcome::Kind::kOk);
  outcome = Search({"--merge", Path("half.json")});
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("split into 2 shards, 1 given"));
}

// What `dtsim search` prints of a search file and `dtsim report` shows is checked on reading. A
// setting of the wrong type was an uncaught exception ("internal error: [json.exception...] type
// must be number"); a ranking naming no simulated plan, a traceback in the report's script
// (found by tools/dev/report_fuzz.py).
TEST_F(SearchCommandTest, ReadingChecksTheSettingsAndTheRankingItShows) {
  ASSERT_EQ(Search(SmallSearch({"-o", Path("good"), "-q"})).kind, CommandOutcome::Kind::kOk);
  const Expected<Json> good = ReadJsonFile(Path("good.json"));
  ASSERT_TRUE(good.ok()) << good.error().ToString();
  const Json& ranking = (*good)["ranking"];
  ASSERT_GE(ranking.size(), 2u);
  int edits = 0;
  const auto merge_edited = [&](const std::function<void(Json&)>& edit) {
    Json copy = *good;
    edit(copy);
    const std::string path = Path(fmt::format("edited{}.json", ++edits));
    EXPECT_TRUE(WriteFileAtomically(path, copy.dump()).ok());
    const CommandOutcome outcome = Search({"--merge", path, "-q"});
    EXPECT_EQ(outcome.kind, CommandOutcome::Kind::kFailure) << path;
    return outcome.error ? outcome.error->ToString() : std::string();
  };
  EXPECT_THAT(merge_edited([](Json& j) { j["settings"]["gpus"] = "x"; }),
              HasSubstr("edited1.json: settings.gpus: expected an integer, got \"x\""));
  EXPECT_THAT(merge_edited([](Json& j) { j["settings"]["config"] = 5; }),
              HasSubstr("settings.config: expected a string, got 5"));
  EXPECT_THAT(merge_edited([](Json& j) { j["settings"]["simulation_config"]["training"] = 1; }),
              HasSubstr("settings.simulation_config.training: expected a JSON object"));
  EXPECT_THAT(merge_edited([](Json& j) { j["settings"]["gpu_memory_bytes"] = -1; }),
              HasSubstr("settings.gpu_memory_bytes"));
  EXPECT_THAT(merge_edited([](Json& j) { j["settings"]["ranks"] = 3; }),
              HasSubstr("settings.ranks: expected a string, got 3"));
  EXPECT_THAT(merge_edited([](Json& j) { j["settings"]["ranks"] = "some"; }),
              HasSubstr("settings.ranks: expected \"symmetric\" or \"full\", got \"some\""));
  EXPECT_THAT(merge_edited([](Json& j) { j.erase("ranking"); }),
              HasSubstr("ranking: missing required field"));
  EXPECT_THAT(merge_edited([](Json& j) { j["ranking"][0] = -36; }), HasSubstr("ranking[0]"));
  EXPECT_THAT(merge_edited([](Json& j) { j["ranking"][1] = Json::object(); }),
              HasSubstr("ranking[1]"));
  EXPECT_THAT(merge_edited([](Json& j) { j["ranking"][0] = 999999; }),
              HasSubstr("ranking[0]: not the index of a simulated plan in \"plans\", got 999999"));
  EXPECT_THAT(merge_edited([&](Json& j) { j["ranking"][1] = ranking[0]; }),
              HasSubstr("ranking[1]: ranked twice"));
}

// The search_file fuzz harness's seed is a search file the reader accepts, with ranked plans. A
// seed it refuses keeps a campaign in the file's head: the first one named 3 of the 34 columns,
// and 7 million executions never reached a plan row, the ranking or the merge.
TEST(FuzzSeedTest, TheSearchFileSeedsAreRead) {
  int seeds = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(DTSIM_SOURCE_DIR "/tests/fuzz/seeds/search_file")) {
    const Expected<SearchFile> file = ReadSearchFile(entry.path().string());
    ASSERT_TRUE(file.ok()) << file.error().ToString();
    EXPECT_FALSE(file->result.ranking.empty()) << entry.path();
    ++seeds;
  }
  EXPECT_GE(seeds, 1);
}

}  // namespace
}  // namespace dtsim::cli
