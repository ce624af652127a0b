// NeMo training configs in (strategies/nemo_import.h): the shipped GPT-3 175B and LLaMA-2 70B
// examples written as NeMo Framework Launcher configs simulate as the examples do, every key
// dtsim does not model is listed, OmegaConf's interpolations resolve, and bad values are
// errors naming the file and the key.
#include "strategies/nemo_import.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/base/yaml_reader.h"
#include "tests/strategies/simulate_helpers.h"

namespace dtsim::strategies {
namespace {

using testing::Contains;
using testing::ElementsAreArray;
using testing::HasSubstr;
using testing::Not;

Json LaunchYaml(const std::string& name) {
  Expected<Json> yaml = ReadYamlFile(std::string(DTSIM_SOURCE_DIR "/tests/data/launch/") + name);
  EXPECT_TRUE(yaml.ok()) << yaml.error().ToString();
  return *yaml;
}

// The cluster's preset and GPU, as `dtsim import nemo --preset --gpu` gives them.
ImportTarget On(const Json& example) {
  return {
      .cluster = {{"preset", example["cluster"]["preset"]}, {"gpu", example["cluster"]["gpu"]}}};
}

// The job's 128 nodes come from trainer.num_nodes; the GPT-2 tokenizer gives the 50,257-token
// vocabulary; ffn_hidden_size and the position table are interpolations. Every other key is
// listed, in key order.
TEST(NemoImportTest, GptThreeConfigSimulatesAsTheShippedExample) {
  const Json example = ExampleJson("gpt3_175b_1024gpu.json");
  Expected<ImportedConfig> imported =
      ImportNemoConfig(LaunchYaml("gpt3_175b_nemo.yaml"), "gpt3.yaml", On(example));
  ASSERT_TRUE(imported.ok()) << imported.error().ToString();
  EXPECT_EQ(imported->config["cluster"]["nodes"], 128);
  EXPECT_EQ(imported->config["parallelism"]["data"], 8);  // 1,024 GPUs over TP 8 × PP 16
  EXPECT_EQ(imported->config["model"]["ffn_hidden"], 4 * 12288);
  EXPECT_EQ(imported->config["model"]["vocab"], 50257);
  ExpectSameIteration(imported->config, example);
  // trainer.max_steps: 75,000 iterations of 1,536 × 2,048 tokens (docs/time_to_train.md).
  EXPECT_EQ(imported->config["time_to_train"]["tokens"].get<double>(), 75000.0 * 1536 * 2048);
  EXPECT_THAT(imported->not_modelled,
              ElementsAreArray({
                  "exp_manager.checkpoint_callback_params.model_parallel_size: "
                  "${multiply:${training.model.tensor_model_parallel_size}, "
                  "${training.model.pipeline_model_parallel_size}}",
                  "exp_manager.checkpoint_callback_params.monitor: val_loss",
                  "exp_manager.explicit_log_dir: ${training.run.results_dir}/results",
                  "exp_manager.name: megatron_gpt",
                  "model.data.data_prefix: [5 items]",
                  "model.init_method_std: 0.006",
                  "model.layernorm_epsilon: 1e-5",
                  "model.megatron_amp_O2: True",
                  "model.optim.betas: [0.9, 0.95]",
                  "model.optim.bucket_cap_mb: 100",
                  "model.optim.lr: 0.6e-4",
                  "model.optim.sched.min_lr: 0.6e-5",
                  "model.optim.sched.name: CosineAnnealing",
                  "model.optim.sched.warmup_steps: 115",
                  "model.optim.weight_decay: 0.1",
                  "model.tokenizer.merge_file: ${data_dir}/bpe/merges.txt",
                  "model.tokenizer.vocab_file: ${data_dir}/bpe/vocab.json",
                  "run.name: gpt3_175b",
                  "run.results_dir: ${base_results_dir}/${.name}",
                  "run.time_limit: 26-00:00:00",
                  "trainer.gradient_clip_val: 1.0",
                  "trainer.logger: False",
                  "trainer.val_check_interval: 2000",
              }));
}

// Megatron-Core's GPT with GQA, RMSNorm, SwiGLU, RoPE, no biases or dropout, Transformer
// Engine's fused attention; the sentencepiece tokenizer's vocabulary given on the side.
TEST(NemoImportTest, LlamaConfigSimulatesAsTheShippedExample) {
  const Json example = ExampleJson("llama2_70b_64h100.json");
  ImportTarget target = On(example);
  target.vocab = 32000;
  Expected<ImportedConfig> imported =
      ImportNemoConfig(LaunchYaml("llama2_70b_nemo.yaml"), "llama.yaml", target);
  ASSERT_TRUE(imported.ok()) << imported.error().ToString();
  ExpectSameIteration(imported->config, example);
  EXPECT_EQ(imported->config["training"]["dropout"], false);
  EXPECT_EQ(imported->config["training"]["flash_attention"], true);
  EXPECT_THAT(imported->not_modelled, Contains("model.optim.overlap_param_sync: true"));
  EXPECT_THAT(imported->not_modelled, Contains("model.ffn_dropout: 0.0"));
  EXPECT_THAT(imported->not_modelled,
              Contains("defaults: [_self_, {optional tp_overlap@model.ub_tp_comm_overlap_cfg: "
                       "ub_cfg_h100_h8192_tp4_mbs1_seqlen4096}]"));
  for (const std::string& listed : imported->not_modelled) {
    EXPECT_THAT(listed, Not(HasSubstr("parallel_size"))) << listed;
    EXPECT_THAT(listed, Not(HasSubstr("--"))) << listed;
  }
}

Json Config(const std::string& model, const std::string& extra = "") {
  Expected<Json> yaml = ParseYaml(
      "trainer: {num_nodes: 2, devices: 8, precision: bf16}\n"
      "model:\n"
      "  num_layers: 4\n  hidden_size: 1024\n  num_attention_heads: 16\n"
      "  encoder_seq_length: 2048\n  max_position_embeddings: 2048\n"
      "  micro_batch_size: 1\n  global_batch_size: 32\n"
      "  tokenizer: {library: megatron, type: GPT2BPETokenizer}\n" +
          model + extra,
      "t.yaml");
  EXPECT_TRUE(yaml.ok()) << yaml.error().ToString();
  return yaml.ok() ? *yaml : Json();
}

Expected<ImportedConfig> Import(const Json& yaml) {
  return ImportNemoConfig(yaml, "t.yaml",
                          {.cluster = {{"preset", "dgx-h100"}, {"gpu", "h100-sxm5-80gb"}}});
}

std::string ErrorOf(const Json& yaml) {
  Expected<ImportedConfig> imported = Import(yaml);
  EXPECT_FALSE(imported.ok()) << yaml.dump();
  return imported.ok() ? std::string() : imported.error().ToString();
}

// Relative (`.x`, `..x`), absolute and launcher-rooted (`training.…`) references, NeMo's
// resolvers nested in each other, and text around an interpolation.
TEST(NemoImportTest, InterpolationsResolveAsOmegaConfDoes) {
  Expected<ImportedConfig> imported =
      Import(Config("  ffn_hidden_size: ${multiply:${divide_floor:${.hidden_size}, 3}, 12}\n"
                    "  tensor_model_parallel_size: ${..parallel.tp}\n"
                    "  pipeline_model_parallel_size: ${training.parallel.pp}\n"
                    "  context_parallel_size: ${divide_ceil:3, 2}\n"
                    "  kv_channels: ${model.head}\n"
                    "  transformer_engine: true\n"
                    "  head: 64\n"
                    "  optim: {name: fused_adam, lr: '${multiply:2, 1.5e-4}'}\n",
                    "parallel: {tp: 2, pp: '${.tp}'}\n"));
  ASSERT_TRUE(imported.ok()) << imported.error().ToString();
  const Json& config = imported->config;
  EXPECT_EQ(config["model"]["ffn_hidden"], 341 * 12);  // floor(1024 / 3) · 12
  EXPECT_EQ(config["parallelism"]["tensor"]["size"], 2);
  EXPECT_EQ(config["parallelism"]["pipeline"]["size"], 2);
  EXPECT_EQ(config["parallelism"]["context"]["size"], 2);  // ceil(3 / 2)
  EXPECT_EQ(config["model"]["head_dim"], 64);
  EXPECT_EQ(config["parallelism"]["data"], 2);  // 16 GPUs over TP 2 × PP 2 × CP 2
  EXPECT_EQ(config["parallelism"]["zero_stage"], 0);
  EXPECT_EQ(config["training"]["precision"], "bf16");
  // An unread key keeps its interpolation as written, however it would resolve.
  EXPECT_THAT(imported->not_modelled, Contains("model.optim.lr: ${multiply:2, 1.5e-4}"));
  EXPECT_THAT(imported->not_modelled, Contains("model.head: 64"));
}

TEST(NemoImportTest, ModelledKeysBecomeTheSettingsTheyStandFor) {
  Expected<ImportedConfig> imported = Import(Config(
      "  normalization: rmsnorm\n  activation: geglu\n  bias: false\n"
      "  position_embedding_type: alibi\n  num_query_groups: 4\n"
      "  activations_checkpoint_granularity: full\n  activations_checkpoint_method: uniform\n"
      "  activations_checkpoint_num_layers: 1\n  hidden_dropout: 0.0\n  attention_dropout: 0\n"
      "  transformer_engine: true\n  fp8: true\n  fp8_hybrid: true\n  fp8_margin: 0\n"
      "  num_moe_experts: 8\n  moe_router_topk: 2\n  expert_model_parallel_size: 4\n"
      "  moe_expert_capacity_factor: 1.25\n  rampup_batch_size: [16, 16, 5859375]\n"
      "  optim: {name: distributed_fused_adam}\n"));
  ASSERT_TRUE(imported.ok()) << imported.error().ToString();
  const Json& config = imported->config;
  EXPECT_EQ(config["model"]["norm"], "rmsnorm");
  EXPECT_EQ(config["model"]["activation"], "swiglu");
  EXPECT_EQ(config["model"]["linear_bias"], false);
  EXPECT_EQ(config["model"]["kv_heads"], 4);
  EXPECT_EQ(config["model"]["moe"]["experts"], 8);
  EXPECT_EQ(config["model"]["moe"]["top_k"], 2);
  EXPECT_EQ(config["model"]["moe"]["capacity_factor"], 1.25);
  EXPECT_EQ(config["parallelism"]["expert"]["size"], 4);
  EXPECT_EQ(config["training"]["recompute"], "full");
  EXPECT_EQ(config["training"]["dropout"], false);
  EXPECT_EQ(config["training"]["precision"], "fp8");
  EXPECT_EQ(config["training"]["fp8_recipe"], "delayed");
  EXPECT_EQ(config["training"]["flash_attention"], true);
  EXPECT_EQ(config["parallelism"]["zero_stage"], 1);
  EXPECT_EQ(config["parallelism"]["overlap_gradient_reduce"], true);  // apex's default
  EXPECT_THAT(imported->not_modelled,
              Contains("model.activation: geglu (priced as swiglu, the same gated MLP)"));
  EXPECT_THAT(imported->not_modelled,
              Contains("model.position_embedding_type: alibi (priced as learned_absolute)"));
  EXPECT_THAT(imported->not_modelled, Contains("model.fp8_margin: 0"));  // fp8 is on
  EXPECT_THAT(imported->not_modelled,
              Contains("model.rampup_batch_size: [16, 16, 5859375] (dtsim simulates the full "
                       "batch)"));
}

// NeMo's model.cpu_offloading over cpu_offloading_num_layers: Megatron-Core's
// --cpu-offloading-num-layers (3 of the 4 layers); without the switch the count is read and
// means nothing.
TEST(NemoImportTest, CpuOffloadingIsActivationOffloading) {
  Expected<ImportedConfig> on =
      Import(Config("  cpu_offloading: true\n  cpu_offloading_num_layers: 3\n"));
  ASSERT_TRUE(on.ok()) << on.error().ToString();
  EXPECT_EQ(on->config["training"]["activation_offload_layers"], 3);
  Expected<ImportedConfig> off =
      Import(Config("  cpu_offloading: false\n  cpu_offloading_num_layers: 6\n"));
  ASSERT_TRUE(off.ok()) << off.error().ToString();
  EXPECT_FALSE(off->config["training"].contains("activation_offload_layers"));
  for (const std::string& key : off->not_modelled) {
    EXPECT_THAT(key, Not(HasSubstr("cpu_offloading"))) << key;
  }
}

// NeMo's model.use_tp_pp_dp_mapping (Megatron-LM's --use-tp-pp-dp-mapping): the tp-pp-dp order.
TEST(NemoImportTest, TheRankMappingIsTheOrder) {
  Expected<ImportedConfig> mapped = Import(Config("  use_tp_pp_dp_mapping: true\n"));
  ASSERT_TRUE(mapped.ok()) << mapped.error().ToString();
  EXPECT_EQ(mapped->config["parallelism"]["order"], "tp-pp-dp");
  Expected<ImportedConfig> plain = Import(Config("  use_tp_pp_dp_mapping: false\n"));
  ASSERT_TRUE(plain.ok()) << plain.error().ToString();
  EXPECT_FALSE(plain->config["parallelism"].contains("order"));
  for (const std::string& key : plain->not_modelled) {
    EXPECT_THAT(key, Not(HasSubstr("use_tp_pp_dp_mapping"))) << key;
  }
}

// "  key: ${.next}${.next}…" (ten times).
std::string Tenfold(const std::string& key, const std::string& next) {
  std::string line = "  " + key + ": ";
  for (int i = 0; i < 10; ++i) line += "${." + next + "}";
  return line + "\n";
}

// Each case: the model keys added (or a key of the config replaced: "path=value"), and the
// error's beginning.
TEST(NemoImportTest, BadValuesNameTheFileAndTheKey) {
  EXPECT_EQ(ErrorOf(Json::parse(R"({"model": {}})")),
            "t.yaml: expected a NeMo training config: a mapping with trainer: and model:");
  const std::pair<std::string, std::string> cases[] = {
      {"model.num_layers=four", "t.yaml: model.num_layers: expected a positive integer, got four"},
      {"trainer.devices=4", "t.yaml: trainer.devices: the cluster has 8 GPUs a node, got 4"},
      {"trainer.precision=64", "t.yaml: trainer.precision: expected 16, bf16 or 32"},
      {"model.tokenizer={}", "t.yaml: model.tokenizer: the vocabulary is the tokenizer's"},
      {"  sequence_parallel: maybe\n",
       "t.yaml: model.sequence_parallel: expected true or false, got maybe"},
      {"  activation: tanh\n", "t.yaml: model.activation: expected gelu, swiglu"},
      {"  kv_channels: ${data_dir}\n",
       "t.yaml: model.kv_channels: ${data_dir} names no key of this file"},
      {"  kv_channels: ${.a}\n  a: ${.kv_channels}\n",
       "t.yaml: model.kv_channels: interpolations nested more than 16 deep"},
      {"  kv_channels: ${oc.env:HOME}\n",
       "t.yaml: model.kv_channels: dtsim resolves multiply, divide_ceil and divide_floor"},
      {"  kv_channels: ${multiply:2}\n",
       "t.yaml: model.kv_channels: multiply takes two numbers, got 2"},
      {"  kv_channels: ${.x\n", "t.yaml: model.kv_channels: an unclosed ${"},
      // Each level names the next ten times: 10^6 references.
      {"  kv_channels: ${.a}\n" + Tenfold("a", "b") + Tenfold("b", "c") + Tenfold("c", "d") +
           Tenfold("d", "e") + Tenfold("e", "f") + Tenfold("f", "g") + "  g: 1\n",
       "t.yaml: model.kv_channels: interpolations expand past 10000 references"},
      // 1,000 references to 2,000 bytes.
      {"  kv_channels: ${.a}\n" + Tenfold("a", "b") + Tenfold("b", "c") + Tenfold("c", "d") +
           "  d: " + std::string(2000, 'x') + "\n",
       "t.yaml: model.kv_channels: interpolations expand past 1048576 bytes"},
      {"  tensor_model_parallel_size: 3\n", "t.yaml: cluster.nodes: 2 nodes × 8 GPUs"},
      {"  data: {seq_length: 4096}\n",
       "t.yaml: model.data.seq_length: model.encoder_seq_length is 2048, got 4096"},
  };
  for (const auto& [change, error] : cases) {
    Json yaml = Config(change.find('=') == std::string::npos ? change : "");
    if (const size_t equals = change.find('='); equals != std::string::npos) {
      const std::string path = change.substr(0, equals);
      const std::string value = change.substr(equals + 1);
      const size_t dot = path.find('.');
      Json& key = yaml[path.substr(0, dot)][path.substr(dot + 1)];
      key = value == "{}" ? Json::object() : Json(value);
    }
    EXPECT_THAT(ErrorOf(yaml), testing::StartsWith(error)) << change;
  }
}

}  // namespace
}  // namespace dtsim::strategies
