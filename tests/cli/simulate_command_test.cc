#include "tools/cli/simulate_command.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "sim/base/atomic_file.h"
#include "sim/base/gzip.h"
#include "sim/base/input_files.h"
#include "sim/base/json_reader.h"
#include "sim/base/sha256.h"
#include "tests/testing/temp_dir.h"
#include "tools/results/simulate_result.h"

namespace dtsim::cli {
namespace {

using testing::HasSubstr;

const std::string kSmall = DTSIM_EXAMPLES_DIR "/gpt3_1.3b_16gpu.json";

class SimulateCommandTest : public testing_support::TempDirTest {
 protected:
  CommandOutcome Simulate(std::vector<std::string> args) {
    output_.str("");
    return SimulateCommand(args, output_);
  }
  std::ostringstream output_;
};

// Golden scenario: the small example's result, less the wall-clock fields, is checked in.
// After an intended change, regenerate with DTSIM_UPDATE_GOLDEN=1 and say why in the commit.
TEST_F(SimulateCommandTest, SmallExampleMatchesTheGoldenResult) {
  const CommandOutcome outcome =
      Simulate({kSmall, "-o", Path("result.json"), "--timeline", Path("timeline.json")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("DP 2 × TP 4 (SP) × PP 2 (1f1b), 8 micro-batches of 4"));
  Json result = *ReadJsonFile(Path("result.json"));
  EXPECT_EQ(result["format"], results::kSimulateResultFormat.name);
  result["simulator"].erase("build_seconds");
  result["simulator"].erase("simulate_seconds");
  // The provenance (docs/formats/provenance.md) names the run's inputs; it holds this machine's
  // paths and commit, so it is checked here and left out of the golden file.
  const Json& provenance = result["provenance"];
  EXPECT_EQ(provenance["command"], "simulate");
  EXPECT_EQ(provenance["dtsim"]["commit"].get<std::string>().size() == 12 ||
                provenance["dtsim"]["commit"] == "unknown",
            true);
  ASSERT_EQ(provenance["inputs"].size(), 1u);
  EXPECT_EQ(provenance["inputs"][0]["sha256"], Sha256Hex(*ReadFile(kSmall)));
  EXPECT_EQ(provenance["config"]["parallelism"]["data"], 2);
  const Json& cluster = provenance["resolved"]["cluster"];
  EXPECT_EQ(cluster["intra_node"]["bandwidth"], "300 GB/s");  // the dgx-a100 preset's
  EXPECT_EQ(cluster["inter_node"]["nic_bandwidth"], "200 Gbps");
  EXPECT_EQ(cluster["collective_latency"], "8400 ns");
  EXPECT_EQ(provenance["resolved"]["plan"]["virtual_stages"], 1);
  result.erase("provenance");
  result["input"]["config"] = "tools/examples/gpt3_1.3b_16gpu.json";
  const std::string golden_path = DTSIM_SOURCE_DIR "/tests/golden/gpt3_1.3b_16gpu.result.json";
  if (std::getenv("DTSIM_UPDATE_GOLDEN") != nullptr) {
    ASSERT_TRUE(WriteFileAtomically(golden_path, result.dump(2) + "\n").ok());
  }
  const Expected<Json> golden = ReadJsonFile(golden_path);
  ASSERT_TRUE(golden.ok()) << golden.error().ToString();
  EXPECT_EQ(result, *golden) << Json::diff(*golden, result).dump(2);
  const Expected<Json> timeline = ReadJsonFile(Path("timeline.json"));
  ASSERT_TRUE(timeline.ok());
  EXPECT_GT((*timeline)["traceEvents"].size(), 27000u);
  // Every communication slice names how the network model ran it (the result's collectives):
  // the pipeline sends on 2 NCCL channels, everything else a ring.
  int communications = 0;
  for (const Json& event : (*timeline)["traceEvents"]) {
    if (event.value("ph", "") != "X" || !event["args"].contains("op")) continue;
    ++communications;
    EXPECT_EQ(event["args"]["algorithm"],
              event["args"]["op"] == "send_recv" ? "direct on 2 channels" : "ring");
  }
  EXPECT_GT(communications, 3000);
  // The summary prints the costliest: the tensor-parallel all-gathers of 8 MiB over 4 ranks.
  EXPECT_THAT(output_.str(), HasSubstr("all_gather         8.0 MiB      4  ring"));
}

// tools/examples/profiles/h100-sxm5-80gb.json, measured by tools/op_benchmark.py on an H100,
// has every op signature of the H100 examples but the residual add's backward (autograd passes
// that gradient through without a kernel: nothing to time), which falls back to the roofline.
// Beside result.json, result.csv (issue 30: what a pandas user loads in one line): a row per
// stage whose numbers are the JSON's, in seconds and bytes.
TEST_F(SimulateCommandTest, ACsvOfTheStagesLiesBesideTheResult) {
  ASSERT_EQ(Simulate({kSmall, "-o", Path("result.json"), "-q"}).kind, CommandOutcome::Kind::kOk);
  const Json result = *ReadJsonFile(Path("result.json"));
  const std::string csv = *ReadFile(Path("result.csv"));
  std::vector<std::string> lines;
  for (size_t at = 0, end = 0; at < csv.size(); at = end + 1) {
    end = csv.find('\n', at);
    lines.push_back(csv.substr(at, end - at));
  }
  ASSERT_EQ(lines.size(), 3u);  // the header and two stages
  EXPECT_TRUE(lines[0].starts_with("stage,layers,rank,iteration_time_s,compute_s,recompute_s,"))
      << lines[0];
  for (size_t stage = 0; stage < 2; ++stage) {
    const Json& json = result["stages"][stage];
    const std::string expected_start = fmt::format(
        "{},{},{},{},{}", stage, json["layers"].get<int>(), json["time"]["rank"].get<int>(),
        result["iteration_time_ns"].get<int64_t>() / 1e9,
        json["time"]["compute_ns"].get<int64_t>() / 1e9);
    EXPECT_EQ(lines[stage + 1].substr(0, expected_start.size()), expected_start);
    const std::string expected_end =
        fmt::format(",{},{}", json["memory"]["total_bytes"].get<int64_t>(),
                    json["memory"]["capacity_bytes"].get<int64_t>());
    EXPECT_TRUE(lines[stage + 1].ends_with(expected_end)) << lines[stage + 1];
  }
  // A CSV that would be the config (a config named r.csv, the result r.json) is refused
  // before anything is written.
  const std::string config = *ReadFile(kSmall);
  ASSERT_TRUE(WriteFileAtomically(Path("r.csv"), config).ok());
  const CommandOutcome refused = Simulate({Path("r.csv"), "-o", Path("r.json"), "-q"});
  EXPECT_NE(refused.kind, CommandOutcome::Kind::kOk);
  EXPECT_EQ(*ReadFile(Path("r.csv")), config);
  EXPECT_FALSE(std::filesystem::exists(Path("r.json")));
  EXPECT_EQ(results::CsvPathBeside("a/b.json.gz"), "a/b.csv");
  EXPECT_EQ(results::CsvPathBeside("a/b"), "a/b.csv");
}

// Regression: as root, `-o /dev/null` renamed the result over the device and wrote
// /dev/null.csv beside it. A device or pipe gets the JSON in place and no CSV; an empty -o
// ("-o $UNSET") is a usage error, not a run that silently writes nothing.
TEST_F(SimulateCommandTest, DevicesGetTheResultInPlaceAndAnEmptyOutputIsAnError) {
  ASSERT_EQ(Simulate({kSmall, "-o", "/dev/null", "--timeline", "/dev/null", "-q"}).kind,
            CommandOutcome::Kind::kOk);
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/null"));
  EXPECT_FALSE(std::filesystem::exists("/dev/null.csv"));
  for (const char* option : {"-o", "--timeline", "--set"}) {
    const CommandOutcome empty = Simulate({kSmall, option, "", "-q"});
    ASSERT_EQ(empty.kind, CommandOutcome::Kind::kUsage) << option;
    EXPECT_THAT(empty.error->ToString(), HasSubstr("was given an empty value")) << option;
  }
  const CommandOutcome under_dev = Simulate({kSmall, "-o", "/dev/dtsim-result.json", "-q"});
  ASSERT_EQ(under_dev.kind, CommandOutcome::Kind::kFailure);
  EXPECT_EQ(under_dev.error->ToString(),
            "/dev/dtsim-result.json: no such device or file (outputs are not created under /dev "
            "or /proc)");
  EXPECT_EQ(output_.str(), "");  // refused before the simulation
}

// `dtsim simulate <(jq ... c.json)`: the provenance digests what the pipe held (it recorded
// the SHA-256 of nothing, the pipe being at its end when read again).
TEST_F(SimulateCommandTest, AConfigFromAPipeIsDigestedAsItWasRead) {
  const std::string fifo = Path("config.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string config = *ReadFile(kSmall);
  ForgetInputFiles();  // the test read it, not the command
  std::thread writer([&] { std::ofstream(fifo) << config; });
  const CommandOutcome outcome = Simulate({fifo, "-o", Path("r.json"), "-q"});
  if (outcome.kind != CommandOutcome::Kind::kOk) std::ifstream(fifo).close();  // free the writer
  writer.join();
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  const Json inputs = (*ReadJsonFile(Path("r.json")))["provenance"]["inputs"];
  ASSERT_EQ(inputs.size(), 1u);
  EXPECT_EQ(inputs[0]["path"], fifo);
  EXPECT_EQ(inputs[0]["sha256"], Sha256Hex(config));
  EXPECT_EQ(inputs[0]["bytes"], config.size());
}

TEST_F(SimulateCommandTest, TheShippedH100ProfilePricesTheH100ExamplesFromMeasurements) {
  for (const char* example : {DTSIM_EXAMPLES_DIR "/llama2_70b_64h100.json",
                              DTSIM_EXAMPLES_DIR "/mixtral_8x7b_ep8_64h100.json"}) {
    const CommandOutcome outcome =
        Simulate({example, "--set", "profile=profiles/h100-sxm5-80gb.json"});
    ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
    EXPECT_THAT(output_.str(), HasSubstr("cost sources   measured 99.")) << example;
  }
}

// tools/examples/gpt2_124m_1h100.json is the GPT-2 small step of tools/gpu_checks/gpt2_step.py
// (bf16 autocast over fp32 weights, micro-batch 8 × 1,024, flash attention, fused AdamW) on
// one H100, priced from the op costs measured there: within 10% of the step measured on that
// H100, 30.384 ms (docs/profiler.md, "Overhead": the unprofiled median; the GPU was busy 28.2
// ms of it). PyTorch's autocast work is what brings it there: priced as a Megatron step with
// fp32 weights (no casts, bf16 norms and residual stream, bias gradients in the GEMMs) the
// same config is 20% fast.
TEST_F(SimulateCommandTest, TheGpt2StepMeasuredOnAnH100IsPredictedWithinTenPercent) {
  constexpr double kMeasuredMs = 30.384;
  // Each run writes a result of its own: a file read is an input the next run may not overwrite.
  const auto predicted_ms = [&](const std::string& result, std::vector<std::string> args) {
    args.insert(args.begin(), DTSIM_EXAMPLES_DIR "/gpt2_124m_1h100.json");
    args.insert(args.end(), {"-o", Path(result), "--quiet"});
    const CommandOutcome outcome = Simulate(args);
    EXPECT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
    return (*ReadJsonFile(Path(result)))["iteration_time_ns"].get<double>() / 1e6;
  };
  EXPECT_NEAR(predicted_ms("pytorch.json", {}) / kMeasuredMs, 1.0, 0.10);
  EXPECT_LT(predicted_ms("megatron.json", {"--set", "training.framework=megatron", "--set",
                                           "training.param_precision=fp32"}) /
                kMeasuredMs,
            0.85);
}

// tools/examples/profiles/h200-sxm-141gb.json, measured the same way on an H200 for the same
// examples' ops at h200-sxm-141gb and GPT-2 small's, prices them too when they run on H200s.
TEST_F(SimulateCommandTest, TheShippedH200ProfilePricesTheExamplesOnH200s) {
  for (const char* example : {DTSIM_EXAMPLES_DIR "/llama2_70b_64h100.json",
                              DTSIM_EXAMPLES_DIR "/mixtral_8x7b_ep8_64h100.json"}) {
    const CommandOutcome outcome = Simulate({example, "--set", "cluster.gpu=h200-sxm-141gb",
                                             "--set", "profile=profiles/h200-sxm-141gb.json"});
    ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
    EXPECT_THAT(output_.str(), HasSubstr("cost sources   measured 99.")) << example;
  }
}

// Regression: the H100 table priced the GPT-2 example on an A100 with the H100's times (77.3%
// MFU, silently). A table of another GPU is refused; a device name of the same family, or a
// name that tells no GPU, is taken as the user's word.
TEST_F(SimulateCommandTest, AnOpCostTableOfAnotherGpuIsRefused) {
  const std::string example = DTSIM_EXAMPLES_DIR "/gpt2_124m_1h100.json";
  CommandOutcome outcome = Simulate({example, "--set", "cluster.gpu=a100-sxm4-80gb", "-q"});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(),
              HasSubstr("gpt2_124m_1h100.json: profile: the op-cost table was measured on "
                        "h100-sxm5-80gb, the config's GPU is a100-sxm4-80gb: its times would "
                        "price another GPU"));
  // H100 PCIe is an H100 of another memory and clock: both presets, so they differ.
  outcome = Simulate({example, "--set", "cluster.gpu=h100-pcie-80gb", "-q"});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  Json table = *ReadJsonFile(DTSIM_EXAMPLES_DIR "/profiles/h100-sxm5-80gb.json");
  for (const auto& [gpu, ok] : std::vector<std::pair<std::string, bool>>{
           {"NVIDIA H100 80GB HBM3", true}, {"unknown", true}, {"NVIDIA A100-PG509-200", false}}) {
    table["gpu"] = gpu;
    const std::string path = Path("table.json");
    ForgetInputFiles();  // the last run read it
    ASSERT_TRUE(WriteFileAtomically(path, table.dump()).ok());
    outcome = Simulate({example, "--set", "profile=" + path, "-q"});
    EXPECT_EQ(outcome.kind == CommandOutcome::Kind::kOk, ok) << gpu;
  }
}

TEST_F(SimulateCommandTest, SummaryShowsOnlyThePlanTheModelHas) {
  // A ResNet trains data parallel only: no tensor or pipeline sizes, no schedule.
  ASSERT_EQ(Simulate({DTSIM_EXAMPLES_DIR "/resnet50_256gpu.json"}).kind, CommandOutcome::Kind::kOk);
  EXPECT_THAT(output_.str(),
              HasSubstr("plan           DP 256 (data parallel), 1 micro-batch of 128, "
                        "ZeRO 0\n"));
  // One pipeline stage: no schedule; uneven stages: the split.
  ASSERT_EQ(
      Simulate({kSmall, "--set", "parallelism.pipeline.size=1", "--set", "parallelism.data=4"})
          .kind,
      CommandOutcome::Kind::kOk);
  EXPECT_THAT(output_.str(), HasSubstr("DP 4 × TP 4 (SP) × PP 1, 4 micro-batches of 4"));
  // Activation offloading is said after the recompute policy.
  ASSERT_EQ(Simulate({kSmall, "--set", "parallelism.pipeline.size=1", "--set", "parallelism.data=4",
                      "--set", "training.recompute=none", "--set",
                      "training.activation_offload_layers=6"})
                .kind,
            CommandOutcome::Kind::kOk);
  EXPECT_THAT(output_.str(), HasSubstr("recompute none, 6 layers' activations offloaded"));
  ASSERT_EQ(Simulate({kSmall, "--set", "parallelism.pipeline.layers=[10,14]"}).kind,
            CommandOutcome::Kind::kOk);
  EXPECT_THAT(output_.str(), HasSubstr("stage layers   10, 14 (as given)"));
}

TEST_F(SimulateCommandTest, OverridesAndErrors) {
  const CommandOutcome what_if =
      Simulate({kSmall, "--set", "parallelism.pipeline.schedule=gpipe", "--quiet"});
  EXPECT_EQ(what_if.kind, CommandOutcome::Kind::kOk) << what_if.error->ToString();
  const CommandOutcome bad = Simulate({kSmall, "--set", "parallelism.data=3"});
  ASSERT_EQ(bad.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(bad.error->ToString(), HasSubstr("gpt3_1.3b_16gpu.json"));
  EXPECT_THAT(bad.error->ToString(), HasSubstr("training.global_batch"));
  EXPECT_EQ(Simulate({}).kind, CommandOutcome::Kind::kUsage);
  EXPECT_EQ(Simulate({kSmall, "--set", "nonsense"}).kind, CommandOutcome::Kind::kFailure);
  EXPECT_EQ(Simulate({Path("missing.json")}).kind, CommandOutcome::Kind::kFailure);
}

// Issue 35: the weak errors a new user met, each now with a message that names the fix.
TEST_F(SimulateCommandTest, OrdinaryMistakesGetMessagesThatNameTheFix) {
  const auto error = [this](std::vector<std::string> args) {
    const CommandOutcome outcome = Simulate(std::move(args));
    EXPECT_NE(outcome.kind, CommandOutcome::Kind::kOk);
    return outcome.error ? outcome.error->ToString() : std::string();
  };
  // A space where "=" belongs ("too many positional options" before).
  EXPECT_EQ(error({kSmall, "--set", "parallelism.data", "8"}),
            "--set takes KEY=VALUE in one argument: write --set parallelism.data=8");
  // A result handed back as a config ("model: missing required section" before).
  const std::string result = Path("result.json");
  ASSERT_EQ(Simulate({kSmall, "-o", result, "--quiet"}).kind, CommandOutcome::Kind::kOk);
  EXPECT_THAT(error({result}), HasSubstr("format: this is a file dtsim wrote, not a config; it "
                                         "came from the config \"" +
                                         kSmall + "\""));
  // A GPU named by its family lists the presets it begins (none suggested before).
  EXPECT_THAT(error({kSmall, "--set", "cluster.gpu=h100"}),
              HasSubstr("(did you mean \"h100-sxm5-80gb\" or \"h100-pcie-80gb\"?)"));
  // A plan larger than a sized cluster says what would fit (16 GPUs: 2 nodes of 8).
  EXPECT_THAT(error({kSmall, "--set", "cluster.nodes=2", "--set", "parallelism.data=4"}),
              HasSubstr("data × tensor × pipeline = 4 × 4 × 2 = 32 ranks, but the cluster has 16 "
                        "GPUs (2 nodes × 8); set parallelism.data=2, cluster.nodes=4 or "
                        "cluster.nodes=null (sized to the plan)"));
  // An output in a directory that does not exist fails before any work, not after it.
  EXPECT_EQ(error({kSmall, "-o", Path("missing/result.json")}),
            Path("missing/result.json") + ": cannot write here: the directory \"" +
                Path("missing") + "\" does not exist");
  // Interleaving one chunk per stage was accepted and held 1.6 GiB more than 1F1B.
  EXPECT_THAT(error({kSmall, "--set", "parallelism.pipeline.schedule=interleaved"}),
              HasSubstr("parallelism.pipeline.virtual_stages: the \"interleaved\" schedule "
                        "interleaves model chunks, so it needs virtual_stages of at least 2"));
}

// A gzip-compressed config reads like the plain one (detected by content, not by name), and a
// timeline named *.gz is written compressed (issue 35: it was plain JSON under a .gz name).
TEST_F(SimulateCommandTest, CompressedConfigsAndTimelines) {
  const std::string plain = Path("plain.json");
  const std::string zipped = Path("config.json.gz");
  const std::string timeline = Path("t.json.gz");
  ASSERT_TRUE(WriteFileAtomically(zipped, *ReadFile(kSmall)).ok());
  ASSERT_TRUE(LooksGzipped(*ReadFile(zipped)));
  ForgetInputFiles();
  ASSERT_EQ(Simulate({kSmall, "-o", plain, "--quiet"}).kind, CommandOutcome::Kind::kOk);
  const CommandOutcome outcome =
      Simulate({zipped, "-o", Path("from_gz.json"), "--timeline", timeline, "--quiet"});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_EQ((*ReadJsonFile(Path("from_gz.json")))["iteration_time_ns"],
            (*ReadJsonFile(plain))["iteration_time_ns"]);
  EXPECT_TRUE(LooksGzipped(*ReadFile(timeline)));
  Expected<Json> events = ReadJsonFile(timeline);
  ASSERT_TRUE(events.ok()) << events.error().ToString();
  EXPECT_TRUE(events->contains("traceEvents"));
}

// Issue 35: a symmetric timeline declared every rank of the cluster (121 processes, 2 with
// events); `--timeline-ranks` and `--timeline-window` choose what goes in.
TEST_F(SimulateCommandTest, TimelinesHoldTheRanksAndTheSpanAsked) {
  const std::string llama = DTSIM_EXAMPLES_DIR "/llama2_70b_64h100.json";  // symmetric ranks
  const auto processes = [](const Json& timeline) {
    std::set<int> declared, busy;
    for (const Json& event : timeline["traceEvents"]) {
      if (event.value("name", "") == "process_name") declared.insert(event["pid"].get<int>());
      if (event.value("ph", "") == "X") busy.insert(event["pid"].get<int>());
    }
    return std::pair(declared, busy);
  };
  ASSERT_EQ(Simulate({llama, "--timeline", Path("all.json"), "-q"}).kind,
            CommandOutcome::Kind::kOk);
  const auto [declared, busy] = processes(*ReadJsonFile(Path("all.json")));
  EXPECT_EQ(declared, busy);  // only the simulated ranks: one per pipeline stage
  EXPECT_LT(declared.size(), 64u);
  ASSERT_GE(busy.size(), 2u);

  const int first = *busy.begin();
  ForgetInputFiles();
  ASSERT_EQ(Simulate({llama, "--timeline", Path("one.json"), "--timeline-ranks",
                      std::to_string(first), "--timeline-window", "100 ms:300 ms", "-q"})
                .kind,
            CommandOutcome::Kind::kOk);
  const Json one = *ReadJsonFile(Path("one.json"));
  EXPECT_EQ(processes(one).first, std::set<int>{first});
  size_t slices = 0;
  for (const Json& event : one["traceEvents"]) {
    if (event.value("ph", "") != "X") continue;
    ++slices;
    const double start = event["ts"].get<double>();  // µs
    EXPECT_LE(start, 300000.0);
    EXPECT_GE(start + event["dur"].get<double>(), 100000.0);
  }
  EXPECT_GT(slices, 0u);

  const CommandOutcome bad =
      Simulate({llama, "--timeline", Path("x.json"), "--timeline-ranks", "3-1"});
  ASSERT_EQ(bad.kind, CommandOutcome::Kind::kFailure);
  EXPECT_EQ(bad.error->ToString(),
            "--timeline-ranks: expected ranks and ranges of ranks, \"0-7,64\", got \"3-1\"");
  const CommandOutcome window =
      Simulate({llama, "--timeline", Path("x.json"), "--timeline-window", "2 s:1 s"});
  ASSERT_EQ(window.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(window.error->ToString(), HasSubstr("END must be after START"));

  // Selections that chose nothing wrote an empty timeline (or none) and exited 0; each fails
  // before any output is written.
  const auto error = [&](std::vector<std::string> args) {
    ForgetInputFiles();
    args.insert(args.begin(), llama);
    args.insert(args.end(), {"-o", Path("r.json"), "-q"});
    const CommandOutcome outcome = Simulate(args);
    EXPECT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
    EXPECT_FALSE(std::filesystem::exists(Path("r.json")));
    return outcome.error ? outcome.error->ToString() : std::string();
  };
  EXPECT_EQ(error({"--timeline", Path("x.json"), "--timeline-ranks", "64"}),
            "--timeline-ranks: no rank 64 in this run: it has ranks 0 to 63");
  const int idle = first + 1;  // in the first stage, whose class the simulation runs as `first`
  ASSERT_EQ(busy.count(idle), 0u);
  EXPECT_THAT(error({"--timeline", Path("x.json"), "--timeline-ranks", std::to_string(idle)}),
              HasSubstr("none of these ranks ran a task in this simulation; those that did: " +
                        std::to_string(first) + ", "));
  EXPECT_THAT(error({"--timeline", Path("x.json"), "--timeline-window", "1000 s:1001 s"}),
              HasSubstr("--timeline-window: the window starts at or after the last task ends"));
  EXPECT_EQ(error({"--timeline-ranks", "0"}),
            "--timeline-ranks: selects what goes into the timeline, and no timeline is written: "
            "add --timeline FILE, got \"0\"");
  EXPECT_FALSE(std::filesystem::exists(Path("x.json")));
}

// Regression (issue 26): `dtsim simulate same.json -o same.json` replaced the config with the
// result. Every output that resolves to an input is refused before any work, the config and a
// profile it names included, and nothing is written.
TEST_F(SimulateCommandTest, AnOutputOverAnInputIsRefusedAndTheInputKept) {
  const std::string config = Path("same.json");
  const std::string text = *ReadFile(kSmall);
  ASSERT_TRUE(WriteFileAtomically(config, text).ok());
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{config, "-o", config},
        std::vector<std::string>{config, "--timeline",
                                 dir_.string() + "/../" + dir_.filename().string() + "/same.json"},
        std::vector<std::string>{config, "--op-list", config}}) {
    const CommandOutcome outcome = Simulate(args);
    ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure) << args[2];
    EXPECT_THAT(outcome.error->ToString(),
                HasSubstr("refusing to write an output over an input of this command"));
    EXPECT_EQ(*ReadFile(config), text);
  }
  const std::string profile = DTSIM_EXAMPLES_DIR "/profiles/h100-sxm5-80gb.json";
  const std::string copy = Path("profile.json");
  ASSERT_TRUE(WriteFileAtomically(copy, *ReadFile(profile)).ok());
  const CommandOutcome over_profile =
      Simulate({DTSIM_EXAMPLES_DIR "/llama2_70b_64h100.json", "--set", "profile=" + copy, "--set",
                "simulation.ranks=symmetric", "-o", copy, "--quiet"});
  ASSERT_EQ(over_profile.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(over_profile.error->ToString(), HasSubstr(copy + ": refusing to write"));
  EXPECT_EQ(*ReadFile(copy), *ReadFile(profile));
}

// Regression (issue 26): a config of 100,000 nested arrays crashed with a stack overflow.
TEST_F(SimulateCommandTest, ADeeplyNestedConfigIsAnError) {
  const std::string config = Path("deep.json");
  ASSERT_TRUE(
      WriteFileAtomically(config, std::string(100000, '[') + std::string(100000, ']')).ok());
  const CommandOutcome outcome = Simulate({config});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_EQ(outcome.error->ToString(),
            config + ": line 1, column 257: JSON nested deeper than 256 levels");
  const CommandOutcome set = Simulate({kSmall, "--set", "model.layers=" + std::string(300, '[')});
  ASSERT_EQ(set.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(set.error->ToString(), HasSubstr("nests deeper than 256 levels"));
}

// Issue 26: a config that asks for 10⁹ GPUs or 10¹² tokens fails in well under a second with a
// message, before anything is built (not by the kernel's OOM killer).
TEST_F(SimulateCommandTest, AbsurdSizesFailFastWithAMessage) {
  const auto timed = [this](std::vector<std::string> args) {
    const auto start = std::chrono::steady_clock::now();
    const CommandOutcome outcome = Simulate(std::move(args));
    const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
    EXPECT_LT(seconds.count(), 1.0);
    EXPECT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
    return outcome.error.has_value() ? outcome.error->ToString() : std::string();
  };
  // 10⁹ GPUs: 125,000,000 nodes of 8, or a plan of 15,625,000 × 8 × 8 ranks.
  EXPECT_THAT(timed({kSmall, "--set", "cluster.nodes=125000000"}),
              HasSubstr("cluster.nodes: must be in [1, 1048576], got 125000000"));
  EXPECT_THAT(timed({kSmall, "--set", "parallelism.data=15625000", "--set", "parallelism.tensor=8",
                     "--set", "parallelism.pipeline=8", "--set", "training.global_batch=62500000",
                     "--set", "cluster.nodes=null"}),
              HasSubstr("parallelism: data × tensor × pipeline = 15625000 × 8 × 8 is more than "
                        "the 16777216 ranks dtsim simulates, got 1000000000"));
  // 10¹² tokens an iteration: 1,953,125,000 sequences of 512 (2³·5¹² × 2⁹), 244,140,625
  // micro-batches of 4 on each of 2 replicas; and one sequence of 10¹² tokens.
  const std::vector<std::string> tokens = {kSmall, "--set", "training.global_batch=1953125000",
                                           "--set", "training.seq_len=512"};
  EXPECT_THAT(timed(tokens), HasSubstr("16 simulated ranks × 244140625 micro-batches"));
  std::vector<std::string> symmetric = tokens;
  symmetric.insert(symmetric.end(), {"--set", "simulation.ranks=\"symmetric\""});
  EXPECT_THAT(timed(symmetric), HasSubstr("2 simulated ranks × 244140625 micro-batches"));
  EXPECT_THAT(timed({kSmall, "--set", "training.seq_len=1000000000000"}),
              HasSubstr("training.seq_len: too large: at most 16777216, got 1000000000000"));
  // --max-memory is simulation.max_memory.
  EXPECT_THAT(timed({kSmall, "--max-memory", "100 KiB"}),
              HasSubstr("over the 9.54e-05 GiB allowed (--max-memory)"));
  EXPECT_THAT(timed({kSmall, "--max-memory", "0 GiB"}),
              HasSubstr("simulation.max_memory: must be more than zero"));
  // Both set it: --max-memory won silently over the --set.
  EXPECT_EQ(timed({kSmall, "--set", "simulation.max_memory=\"1 GiB\"", "--max-memory", "2 GiB"}),
            "--max-memory: sets simulation.max_memory, and so does --set "
            "simulation.max_memory=\"1 GiB\": give one of the two, got \"2 GiB\"");
}

TEST_F(SimulateCommandTest, CompressionPhasesAndWarningsReachTheSummaryAndTheResult) {
  const std::string onebit = DTSIM_EXAMPLES_DIR "/bert_large_64gpu_ethernet_onebit_adam.json";
  ASSERT_EQ(Simulate({onebit, "-o", Path("onebit.json")}).kind, CommandOutcome::Kind::kOk);
  EXPECT_THAT(output_.str(), HasSubstr("(compressed phase)"));
  EXPECT_THAT(output_.str(), HasSubstr("compression    onebit_adam; warmup 23000 steps × "));
  const Json result = *ReadJsonFile(Path("onebit.json"));
  ASSERT_EQ(result["compression"]["phases"].size(), 2u);
  EXPECT_EQ(result["compression"]["phases"][0]["phase"], "warmup");
  EXPECT_EQ(result["compression"]["phases"][1]["steps"], 152000 - 23000);
  EXPECT_EQ(result["compression"]["phases"][1]["iteration_time_ns"], result["iteration_time_ns"]);
  // Symmetric ranks with skewed routing: the warning is printed and written.
  const std::string mixtral = DTSIM_EXAMPLES_DIR "/mixtral_8x7b_ep8_64h100.json";
  ASSERT_EQ(Simulate({mixtral, "--set", "simulation.ranks=symmetric", "--set",
                      "parallelism.expert.imbalance=2", "-o", Path("mixtral.json")})
                .kind,
            CommandOutcome::Kind::kOk);
  EXPECT_THAT(output_.str(), HasSubstr("warning: symmetric ranks simulate balanced routing"));
  EXPECT_EQ((*ReadJsonFile(Path("mixtral.json")))["warnings"].size(), 1u);
  // An unknown method lists the registered ones, naming the file.
  const CommandOutcome bad = Simulate({onebit, "--set", "compression.method=1bit"});
  ASSERT_EQ(bad.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(bad.error->ToString(), HasSubstr("bert_large_64gpu_ethernet_onebit_adam.json"));
  EXPECT_THAT(bad.error->ToString(), HasSubstr("registered: \"none\", \"fp16\""));
}

// A DiLoCo job (docs/diloco.md): the summary names the replicas, the outer synchronization and
// its state, the result file has them, and the run's average is the one the readers take.
TEST_F(SimulateCommandTest, DilocoReachesTheSummaryAndTheResult) {
  const std::string example = DTSIM_EXAMPLES_DIR "/llama3_70b_diloco_4sites_1024h100.json";
  CommandOutcome outcome = Simulate({example, "-o", Path("diloco.json")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_THAT(output_.str(), HasSubstr("(one replica's inner step)"));
  EXPECT_THAT(output_.str(), HasSubstr("diloco         4 replicas of 256 GPUs; each of 1 fragment "
                                       "synchronized every 100 steps"));
  EXPECT_THAT(output_.str(), HasSubstr("(across sites)"));
  EXPECT_THAT(output_.str(), HasSubstr("the fp32 outer copy in host memory"));
  const Json result = *ReadJsonFile(Path("diloco.json"));
  const Json& diloco = result["diloco"];
  EXPECT_EQ(diloco["replicas"], 4);
  EXPECT_EQ(diloco["replica_gpus"], 256);
  EXPECT_EQ(diloco["across_sites"], true);
  EXPECT_EQ(diloco["inner_step_ns"], result["iteration_time_ns"]);
  EXPECT_EQ(diloco["average_step_ns"], result["compression"]["average_iteration_time_ns"]);
  EXPECT_EQ(diloco["synchronization_ns"].get<int64_t>(),
            diloco["copies_ns"].get<int64_t>() + diloco["all_reduce_ns"].get<int64_t>() +
                diloco["update_ns"].get<int64_t>() + diloco["all_gather_ns"].get<int64_t>());
  // The whole job's 2,048 sequences over the inner step, as for any iteration; the summary adds
  // the run average's.
  EXPECT_NEAR(result["samples_per_second"].get<double>(),
              2048 / (diloco["inner_step_ns"].get<double>() * 1e-9), 1e-9);
  EXPECT_THAT(output_.str(), HasSubstr("(inner step; over the run average "));
  // Without the section the same plan runs synchronously, and the result has no "diloco".
  outcome = Simulate({example, "--set", "diloco=null", "-o", Path("sync.json"), "--quiet"});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  EXPECT_FALSE((*ReadJsonFile(Path("sync.json"))).contains("diloco"));
}

// The result's input says when Megatron-Core's expert all-to-all overlap ran (the shipped
// DeepSeek-V3 example sets it), and says nothing of it otherwise.
TEST_F(SimulateCommandTest, TheResultRecordsTheExpertOverlap) {
  const std::string example = DTSIM_EXAMPLES_DIR "/deepseek_v3_1024h100.json";
  CommandOutcome outcome = Simulate({example, "-o", Path("overlap.json"), "--quiet"});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  const Json overlap = *ReadJsonFile(Path("overlap.json"));
  EXPECT_EQ(overlap["input"]["plan"]["expert_overlap"], true);
  EXPECT_EQ(overlap["input"]["plan"]["expert_delay_wgrad"], true);
  outcome = Simulate({example, "--set", R"(parallelism.expert={"size": 64, "tensor": 1})", "-o",
                      Path("plain.json"), "--quiet"});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  const Json plain = *ReadJsonFile(Path("plain.json"));
  EXPECT_FALSE(plain["input"]["plan"].contains("expert_overlap"));
  EXPECT_FALSE(plain["input"]["plan"].contains("expert_delay_wgrad"));
  EXPECT_LT(overlap["iteration_time_ns"].get<int64_t>(), plain["iteration_time_ns"].get<int64_t>());
}

}  // namespace
}  // namespace dtsim::cli

namespace dtsim::cli {
namespace {

// "model": {"hf_config": …}: the Hugging Face config relative to the config file, the section's
// other keys overriding its fields; its errors name the file and the field.
TEST_F(SimulateCommandTest, ModelFromAHuggingFaceConfig) {
  std::filesystem::create_directory(Path("hf"));
  ASSERT_TRUE(WriteFileAtomically(Path("hf/config.json"), R"({"model_type": "llama",
    "hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 8,
    "num_attention_heads": 16, "num_key_value_heads": 4, "vocab_size": 32000,
    "max_position_embeddings": 2048, "hidden_act": "silu", "tie_word_embeddings": false})")
                  .ok());
  const std::string config = R"({"model": {"hf_config": "hf/config.json", "layers": 4},
    "training": {"global_batch": 8, "micro_batch": 1, "seq_len": 1024},
    "cluster": {"preset": "dgx-a100", "gpu": "a100-sxm4-80gb"},
    "parallelism": {"data": 2, "tensor": 2}})";
  ASSERT_TRUE(WriteFileAtomically(Path("run.json"), config).ok());
  CommandOutcome outcome = Simulate({Path("run.json"), "-o", Path("result.json")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kOk) << outcome.error->ToString();
  const Json result = *ReadJsonFile(Path("result.json"));
  EXPECT_EQ(result["input"]["plan"]["tensor"], 2);
  EXPECT_THAT(output_.str(), HasSubstr("DP 2 × TP 2"));
  ForgetInputFiles();  // the run read hf/config.json: writers refuse it until forgotten
  ASSERT_TRUE(WriteFileAtomically(Path("hf/config.json"), R"({"model_type": "mamba"})").ok());
  outcome = Simulate({Path("run.json")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(),
              HasSubstr("hf/config.json: model_type: a model type dtsim does not read"));
  std::filesystem::remove(Path("hf/config.json"));
  outcome = Simulate({Path("run.json")});
  ASSERT_EQ(outcome.kind, CommandOutcome::Kind::kFailure);
  EXPECT_THAT(outcome.error->ToString(), HasSubstr("model.hf_config"));
}

}  // namespace
}  // namespace dtsim::cli
