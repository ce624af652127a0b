// Every result family: written by its writer, read back by its reader, the figures unchanged;
// and the list of formats kept equal to docs/formats/README.md.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <sstream>

#include "strategies/simulate.h"
#include "tests/testing/temp_dir.h"
#include "tests/traces/chakra_test_traces.h"
#include "tools/results/op_list.h"
#include "tools/results/replay_result.h"
#include "tools/results/result_file.h"
#include "tools/results/run_result.h"
#include "tools/results/simulate_result.h"
#include "tools/results/sweep_result.h"
#include "tools/results/validation_report.h"
#include "traces/kineto_reader.h"
#include "traces/op_cost_table.h"

namespace dtsim::results {
namespace {

const std::string kSmall = DTSIM_EXAMPLES_DIR "/gpt3_1.3b_16gpu.json";

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(WrittenFormatsTest, EachHasAPageAndTheIndexListsThemAll) {
  std::set<std::string_view> names;
  std::vector<std::string> expected_rows;
  for (const WrittenFormat& written : WrittenFormats()) {
    const FileFormat& format = *written.format;
    EXPECT_TRUE(names.insert(format.name).second) << format.name << " listed twice";
    EXPECT_TRUE(format.name.starts_with("dtsim.")) << format.name;
    const std::string page = DTSIM_SOURCE_DIR "/docs/formats/" + std::string(written.page) + ".md";
    const std::string text = ReadText(page);
    EXPECT_NE(text.find(format.name), std::string::npos) << page << " does not name it";
    EXPECT_NE(text.find(format.Version()), std::string::npos) << page << " lacks its version";
    expected_rows.push_back(
        fmt::format("{} {} {}.md", format.name, format.Version(), written.page));
  }
  // The index's table: | `NAME` | VERSION | PAGE | ... in the same order. (Read by hand:
  // std::regex trips gcc 12's -Wmaybe-uninitialized under the sanitizers.)
  std::istringstream index(ReadText(DTSIM_SOURCE_DIR "/docs/formats/README.md"));
  std::vector<std::string> rows;
  for (std::string line; std::getline(index, line);) {
    if (!line.starts_with("| `dtsim.")) continue;
    std::vector<std::string> cells;
    std::istringstream row(line.substr(1));
    for (std::string cell; std::getline(row, cell, '|');) {
      const size_t first = cell.find_first_not_of(" `");
      const size_t last = cell.find_last_not_of(" `");
      cells.push_back(first == std::string::npos ? "" : cell.substr(first, last - first + 1));
    }
    ASSERT_GE(cells.size(), 3u) << line;
    rows.push_back(fmt::format("{} {} {}", cells[0], cells[1], cells[2]));
  }
  EXPECT_EQ(rows, expected_rows);
}

class ResultFilesTest : public testing_support::TempDirTest {
 protected:
  // Writes `document`, reads it back as `format`: the JSON that comes back. Each in a file of
  // its own: a file once read is an input, which no write may replace.
  Json RoundTrip(const OrderedJson& document, const FileFormat& format) {
    const std::string path = Path(fmt::format("result{}.json", ++files_));
    EXPECT_TRUE(WriteResultFile(path, document).ok());
    Expected<Json> read = ReadResultFile(path, format);
    EXPECT_TRUE(read.ok()) << read.error().ToString();
    return read.ok() ? *read : Json();
  }
  int files_ = 0;
};

TEST_F(ResultFilesTest, SimulateResult) {
  Expected<strategies::ResolvedConfig> config = strategies::LoadConfig(kSmall, {});
  ASSERT_TRUE(config.ok()) << config.error().ToString();
  Expected<strategies::SimulationResult> result = strategies::Simulate(*config);
  ASSERT_TRUE(result.ok()) << result.error().ToString();
  const Json json = RoundTrip(SimulateResultJson(*config, *result), kSimulateResultFormat);
  EXPECT_EQ(json["version"], "1.12");
  // Every distinct communication, costliest first, with how the analytical model ran it. The
  // pipeline sends of 8 MiB go from node 0 to node 1 of the DGX A100s (stage 0 is ranks 0–7):
  // a 2-rank communicator across nodes, 200 Gb/s NICs give a network peer ⌈25 / 14⌉ = 2
  // channels (network/nccl_p2p.h), 2 × 14 GB/s × 0.96 = 26.9 GB/s, so the NIC's 24 GB/s binds,
  // in NCCL's 128 KiB network messages that keep 0.9117629 of it (NetMessageEfficiency):
  // 8.4 us + 5 us + 8,388,608 B / 21.882 GB/s (383,352 ns rounded up) = 396,752 ns.
  ASSERT_TRUE(json["collectives"].is_array());
  ASSERT_FALSE(json["collectives"].empty());
  int64_t previous = std::numeric_limits<int64_t>::max();
  bool saw_send = false;
  for (const Json& entry : json["collectives"]) {
    EXPECT_LE(entry["total_ns"].get<int64_t>(), previous);
    previous = entry["total_ns"].get<int64_t>();
    if (entry["op"] != "send_recv") continue;
    saw_send = true;
    EXPECT_EQ(entry["method"], "direct on 2 channels");
    EXPECT_EQ(entry["size_bytes"], 8388608);
    EXPECT_EQ(entry["group_size"], 2);
    EXPECT_EQ(entry["longest_ns"], 396752);
  }
  EXPECT_TRUE(saw_send);
  Expected<SimulateResultRecord> read = SimulateResultFromJson(json);
  ASSERT_TRUE(read.ok()) << read.error().ToString();
  EXPECT_EQ(read->config, kSmall);
  EXPECT_EQ(read->model, "gpt3-1.3b");
  EXPECT_EQ(read->nodes * read->gpus_per_node, 16);
  EXPECT_EQ(read->iteration_time, result->iteration_time);
  EXPECT_EQ(read->average_iteration_time, result->average_iteration_time);
  EXPECT_EQ(read->samples_per_second, result->samples_per_second);
  EXPECT_EQ(read->mfu, result->mfu);
  EXPECT_EQ(read->hfu, result->hfu);
  EXPECT_EQ(read->fingerprint, result->summary.fingerprint);
  ASSERT_EQ(read->stage_times.size(), result->stages.size());
  for (size_t i = 0; i < result->stages.size(); ++i) {
    const strategies::TimeBreakdown& want = result->stages[i];
    const strategies::TimeBreakdown& got = read->stage_times[i];
    EXPECT_EQ(got.rank, want.rank);
    EXPECT_EQ(got.compute, want.compute);
    EXPECT_EQ(got.tensor, want.tensor);
    EXPECT_EQ(got.pipeline, want.pipeline);
    EXPECT_EQ(got.data_exposed, want.data_exposed);
    EXPECT_EQ(got.idle, want.idle);
    EXPECT_EQ(read->stage_memory[i].total(), result->iteration->stats.stage_memory[i].total());
  }
  EXPECT_EQ(read->warnings, result->warnings);
  EXPECT_FALSE(json.contains("time_to_train"));
  EXPECT_FALSE(read->time_to_train_s);

  // With a time_to_train section (1.11): the run's wall clock comes back.
  Expected<strategies::ResolvedConfig> run = strategies::LoadConfig(
      kSmall, {"time_to_train.tokens=1e9", "time_to_train.reliability.restart=\"5 min\"",
               "time_to_train.reliability.checkpoint_write=\"10 GB/s\""});
  ASSERT_TRUE(run.ok()) << run.error().ToString();
  Expected<strategies::SimulationResult> simulated = strategies::Simulate(*run);
  ASSERT_TRUE(simulated.ok()) << simulated.error().ToString();
  ASSERT_TRUE(simulated->time_to_train);
  const Json with_run = RoundTrip(SimulateResultJson(*run, *simulated), kSimulateResultFormat);
  EXPECT_EQ(with_run["time_to_train"]["iterations"], simulated->time_to_train->budget.iterations);
  EXPECT_TRUE(with_run["time_to_train"]["reliability"].is_object());
  Expected<SimulateResultRecord> read_run = SimulateResultFromJson(with_run);
  ASSERT_TRUE(read_run.ok()) << read_run.error().ToString();
  ASSERT_TRUE(read_run->time_to_train_s);
  EXPECT_DOUBLE_EQ(*read_run->time_to_train_s, simulated->time_to_train->wall_s);

  // The op list of the same plan.
  Expected<std::vector<models::RecordingCostModel::Recorded>> ops = strategies::PricedOps(*config);
  ASSERT_TRUE(ops.ok());
  Expected<OpListRecord> list = OpListFromJson(RoundTrip(OpListJson(*config, *ops), kOpListFormat));
  ASSERT_TRUE(list.ok()) << list.error().ToString();
  EXPECT_EQ(list->gpu, "a100-sxm4-80gb");
  ASSERT_EQ(list->ops.size(), ops->size());
  for (size_t i = 0; i < ops->size(); ++i) {
    EXPECT_EQ(list->ops[i].signature.Key(), (*ops)[i].signature.Key());
    EXPECT_EQ(list->ops[i].count, (*ops)[i].count);
    EXPECT_EQ(list->ops[i].example, (*ops)[i].example);
  }

  // A sweep of two points, one simulated and one failed.
  int64_t memory_bytes = 0;
  for (const models::MemoryBreakdown& stage : result->iteration->stats.stage_memory) {
    memory_bytes = std::max(memory_bytes, stage.total());
  }
  SweepDocument sweep{.config = kSmall, .set = {"training.micro_batch=4"}};
  sweep.axes.push_back({.key = "parallelism.data", .texts = {"2", "3"}, .values = {2, 3}});
  sweep.points.push_back({.choice = {0},
                          .result = SimulateResultJson(*config, *result),
                          .figures = strategies::FiguresOf(*result),
                          .memory_bytes = memory_bytes});
  sweep.points.push_back({.choice = {1}, .error = "c.json: parallelism: 3 does not divide 16"});
  ASSERT_TRUE(WriteSweepFiles(Path("sweep"), sweep).ok());
  Expected<Json> sweep_json = ReadResultFile(Path("sweep.json"), kSweepFormat);
  ASSERT_TRUE(sweep_json.ok()) << sweep_json.error().ToString();
  Expected<SweepRecord> sweep_read = SweepFromJson(*sweep_json);
  ASSERT_TRUE(sweep_read.ok()) << sweep_read.error().ToString();
  EXPECT_EQ(sweep_read->keys, std::vector<std::string>{"parallelism.data"});
  ASSERT_EQ(sweep_read->points.size(), 2u);
  ASSERT_TRUE(sweep_read->points[0].result.has_value());
  EXPECT_EQ(sweep_read->points[0].result->iteration_time, result->iteration_time);
  EXPECT_EQ(sweep_read->points[0].values["parallelism.data"], 2);
  EXPECT_FALSE(sweep_read->points[1].result.has_value());
  EXPECT_EQ(sweep_read->points[1].error, "c.json: parallelism: 3 does not divide 16");
  // The CSV: a header and a row per point; the failed one carries its error.
  const std::string csv = ReadText(Path("sweep.csv"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
  EXPECT_NE(csv.find("3,failed,,,,,,,,,,,,,,,,,c.json: parallelism: 3 does not divide 16\n"),
            std::string::npos)
      << csv;
}

// The optional sections `dtsim report` shows (tools/report/report.py) are of their written
// shape when present, and a sweep point names its value on every axis: what the readers accept,
// the report draws. Each case below once passed the readers and gave a traceback in the report's
// script (found by tools/dev/report_fuzz.py).
TEST_F(ResultFilesTest, ReadersCheckWhatTheReportShows) {
  Expected<strategies::ResolvedConfig> config = strategies::LoadConfig(kSmall, {});
  ASSERT_TRUE(config.ok()) << config.error().ToString();
  Expected<strategies::SimulationResult> result = strategies::Simulate(*config);
  ASSERT_TRUE(result.ok()) << result.error().ToString();
  const Json good = Json::parse(SimulateResultJson(*config, *result).dump());
  ASSERT_TRUE(SimulateResultFromJson(good).ok());
  const auto read_edited = [&](const std::function<void(Json&)>& edit) {
    Json copy = good;
    edit(copy);
    Expected<SimulateResultRecord> read = SimulateResultFromJson(copy);
    return read.ok() ? std::string("accepted") : read.error().ToString();
  };
  EXPECT_EQ(read_edited([](Json& j) { j["provenance"] = "x"; }),
            "provenance: expected a JSON object, got \"x\"");
  EXPECT_EQ(read_edited([](Json& j) {
              j["provenance"] = {{"resolved", {{"cluster", 4}}}};
            }),
            "provenance.resolved.cluster: expected a JSON object, got 4");
  EXPECT_EQ(read_edited([](Json& j) { j["stages"][0]["memory"]["capacity_bytes"] = ""; }),
            "stages[0].memory.capacity_bytes: expected an integer, got \"\"");
  EXPECT_EQ(read_edited([](Json& j) {
              j["input"]["calibration"] = {{"source", 1}};
            }),
            "input.calibration.source: expected a string, got 1");
  EXPECT_EQ(read_edited([](Json& j) { j["error_band"] = Json::object(); }),
            "error_band.mape_percent: missing required field");
  EXPECT_EQ(read_edited([](Json& j) { j["input"]["gpus_per_node"] = 0; }),
            "input.gpus_per_node: must be in [1, 2147483647], got 0");
  EXPECT_EQ(read_edited([](Json& j) { j["input"]["plan"]["zero_stage"] = 4; }),
            "input.plan.zero_stage: must be in [0, 3], got 4");
  // Absent, each is fine: files older than the sections.
  EXPECT_EQ(read_edited([](Json& j) {
              j.erase("provenance");
              j["stages"][0]["memory"].erase("capacity_bytes");
            }),
            "accepted");

  Json sweep = {
      {"format", "dtsim.sweep"},
      {"version", "1.0"},
      {"config", kSmall},
      {"vary", {{{"key", "training.micro_batch"}, {"values", {1}}}}},
      {"points", {{{"values", {{"training.m", 1}}}, {"status", "failed"}, {"error", "x"}}}}};
  Expected<SweepRecord> read = SweepFromJson(sweep);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.error().ToString(),
            "points[0].values: missing the value of a varied key, got \"training.micro_batch\"");
  sweep["points"][0]["values"] = {{"training.micro_batch", 1}};
  EXPECT_TRUE(SweepFromJson(sweep).ok());
}

TEST_F(ResultFilesTest, RunResult) {
  engine::RunSummary summary;
  summary.makespan = TimeNs(3973863);
  summary.events = 41;
  summary.fingerprint = 0x901d1f723e375051;
  summary.tasks = 12;
  summary.ranks = {{.rank = 0, .busy = DurationNs(3000000)}, {.rank = 1}};
  summary.kinds = {{.name = "compute", .tasks = 12, .total = DurationNs(5000000)}};
  const RunContext context{.graph_path = "g.json", .communication_model = {{"name", "fixed"}}};
  const Json json = RoundTrip(RunResultJson(summary, context), kRunResultFormat);
  Expected<RunResultRecord> read = RunResultFromJson(json);
  ASSERT_TRUE(read.ok()) << read.error().ToString();
  EXPECT_EQ(read->graph, "g.json");
  EXPECT_EQ(read->makespan, DurationNs(3973863));
  EXPECT_EQ(read->ranks, 2);
  EXPECT_EQ(read->tasks, 12);
  EXPECT_EQ(read->events, 41);
  EXPECT_EQ(read->fingerprint, 0x901d1f723e375051u);
  EXPECT_EQ(json["simulator"]["fingerprint"], "0x901d1f723e375051");
}

TEST_F(ResultFilesTest, ReplayResultOfAProfilerTrace) {
  Expected<traces::Trace> trace = traces::ReadKinetoTrace(
      DTSIM_TEST_DATA_DIR "/captured/h100_known_kernels_default_kinds.json.gz");
  ASSERT_TRUE(trace.ok()) << trace.error().ToString();
  Expected<traces::ReplayGraph> replay = traces::BuildReplayGraph(*trace);
  ASSERT_TRUE(replay.ok());
  Expected<strategies::ReplayResult> result = strategies::SimulateReplay(*replay);
  ASSERT_TRUE(result.ok());
  strategies::ReplayWhatIf what_if;
  what_if.serialize_gpu_streams = true;
  Expected<strategies::WhatIfResult> changed =
      strategies::SimulateWhatIf(*trace, *replay, *result, what_if);
  ASSERT_TRUE(changed.ok()) << changed.error().ToString();
  const traces::Trace* job[] = {&*trace};
  const Json json =
      RoundTrip(ReplayResultJson(job, *replay, *result, WhatIfOutcome{what_if, *changed}),
                kReplayResultFormat);
  Expected<ReplayResultRecord> read = ReplayResultFromJson(json);
  ASSERT_TRUE(read.ok()) << read.error().ToString();
  EXPECT_EQ(read->trace_file, trace->file);
  EXPECT_EQ(read->tasks, replay->graph.task_count());
  EXPECT_DOUBLE_EQ(read->simulated_span_ms,
                   static_cast<double>(result->summary.makespan.ns()) / 1e6);
  ASSERT_EQ(read->steps.size(), result->steps.size());
  for (size_t i = 0; i < result->steps.size(); ++i) {
    EXPECT_EQ(read->steps[i].number, result->steps[i].number);
    EXPECT_DOUBLE_EQ(read->steps[i].measured_ms,
                     static_cast<double>(result->steps[i].measured.ns()) / 1e6);
  }
  ASSERT_TRUE(read->mean_absolute_error.has_value());
  EXPECT_EQ(*read->mean_absolute_error, result->mean_absolute_error);
  ASSERT_TRUE(read->what_if.has_value());
  EXPECT_EQ(read->what_if->description, what_if.Describe());
  EXPECT_DOUBLE_EQ(read->what_if->what_if_span_ms,
                   static_cast<double>(changed->what_if_span.ns()) / 1e6);
  // 1.2: each step's critical path, its parts adding up to the step.
  ASSERT_FALSE(json["steps"].empty());
  for (const Json& step : json["steps"]) {
    double total = 0;
    for (const char* part :
         {"gpu", "communication", "host", "cuda_api", "sync_wait", "fixed_gap", "peer_wait"}) {
      total += step["critical_path_ms"][part].get<double>();
    }
    EXPECT_NEAR(total, step["simulated_ms"].get<double>(), 1e-6);
  }
  const Json& what_if_step = json["what_if"]["steps"].at(0);
  EXPECT_TRUE(what_if_step.contains("replayed_critical_path_ms"));
  EXPECT_TRUE(what_if_step.contains("what_if_critical_path_ms"));
  EXPECT_FALSE(what_if_step["what_if_critical_path_ms"].contains("sped_up"));  // no speedups

  // What `dtsim report` draws and tabulates of a replay is checked on reading (each case once
  // passed the reader and gave a traceback in the report's script: tools/dev/report_fuzz.py).
  const auto read_edited = [&json](const std::function<void(Json&)>& edit) {
    Json copy = json;
    edit(copy);
    Expected<ReplayResultRecord> edited = ReplayResultFromJson(copy);
    return edited.ok() ? std::string("accepted") : edited.error().ToString();
  };
  EXPECT_EQ(read_edited([](Json& j) { j["steps"][0]["critical_path_ms"]["host"] = "x"; }),
            "steps[0].critical_path_ms.host: expected a number of milliseconds, got \"x\"");
  EXPECT_EQ(read_edited([](Json& j) { j["steps"][0]["rank"] = 1e-300; }),
            "steps[0].rank: expected an integer, got 1e-300");
  EXPECT_EQ(read_edited([](Json& j) { j["what_if"]["steps"][0].erase("what_if_ms"); }),
            "what_if.steps[0].what_if_ms: missing required field");
  EXPECT_EQ(read_edited([](Json& j) { j["what_if"]["steps"][0]["why_unmoved"] = true; }),
            "what_if.steps[0].why_unmoved: expected a string, got true");
  EXPECT_EQ(read_edited([](Json& j) {
              j["job"] = {{"traces", 2}};
            }),
            "job.traces: expected an array, got 2");
}

TEST_F(ResultFilesTest, ReplayResultOfAChakraTrace) {
  std::vector<traces::ChakraTrace> ranks;
  for (int64_t rank = 0; rank < 4; ++rank) ranks.push_back(traces::TwoGroupRank(rank));
  Expected<traces::ChakraGraph> chakra = traces::BuildChakraGraph(ranks);
  ASSERT_TRUE(chakra.ok()) << chakra.error().ToString();
  const Json json =
      RoundTrip(ChakraReplayResultJson(ranks[0], *chakra, DurationNs(20000)), kReplayResultFormat);
  Expected<ReplayResultRecord> read = ReplayResultFromJson(json);
  ASSERT_TRUE(read.ok()) << read.error().ToString();
  EXPECT_EQ(read->trace_format, "chakra");
  EXPECT_EQ(read->tasks, chakra->graph.task_count());
  EXPECT_DOUBLE_EQ(read->simulated_span_ms, 0.020);
  EXPECT_TRUE(read->steps.empty());
  EXPECT_FALSE(read->mean_absolute_error.has_value());
  EXPECT_FALSE(read->what_if.has_value());
}

TEST_F(ResultFilesTest, ValidationReport) {
  strategies::ValidationReport report;
  report.rows.push_back({.id = "a",
                         .category = "runs",
                         .metric = "iteration_time",
                         .unit = "s",
                         .measured = 2.0,
                         .predicted = 1.6,
                         .is_time = true,
                         .how = "gpt3-1.3b on 16 GPUs"});
  report.rows.push_back({.id = "b",
                         .category = "runs",
                         .metric = "achieved_tflops_per_gpu",
                         .unit = "TFLOP/s",
                         .measured = 150.0,
                         .predicted = 165.0,
                         .how = "llama"});
  report.unsimulated.push_back({.id = "c", .category = "moe", .reason = "not built"});
  report = strategies::MergeReports({std::move(report)});
  // Errors are speed ratios − 1: a: 2 s measured / 1.6 s predicted − 1 = +25%; b: 165/150 − 1
  // = +10%; MAPE (25 + 10) / 2 = 17.5%.
  EXPECT_DOUBLE_EQ(report.mean_absolute_percentage_error, 17.5);
  ASSERT_EQ(report.categories.size(), 1u);
  EXPECT_EQ(report.categories[0].points, 2);
  EXPECT_DOUBLE_EQ(report.categories[0].mean_error, 17.5);
  // Peak memory rows: one measured (12 GiB predicted over 10 measured − 1 = +20%), one that
  // ran out of memory and is predicted to fit (a wrong verdict).
  std::vector<strategies::MemoryRow> memory_rows;
  memory_rows.push_back({.id = "m",
                         .source = "log",
                         .kind = strategies::MeasuredMemory::kReserved,
                         .measured_bytes = 10.0 * (1 << 30),
                         .predicted_bytes = 12.0 * (1 << 30),
                         .capacity_bytes = 80.0 * (1 << 30)});
  memory_rows.push_back({.id = "oom",
                         .source = "log",
                         .ran = false,
                         .predicted_bytes = 70.0 * (1 << 30),
                         .capacity_bytes = 80.0 * (1 << 30)});
  const strategies::MemoryReport memory = strategies::SummarizeMemory(std::move(memory_rows));
  EXPECT_DOUBLE_EQ(memory.comparable_mape, 20);
  EXPECT_EQ(memory.wrong_verdicts, 1);
  EXPECT_EQ(memory.sources.size(), 1u);
  const Json json = RoundTrip(ValidationReportJson({"points.json", "more.json"}, report, memory),
                              kValidationReportFormat);
  EXPECT_DOUBLE_EQ(json["memory"]["rows"][0]["error"].get<double>(), 0.2);
  EXPECT_FALSE(json["memory"]["rows"][1]["verdict_right"].get<bool>());
  EXPECT_DOUBLE_EQ(json["rows"][0]["error"].get<double>(), 0.25);
  Expected<ValidationReportRecord> read = ValidationReportFromJson(json);
  ASSERT_TRUE(read.ok()) << read.error().ToString();
  EXPECT_EQ(read->points, (std::vector<std::string>{"points.json", "more.json"}));
  ASSERT_EQ(read->rows.size(), 2u);
  EXPECT_EQ(read->rows[1].id, "b");
  EXPECT_EQ(read->rows[1].predicted, 165.0);
  EXPECT_TRUE(read->rows[0].is_time);
  EXPECT_EQ(read->rows[0].category, "runs");
  EXPECT_EQ(read->rows[0].how, "gpt3-1.3b on 16 GPUs");
  ASSERT_EQ(read->unsimulated.size(), 1u);
  EXPECT_EQ(read->unsimulated[0].reason, "not built");
  EXPECT_DOUBLE_EQ(read->mean_absolute_percentage_error, 17.5);
  ASSERT_EQ(read->memory.size(), 2u);
  EXPECT_EQ(read->memory[0].kind, strategies::MeasuredMemory::kReserved);
  EXPECT_FALSE(read->memory[1].ran);
}

TEST_F(ResultFilesTest, ReadingNamesTheFileAndAnotherFormatOrMajor) {
  ASSERT_TRUE(WriteResultFile(Path("run.json"), FormatHeader(kRunResultFormat)).ok());
  Expected<Json> read = ReadResultFile(Path("run.json"), kSweepFormat);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.error().ToString(),
            Path("run.json") +
                ": format: not a sweep result: expected format \"dtsim.sweep\", got "
                "\"dtsim.run_result\"");
  OrderedJson future = FormatHeader(kSweepFormat);
  future["version"] = "2.0";
  ASSERT_TRUE(WriteResultFile(Path("future.json"), future).ok());
  read = ReadResultFile(Path("future.json"), kSweepFormat);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.error().ToString(),
            Path("future.json") +
                ": version: unsupported version of dtsim.sweep (this dtsim reads 1.x), got "
                "\"2.0\"");
}

// Tables written before the one convention carry the integer major: still read.
TEST(OpCostTableVersionTest, ReadsTheOldIntegerVersion) {
  const Json table = Json::parse(R"({"format": "dtsim.op_costs", "version": 1, "gpu": "g",
      "ops": [{"op": "gemm", "dtype": "bf16", "dims": {"m": 8}, "time": "1 us"}]})");
  Expected<traces::OpCostTable> read = traces::OpCostTableFromJson(table);
  ASSERT_TRUE(read.ok()) << read.error().ToString();
  EXPECT_EQ(read->ops().size(), 1u);
  EXPECT_EQ(traces::OpCostTableToJson(*read)["version"], "1.1");
  EXPECT_EQ(traces::OpCostTableToJson(*read)["timing"], "isolated");  // absent: isolated
}

}  // namespace
}  // namespace dtsim::results
