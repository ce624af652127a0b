#include "tools/cli/model_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "sim/base/atomic_file.h"
#include "tests/testing/temp_dir.h"

namespace dtsim::cli {
namespace {

using testing::HasSubstr;

class ModelCommandTest : public testing_support::TempDirTest {
 protected:
  CommandOutcome Run(std::vector<std::string> args) {
    output_.str("");
    return ModelCommand(args, output_);
  }
  std::ostringstream output_;
};

TEST_F(ModelCommandTest, PresetSummaryAndOps) {
  const CommandOutcome outcome = Run({"gpt3-175b", "--tp", "8", "--sp", "--ops"});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("174.604 B total"));
  EXPECT_THAT(output_.str(), HasSubstr("attn.qkv.wgrad"));
  // 34·s·b·h/t with SP and no recompute plus the score tensors 5·a·s²·b/t:
  // (34·2048·12288 + 5·96·2048²) / 8 bytes = 358.6 MB.
  EXPECT_THAT(output_.str(), HasSubstr("358.613 MB"));
}

TEST_F(ModelCommandTest, LatentAttentionAndTheKvCache) {
  // DeepSeek-V3: (512 + 64)·61·2 bytes a token (tests/models/mla_test.cc derives it).
  const CommandOutcome outcome = Run({"deepseek-v3"});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("latent attention: query latent 1536, KV latent 512"));
  EXPECT_THAT(output_.str(), HasSubstr("1 shared expert(s), 3 dense layer(s) first"));
  EXPECT_THAT(output_.str(), HasSubstr("KV cache 70272 bytes per token"));
  EXPECT_THAT(output_.str(), HasSubstr("671.026 B total"));
}

TEST_F(ModelCommandTest, Fp8LayerRunsItsLinearGemmsInFp8) {
  const CommandOutcome outcome =
      Run({"gpt3-175b", "--tp", "8", "--sp", "--dtype", "fp8", "--gpu", "h100-sxm5-80gb", "--ops"});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("attn.qkv.quantize"));
  EXPECT_THAT(output_.str(), HasSubstr("mlp.fc2.grad_quantize"));
  // The saved inputs of the four linear layers shrink to 1 byte per element: 7·s·b·h/t bytes
  // less than BF16's 358.613 MB, 7 · 2048 · 12288 / 8 = 22.020 MB: 336.593 MB.
  EXPECT_THAT(output_.str(), HasSubstr("336.593 MB"));
  CommandOutcome typo = Run({"gpt3-175b", "--dtype", "fp8", "--fp8-recipe", "blocwise"});
  ASSERT_EQ(typo.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(typo.error->ToString(), HasSubstr("did you mean \"blockwise\""));
}

TEST_F(ModelCommandTest, ModelFileAndErrors) {
  ASSERT_TRUE(WriteFileAtomically(Path("m.json"), R"({"preset": "llama3-8b", "layers": 2})").ok());
  EXPECT_EQ(Run({Path("m.json")}).kind, CommandOutcome::Kind::kOk);
  ASSERT_TRUE(
      WriteFileAtomically(Path("bad.json"), R"({"preset": "llama3-8b", "kv_heads": 5})").ok());
  CommandOutcome bad = Run({Path("bad.json")});
  ASSERT_EQ(bad.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(bad.error->ToString(), HasSubstr("bad.json"));
  EXPECT_THAT(bad.error->ToString(), HasSubstr("kv_heads must divide heads"));
  CommandOutcome unknown = Run({"llama-3-8b"});
  ASSERT_EQ(unknown.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(unknown.error->ToString(), HasSubstr("did you mean \"llama3-8b\""));
  CommandOutcome tp = Run({"llama3-8b", "--tp", "3"});
  ASSERT_EQ(tp.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(tp.error->ToString(), HasSubstr("must divide heads (32)"));
  EXPECT_EQ(Run({"llama3-8b", "--recompute", "some"}).kind, CommandOutcome::Kind::kFailure);
  EXPECT_EQ(Run({}).kind, CommandOutcome::Kind::kUsage);
}

// --recompute selective --recompute-modules: DeepSeek-V3's first MoE layer (index 3) over 4,096
// tokens keeps 469,762,048 B less with mla_up_proj (its Q, K, V) and 134,217,728 less with
// moe_act (the experts' activation output): tests/models/ops_test.cc derives both.
TEST_F(ModelCommandTest, RecomputeModulesOfAMoeLayer) {
  const auto kept = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"deepseek-v3",  "--seq",   "4096", "--flash",
                                     "--no-dropout", "--layer", "3"};
    args.insert(args.end(), extra.begin(), extra.end());
    const CommandOutcome outcome = Run(args);
    EXPECT_EQ(outcome.kind, CommandOutcome::Kind::kOk)
        << (outcome.error ? outcome.error->ToString() : "");
    const std::string text = output_.str();
    const size_t at = text.find("recompute): ");
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + 12));
  };
  const double none = kept({});
  EXPECT_THAT(output_.str(), HasSubstr("layer 3 on one of 1"));
  const double modules =
      kept({"--recompute", "selective", "--recompute-modules", "mla_up_proj,moe_act"});
  EXPECT_THAT(output_.str(), HasSubstr("(selective of mla_up_proj, moe_act recompute)"));
  EXPECT_NEAR(none - modules, (469'762'048 + 134'217'728) / 1e6, 1e-3);
  CommandOutcome typo = Run(
      {"deepseek-v3", "--recompute", "selective", "--recompute-modules", "mla_up_proj,moe_actt"});
  ASSERT_EQ(typo.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(typo.error->ToString(), HasSubstr("did you mean \"moe_act\""));
  EXPECT_EQ(Run({"deepseek-v3", "--recompute-modules", "mlp"}).kind,
            CommandOutcome::Kind::kFailure);  // needs --recompute selective
  EXPECT_EQ(Run({"deepseek-v3", "--layer", "61"}).kind, CommandOutcome::Kind::kFailure);
}

}  // namespace
}  // namespace dtsim::cli
