#include "tools/cli/model_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "sim/base/atomic_file.h"
#include "sim/base/json_reader.h"
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
  EXPECT_THAT(output_.str(), HasSubstr("MoE on 58 of 61 layers after 3 dense, 1 shared expert(s)"));
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

// Gemma 3's windows, five layers of six: layers 5, 11, 17, 23 and 29 of 32 keep full
// attention, 27 are windowed; the report file says the same.
TEST_F(ModelCommandTest, SlidingWindowPattern) {
  ASSERT_TRUE(WriteFileAtomically(Path("w.json"), R"({"preset": "llama3-8b",
      "sliding_window": 1024, "sliding_window_pattern": 6})")
                  .ok());
  ASSERT_EQ(Run({Path("w.json"), "-o", Path("w.out.json")}).kind, CommandOutcome::Kind::kOk);
  EXPECT_THAT(output_.str(), HasSubstr("sliding window of 1024 keys on 27 of 32 layers"));
  const Expected<Json> json = ReadJsonFile(Path("w.out.json"));
  ASSERT_TRUE(json.ok()) << json.error().ToString();
  EXPECT_EQ((*json)["model"]["sliding_window"],
            Json::parse(R"({"tokens": 1024, "windowed_layers": 27, "pattern": 6})"));
}

// Errors name the option the user gave (the API names ModelQuery's fields).
TEST_F(ModelCommandTest, ErrorsNameTheOption) {
  const auto error_of = [this](std::vector<std::string> args) {
    const CommandOutcome outcome = Run(std::move(args));
    return outcome.error ? outcome.error->ToString() : std::string("ok");
  };
  EXPECT_EQ(error_of({"llama3-8b", "--seq", "-5"}), "--seq: must be at least 1, got -5");
  // 0 is the API's "the model's max_seq"; typed, it was taken as that silently.
  EXPECT_EQ(error_of({"llama3-8b", "--seq", "0"}), "--seq: must be at least 1, got 0");
  EXPECT_EQ(error_of({"llama3-8b", "--tp", "0"}), "--tp: must be at least 1, got 0");
  EXPECT_EQ(error_of({"llama3-8b", "--micro-batch", "0"}),
            "--micro-batch: must be at least 1, got 0");
  // A recipe without --dtype fp8 was ignored; FP8 or BF16 on a GPU without their tensor cores
  // was priced on the vector units. Both are errors, as in a config.
  EXPECT_EQ(error_of({"llama3-8b", "--fp8-recipe", "current"}),
            "--fp8-recipe: an FP8 recipe needs dtype \"fp8\" (the dtype is \"bf16\"), got "
            "\"current\"");
  EXPECT_THAT(error_of({"llama3-8b", "--dtype", "fp8", "--gpu", "v100-sxm2-32gb"}),
              HasSubstr("--dtype: the GPU \"v100-sxm2-32gb\" has no FP8 tensor cores"));
  EXPECT_THAT(error_of({"llama3-8b", "--gpu", "v100-sxm2-32gb"}),
              HasSubstr("--dtype: the GPU \"v100-sxm2-32gb\" has no bf16 matrix peak"));
  EXPECT_EQ(error_of({"llama3-8b", "--gpu", "v100-sxm2-32gb", "--dtype", "fp16"}), "ok");
  EXPECT_THAT(
      error_of({"llama3-8b", "--dtype", "fp8", "--fp8-recipe", "mxfp8", "--gpu", "h100-sxm5-80gb"}),
      HasSubstr("--fp8-recipe: MXFP8 needs microscaling tensor cores"));
  // Past a config's bounds the printed bytes and times had overflowed.
  EXPECT_EQ(error_of({"gpt3-175b", "--seq", "99999999999"}),
            "--seq: at most 16777216 (2^24), as in a config, got 99999999999");
  EXPECT_EQ(error_of({"gpt3-175b", "--micro-batch", "1000000000000"}),
            "--micro-batch: at most 68719476736 (2^36), as in a config, got 1000000000000");
  EXPECT_EQ(error_of({"llama3-70b", "--seq", "16777216"}), "ok");
  // GPT-3's learned position table has 2,048 rows: a longer sequence has no position.
  EXPECT_EQ(error_of({"gpt3-175b", "--seq", "4096"}),
            "--seq: longer than the model's learned position table (2048 positions, its "
            "max_seq), got 4096");
  // Both within their bounds, their product was not: 0.000 MB of activations were printed.
  // 2^36 · 2^24 · 128,256 (LLaMA 3's vocabulary, the widest) = 1.48e23.
  EXPECT_THAT(error_of({"llama3-70b", "--seq", "16777216", "--micro-batch", "68719476736"}),
              HasSubstr("model: a micro-batch's activations (micro_batch × seq_len × the widest "
                        "of hidden, attention, ffn_hidden and the padded vocabulary) come to "
                        "1.48e+23 elements, past the 2^56"));
  EXPECT_THAT(error_of({"llama3-8b", "--gpu", "h1000"}), HasSubstr("--gpu: unknown GPU"));
  EXPECT_THAT(error_of({"llama3-8b", "--layer", "32"}),
              HasSubstr("--layer: the model has layers 0 to 31"));
  EXPECT_THAT(error_of({"llama3-8b", "--recompute-modules", "mlp"}),
              HasSubstr("--recompute-modules: the modules name"));
}

// -o writes what the command prints: the parameters, each pass's totals and every op.
TEST_F(ModelCommandTest, ReportFileHoldsWhatIsPrinted) {
  const CommandOutcome outcome = Run({"gpt3-175b", "--tp", "8", "--sp", "-o", Path("m.json")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  const Expected<Json> json = ReadJsonFile(Path("m.json"));
  ASSERT_TRUE(json.ok()) << json.error().ToString();
  EXPECT_EQ((*json)["format"], "dtsim.model");
  EXPECT_EQ((*json)["model"]["layers"], 96);
  EXPECT_EQ((*json)["layer"]["tensor_parallel"], 8);
  // 174.604 B parameters, as printed.
  EXPECT_EQ((*json)["parameters"]["total"].get<int64_t>() / 1'000'000, 174'604);
  EXPECT_THAT(output_.str(), HasSubstr("174.604 B total"));
  // The forward total is the sum of the forward ops' times.
  double seconds = 0;
  for (const Json& op : (*json)["layer"]["ops"]["forward"]) seconds += op["seconds"].get<double>();
  EXPECT_NEAR(seconds, (*json)["layer"]["totals"]["forward"]["seconds"].get<double>(), 1e-12);
  EXPECT_EQ((*json)["provenance"]["command"], "model");
  // The output never replaces a model file given as the input.
  const std::string model = Path("model.json");
  ASSERT_TRUE(WriteFileAtomically(model, R"({"preset": "llama3-8b", "layers": 2})").ok());
  EXPECT_EQ(Run({model, "-o", model}).kind, CommandOutcome::Kind::kFailure);
  EXPECT_TRUE(Run({model, "-q"}).kind == CommandOutcome::Kind::kOk);
  EXPECT_EQ(output_.str(), "");
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
