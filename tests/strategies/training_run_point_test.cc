// A measured training run (calibration-points.json's schema) as a simulation config: each
// reading rule, the metric compared, the refusals, and every shared calibration point
// simulated or refused for a named reason.
#include "strategies/training_run_point.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <vector>

#include "strategies/config.h"
#include "strategies/simulate.h"
#include "strategies/validation.h"

namespace dtsim::strategies {
namespace {

using testing::HasSubstr;

// DLPerf's Megatron-LM GPT on V100s as the shared file records it (abridged).
Json V100Point() {
  return Json::parse(R"json({
    "id": "v100", "category": "v100_small_cluster_megatron",
    "model": {"name": "GPT h1536 L16", "arch": "GPT dense (Megatron-LM GPT-2 style)",
              "layers": 16, "hidden": 1536, "heads": 16, "ffn_hidden": 6144, "seq_len": 2048,
              "vocab": "50257 GPT-2 BPE, padded by Megatron (report states 51200)"},
    "precision": "fp16 mixed (Apex)",
    "parallel": {"tp": 1, "pp": 4, "dp": 8, "ep": 1, "cp": 1, "global_batch": 512,
                 "micro_batch": 2, "schedule": "interleaved 1F1B, 2 interleaving stages",
                 "recompute": "likely full activation checkpointing",
                 "framework": "NVIDIA Megatron-LM commit 8aa4619f"},
    "hardware": {"gpu": "V100-SXM2-16GB", "gpus_per_node": 8, "gpu_count": 32,
                 "inter_node": "1x 100 Gb/s EDR InfiniBand (Mellanox MT27700) per node"},
    "metrics": [{"name": "iteration_time", "value": 4893.55, "unit": "ms", "kind": "measured"},
                {"name": "throughput", "value": 104.63, "unit": "sequences/s",
                 "kind": "measured"}]
  })json");
}

// A NeMo Llama run on H100s (abridged from the shared file).
Json NemoPoint() {
  return Json::parse(R"json({
    "id": "nemo", "category": "nvidia_nemo_perf",
    "model": {"name": "Llama-3 70B", "arch": "Llama GQA", "layers": 80, "hidden": 8192,
              "heads": 64, "kv_heads": 8, "ffn_hidden": 28672, "vocab": 128256,
              "seq_len": 8192},
    "precision": "FP8 (Transformer Engine, delayed scaling) with BF16 master",
    "parallel": {"tp": 4, "pp": 4, "cp": 2, "dp": 2, "ep": 1, "vp": 5, "global_batch": 128,
                 "micro_batch": 1, "schedule": "interleaved 1F1B v=5",
                 "recompute": "none/selective per NeMo recipe (not stated)"},
    "hardware": {"gpu": "H100-SXM5-80GB", "gpus_per_node": 8, "gpu_count": 64,
                 "inter_node": "8x 400 Gb/s NDR InfiniBand per node (ConnectX-7, 1 per GPU)"},
    "metrics": [{"name": "tokens_per_sec_per_gpu", "value": 1533, "unit": "tokens/s/GPU",
                 "kind": "measured"},
                {"name": "iteration_time_derived", "value": 10.688, "unit": "s",
                 "kind": "derived"}]
  })json");
}

// The point `id` of the shared calibration file; null when it is not there.
Json CalibrationPoint(std::string_view id) {
  const std::string path = std::string(DTSIM_SHARED_DIR) + "/validation/calibration-points.json";
  Expected<Json> points = ReadJsonFile(path);
  EXPECT_TRUE(points.ok()) << points.error().ToString();
  if (!points.ok()) return nullptr;
  for (const Json& point : (*points)["points"]) {
    if (point.value("id", "") == id) return point;
  }
  return nullptr;
}

TrainingRunConfig ConfigOfPoint(const Json& point) {
  Expected<TrainingRunConfig> run = TrainingRunConfigOf(point, "points[0]");
  EXPECT_TRUE(run.ok()) << run.error().ToString();
  return run.ok() ? *run : TrainingRunConfig{};
}

std::string PointError(const Json& point) {
  Expected<ValidationRow> row = TrainingRunPoint(point, "points[0]", "x");
  return row.ok() ? "" : row.error().ToString();
}

TEST(TrainingRunPointTest, ReadsAMegatronLmRunOnV100s) {
  const TrainingRunConfig run = ConfigOfPoint(V100Point());
  const Json& c = run.config;
  EXPECT_EQ(c["model"]["norm"], "layernorm");  // GPT: LayerNorm, GeLU, learned, tied, biases
  EXPECT_EQ(c["model"]["activation"], "gelu");
  EXPECT_EQ(c["model"]["tied_embeddings"], true);
  EXPECT_EQ(c["model"]["vocab"], 50257);  // the first number of the text
  EXPECT_EQ(c["training"]["precision"], "fp16");
  EXPECT_EQ(c["training"]["recompute"], "full");
  EXPECT_EQ(c["training"]["flash_attention"], false);
  EXPECT_EQ(c["parallelism"]["pipeline"]["schedule"], "interleaved");
  EXPECT_EQ(c["parallelism"]["pipeline"]["virtual_stages"], 2);  // "2 interleaving stages"
  EXPECT_EQ(c["parallelism"]["zero_stage"], 0);
  EXPECT_EQ(c["parallelism"]["overlap_gradient_reduce"], false);  // Megatron-LM
  EXPECT_EQ(c["cluster"]["preset"], "dgx1-v100");
  EXPECT_EQ(c["cluster"]["gpu"]["memory"], "16 GiB");
  EXPECT_EQ(c["cluster"]["inter_node"]["nics_per_node"], 1);
  EXPECT_EQ(c["cluster"]["inter_node"]["nic_bandwidth"], "100 Gbps");
  EXPECT_THAT(run.assumed, testing::Contains("recompute full"));
  EXPECT_THAT(run.summary, HasSubstr("PP 4 interleaved v=2, DP 8, fp16, recompute full"));
}

TEST(TrainingRunPointTest, ReadsANemoRecipeOnH100s) {
  const TrainingRunConfig run = ConfigOfPoint(NemoPoint());
  const Json& c = run.config;
  EXPECT_EQ(c["model"]["norm"], "rmsnorm");  // Llama: RMSNorm, SwiGLU, rotary, untied
  EXPECT_EQ(c["model"]["activation"], "swiglu");
  EXPECT_EQ(c["model"]["kv_heads"], 8);
  EXPECT_EQ(c["training"]["precision"], "fp8");
  EXPECT_EQ(c["training"]["fp8_recipe"], "delayed");
  EXPECT_EQ(c["training"]["recompute"], "selective");
  EXPECT_EQ(c["training"]["flash_attention"], true);
  EXPECT_EQ(c["training"]["dropout"], false);
  EXPECT_EQ(c["parallelism"]["context"], 2);
  EXPECT_EQ(c["parallelism"]["tensor"]["sequence_parallel"], true);  // NeMo: SP with TP
  EXPECT_EQ(c["parallelism"]["zero_stage"], 1);  // Megatron-Core's distributed optimizer
  EXPECT_EQ(c["parallelism"]["overlap_gradient_reduce"], true);
  EXPECT_THAT(run.assumed, testing::Contains("distributed optimizer (ZeRO-1)"));
}

TEST(TrainingRunPointTest, ComparesTheFirstAbsoluteMeasuredMetric) {
  // tokens/s/GPU = global batch × sequence / (iteration time × GPUs): the row's prediction is
  // the simulated iteration's, divided the same way.
  const Json point = NemoPoint();
  Expected<ValidationRow> row = TrainingRunPoint(point, "points[0]", "nemo");
  ASSERT_TRUE(row.ok()) << row.error().ToString();
  Expected<ResolvedConfig> config = ConfigFromJson(ConfigOfPoint(point).config, "");
  ASSERT_TRUE(config.ok()) << config.error().ToString();
  Expected<SimulationResult> result = Simulate(*config);
  ASSERT_TRUE(result.ok()) << result.error().ToString();
  EXPECT_EQ(row->metric, "tokens_per_sec_per_gpu");
  EXPECT_FALSE(row->is_time);
  EXPECT_NEAR(row->predicted, 128.0 * 8192 / result->iteration_time.ToSecondsDouble() / 64,
              1e-6 * row->predicted);
  EXPECT_DOUBLE_EQ(row->Error(), row->predicted / 1533 - 1);
  // An iteration time in ms is compared in ms, and a time's error is measured / predicted − 1.
  Expected<ValidationRow> v100 = TrainingRunPoint(V100Point(), "points[0]", "v100");
  ASSERT_TRUE(v100.ok()) << v100.error().ToString();
  EXPECT_EQ(v100->metric, "iteration_time");
  EXPECT_TRUE(v100->is_time);
  EXPECT_DOUBLE_EQ(v100->Error(), 4893.55 / v100->predicted - 1);
}

TEST(TrainingRunPointTest, RefusalsNameTheFieldAndTheValue) {
  Json point = NemoPoint();
  point["model"]["arch"] = "Mamba-2 hybrid";
  EXPECT_THAT(PointError(point),
              HasSubstr("points[0].model.arch: unknown architecture: expected one naming GPT, "
                        "Llama, GQA, MoE or squared-ReLU, got \"mamba-2 hybrid\""));
  point = NemoPoint();
  point["hardware"]["gpu_count"] = 128;
  EXPECT_THAT(PointError(point), HasSubstr("points[0].parallel.dp: tp × pp × cp × dp = 64 is not "
                                           "the point's GPU count 128"));
  point = NemoPoint();
  point["parallel"]["ep"] = 32;
  EXPECT_THAT(PointError(point),
              HasSubstr("points[0].parallel.ep: expert parallelism 32 divides neither DP × CP 4 "
                        "nor TP × DP × CP 16 (MoE parallel folding)"));
  point = NemoPoint();
  point["hardware"]["gpu"] = "MI300X";
  EXPECT_THAT(PointError(point), HasSubstr("points[0].hardware.gpu: unknown GPU"));
  point = NemoPoint();
  point["metrics"] = Json::parse(R"([{"name": "speedup", "value": 3.3, "kind":
                                      "reported_relative"}])");
  EXPECT_THAT(PointError(point), HasSubstr("points[0].metrics: no absolute measured metric"));
  point = NemoPoint();
  point["model"].erase("layers");
  EXPECT_THAT(PointError(point), HasSubstr("points[0].model.layers: missing required field"));
}

// DeepSeek-V3 as the shared file gives it: MLA (DeepSeek-V3's sizes), 3 dense layers of FFN
// 18,432, a shared expert, and 61 layers over PP 8 × v 4 = 32 chunks with the embedding and loss
// as layers: ⌈63/32⌉ = 2 slots a chunk, so 1 (after the embedding), 30 × 2, and the loss alone.
TEST(TrainingRunPointTest, ReadsDeepSeekV3) {
  const Json deepseek = CalibrationPoint("mbridge-25.09-h100-DeepSeekV3-1024gpu");
  ASSERT_FALSE(deepseek.is_null());
  const Json c = ConfigOfPoint(deepseek).config;
  EXPECT_EQ(c["model"]["mla"]["kv_lora_rank"], 512);
  EXPECT_EQ(c["model"]["kv_heads"], 128);
  EXPECT_EQ(c["model"]["ffn_hidden"], 18432);
  EXPECT_EQ(c["model"]["moe"]["first_dense_layers"], 3);
  EXPECT_EQ(c["model"]["moe"]["shared_experts"], 1);
  EXPECT_EQ(c["training"]["fp8_recipe"], "blockwise");
  std::vector<int> chunks(32, 2);
  chunks.front() = 1;
  chunks.back() = 0;
  EXPECT_EQ(c["parallelism"]["pipeline"]["layers"].get<std::vector<int>>(), chunks);
}

// The point says its EP is "carved from DP*TP" (Megatron-Bridge's DeepSeek-V3 recipes set
// expert_tensor_parallel_size 1): EP 64 folds over TP 2 × DP 64 although it does not exceed DP,
// so an expert-parallel group is 64 consecutive ranks (8 nodes), not every second rank of 128.
// Without that statement EP 64 ≤ DP 64 stays within the data-parallel ranks, expert TP 2.
TEST(TrainingRunPointTest, FoldsWhereThePointCarvesExpertsFromTensorRanks) {
  Json deepseek = CalibrationPoint("mbridge-25.09-h100-DeepSeekV3-1024gpu");
  ASSERT_FALSE(deepseek.is_null());
  TrainingRunConfig run = ConfigOfPoint(deepseek);
  // Its recipe on H100 also overlaps the all-to-alls with delayed weight gradients.
  EXPECT_EQ(run.config["parallelism"]["expert"],
            Json::parse(R"({"size": 64, "tensor": 1, "overlap": true, "delay_wgrad": true})"));
  EXPECT_THAT(run.assumed, testing::Contains("expert TP 1 (MoE parallel folding)"));
  EXPECT_THAT(run.assumed, testing::Contains(HasSubstr("overlap_moe_expert_parallel_comm")));
  EXPECT_THAT(run.summary, HasSubstr("EP 64 (folded)"));
  deepseek["inferred"] = Json::array({"network per DGX reference spec"});
  run = ConfigOfPoint(deepseek);
  EXPECT_EQ(run.config["parallelism"]["expert"],
            Json::parse(R"({"size": 64, "overlap": true, "delay_wgrad": true})"));
  EXPECT_THAT(run.summary, HasSubstr("EP 64,"));
}

// Qwen3-235B-A22B as Megatron-Bridge runs it on 256 H100s: EP 32 > DP 16, so the experts fold
// over TP 2 × DP 16 with whole experts per rank (expert TP 1), 128/32 = 4 of them.
TEST(TrainingRunPointTest, FoldsExpertParallelismOverTensorRanks) {
  const Json qwen = CalibrationPoint("mbridge-25.09-h100-Qwen3-235B-A22B-256gpu");
  ASSERT_FALSE(qwen.is_null());
  const TrainingRunConfig run = ConfigOfPoint(qwen);
  EXPECT_EQ(run.config["parallelism"]["expert"], Json::parse(R"({"size": 32, "tensor": 1})"));
  EXPECT_EQ(run.config["parallelism"]["tensor"]["sequence_parallel"], true);
  EXPECT_THAT(run.assumed, testing::Contains("expert TP 1 (MoE parallel folding)"));
  const Expected<ValidationRow> row =
      TrainingRunPoint(qwen, "points[i]", "mbridge-25.09-h100-Qwen3-235B-A22B-256gpu");
  ASSERT_TRUE(row.ok()) << row.error().ToString();
  EXPECT_GT(row->predicted, 0);
}

// Every point of the shared calibration file either simulates or is refused for one of the
// reasons listed here: points with relative figures only (every run with a full
// configuration simulates). The errors per category are printed (docs/validation.md quotes them).
TEST(TrainingRunPointTest, EveryCalibrationPointSimulatesOrSaysWhyNot) {
  const std::string path = std::string(DTSIM_SHARED_DIR) + "/validation/calibration-points.json";
  Expected<Json> points = ReadJsonFile(path);
  ASSERT_TRUE(points.ok()) << points.error().ToString();
  Expected<ValidationReport> report = Validate(*points, path);
  ASSERT_TRUE(report.ok()) << report.error().ToString();
  EXPECT_EQ(report->rows.size() + report->unsimulated.size(), (*points)["points"].size());
  const std::set<std::string> known_refusals = {
      "onebit-adam-bert-large-e2e",  // relative figures only
      "onebit-adam-compression-stage-ethernet",
      "onebit-adam-allreduce-fraction",
      "tutel-single-moe-layer-16-2048",
      "tutel-blog-ndm-a100",
      "tutel-swinv2-moe"};
  for (const UnsimulatedPoint& point : report->unsimulated) {
    std::printf("not simulated: %s: %s\n", point.id.c_str(), point.reason.c_str());
    EXPECT_TRUE(known_refusals.contains(point.id)) << point.id << ": " << point.reason;
  }
  EXPECT_EQ(report->unsimulated.size(), known_refusals.size());
  for (const CategoryAccuracy& category : report->categories) {
    std::printf("%-30s %3d points  MAPE %6.1f%%  mean %+6.1f%%\n", category.category.c_str(),
                category.points, category.mean_absolute_percentage_error, category.mean_error);
  }
  for (const ValidationRow& row : report->rows) {
    std::printf("  %-44s %-24s %10.2f %10.2f %+7.1f%%\n", row.id.c_str(), row.metric.c_str(),
                row.measured, row.predicted, 100 * row.Error());
  }
  // Every measured run ran, so dtsim's memory model fits each (with what its recipe sets and,
  // where the point is silent, the cheapest savers that fit).
  for (const ValidationRow& row : report->rows) {
    EXPECT_EQ(row.how.find("memory model does not fit it"), std::string::npos)
        << row.id << ": " << row.how;
  }
}

// What NVIDIA's recipes set beyond their tables (strategies/published_recipes.cc cites each
// file): NeMo 24.07's FP8 examples sync gradients in bf16 (GPT, Llama; Nemotron-4 340B also
// keeps its optimizer state in bf16; the Nemotron 8B example sets neither); Megatron-Bridge
// 25.09's FP8 configs keep FP8 parameters, its performance scripts' configs bf16 gradients
// (every model: grad_reduce_in_fp32 false), DeepSeek-V3's H100
// run recomputes the modules mla_up_proj and mlp, Qwen3-30B-A3B's recipe every layer in full,
// and its performance scripts export NCCL_P2P_NET_CHUNKSIZE=2097152 for the pipelined 70B and
// 405B runs. Megatron-LM at 8aa4619f (DLPerf's V100 runs) all-reduces fp16 gradients.
// The measured runs kept for checking (tools/validation/checking-points.json, not in ../shared)
// all simulate, and none of them fixed a constant of the shipped calibration: they check that
// it generalizes (docs/validation.md, "Checking points"). Their errors are printed.
TEST(TrainingRunPointTest, CheckingPointsSimulateAndFixNoShippedConstant) {
  const std::string path = std::string(DTSIM_SOURCE_DIR) + "/tools/validation/checking-points.json";
  Expected<Json> points = ReadJsonFile(path);
  ASSERT_TRUE(points.ok()) << points.error().ToString();
  Expected<ValidationReport> report = Validate(*points, path);
  ASSERT_TRUE(report.ok()) << report.error().ToString();
  EXPECT_TRUE(report->unsimulated.empty());
  ASSERT_EQ(report->rows.size(), (*points)["points"].size());
  Expected<Json> shipped =
      ReadJsonFile(std::string(DTSIM_SOURCE_DIR) + "/tools/calibration/default.json");
  ASSERT_TRUE(shipped.ok()) << shipped.error().ToString();
  std::set<std::string> fitted;
  for (const Json& constant : (*shipped)["constants"]) {
    for (const Json& id : constant["points"]) fitted.insert(id.get<std::string>());
  }
  EXPECT_FALSE(fitted.empty());
  for (const ValidationRow& row : report->rows) {
    EXPECT_FALSE(fitted.contains(row.id)) << row.id << " is for checking, not fitting";
    std::printf("  %-44s %-24s %10.2f %10.2f %+7.1f%%\n", row.id.c_str(), row.metric.c_str(),
                row.measured, row.predicted, 100 * row.Error());
  }
}

TEST(TrainingRunPointTest, AppliesWhatThePublishedRecipesSet) {
  const auto training = [](std::string_view id) {
    const Json point = CalibrationPoint(id);
    EXPECT_FALSE(point.is_null()) << id;
    return point.is_null() ? TrainingRunConfig{} : ConfigOfPoint(point);
  };
  const TrainingRunConfig llama = training("nemo2407-LLAMA3-8B-8gpu");
  EXPECT_EQ(llama.config["training"]["grad_precision"], "bf16");
  EXPECT_FALSE(llama.config["training"].contains("param_precision"));
  EXPECT_THAT(llama.assumed, testing::Contains(HasSubstr("optim.grad_sync_dtype=bf16")));
  const Json nemotron = training("nemo2407-Nemotron-340B-128gpu").config["training"];
  EXPECT_EQ(nemotron["grad_precision"], "bf16");
  EXPECT_EQ(nemotron["master_precision"], "bf16");
  EXPECT_EQ(nemotron["moment_precision"], "bf16");
  EXPECT_FALSE(
      training("nemo2407-Nemotron-8B-64gpu").config["training"].contains("grad_precision"));
  const TrainingRunConfig llama405_run = training("mbridge-25.09-h100-LLAMA3.1-405B-1024gpu");
  const Json& llama405 = llama405_run.config["training"];
  EXPECT_EQ(llama405["param_precision"], "fp8");
  EXPECT_EQ(llama405["grad_precision"], "bf16");  // the performance YAML's override
  EXPECT_EQ(llama405_run.config["cluster"]["nccl"]["p2p_net_chunk_size"], "2 MiB");
  EXPECT_THAT(llama405_run.assumed, testing::Contains(HasSubstr("NCCL_P2P_NET_CHUNKSIZE")));
  EXPECT_EQ(training("mbridge-25.09-h100-LLAMA3-70B-64gpu")
                .config["cluster"]["nccl"]["p2p_net_chunk_size"],
            "2 MiB");
  // Not for the 8B (one stage) nor for models the script leaves at NCCL's default.
  EXPECT_FALSE(training("mbridge-25.09-h100-LLAMA3-8B-8gpu").config["cluster"].contains("nccl"));
  EXPECT_FALSE(
      training("mbridge-25.09-h100-DeepSeekV3-1024gpu").config["cluster"].contains("nccl"));
  const TrainingRunConfig deepseek = training("mbridge-25.09-h100-DeepSeekV3-1024gpu");
  EXPECT_EQ(deepseek.config["training"]["grad_precision"], "bf16");
  EXPECT_EQ(deepseek.config["training"]["param_precision"], "fp8");
  EXPECT_EQ(deepseek.config["training"]["recompute"], "selective");
  EXPECT_EQ(deepseek.config["training"]["recompute_modules"],
            Json::parse(R"(["mla_up_proj", "mlp"])"));
  EXPECT_FALSE(deepseek.recompute_assumed);
  const TrainingRunConfig qwen = training("mbridge-25.09-h100-Qwen3-30B-A3B-16gpu");
  EXPECT_EQ(qwen.config["training"]["recompute"], "full");
  EXPECT_EQ(qwen.config["training"]["grad_precision"], "bf16");
  EXPECT_THAT(qwen.assumed, testing::Contains(HasSubstr("grad_reduce_in_fp32 false")));
  EXPECT_FALSE(qwen.recompute_assumed);
  EXPECT_THAT(qwen.assumed, testing::Contains(HasSubstr("qwen3_30b_a3b.py")));
  const TrainingRunConfig dlperf = training("dlperf-megatron-DP_16x1x1_32_1536x16");
  EXPECT_EQ(dlperf.config["training"]["grad_precision"], "fp16");
  EXPECT_THAT(dlperf.assumed, testing::Contains(HasSubstr("--fp32-allreduce")));
}

// MegaScale's Megatron-LM baseline (GPT 175B, TP 8, PP 8 interleaved, DP 4 on A100-80GB)
// states neither sequence parallelism, the distributed optimizer nor its recompute. As dtsim
// assumed them (none of the three) the plan needs 116.9 GiB a GPU; the run ran, so the
// cheapest savers are added until it fits: SP alone does not (the full-size optimizer state,
// 12 B × 2.8 G parameters = 31.8 GiB, stays), SP and ZeRO-1 over the 4 replicas do, without
// recompute.
TEST(TrainingRunPointTest, AddsTheCheapestMemorySaversThatFit) {
  const Json megascale = CalibrationPoint("megascale-t2-Megatron-LM-256");
  ASSERT_FALSE(megascale.is_null());
  const TrainingRunConfig run = ConfigOfPoint(megascale);
  EXPECT_EQ(run.config["parallelism"]["tensor"]["sequence_parallel"], true);
  EXPECT_EQ(run.config["parallelism"]["zero_stage"], 1);
  EXPECT_EQ(run.config["training"]["recompute"], "none");
  EXPECT_THAT(run.assumed,
              testing::Contains("SP, distributed optimizer (ZeRO-1) (the least that fits "
                                "dtsim's memory model: the run ran)"));
  EXPECT_THAT(run.assumed, testing::Not(testing::Contains("no SP")));
  EXPECT_THAT(run.summary, HasSubstr("(to fit: SP, distributed optimizer (ZeRO-1))"));
  // One data-parallel replica (DP 1 on 64 GPUs) leaves nothing to shard the optimizer over:
  // SP, then recompute, until it fits.
  Json alone = megascale;
  alone["hardware"]["gpu_count"] = 64;
  alone["parallel"]["dp"] = 1;
  const TrainingRunConfig one = ConfigOfPoint(alone);
  EXPECT_EQ(one.config["parallelism"]["zero_stage"], 0);
  EXPECT_EQ(one.config["parallelism"]["tensor"]["sequence_parallel"], true);
  EXPECT_NE(one.config["training"]["recompute"], "none");
  // A stated setting is not changed: the V100 run's full recompute is the point's.
  EXPECT_EQ(ConfigOfPoint(V100Point()).config["parallelism"]["tensor"]["sequence_parallel"], false);
}

}  // namespace
}  // namespace dtsim::strategies
