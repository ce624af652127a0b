#include "tools/cli/import_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "sim/base/atomic_file.h"
#include "sim/base/input_files.h"
#include "sim/base/json_reader.h"
#include "tests/testing/temp_dir.h"
#include "tools/cli/simulate_command.h"

namespace dtsim::cli {
namespace {

using testing::HasSubstr;

const std::string kLlama = DTSIM_SOURCE_DIR "/tests/data/launch/llama2_70b_megatron.txt";
const std::vector<std::string> kCluster = {
    "--gpu", "h100-sxm5-80gb", "--preset", "dgx-h100", "--nodes", "8", "--vocab", "32000"};

class ImportCommandTest : public testing_support::TempDirTest {
 protected:
  CommandOutcome Import(std::vector<std::string> args) {
    output_.str("");
    ForgetInputFiles();
    return ImportCommand(args, output_);
  }
  std::vector<std::string> WithCluster(std::vector<std::string> args) {
    args.insert(args.end(), kCluster.begin(), kCluster.end());
    return args;
  }
  std::ostringstream output_;
};

// The LLaMA-2 launch from a file: a config `dtsim simulate` runs, and the arguments it does not
// model listed under it.
TEST_F(ImportCommandTest, ALaunchFileBecomesAConfigThatSimulates) {
  const CommandOutcome outcome =
      Import(WithCluster({"megatron", "--from", kLlama, "-o", Path("llama.json")}));
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("not modelled (13 argument(s), read and left out):\n"));
  EXPECT_THAT(output_.str(), HasSubstr("  --lr 3.0e-4\n"));
  const Json config = *ReadJsonFile(Path("llama.json"));
  EXPECT_EQ(config["parallelism"]["data"], 4);                 // 64 GPUs over TP 8 × PP 2
  EXPECT_TRUE(config["time_to_train"]["tokens"].is_number());  // from --train-iters
  std::ostringstream ignored;
  ForgetInputFiles();
  const std::vector<std::string> args = {Path("llama.json"), "-q", "--set",
                                         "simulation.ranks=symmetric"};
  const CommandOutcome simulated = SimulateCommand(args, ignored);
  EXPECT_EQ(simulated.kind, CommandOutcome::Kind::kOk) << simulated.error->ToString();
}

// Arguments after "--" (a shell's words); the config printed.
TEST_F(ImportCommandTest, ArgumentsAfterTheSeparatorPrintTheConfig) {
  std::vector<std::string> args = WithCluster({"megatron"});  // options before "--"
  for (const char* word :
       {"--", "--num-layers", "2", "--hidden-size", "1024", "--num-attention-heads", "16",
        "--seq-length=2048", "--global-batch-size", "64", "--bf16", "--tensor-model-parallel-size",
        "2"}) {
    args.emplace_back(word);
  }
  const CommandOutcome outcome = Import(args);
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  const Json config = Json::parse(output_.str());
  EXPECT_EQ(config["model"]["layers"], 2);
  EXPECT_EQ(config["training"]["seq_len"], 2048);
  EXPECT_EQ(config["parallelism"]["data"], 32);  // 8 nodes × 8 GPUs over TP 2
}

TEST_F(ImportCommandTest, UsageErrorsSayWhatToGive) {
  CommandOutcome outcome = Import(WithCluster({"torchtitan", "--from", kLlama}));
  EXPECT_EQ(outcome.kind, CommandOutcome::Kind::kUsage);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("dtsim import megatron"));
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("dtsim import deepspeed [DS_CONFIG.json]"));
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("dtsim import nemo CONFIG.yaml"));
  // Megatron-LM's flags name no DeepSpeed config.
  outcome = Import(WithCluster({"deepspeed", "--from", kLlama}));
  EXPECT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("give DeepSpeed's config"));
  outcome = Import({"megatron", "--from", kLlama});
  EXPECT_EQ(outcome.kind, CommandOutcome::Kind::kUsage);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("--preset NAME --gpu PRESET --nodes N"));
  outcome = Import(WithCluster({"megatron"}));
  EXPECT_EQ(outcome.kind, CommandOutcome::Kind::kUsage);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("after -- or in a file with --from"));
  // A count given as 0 or less names the option (it read as "not given": "give the cluster").
  outcome = Import({"megatron", "--from", kLlama, "--gpu", "h100-sxm5-80gb", "--preset", "dgx-h100",
                    "--nodes", "0"});
  EXPECT_EQ(outcome.kind, CommandOutcome::Kind::kUsage);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("--nodes: must be at least 1, got 0"));
  outcome = Import({"megatron", "--from", kLlama, "--gpu", "h100-sxm5-80gb", "--preset", "dgx-h100",
                    "--nodes", "8", "--vocab", "-1"});
  EXPECT_EQ(outcome.kind, CommandOutcome::Kind::kUsage);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("--vocab: must be at least 1, got -1"));
}

const std::string kLlamaNemo = DTSIM_SOURCE_DIR "/tests/data/launch/llama2_70b_nemo.yaml";

// A NeMo training config: the job's 8 nodes are its trainer.num_nodes; the keys not modelled
// listed by their paths.
TEST_F(ImportCommandTest, ANemoConfigBecomesAConfigThatSimulates) {
  const CommandOutcome outcome = Import({"nemo", kLlamaNemo, "--gpu", "h100-sxm5-80gb", "--preset",
                                         "dgx-h100", "--vocab", "32000", "-o", Path("llama.json")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("key(s), read and left out):\n"));
  EXPECT_THAT(output_.str(), HasSubstr("  model.optim.lr: 0.00015\n"));
  const Json config = *ReadJsonFile(Path("llama.json"));
  EXPECT_EQ(config["cluster"]["nodes"], 8);
  EXPECT_EQ(config["parallelism"]["data"], 4);  // 64 GPUs over TP 8 × PP 2
  std::ostringstream ignored;
  ForgetInputFiles();
  const std::vector<std::string> args = {Path("llama.json"), "-q"};
  const CommandOutcome simulated = SimulateCommand(args, ignored);
  EXPECT_EQ(simulated.kind, CommandOutcome::Kind::kOk) << simulated.error->ToString();
}

TEST_F(ImportCommandTest, NemoErrorsNameTheFileAndTheKey) {
  const std::vector<std::string> cluster = {"--gpu",    "h100-sxm5-80gb", "--preset",
                                            "dgx-h100", "--vocab",        "32000"};
  const auto with_cluster = [&cluster](std::vector<std::string> args) {
    args.insert(args.end(), cluster.begin(), cluster.end());
    return args;
  };
  CommandOutcome outcome = Import(with_cluster({"nemo", kLlamaNemo, "--nodes", "16"}));
  EXPECT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_EQ(outcome.error->ToString(),
            kLlamaNemo + ": trainer.num_nodes: the cluster is given 16 nodes, got 8");
  outcome = Import({"nemo", kLlamaNemo, "--gpu", "h100-sxm5-80gb"});
  EXPECT_EQ(outcome.kind, CommandOutcome::Kind::kUsage);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("give the cluster: --preset NAME --gpu PRESET"));
  std::vector<std::string> args = with_cluster({"nemo", kLlamaNemo});
  args.insert(args.end(), {"--", "--num-layers", "2"});
  outcome = Import(args);
  EXPECT_EQ(outcome.kind, CommandOutcome::Kind::kUsage);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("a NeMo config is the whole job"));
  ASSERT_TRUE(WriteFileAtomically(Path("bad.yaml"), "trainer: {num_nodes: 1\nmodel: {}\n").ok());
  outcome = Import(with_cluster({"nemo", Path("bad.yaml")}));
  EXPECT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr(Path("bad.yaml") + ": line "));
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("not valid YAML"));
  outcome = Import(with_cluster({"nemo", Path("missing.yaml")}));
  EXPECT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr(Path("missing.yaml")));
  // The config is never overwritten by the output.
  outcome = Import(with_cluster({"nemo", Path("bad.yaml"), "-o", Path("bad.yaml")}));
  EXPECT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_EQ(*ReadFile(Path("bad.yaml")), "trainer: {num_nodes: 1\nmodel: {}\n");
}

// dtsim search --emit's pair: the launch flags name the config beside them, which gives the
// batch, ZeRO and precision; a config named on the command line is read instead.
TEST_F(ImportCommandTest, DeepSpeedFlagsReadTheConfigTheyName) {
  std::filesystem::create_directories(Path("plans"));
  ASSERT_TRUE(WriteFileAtomically(Path("plans/plan-1.deepspeed.txt"),
                                  "# dtsim search plan #1\n"
                                  "--num-layers 4 --hidden-size 1024 --num-attention-heads 16 \\\n"
                                  "--seq-length 2048 --tensor-model-parallel-size 2 \\\n"
                                  "--no-pipeline-parallel --zero-stage 2 --bf16 --lr 1e-4 \\\n"
                                  "--deepspeed --deepspeed_config plan-1.ds_config.json\n")
                  .ok());
  ASSERT_TRUE(WriteFileAtomically(Path("plans/plan-1.ds_config.json"),
                                  R"({"train_batch_size": 256, "train_micro_batch_size_per_gpu": 2,
                                      "zero_optimization": {"stage": 2, "overlap_comm": true},
                                      "bf16": {"enabled": true}, "steps_per_print": 10})")
                  .ok());
  CommandOutcome outcome = Import(WithCluster(
      {"deepspeed", "--from", Path("plans/plan-1.deepspeed.txt"), "-o", Path("ds.json")}));
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("not modelled (2 argument(s), read and left out):\n"
                                       "  --lr 1e-4\n  ds_config steps_per_print: 10\n"));
  const Json config = *ReadJsonFile(Path("ds.json"));
  EXPECT_EQ(config["training"]["global_batch"], 256);
  EXPECT_EQ(config["training"]["micro_batch"], 2);
  EXPECT_EQ(config["parallelism"]["zero_stage"], 2);
  EXPECT_EQ(config["parallelism"]["data"], 32);  // 8 nodes × 8 GPUs over TP 2
  // The flag's --name=value spelling too.
  ASSERT_TRUE(WriteFileAtomically(Path("plans/equals.txt"),
                                  "--num-layers 4 --hidden-size 1024 --num-attention-heads 16 "
                                  "--seq-length 2048 --tensor-model-parallel-size 2 "
                                  "--deepspeed_config=plan-1.ds_config.json\n")
                  .ok());
  outcome = Import(WithCluster({"deepspeed", "--from", Path("plans/equals.txt")}));
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_EQ(Json::parse(output_.str())["parallelism"]["zero_stage"], 2);
  // The config the flags name is an input: never the output.
  const std::string before = *ReadFile(Path("plans/plan-1.ds_config.json"));
  outcome = Import(WithCluster({"deepspeed", "--from", Path("plans/plan-1.deepspeed.txt"), "-o",
                                Path("plans/plan-1.ds_config.json")}));
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_EQ(*ReadFile(Path("plans/plan-1.ds_config.json")), before);
  // The config named on the command line; its errors name it.
  ASSERT_TRUE(WriteFileAtomically(Path("other.json"),
                                  R"({"train_batch_size": 256, "zero_optimization": {"stage": 3}})")
                  .ok());
  outcome = Import(
      WithCluster({"deepspeed", Path("other.json"), "--from", Path("plans/plan-1.deepspeed.txt")}));
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(),
              HasSubstr("other.json: zero_optimization.stage: disagrees with --zero-stage 2"));
}

// A bad flag names the file and the flag; the output is never the input.
TEST_F(ImportCommandTest, FailuresNameTheFileAndTheFlag) {
  ASSERT_TRUE(WriteFileAtomically(Path("bad.txt"), "--num-layers x --hidden-size 8\n").ok());
  CommandOutcome outcome = Import(WithCluster({"megatron", "--from", Path("bad.txt")}));
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("bad.txt"));
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("--num-layers: expected a positive integer"));
  outcome = Import(WithCluster({"megatron", "--from", Path("bad.txt"), "-o", Path("bad.txt")}));
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_EQ(*ReadFile(Path("bad.txt")), "--num-layers x --hidden-size 8\n");
}

}  // namespace
}  // namespace dtsim::cli
