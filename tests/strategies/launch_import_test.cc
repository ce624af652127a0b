// Launch arguments in (strategies/launch_import.h): the launch commands of the shipped GPT-3
// 175B and LLaMA-2 70B examples simulate as the examples do, every argument dtsim does not
// model is listed, and a plan's emitted Megatron-LM flags read back as the same plan.
#include "strategies/launch_import.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sim/base/atomic_file.h"
#include "strategies/launch_arguments.h"
#include "strategies/stage_memory.h"
#include "tests/strategies/simulate_helpers.h"

namespace dtsim::strategies {
namespace {

using testing::Contains;
using testing::ElementsAreArray;
using testing::HasSubstr;

std::vector<std::string> LaunchFile(const std::string& name) {
  Expected<std::string> text = ReadFile(std::string(DTSIM_SOURCE_DIR "/tests/data/launch/") + name);
  EXPECT_TRUE(text.ok()) << text.error().ToString();
  return SplitLaunchArguments(*text);
}

TEST(LaunchImportTest, SplitsALaunchScriptIntoWords) {
  EXPECT_THAT(SplitLaunchArguments("# a comment\n--num-layers 96 \\\n  --bf16   # fast\n\n--x=1\n"),
              ElementsAreArray({"--num-layers", "96", "--bf16", "--x=1"}));
}

// Megatron-LM's examples/gpt3/train_gpt3_175b_distributed.sh with the example's plan: the GPT-2
// tokenizer's 50,257 tokens given on the side; its optimizer, schedule, data and logging
// arguments listed, in order.
TEST(LaunchImportTest, GptThreeLaunchSimulatesAsTheShippedExample) {
  const Json example = ExampleJson("gpt3_175b_1024gpu.json");
  Expected<ImportedConfig> imported = ImportMegatronArguments(
      LaunchFile("gpt3_175b_megatron.txt"), {.cluster = example["cluster"], .vocab = 50257});
  ASSERT_TRUE(imported.ok()) << imported.error().ToString();
  EXPECT_EQ(imported->config["parallelism"]["data"], 8);  // 1,024 GPUs over TP 8 × PP 16
  ExpectSameIteration(imported->config, example);
  // The run: 500,000 iterations of 1,536 × 2,048 tokens (the batch ramp not modelled).
  EXPECT_EQ(imported->config["time_to_train"]["tokens"].get<double>(), 500000.0 * 1536 * 2048);
  EXPECT_THAT(
      imported->not_modelled,
      ElementsAreArray({"--rampup-batch-size 16 16 5859375", "--weight-decay 0.1",
                        "--adam-beta1 0.9", "--adam-beta2 0.95", "--init-method-std 0.006",
                        "--clip-grad 1.0", "--lr 6.0e-5", "--lr-decay-style cosine",
                        "--min-lr 6.0e-6", "--lr-warmup-fraction .001", "--lr-decay-iters 430000",
                        "--data-path /data/gpt3_text_document", "--vocab-file gpt2-vocab.json",
                        "--merge-file gpt2-merges.txt", "--split 949,50,1", "--log-interval 100",
                        "--save-interval 10000", "--eval-interval 1000", "--eval-iters 10"}));
}

// A core_v0.14 launch of the LLaMA-2 70B example: GQA, RMSNorm, SwiGLU, RoPE, no biases or
// dropout, flash attention.
TEST(LaunchImportTest, LlamaLaunchSimulatesAsTheShippedExample) {
  const Json example = ExampleJson("llama2_70b_64h100.json");
  Expected<ImportedConfig> imported = ImportMegatronArguments(
      LaunchFile("llama2_70b_megatron.txt"), {.cluster = example["cluster"], .vocab = 32000});
  ASSERT_TRUE(imported.ok()) << imported.error().ToString();
  ExpectSameIteration(imported->config, example);
  EXPECT_EQ(imported->config["training"]["dropout"], false);
  EXPECT_THAT(imported->not_modelled, Contains("--tokenizer-type Llama2Tokenizer"));
  EXPECT_THAT(imported->not_modelled, Contains("--overlap-param-gather"));
  EXPECT_THAT(imported->not_modelled, Contains("--lr 3.0e-4"));
  for (const std::string& argument : imported->not_modelled) {
    EXPECT_THAT(argument, testing::Not(HasSubstr("parallel"))) << argument;
  }
}

// Emitted environment and flags (a line each, "--flag value") as a shell would split them.
std::vector<std::string> Words(const LaunchArguments& emitted) {
  std::vector<std::string> words = emitted.environment;
  for (const std::string& line : emitted.arguments) {
    const std::vector<std::string> split = SplitLaunchArguments(line);
    words.insert(words.end(), split.begin(), split.end());
  }
  return words;
}

// Export then import: the flags MegatronArguments writes for a plan read back as a config
// that simulates as the plan (every setting they express; the vocabulary given on the side).
void ExpectRoundTrip(const Json& json) {
  const ResolvedConfig original = ConfigOf(json);
  const std::vector<std::string> words = Words(MegatronArguments(original));
  // The cluster without its NCCL settings: the emitted environment must bring them back.
  Json cluster = json["cluster"];
  cluster.erase("nccl");
  Expected<ImportedConfig> imported = ImportMegatronArguments(
      words, {.cluster = cluster, .vocab = original.model.transformer.vocab});
  ASSERT_TRUE(imported.ok()) << imported.error().ToString() << "\n" << json.dump();
  ExpectSameIteration(imported->config, json);
}

Json Plan(const char* model, const char* parallelism, const char* training, int nodes) {
  Json json = {{"model", model},
               {"cluster", {{"preset", "dgx-h100"}, {"gpu", "h100-sxm5-80gb"}, {"nodes", nodes}}},
               {"parallelism", Json::parse(parallelism)},
               {"training", Json::parse(training)}};
  return json;
}

TEST(LaunchImportTest, EmittedFlagsReadBackAsThePlan) {
  ExpectRoundTrip(Plan("llama2-70b",
                       R"({"data": 4, "tensor": {"size": 8, "sequence_parallel": true},
      "pipeline": {"size": 4, "schedule": "interleaved", "virtual_stages": 5}, "zero_stage": 1})",
                       R"({"global_batch": 512, "seq_len": 4096, "flash_attention": true,
      "recompute": "selective", "dropout": false})",
                       16));
  ExpectRoundTrip(Plan("mixtral-8x7b", R"({"data": 8, "tensor": 2, "expert": 8, "zero_stage": 3})",
                       R"({"global_batch": 256, "seq_len": 4096, "flash_attention": true,
      "recompute": "full"})",
                       2));
  ExpectRoundTrip(
      Plan("llama3-8b",
           R"({"data": 2, "tensor": 2, "context": {"size": 2, "comm": "a2a"}, "zero_stage": 1})",
           R"({"global_batch": 64, "seq_len": 8192, "flash_attention": true,
      "precision": "fp8", "fp8_recipe": "current"})",
           1));
  ExpectRoundTrip(Plan("gpt3-175b", R"({"data": 8, "tensor": 8, "pipeline": 16, "zero_stage": 1})",
                       R"({"global_batch": 1536, "precision": "fp16"})", 128));
  // The embedding and loss as pipeline layers: 80 + 2 layers over 2 stages of 41 — as 40 and
  // 40 blocks, the split without them, so the flags are checked as read too — and the embedding
  // alone, 80 + 1 over 3 stages of 27: 26, 27, 27 blocks.
  const Json counted = Plan("llama2-70b", R"({"data": 8, "tensor": 8,
      "pipeline": {"size": 2, "embedding_as_layer": true, "loss_as_layer": true}})",
                            R"({"global_batch": 512, "seq_len": 4096, "flash_attention": true,
      "recompute": "full"})",
                            16);
  ExpectRoundTrip(counted);
  const Expected<ImportedConfig> split = ImportMegatronArguments(
      Words(MegatronArguments(ConfigOf(counted))), {.cluster = counted["cluster"], .vocab = 32000});
  ASSERT_TRUE(split.ok()) << split.error().ToString();
  EXPECT_EQ(split->config["parallelism"]["pipeline"]["embedding_as_layer"], true);
  EXPECT_EQ(split->config["parallelism"]["pipeline"]["loss_as_layer"], true);
  ExpectRoundTrip(Plan("llama2-70b", R"({"data": 4, "tensor": 8,
      "pipeline": {"size": 3, "embedding_as_layer": true}})",
                       R"({"global_batch": 512, "seq_len": 4096, "flash_attention": true,
      "recompute": "full"})",
                       12));
  // The rank order: --use-tp-pp-dp-mapping, here on a cluster of pods where it moves the
  // iteration (the data-parallel rings, not the pipelines, cross the 1:8 core).
  Json pods = Plan("gpt3-175b",
                   R"({"data": 8, "tensor": 8, "pipeline": 16, "zero_stage": 1,
                       "order": "tp-pp-dp"})",
                   R"({"global_batch": 1536, "precision": "fp16"})", 128);
  pods["cluster"]["inter_node"] = {{"topology", "fat-tree"},
                                   {"nodes_per_leaf", 2},
                                   {"nodes_per_pod", 16},
                                   {"pod_oversubscription", 8}};
  ExpectRoundTrip(pods);
  Json megatron_order = pods;
  megatron_order["parallelism"].erase("order");
  megatron_order["simulation"] = {{"ranks", "symmetric"}};
  pods["simulation"] = megatron_order["simulation"];
  EXPECT_NE(SimulateJson(megatron_order).iteration_time, SimulateJson(pods).iteration_time);
  const Expected<ImportedConfig> mapped = ImportMegatronArguments(
      Words(MegatronArguments(ConfigOf(pods))), {.cluster = pods["cluster"], .vocab = 50257});
  ASSERT_TRUE(mapped.ok()) << mapped.error().ToString();
  EXPECT_EQ(mapped->config["parallelism"]["order"], "tp-pp-dp");
  EXPECT_THAT(mapped->not_modelled, testing::Not(Contains(HasSubstr("use-tp-pp-dp-mapping"))));
  // Activation offloading: --cpu-offloading-num-layers.
  ExpectRoundTrip(Plan("llama3-8b", R"({"data": 4, "tensor": {"size": 2, "sequence_parallel": true},
      "zero_stage": 1})",
                       R"({"global_batch": 64, "micro_batch": 2, "seq_len": 8192,
      "flash_attention": true, "dropout": false, "activation_offload_layers": 16})",
                       1));
  // The expert all-to-alls' overlap: --overlap-moe-expert-parallel-comm, --delay-wgrad-compute.
  ExpectRoundTrip(Plan("mixtral-8x7b",
                       R"({"data": 8, "tensor": {"size": 2, "sequence_parallel": true},
      "pipeline": {"size": 2, "schedule": "interleaved", "virtual_stages": 2},
      "expert": {"size": 8, "overlap": true, "delay_wgrad": true}, "zero_stage": 1})",
                       R"({"global_batch": 256, "seq_len": 4096, "flash_attention": true,
      "recompute": "selective"})",
                       4));
  // Sliding windows: --window-size, and --window-attn-skip-freq as an integer (Gemma 3's 5:1)
  // or a list (Qwen2's full layers first).
  Json windowed = Plan("llama3-8b", R"({"data": 8, "zero_stage": 1})",
                       R"({"global_batch": 64, "seq_len": 8192, "flash_attention": true,
      "recompute": "full"})",
                       1);
  windowed["model"] = {
      {"preset", "llama3-8b"}, {"sliding_window", 1024}, {"sliding_window_pattern", 6}};
  ExpectRoundTrip(windowed);
  std::vector<int> first_full(32, 1);
  std::fill_n(first_full.begin(), 8, 0);
  windowed["model"]["sliding_window_pattern"] = first_full;
  ExpectRoundTrip(windowed);
  // DeepSeek-V3's layer at a toy size: MLA, dense layers first (--moe-layer-freq as a list),
  // a shared expert (--moe-shared-expert-intermediate-size) and an MTP module.
  Json deepseek = Plan("deepseek-v3", R"({"data": 8, "expert": 8, "zero_stage": 1})",
                       R"({"global_batch": 16, "seq_len": 2048, "flash_attention": true,
      "recompute": "full"})",
                       1);
  deepseek["model"] = Json::parse(R"({"preset": "deepseek-v3", "layers": 6, "mtp_layers": 1,
      "moe": {"experts": 16, "top_k": 2, "first_dense_layers": 2, "shared_experts": 1}})");
  ExpectRoundTrip(deepseek);
  // MoE on layers placed one flag a layer (Megatron-Core's integer --moe-layer-freq 2: layers
  // 0, 2, 4), which every and first_dense_layers cannot say.
  deepseek["model"]["moe"] = Json::parse(
      R"({"experts": 16, "top_k": 2, "shared_experts": 1, "layers": [1, 0, 1, 0, 1, 0]})");
  ExpectRoundTrip(deepseek);
  const ResolvedConfig listed_plan = ConfigOf(deepseek);
  const std::vector<std::string> words = Words(MegatronArguments(listed_plan));
  EXPECT_THAT(words, Contains("([1,0])*3"));
  const Expected<ImportedConfig> listed = ImportMegatronArguments(
      words, {.cluster = deepseek["cluster"], .vocab = listed_plan.model.transformer.vocab});
  ASSERT_TRUE(listed.ok()) << listed.error().ToString();
  EXPECT_EQ(listed->config["model"]["moe"]["layers"], Json::parse("[1, 0, 1, 0, 1, 0]"));
  // NCCL_P2P_NET_CHUNKSIZE in the launch's environment: the pipeline's sends cross nodes in
  // 512 KiB steps (cluster.nccl), which changes the iteration.
  Json chunked = Plan("llama2-70b", R"({"data": 1, "tensor": 8, "pipeline": 4})",
                      R"({"global_batch": 16, "seq_len": 4096, "flash_attention": true,
      "recompute": "full"})",
                      4);
  chunked["cluster"]["nccl"] = {{"p2p_net_chunk_size", "2 MiB"}};
  EXPECT_EQ(MegatronArguments(ConfigOf(chunked)).environment,
            std::vector<std::string>{"NCCL_P2P_NET_CHUNKSIZE=2097152"});
  ExpectRoundTrip(chunked);
}

// The environment before the flags: NCCL_P2P_NET_CHUNKSIZE sets cluster.nccl, other
// assignments are listed, a bad value names the variable; after a flag an assignment is a value.
TEST(LaunchImportTest, TheLaunchEnvironmentIsRead) {
  const Json cluster = {{"preset", "dgx-h100"}, {"gpu", "h100-sxm5-80gb"}, {"nodes", 1}};
  const std::vector<std::string> shape = {"--num-layers",          "2", "--hidden-size", "512",
                                          "--num-attention-heads", "8", "--seq-length",  "1024",
                                          "--global-batch-size",   "8", "--vocab-size",  "32000"};
  auto with = [&](std::vector<std::string> environment) {
    environment.insert(environment.end(), shape.begin(), shape.end());
    return ImportMegatronArguments(environment, {.cluster = cluster});
  };
  const Expected<ImportedConfig> imported =
      with({"NCCL_P2P_NET_CHUNKSIZE=524288", "CUDA_DEVICE_MAX_CONNECTIONS=1"});
  ASSERT_TRUE(imported.ok()) << imported.error().ToString();
  EXPECT_EQ(imported->config["cluster"]["nccl"]["p2p_net_chunk_size"], "524288 B");
  EXPECT_THAT(imported->not_modelled, Contains("CUDA_DEVICE_MAX_CONNECTIONS=1 (environment)"));
  const Expected<ImportedConfig> bad = with({"NCCL_P2P_NET_CHUNKSIZE=2MB"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().ToString(),
            "NCCL_P2P_NET_CHUNKSIZE: expected a positive integer: the bytes NCCL reads, got "
            "\"2MB\"");
  EXPECT_FALSE(with({"NCCL_P2P_NET_CHUNKSIZE=0"}).ok());
  std::vector<std::string> late = shape;
  late.emplace_back("NCCL_P2P_NET_CHUNKSIZE=524288");
  EXPECT_FALSE(ImportMegatronArguments(late, {.cluster = cluster}).ok());
}

// --qk-layernorm: a QK norm over each query and key head.
TEST(LaunchImportTest, QkLayerNormIsTheModelsQkNorm) {
  const Json cluster = {{"preset", "dgx-h100"}, {"gpu", "h100-sxm5-80gb"}, {"nodes", 1}};
  std::vector<std::string> flags = {"--num-layers",          "2", "--hidden-size", "512",
                                    "--num-attention-heads", "8", "--seq-length",  "1024",
                                    "--global-batch-size",   "8", "--vocab-size",  "32000"};
  const Expected<ImportedConfig> plain = ImportMegatronArguments(flags, {.cluster = cluster});
  ASSERT_TRUE(plain.ok()) << plain.error().ToString();
  EXPECT_FALSE(plain->config["model"].contains("qk_norm"));
  flags.emplace_back("--qk-layernorm");
  const Expected<ImportedConfig> imported = ImportMegatronArguments(flags, {.cluster = cluster});
  ASSERT_TRUE(imported.ok()) << imported.error().ToString();
  EXPECT_EQ(imported->config["model"]["qk_norm"], true);
  EXPECT_THAT(imported->not_modelled, testing::Not(Contains("--qk-layernorm")));
}

// Megatron-LM's 2021–2024 switch for its async input-gradient all-reduce.
TEST(LaunchImportTest, NoAsyncAllReduceTurnsTheTensorOverlapOff) {
  const Json cluster = {{"preset", "dgx-h100"}, {"gpu", "h100-sxm5-80gb"}, {"nodes", 1}};
  std::vector<std::string> args = {"--num-layers",
                                   "2",
                                   "--hidden-size",
                                   "512",
                                   "--num-attention-heads",
                                   "8",
                                   "--seq-length",
                                   "1024",
                                   "--global-batch-size",
                                   "8",
                                   "--vocab-size",
                                   "32000",
                                   "--tensor-model-parallel-size",
                                   "2"};
  const Expected<ImportedConfig> async = ImportMegatronArguments(args, {.cluster = cluster});
  ASSERT_TRUE(async.ok()) << async.error().ToString();
  EXPECT_FALSE(async->config["parallelism"]["tensor"].contains("overlap"));
  args.emplace_back("--no-async-tensor-model-parallel-allreduce");
  const Expected<ImportedConfig> none = ImportMegatronArguments(args, {.cluster = cluster});
  ASSERT_TRUE(none.ok()) << none.error().ToString();
  EXPECT_EQ(none->config["parallelism"]["tensor"]["overlap"], "none");
  EXPECT_THAT(none->not_modelled, testing::Not(Contains(HasSubstr("no-async"))));
  // Under sequence parallelism it stopped nothing: the reduce-scatter stayed async.
  args.emplace_back("--sequence-parallel");
  const Expected<ImportedConfig> sp = ImportMegatronArguments(args, {.cluster = cluster});
  ASSERT_TRUE(sp.ok()) << sp.error().ToString();
  EXPECT_FALSE(sp->config["parallelism"]["tensor"].contains("overlap"));
}

TEST(LaunchImportTest, BadArgumentsNameTheFlag) {
  const Json cluster = {{"preset", "dgx-h100"}, {"gpu", "h100-sxm5-80gb"}, {"nodes", 1}};
  const auto error = [&](std::vector<std::string> args, std::optional<int64_t> vocab = 32000) {
    Expected<ImportedConfig> imported =
        ImportMegatronArguments(args, {.cluster = cluster, .vocab = vocab});
    return imported.ok() ? std::string("no error") : imported.error().ToString();
  };
  const std::vector<std::string> shape = {"--num-layers",          "2", "--hidden-size", "512",
                                          "--num-attention-heads", "8", "--seq-length",  "1024",
                                          "--global-batch-size",   "8"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = shape;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  EXPECT_EQ(error(shape), "no error");
  EXPECT_THAT(error({"--hidden-size", "512"}), HasSubstr("--num-layers: required"));
  EXPECT_THAT(error(with({"--num-layers", "two"})),
              HasSubstr("--num-layers: expected a positive integer, got \"two\""));
  EXPECT_THAT(error(shape, std::nullopt), HasSubstr("the vocabulary comes from the tokenizer"));
  EXPECT_THAT(
      error(with({"--tensor-model-parallel-size", "8", "--pipeline-model-parallel-size", "2"})),
      HasSubstr("1 nodes × 8 GPUs are not a multiple of TP × PP × CP = 16"));
  EXPECT_THAT(error({"pretrain_gpt.py", "--num-layers", "2"}),
              HasSubstr("an argument outside any flag"));
  // Read as bf16: Megatron-LM refuses the pair.
  EXPECT_THAT(error(with({"--bf16", "--fp16"})),
              HasSubstr("--fp16: --bf16 and --fp16 both given: pretrain_gpt.py refuses the pair"));
  EXPECT_THAT(error(with({"--normalization", "BatchNorm"})),
              HasSubstr("--normalization: expected RMSNorm or LayerNorm"));
  EXPECT_THAT(error(with({"--recompute-granularity", "some"})),
              HasSubstr("--recompute-granularity: expected full or selective"));
  // Two layers on one stage cannot be chunks of three (was read as no interleaving).
  EXPECT_THAT(error(with({"--num-layers-per-virtual-pipeline-stage", "3"})),
              HasSubstr("--num-layers-per-virtual-pipeline-stage: must divide the 2 layers per "
                        "pipeline stage, got 3"));
  EXPECT_EQ(error(with({"--pipeline-model-parallel-size", "2",
                        "--num-layers-per-virtual-pipeline-stage", "1"})),
            "no error");  // 1 layer per stage: one chunk
}

// Export then import through Megatron-DeepSpeed: DeepSpeedArguments' flags and config JSON
// read back as a config that simulates as the plan; what dtsim does not read of the JSON is
// listed.
void ExpectDeepSpeedRoundTrip(Json json) {
  json["training"]["framework"] = "deepspeed";
  const ResolvedConfig original = ConfigOf(json);
  const LaunchArguments emitted = DeepSpeedArguments(original, "plan-1.ds_config.json");
  const std::vector<std::string> words = Words(emitted);
  Expected<ImportedConfig> imported = ImportDeepSpeedArguments(
      words, emitted.config_file, "plan-1.ds_config.json",
      {.cluster = json["cluster"], .vocab = original.model.transformer.vocab});
  ASSERT_TRUE(imported.ok()) << imported.error().ToString() << "\n" << json.dump();
  ExpectSameIteration(imported->config, json);
  EXPECT_EQ(imported->config["training"]["framework"], "deepspeed");
  for (const std::string& argument : imported->not_modelled) {
    EXPECT_THAT(argument,
                testing::AnyOf(HasSubstr("steps_per_print"), HasSubstr("contiguous_gradients")))
        << json.dump();
  }
}

// The run's length (docs/time_to_train.md): a time_to_train section becomes --train-iters, the
// iterations it needs at the plan's batch, and --train-iters or --train-samples read back as
// its tokens. 10^10 tokens at 512 × 4,096 = 2,097,152 a step: ⌈4,768.37⌉ = 4,769 iterations,
// which read back as 4,769 × 2,097,152 = 10,001,317,888 tokens.
TEST(LaunchImportTest, TheRunLengthIsTrainIters) {
  Json json = Plan("llama3-8b", R"({"data": 8})",
                   R"({"global_batch": 512, "seq_len": 4096, "flash_attention": true})", 1);
  json["time_to_train"] = {{"tokens", 1e10}};
  const ResolvedConfig original = ConfigOf(json);
  const LaunchArguments megatron = MegatronArguments(original);
  EXPECT_THAT(megatron.arguments, testing::Contains("--train-iters 4769"));
  Expected<ImportedConfig> imported =
      ImportMegatronArguments(Words(megatron), {.cluster = json["cluster"], .vocab = 128256});
  ASSERT_TRUE(imported.ok()) << imported.error().ToString();
  EXPECT_EQ(imported->config["time_to_train"]["tokens"].get<double>(), 10001317888.0);
  // Megatron-Bridge's override and Megatron-DeepSpeed's flag say the same.
  EXPECT_THAT(MegatronBridgeArguments(original).arguments,
              testing::Contains("train.train_iters=4769"));
  EXPECT_THAT(DeepSpeedArguments(original, "ds.json").arguments,
              testing::Contains("--train-iters 4769"));
  // Sequences instead of iterations: 1,000 × 4,096 tokens.
  std::vector<std::string> words = Words(megatron);
  const auto iters = std::find(words.begin(), words.end(), "--train-iters");
  ASSERT_NE(iters, words.end());
  *iters = "--train-samples";
  *(iters + 1) = "1000";
  imported = ImportMegatronArguments(words, {.cluster = json["cluster"], .vocab = 128256});
  ASSERT_TRUE(imported.ok()) << imported.error().ToString();
  EXPECT_EQ(imported->config["time_to_train"]["tokens"].get<double>(), 4096000.0);
  // Not both.
  words.insert(words.end(), {"--train-iters", "10"});
  imported = ImportMegatronArguments(words, {.cluster = json["cluster"], .vocab = 128256});
  ASSERT_FALSE(imported.ok());
  EXPECT_THAT(imported.error().ToString(), HasSubstr("give one run length"));
  // Without a section, no flag.
  json.erase("time_to_train");
  EXPECT_THAT(MegatronArguments(ConfigOf(json)).arguments,
              testing::Not(testing::Contains(HasSubstr("--train-iters"))));
}

TEST(LaunchImportTest, DeepSpeedFlagsAndConfigReadBackAsThePlan) {
  // A pipeline with ZeRO-1 (PipelineEngine), tensor and sequence parallelism.
  ExpectDeepSpeedRoundTrip(Plan("llama2-70b",
                                R"({"data": 4, "tensor": {"size": 8, "sequence_parallel": true},
      "pipeline": 4, "zero_stage": 1})",
                                R"({"global_batch": 512, "seq_len": 4096, "flash_attention": true,
      "recompute": "selective", "dropout": false})",
                                16));
  // DeepSpeed-MoE: top-2 dropless experts on every layer, EP 8, ZeRO-2 without a pipeline.
  ExpectDeepSpeedRoundTrip(Plan("mixtral-8x7b",
                                R"({"data": 8, "tensor": 2, "expert": 8, "zero_stage": 2})",
                                R"({"global_batch": 256, "seq_len": 4096, "flash_attention": true,
      "recompute": "full"})",
                                2));
  // DeepSpeed-Ulysses over 2 ranks with ZeRO-3, no flash attention, dropout on; its buffers'
  // settings written to ds_config and read back.
  Json ulysses = Plan("llama3-8b", R"({"data": 4, "context": {"size": 2, "comm": "a2a"},
      "zero_stage": 3})",
                      R"({"global_batch": 64, "seq_len": 8192, "flash_attention": true,
      "framework": "deepspeed", "deepspeed": {"reduce_bucket_size": 10000000,
      "stage3_max_reuse_distance": 0}})",
                      1);
  ExpectDeepSpeedRoundTrip(ulysses);
  const ResolvedConfig original = ConfigOf(ulysses);
  const LaunchArguments emitted = DeepSpeedArguments(original, "plan-1.ds_config.json");
  const Json& zero = emitted.config_file["zero_optimization"];
  EXPECT_EQ(zero["reduce_bucket_size"], 10000000);
  EXPECT_EQ(zero["stage3_max_reuse_distance"], 0);
  EXPECT_EQ(zero["stage3_max_live_parameters"], 1000000000);  // DeepSpeed's default
  Expected<ImportedConfig> imported =
      ImportDeepSpeedArguments(Words(emitted), emitted.config_file, "plan-1.ds_config.json",
                               {.cluster = ulysses["cluster"], .vocab = 128256});
  ASSERT_TRUE(imported.ok()) << imported.error().ToString();
  const Expected<std::vector<models::MemoryBreakdown>> before = EstimateStageMemory(original);
  const Expected<std::vector<models::MemoryBreakdown>> after =
      EstimateStageMemory(ConfigOf(imported->config));
  ASSERT_TRUE(before.ok() && after.ok());
  EXPECT_EQ((*after)[0].total(), (*before)[0].total());
  // fp16 with 1-bit Adam (its freeze_step the warm-up), which runs without ZeRO: the reduction
  // after the backward pass, as DeepSpeed's engine runs it then.
  Json gpt = Plan("gpt3-1.3b", R"({"data": 16, "zero_stage": 0, "overlap_gradient_reduce": false})",
                  R"({"global_batch": 512, "precision": "fp16"})", 2);
  gpt["compression"] = {{"method", "onebit_adam"}, {"warmup_steps", 400}};
  ExpectDeepSpeedRoundTrip(gpt);
}

// ZeRO-3's bucket and coordinator limits come from zero_optimization, numbers as DeepSpeed's
// configs write them (5e8) or Hugging Face's "auto" (h² for the bucket, 0.9·h² for the
// prefetch: 512² = 262,144 and 235,929).
TEST(LaunchImportTest, DeepSpeedZero3BuffersAreRead) {
  const std::vector<std::string> args = {"--num-layers",          "2", "--hidden-size", "512",
                                         "--num-attention-heads", "8", "--seq-length",  "1024",
                                         "--zero-stage",          "3", "--deepspeed"};
  const Json cluster = {{"preset", "dgx-h100"}, {"gpu", "h100-sxm5-80gb"}, {"nodes", 1}};
  Json ds = {{"train_batch_size", 8},
             {"train_micro_batch_size_per_gpu", 1},
             {"zero_optimization",
              {{"stage", 3},
               {"reduce_bucket_size", "auto"},
               {"stage3_prefetch_bucket_size", "auto"},
               {"stage3_max_live_parameters", 1e9},
               {"stage3_max_reuse_distance", 0},
               {"contiguous_gradients", false}}}};
  const auto import = [&](const Json& config) {
    return ImportDeepSpeedArguments(args, config, "ds.json", {.cluster = cluster, .vocab = 32000});
  };
  Expected<ImportedConfig> imported = import(ds);
  ASSERT_TRUE(imported.ok()) << imported.error().ToString();
  EXPECT_EQ(imported->config["training"]["deepspeed"],
            Json({{"reduce_bucket_size", 262144},
                  {"stage3_prefetch_bucket_size", 235929},
                  {"stage3_max_live_parameters", 1000000000},
                  {"stage3_max_reuse_distance", 0},
                  {"contiguous_gradients", false}}));
  EXPECT_EQ(ConfigOf(imported->config).training.deepspeed.prefetch_bucket_size, 235929);
  ds["zero_optimization"]["stage3_max_live_parameters"] = "auto";
  imported = import(ds);
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.error().ToString(),
            "ds.json: zero_optimization.stage3_max_live_parameters: expected a non-negative "
            "integer, got \"auto\"");
  ds["zero_optimization"]["stage3_max_live_parameters"] = 1;
  ds["zero_optimization"]["reduce_bucket_size"] = -5;
  imported = import(ds);
  ASSERT_FALSE(imported.ok());
  EXPECT_EQ(imported.error().ToString(),
            "ds.json: zero_optimization.reduce_bucket_size: expected a non-negative integer or "
            "\"auto\", got -5");
}

TEST(LaunchImportTest, DeepSpeedConfigErrorsNameTheFileAndKey) {
  const Json cluster = {{"preset", "dgx-h100"}, {"gpu", "h100-sxm5-80gb"}, {"nodes", 1}};
  const std::vector<std::string> args = {
      "--num-layers", "2",    "--hidden-size", "512", "--num-attention-heads", "8",
      "--seq-length", "1024", "--zero-stage",  "1",   "--deepspeed",           "--deepspeed_config",
      "ds.json"};
  const auto import = [&](const Json& ds) {
    return ImportDeepSpeedArguments(args, ds, "ds.json", {.cluster = cluster, .vocab = 32000});
  };
  const auto error = [&](const Json& ds) {
    Expected<ImportedConfig> imported = import(ds);
    return imported.ok() ? std::string("no error") : imported.error().ToString();
  };
  // 8 GPUs, one micro-batch of 1 each: 8 sequences a step, one accumulation step.
  const Json good = {{"train_batch_size", 8},
                     {"train_micro_batch_size_per_gpu", 1},
                     {"gradient_accumulation_steps", 1},
                     {"zero_optimization", {{"stage", 1}, {"reduce_bucket_size", 5e8}}},
                     {"bf16", {{"enabled", true}}},
                     {"gradient_clipping", 1.0}};
  Expected<ImportedConfig> imported = import(good);
  ASSERT_TRUE(imported.ok()) << imported.error().ToString();
  EXPECT_EQ(imported->config["training"]["precision"], "bf16");
  EXPECT_EQ(imported->config["training"]["flash_attention"], false);
  EXPECT_EQ(imported->config["parallelism"]["zero_stage"], 1);
  // ZeRO-1's reduction overlaps only when overlap_comm says so (DeepSpeed's default: off).
  EXPECT_EQ(imported->config["parallelism"]["overlap_gradient_reduce"], false);
  // ZeRO-1's gradient bucket is read (5e8 elements, as DeepSpeed's configs write it).
  EXPECT_EQ(imported->config["training"]["deepspeed"]["reduce_bucket_size"], 500000000);
  EXPECT_THAT(imported->not_modelled, ElementsAreArray({"ds_config gradient_clipping: 1.0"}));
  Json bad = good;
  bad["zero_optimization"]["stage"] = 2;
  EXPECT_EQ(error(bad), "ds.json: zero_optimization.stage: disagrees with --zero-stage 1, got 2");
  bad = good;
  bad["gradient_accumulation_steps"] = 4;
  EXPECT_THAT(error(bad), HasSubstr("ds.json: gradient_accumulation_steps: train_batch_size 8 is "
                                    "not micro-batch 1 × 4 steps × data parallelism 8"));
  bad = good;  // products of the three would overflow: checked by division
  bad["train_batch_size"] = int64_t{1} << 62;
  bad["train_micro_batch_size_per_gpu"] = int64_t{1} << 62;
  EXPECT_THAT(error(bad), HasSubstr("gradient_accumulation_steps: train_batch_size "
                                    "4611686018427387904 is not micro-batch 4611686018427387904"));
  bad["train_micro_batch_size_per_gpu"] = 0;
  EXPECT_THAT(error(bad),
              HasSubstr("train_micro_batch_size_per_gpu: expected a positive integer, got 0"));
  bad = good;
  bad.erase("train_batch_size");
  EXPECT_THAT(error(bad), HasSubstr("ds.json: train_batch_size: required: the global batch"));
  bad = good;
  bad["fp16"] = {{"enabled", true}};
  EXPECT_THAT(error(bad), HasSubstr("ds.json: fp16.enabled: bf16 and fp16 both enabled"));
  bad = good;
  bad["bf16"]["enabled"] = "yes";
  EXPECT_THAT(error(bad), HasSubstr("ds.json: bf16.enabled: expected true or false"));
  EXPECT_THAT(error(Json::array()), HasSubstr("ds.json: expected DeepSpeed's config object"));
}

}  // namespace
}  // namespace dtsim::strategies
