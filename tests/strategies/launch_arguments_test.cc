#include "strategies/launch_arguments.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

// LLaMA-2 70B on 128 H100s, TP 8 with SP, PP 4 interleaved ×5, ZeRO-1: the flags NVIDIA's
// recipes use for it.
TEST(MegatronArgumentsTest, ALlamaPlanAsPretrainGptFlags) {
  const LaunchArguments args = MegatronArguments(Read(Json::parse(R"({
    "data": 4, "tensor": {"size": 8, "sequence_parallel": true},
    "pipeline": {"size": 4, "schedule": "interleaved", "virtual_stages": 5}, "zero_stage": 1})")));
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

}  // namespace
}  // namespace dtsim::strategies
