#include "strategies/launch_arguments.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

namespace dtsim::strategies {
namespace {

using testing::Contains;
using testing::HasSubstr;

ResolvedConfig Read(const Json& parallelism, const std::string& recompute = "selective",
                    int micro_batch = 1) {
  Json json = Json::parse(R"({
    "model": "llama2-70b",
    "training": {"global_batch": 512, "micro_batch": 1, "seq_len": 4096, "precision": "bf16",
                 "flash_attention": true},
    "cluster": {"preset": "dgx-h100", "nodes": 16, "gpu": "h100-sxm5-80gb"}})");
  json["parallelism"] = parallelism;
  json["training"]["recompute"] = recompute;
  json["training"]["micro_batch"] = micro_batch;
  Expected<ResolvedConfig> config = ConfigFromJson(json, "");
  EXPECT_TRUE(config.ok()) << config.error().ToString();
  return *config;
}

// LLaMA-2 70B on 128 H100s, TP 8 with SP, PP 4 interleaved ×5, ZeRO-1.
ResolvedConfig LlamaPlan() {
  return Read(Json::parse(R"({
    "data": 4, "tensor": {"size": 8, "sequence_parallel": true},
    "pipeline": {"size": 4, "schedule": "interleaved", "virtual_stages": 5}, "zero_stage": 1})"));
}

// The LLaMA plan: the flags NVIDIA's recipes use for it.
TEST(MegatronArgumentsTest, ALlamaPlanAsPretrainGptFlags) {
  const LaunchArguments args = MegatronArguments(LlamaPlan());
  EXPECT_EQ(args.framework, "Megatron-LM core_v0.14");
  for (const char* flag : {"--num-layers 80",
                           "--hidden-size 8192",
                           "--ffn-hidden-size 28672",
                           "--num-attention-heads 64",
                           "--group-query-attention",
                           "--num-query-groups 8",
                           "--normalization RMSNorm",
                           "--swiglu",
                           "--position-embedding-type rope",
                           "--disable-bias-linear",
                           "--untie-embeddings-and-output-weights",
                           "--tensor-model-parallel-size 8",
                           "--sequence-parallel",
                           "--pipeline-model-parallel-size 4",
                           "--virtual-pipeline-model-parallel-size 5",
                           "--use-distributed-optimizer",
                           "--overlap-grad-reduce",
                           "--overlap-param-gather",
                           "--micro-batch-size 1",
                           "--global-batch-size 512",
                           "--seq-length 4096",
                           "--recompute-granularity selective",
                           "--bf16",
                           "--use-flash-attn"}) {
    EXPECT_THAT(args.arguments, Contains(flag));
  }
  EXPECT_THAT(args.arguments, testing::Not(Contains("--use-megatron-fsdp")));
  ASSERT_EQ(args.not_expressed.size(), 1u);  // only the tokenizer's vocabulary
  EXPECT_THAT(args.not_expressed[0], HasSubstr("vocabulary (32000 tokens)"));
}

// Megatron-Core sends the whole activation from every tensor-parallel peer unless sequence
// parallel: a plan with Megatron-LM's old scatter/gather has no flag there, and says so.
TEST(MegatronArgumentsTest, ScatteredPipelineTransfersAreNotExpressed) {
  const auto notes = [](const char* parallelism) {
    return MegatronArguments(Read(Json::parse(parallelism))).not_expressed;
  };
  EXPECT_THAT(notes(R"({"data": 4, "tensor": 8, "pipeline": {"size": 4, "scatter_gather": true}})"),
              Contains(HasSubstr("pipeline transfers scattered")));
  EXPECT_THAT(notes(R"({"data": 4, "tensor": 8, "pipeline": 4})"),
              testing::Not(Contains(HasSubstr("pipeline transfers scattered"))));
  // Under SP each peer sends its own sequence shard: the same transfers either way.
  EXPECT_THAT(notes(R"({"data": 4, "tensor": {"size": 8, "sequence_parallel": true},
                        "pipeline": {"size": 4, "scatter_gather": true}})"),
              testing::Not(Contains(HasSubstr("pipeline transfers scattered"))));
}

// The rank order: Megatron-LM's default numbering is dtsim's tp-dp-pp; tp-pp-dp is
// --use-tp-pp-dp-mapping (Bridge: dist.use_tp_pp_dp_mapping), but with context parallelism
// Megatron puts the CP peers inside the pipeline; any other order has no flag. Orders that
// number the plan's ranks alike (PP 1) need none. Megatron-DeepSpeed numbers tp-dp-pp only.
TEST(MegatronArgumentsTest, TheRankOrder) {
  const auto plan = [](const char* order, int pipeline = 4, int context = 1) {
    Json parallelism = {{"data", 4 / context},
                        {"tensor", 8},
                        {"pipeline", pipeline},
                        {"context", context},
                        {"order", order}};
    if (pipeline == 1) parallelism["data"] = 16 / context;
    return Read(parallelism);
  };
  const LaunchArguments mapped = MegatronArguments(plan("tp-pp-dp"));
  EXPECT_THAT(mapped.arguments, Contains("--use-tp-pp-dp-mapping"));
  EXPECT_THAT(mapped.not_expressed, testing::Not(Contains(HasSubstr("rank order"))));
  EXPECT_THAT(MegatronBridgeArguments(plan("tp-pp-dp")).arguments,
              Contains("dist.use_tp_pp_dp_mapping=true"));
  EXPECT_THAT(MegatronArguments(plan("tp-dp-pp")).arguments,
              testing::Not(Contains("--use-tp-pp-dp-mapping")));
  EXPECT_THAT(MegatronArguments(plan("tp-pp-dp", 1)).arguments,
              testing::Not(Contains("--use-tp-pp-dp-mapping")));
  EXPECT_THAT(MegatronArguments(plan("tp-pp-dp", 4, 2)).not_expressed,
              Contains(HasSubstr("context-parallel peers outside the pipeline")));
  const LaunchArguments other = MegatronArguments(plan("pp-dp-tp"));
  EXPECT_THAT(other.arguments, testing::Not(Contains("--use-tp-pp-dp-mapping")));
  EXPECT_THAT(other.not_expressed, Contains(HasSubstr("the rank order pp-dp-tp (Megatron-LM")));
  EXPECT_THAT(DeepSpeedArguments(plan("tp-pp-dp")).not_expressed,
              Contains(HasSubstr("the rank order tp-pp-dp (Megatron-DeepSpeed numbers")));
  EXPECT_THAT(DeepSpeedArguments(plan("tp-dp-pp")).not_expressed,
              testing::Not(Contains(HasSubstr("rank order"))));
}

// The embedding and loss counted as pipeline layers: Megatron-LM's
// --account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split (Bridge:
// model.account_for_…); Megatron-DeepSpeed has no such split, and says so.
TEST(MegatronArgumentsTest, TheEmbeddingAndLossCountedAsPipelineLayers) {
  const ResolvedConfig config = Read(Json::parse(R"({"data": 8, "tensor": 8,
      "pipeline": {"size": 2, "embedding_as_layer": true, "loss_as_layer": true}})"));
  const LaunchArguments megatron = MegatronArguments(config);
  EXPECT_THAT(megatron.arguments, Contains("--account-for-embedding-in-pipeline-split"));
  EXPECT_THAT(megatron.arguments, Contains("--account-for-loss-in-pipeline-split"));
  const LaunchArguments bridge = MegatronBridgeArguments(config);
  EXPECT_THAT(bridge.arguments, Contains("model.account_for_embedding_in_pipeline_split=true"));
  EXPECT_THAT(bridge.arguments, Contains("model.account_for_loss_in_pipeline_split=true"));
  EXPECT_THAT(DeepSpeedArguments(config).not_expressed,
              Contains(HasSubstr("the embedding or loss counted as a layer")));
  EXPECT_THAT(MegatronArguments(LlamaPlan()).arguments,
              testing::Not(Contains("--account-for-embedding-in-pipeline-split")));
}

// Megatron-LM always overlaps the input-gradient reduction with the wgrad: a plan without
// that overlap has no flag, and says so.
TEST(MegatronArgumentsTest, TensorCollectivesWithoutOverlapAreNotExpressed) {
  const LaunchArguments args = MegatronArguments(Read(Json::parse(R"({
    "data": 16, "tensor": {"size": 8, "overlap": "none"}})")));
  EXPECT_THAT(args.not_expressed, Contains(HasSubstr("tensor-parallel collectives without "
                                                     "overlap")));
  EXPECT_THAT(MegatronArguments(LlamaPlan()).not_expressed,
              testing::Not(Contains(HasSubstr("without overlap"))));
  // Megatron-DeepSpeed kept Megatron-LM's 2021 switch, which stops the all-reduce's overlap but
  // not sequence parallelism's reduce-scatter's.
  const ResolvedConfig none = Read(Json::parse(R"({
    "data": 16, "tensor": {"size": 8, "overlap": "none"}})"));
  EXPECT_THAT(DeepSpeedArguments(none).arguments,
              Contains("--no-async-tensor-model-parallel-allreduce"));
  const LaunchArguments sp = DeepSpeedArguments(Read(Json::parse(R"({
    "data": 16, "tensor": {"size": 8, "overlap": "none", "sequence_parallel": true}})")));
  EXPECT_THAT(sp.arguments, testing::Not(Contains("--no-async-tensor-model-parallel-allreduce")));
  EXPECT_THAT(sp.not_expressed, Contains(HasSubstr("without overlap")));
  EXPECT_THAT(DeepSpeedArguments(LlamaPlan()).arguments,
              testing::Not(Contains("--no-async-tensor-model-parallel-allreduce")));
}

// ZeRO-3 is Megatron-FSDP sharding parameters, gradients and optimizer state; a 2D grid has no
// flag and is said so; full recompute is uniform over one layer.
TEST(MegatronArgumentsTest, ZeroThreeGridsAndFullRecompute) {
  const LaunchArguments args = MegatronArguments(Read(Json::parse(R"({
    "data": 32, "tensor": {"size": 4, "mode": "2d"}, "zero_stage": 3})"),
                                                      "full", 2));
  EXPECT_THAT(args.arguments, Contains("--use-megatron-fsdp"));
  EXPECT_THAT(args.arguments, Contains("--data-parallel-sharding-strategy optim_grads_params"));
  EXPECT_THAT(args.arguments, Contains("--recompute-granularity full"));
  EXPECT_THAT(args.arguments, Contains("--recompute-method uniform"));
  EXPECT_THAT(args.not_expressed, Contains(HasSubstr("2d tensor parallelism")));
}

// The same LLaMA plan through Megatron-DeepSpeed: its flag names (megatron/arguments.py), the
// ds_config.json of the batch, ZeRO and precision, and what DeepSpeed cannot run — a
// pipeline interleaved ×5 (PipelineEngine runs plain 1F1B).
TEST(DeepSpeedArgumentsTest, ALlamaPlanAsMegatronDeepSpeedFlagsAndConfig) {
  const LaunchArguments args = DeepSpeedArguments(LlamaPlan(), "plan.ds.json");
  EXPECT_EQ(args.framework, "Megatron-DeepSpeed f4157be (2024-12-24)");
  for (const char* flag :
       {"--num-layers 80", "--num-key-value-heads 8", "--normalization rmsnorm", "--swiglu",
        "--use-rotary-position-embeddings", "--disable-bias-linear",
        "--untie-embeddings-and-output-weights", "--tensor-model-parallel-size 8",
        "--sequence-parallel", "--pipeline-model-parallel-size 4", "--zero-stage 1",
        "--micro-batch-size 1", "--global-batch-size 512", "--seq-length 4096",
        "--recompute-granularity selective", "--bf16", "--use-flash-attn-v2", "--deepspeed",
        "--deepspeed_config plan.ds.json"}) {
    EXPECT_THAT(args.arguments, Contains(flag));
  }
  EXPECT_THAT(args.arguments, testing::Not(Contains("--no-pipeline-parallel")));
  EXPECT_THAT(args.not_expressed, Contains(HasSubstr("5 virtual stages per pipeline stage")));
  const Json expected = Json::parse(R"({
    "train_batch_size": 512, "train_micro_batch_size_per_gpu": 1, "steps_per_print": 10,
    "zero_optimization": {"stage": 1, "overlap_comm": true, "contiguous_gradients": true,
                          "reduce_bucket_size": 500000000},
    "bf16": {"enabled": true}})");
  EXPECT_EQ(args.config_file, expected) << args.config_file.dump(2);
}

// No pipeline: DeepSpeed's plain engine (--no-pipeline-parallel), where ZeRO-3 runs; a
// pipeline with ZeRO-2 is named as what PipelineEngine refuses. Ulysses for all-to-all context
// parallelism; 1-bit Adam in the config with its warm-up as freeze_step (15% of 1,000 steps).
TEST(DeepSpeedArgumentsTest, EnginesUlyssesAndOneBitAdam) {
  ResolvedConfig config = Read(Json::parse(R"({
    "data": 16, "tensor": 2, "context": {"size": 4, "comm": "a2a"}, "zero_stage": 3})"),
                               "full");
  config.compression.method = "onebit_adam";
  config.compression.steps = 1000;
  const LaunchArguments plain = DeepSpeedArguments(config);
  EXPECT_THAT(plain.arguments, Contains("--no-pipeline-parallel"));
  EXPECT_THAT(plain.arguments, Contains("--zero-stage 3"));
  EXPECT_THAT(plain.arguments, Contains("--ds-sequence-parallel-size 4"));
  EXPECT_THAT(plain.arguments, Contains("--deepspeed-activation-checkpointing"));
  EXPECT_THAT(plain.arguments, Contains("--deepspeed_config ds_config.json"));
  EXPECT_EQ(plain.config_file["optimizer"]["type"], "OneBitAdam");
  EXPECT_EQ(plain.config_file["optimizer"]["params"]["freeze_step"], 150);
  EXPECT_THAT(plain.not_expressed, Contains(HasSubstr("1-bit Adam")));

  const LaunchArguments piped = DeepSpeedArguments(Read(Json::parse(R"({
    "data": 8, "tensor": 4, "pipeline": 4, "zero_stage": 2})")));
  EXPECT_THAT(piped.not_expressed, Contains(HasSubstr("ZeRO-2 with a pipeline")));
  EXPECT_EQ(piped.config_file["zero_optimization"]["stage"], 2);
}

// The LLaMA plan as Megatron-Bridge overrides: Megatron-LM's flags through Bridge's table
// (--swiglu is two keys, --seq-length the model's and the dataset's, --disable-bias-linear a
// false), BF16 as the bf16_mixed recipe; flash attention and GQA are Bridge's defaults.
TEST(MegatronBridgeArgumentsTest, ALlamaPlanAsRunRecipeOverrides) {
  const LaunchArguments args = MegatronBridgeArguments(LlamaPlan());
  EXPECT_EQ(args.framework, "Megatron-Bridge 067f987 (2026-08-22)");
  EXPECT_EQ(args.what, "scripts/training/run_recipe.py overrides");
  for (const char* override : {"model.num_layers=80",
                               "model.num_query_groups=8",
                               "model.normalization=RMSNorm",
                               "model.gated_linear_unit=true",
                               "model.activation_func=silu",
                               "model.position_embedding_type=rope",
                               "model.add_bias_linear=false",
                               "model.share_embeddings_and_output_weights=false",
                               "model.tensor_model_parallel_size=8",
                               "model.sequence_parallel=true",
                               "model.pipeline_model_parallel_size=4",
                               "model.virtual_pipeline_model_parallel_size=5",
                               "ddp.use_distributed_optimizer=true",
                               "ddp.overlap_grad_reduce=true",
                               "ddp.overlap_param_gather=true",
                               "train.micro_batch_size=1",
                               "train.global_batch_size=512",
                               "model.seq_length=4096",
                               "dataset.seq_length=4096",
                               "model.recompute_granularity=selective",
                               "mixed_precision=bf16_mixed"}) {
    EXPECT_THAT(args.arguments, Contains(override));
  }
  for (const std::string& line : args.arguments) {
    EXPECT_EQ(line.find("--"), std::string::npos) << line;  // every flag translated
  }
  ASSERT_EQ(args.not_expressed.size(), 1u);
  EXPECT_THAT(args.not_expressed[0], HasSubstr("tokenizer.tokenizer_type"));
}

// A QK norm: Megatron-LM's --qk-layernorm, Megatron-Bridge's provider key; Megatron-DeepSpeed
// has none, and says so.
TEST(MegatronBridgeArgumentsTest, QkNorm) {
  ResolvedConfig config = LlamaPlan();
  config.model.transformer.qk_norm = true;
  EXPECT_THAT(MegatronArguments(config).arguments, Contains("--qk-layernorm"));
  EXPECT_THAT(MegatronBridgeArguments(config).arguments, Contains("model.qk_layernorm=true"));
  EXPECT_THAT(DeepSpeedArguments(config).not_expressed, Contains(HasSubstr("QK norm")));
  EXPECT_THAT(MegatronArguments(LlamaPlan()).arguments, testing::Not(Contains("--qk-layernorm")));
}

// Sliding windows: Megatron-LM's --window-size (left, right) and --window-attn-skip-freq,
// Megatron-Bridge's provider keys (a list for Hydra); Megatron-DeepSpeed has none, and says so.
TEST(MegatronBridgeArgumentsTest, SlidingWindows) {
  ResolvedConfig config = LlamaPlan();
  config.model.transformer.sliding_window = 1024;
  config.model.transformer.window_full_every = 6;
  EXPECT_THAT(MegatronArguments(config).arguments, Contains("--window-size 1024,0"));
  EXPECT_THAT(MegatronArguments(config).arguments, Contains("--window-attn-skip-freq 6"));
  EXPECT_THAT(MegatronBridgeArguments(config).arguments, Contains("model.window_size=[1024,0]"));
  EXPECT_THAT(MegatronBridgeArguments(config).arguments, Contains("model.window_attn_skip_freq=6"));
  EXPECT_THAT(DeepSpeedArguments(config).not_expressed, Contains(HasSubstr("sliding-window")));
  config.model.transformer.window_layers.assign(config.model.transformer.layers, 1);
  config.model.transformer.window_layers[0] = 0;
  const std::vector<std::string> listed = MegatronArguments(config).arguments;
  EXPECT_THAT(listed, Contains("--window-attn-skip-freq [0]*1+[1]*79"));
  EXPECT_THAT(MegatronBridgeArguments(config).arguments,
              Contains(testing::StartsWith("model.window_attn_skip_freq=[0,1,1,")));
  EXPECT_THAT(MegatronArguments(LlamaPlan()).arguments,
              testing::Not(Contains(testing::StartsWith("--window"))));
}

// DeepSeek-V3's model: MLA's ranks and head sizes, the dense layers first as a pattern, the
// shared expert's width, the MTP module — as Megatron-LM flags and Megatron-Bridge overrides.
TEST(MegatronBridgeArgumentsTest, LatentAttentionExpertsAndMtp) {
  ResolvedConfig config = LlamaPlan();
  Expected<models::ModelSpec> deepseek = models::ModelPreset("deepseek-v3");
  ASSERT_TRUE(deepseek.ok());
  config.model = *deepseek;
  const std::vector<std::string> flags = MegatronArguments(config).arguments;
  for (const char* flag :
       {"--multi-latent-attention", "--q-lora-rank 1536", "--kv-lora-rank 512", "--qk-head-dim 128",
        "--qk-pos-emb-head-dim 64", "--v-head-dim 128", "--moe-layer-freq [0]*3+[1]*58",
        "--moe-shared-expert-intermediate-size 2048", "--mtp-num-layers 1"}) {
    EXPECT_THAT(flags, Contains(flag));
  }
  const LaunchArguments bridge = MegatronBridgeArguments(config);
  for (const char* override :
       {"model.multi_latent_attention=true", "model.q_lora_rank=1536", "model.mtp_num_layers=1",
        "model.moe_shared_expert_intermediate_size=2048"}) {
    EXPECT_THAT(bridge.arguments, Contains(override));
  }
  EXPECT_THAT(bridge.arguments, Contains(testing::StartsWith("model.moe_layer_freq=[0,0,0,1,1,")));
  for (const std::string& line : bridge.arguments) {
    EXPECT_EQ(line.find("--"), std::string::npos) << line;
  }
}

// MoE layers listed one flag a layer: Megatron-LM takes the list; Megatron-DeepSpeed's
// --expert-interval takes what is every N-th layer from 1 and says when a list is not.
TEST(DeepSpeedArgumentsTest, MoeLayersListedOrAnInterval) {
  ResolvedConfig config = LlamaPlan();
  Expected<models::ModelSpec> mixtral = models::ModelPreset("mixtral-8x7b");
  ASSERT_TRUE(mixtral.ok());
  config.model = *mixtral;
  models::MoeSpec& moe = config.model.transformer.moe;
  moe.layers.assign(32, 0);
  for (size_t i = 1; i < 32; i += 2) moe.layers[i] = 1;  // 1, 3, 5, …: every 2 from 1
  EXPECT_THAT(DeepSpeedArguments(config).arguments, Contains("--expert-interval 2"));
  EXPECT_THAT(DeepSpeedArguments(config).not_expressed,
              testing::Not(Contains(HasSubstr("MoE on the layers"))));
  EXPECT_THAT(MegatronArguments(config).arguments, Contains("--moe-layer-freq ([0,1])*16"));
  std::rotate(moe.layers.begin(), moe.layers.begin() + 1, moe.layers.end());  // 0, 2, 4, …
  EXPECT_THAT(DeepSpeedArguments(config).not_expressed,
              Contains("MoE on the layers ([1,0])*16 (Megatron-DeepSpeed puts experts on every "
                       "--expert-interval-th layer)"));
  EXPECT_THAT(MegatronArguments(config).arguments, Contains("--moe-layer-freq ([1,0])*16"));
}

// Llama 4's chunked attention: no pretrain_gpt.py flag (Megatron-Bridge has it only inside
// llama4_utils.py's attention, no override), so neither script claims a window.
TEST(MegatronBridgeArgumentsTest, ChunkedAttentionIsListed) {
  ResolvedConfig config = LlamaPlan();
  Expected<models::ModelSpec> scout = models::ModelPreset("llama4-scout-17b-16e");
  ASSERT_TRUE(scout.ok());
  config.model = *scout;
  const LaunchArguments megatron = MegatronArguments(config);
  EXPECT_THAT(megatron.not_expressed,
              Contains("chunked attention of 8192 tokens on 36 of 48 layers (Llama 4's: "
                       "pretrain_gpt.py has no flag, nor Megatron-Bridge a recipe override)"));
  EXPECT_THAT(megatron.arguments, testing::Not(Contains(testing::StartsWith("--window"))));
  EXPECT_THAT(DeepSpeedArguments(config).not_expressed,
              Contains("chunked attention (8192 tokens)"));
}

// Gemma's layer: neither GPT script has a flag for a GeGLU MLP or norms after the attention and
// the MLP; both say so (and so does the Bridge rendering, which starts from Megatron-LM's).
TEST(MegatronBridgeArgumentsTest, GemmaLayerIsListed) {
  ResolvedConfig config = LlamaPlan();
  config.model.transformer.activation = models::Activation::kGeGlu;
  config.model.transformer.post_norms = true;
  for (const LaunchArguments& args :
       {MegatronArguments(config), MegatronBridgeArguments(config), DeepSpeedArguments(config)}) {
    EXPECT_THAT(args.not_expressed, Contains(HasSubstr("a GeGLU MLP")));
    EXPECT_THAT(args.not_expressed, Contains("norms after the attention and the MLP"));
  }
  EXPECT_THAT(MegatronArguments(config).arguments, testing::Not(Contains("--swiglu")));
}

// Activation offloading: Megatron-LM's --cpu-offloading-num-layers (it derives the switch),
// Bridge's two provider keys; TE's v1 handler is the environment's, listed.
TEST(MegatronBridgeArgumentsTest, ActivationOffloading) {
  ResolvedConfig config = Read(Json::parse(R"({"data": 16, "tensor": 8})"), "none");
  config.training.activation_offload_layers = 30;
  config.training.activation_offload_v1 = true;
  const LaunchArguments megatron = MegatronArguments(config);
  EXPECT_THAT(megatron.arguments, Contains("--cpu-offloading-num-layers 30"));
  EXPECT_THAT(megatron.not_expressed, Contains(HasSubstr("NVTE_CPU_OFFLOAD_V1=1")));
  const LaunchArguments bridge = MegatronBridgeArguments(config);
  EXPECT_THAT(bridge.arguments, Contains("model.cpu_offloading=true"));
  EXPECT_THAT(bridge.arguments, Contains("model.cpu_offloading_num_layers=30"));
}

// The expert all-to-alls' overlap: Megatron-LM's two flags, Megatron-Bridge's comm_overlap keys
// (run_script.py's A2A_1F1B), and not expressible for Megatron-DeepSpeed.
TEST(MegatronBridgeArgumentsTest, ExpertAllToAllOverlap) {
  ResolvedConfig config = Read(Json::parse(R"({"data": 16, "tensor": 8})"), "none");
  config.plan.expert = 8;
  config.plan.expert_overlap = true;
  config.plan.expert_delay_wgrad = true;
  const LaunchArguments megatron = MegatronArguments(config);
  EXPECT_THAT(megatron.arguments, Contains("--overlap-moe-expert-parallel-comm"));
  EXPECT_THAT(megatron.arguments, Contains("--delay-wgrad-compute"));
  const LaunchArguments bridge = MegatronBridgeArguments(config);
  EXPECT_THAT(bridge.arguments, Contains("comm_overlap.overlap_moe_expert_parallel_comm=true"));
  EXPECT_THAT(bridge.arguments, Contains("comm_overlap.delay_wgrad_compute=true"));
  EXPECT_THAT(DeepSpeedArguments(config).not_expressed,
              Contains(HasSubstr("--overlap-moe-expert-parallel-comm")));
}

// FP8 with delayed scaling is Bridge's bf16_with_fp8_delayed_scaling_mixed recipe; ZeRO-3 is
// Megatron-FSDP; a grid stays listed as Megatron-LM lists it.
TEST(MegatronBridgeArgumentsTest, Fp8RecipesFsdpAndGrids) {
  ResolvedConfig config = Read(Json::parse(R"({"data": 32, "tensor": 4, "zero_stage": 3})"));
  config.training.fp8 = models::Fp8Recipe::kDelayed;
  const LaunchArguments fp8 = MegatronBridgeArguments(config);
  EXPECT_THAT(fp8.arguments, Contains("mixed_precision=bf16_with_fp8_delayed_scaling_mixed"));
  EXPECT_THAT(fp8.arguments, Contains("ddp.use_megatron_fsdp=true"));
  EXPECT_THAT(fp8.arguments, Contains("ddp.data_parallel_sharding_strategy=optim_grads_params"));
  const LaunchArguments grid = MegatronBridgeArguments(Read(Json::parse(R"({
    "data": 32, "tensor": {"size": 4, "mode": "2d"}})"),
                                                            "selective", 2));
  EXPECT_THAT(grid.not_expressed, Contains(HasSubstr("2d tensor parallelism")));
}

}  // namespace
}  // namespace dtsim::strategies
