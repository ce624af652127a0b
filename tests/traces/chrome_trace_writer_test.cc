// Checks the timeline against the Chrome trace event format: the fields each phase requires,
// process and thread names in metadata events, microsecond timestamps with ns precision.
#include "traces/chrome_trace_writer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <set>
#include <sstream>

#include "sim/engine/fixed_cost_model.h"
#include "sim/engine/simulator.h"
#include "sim/graph/builder.h"

namespace dtsim::traces {
namespace {

using graph::TaskGraphBuilder;
using graph::TaskKind;
using Json = nlohmann::json;

class ChromeTraceTest : public testing::Test {
 protected:
  void SetUp() override {
    TaskGraphBuilder builder;
    const graph::StreamId s0 = builder.Stream(0, "compute");
    // 1234.567 us: the timestamps must keep every nanosecond.
    const graph::TaskId gemm =
        builder.AddTask(s0, TaskKind::kCompute, "gemm \"qkv\"", "forward", Nanoseconds(1'234'567));
    // Rank 0 holds 1 GiB, 2 GiB more once the GEMM ends (two changes at one time: one point).
    builder.SetMemoryBase(0, int64_t{1} << 30);
    builder.AddMemoryChange(gemm, int64_t{3} << 30);
    builder.AddMemoryChange(gemm, -(int64_t{1} << 30));
    builder.AddSend(builder.Stream(0, "pp"), 1, Bytes(1000), 0, "send act", "pipeline");
    builder.AddRecv(builder.Stream(1, "pp"), 0, 0, "recv act", "pipeline");
    const std::vector<int32_t> group = {0, 1};
    const graph::CommId ar =
        builder.AddCollective(graph::CommKind::kAllReduce, Bytes(1000), group, "grads", "ring");
    builder.AddCollectiveTask(s0, ar, "", "dp");
    builder.AddCollectiveTask(builder.Stream(1, "compute"), ar, "", "dp");
    Expected<graph::TaskGraph> built = std::move(builder).Build();
    ASSERT_TRUE(built.ok());
    graph_.emplace(std::move(built).value());
    engine::FixedCostModel model(Microseconds(1), Bandwidth::BytesPerSecond(kGiga));
    engine::Simulator sim(*graph_, model);
    ASSERT_TRUE(sim.Run().ok());
    std::ostringstream out;
    WriteChromeTrace(out, *graph_, sim.times(), {.source = "test", .communication_model = "fixed"});
    text_ = out.str();
    trace_ = Json::parse(text_);
  }

  std::vector<Json> Events(std::string_view phase) const {
    std::vector<Json> found;
    for (const Json& event : trace_["traceEvents"]) {
      if (event["ph"] == phase) found.push_back(event);
    }
    return found;
  }

  std::optional<graph::TaskGraph> graph_;
  std::string text_;
  Json trace_;
};

TEST_F(ChromeTraceTest, NamesItsFormatFirstAndNoDisplayTimeUnit) {
  EXPECT_EQ(text_.rfind("{\"otherData\":{\"format\":\"dtsim.timeline\",\"version\":\"1.3\"", 0),
            0u);
  EXPECT_FALSE(trace_.contains("displayTimeUnit"));
  ASSERT_TRUE(trace_["traceEvents"].is_array());
}

TEST_F(ChromeTraceTest, EveryEventHasTheRequiredFields) {
  for (const Json& event : trace_["traceEvents"]) {
    for (const char* field : {"name", "ph", "pid", "tid"}) {
      ASSERT_TRUE(event.contains(field)) << field << " missing in " << event.dump();
    }
    EXPECT_TRUE(event["pid"].is_number_integer());
    EXPECT_TRUE(event["tid"].is_number_integer());
    const std::string phase = event["ph"];
    ASSERT_TRUE(phase == "X" || phase == "M" || phase == "s" || phase == "f" || phase == "C")
        << phase;
    if (phase != "M") {
      EXPECT_TRUE(event["ts"].is_number()) << event.dump();
    }
    if (phase == "X") {
      EXPECT_TRUE(event["dur"].is_number());
      EXPECT_GE(event["dur"].get<double>(), 0);
      EXPECT_TRUE(event.contains("cat"));
    }
    if (phase == "s" || phase == "f") {
      EXPECT_TRUE(event.contains("id"));
    }
  }
}

TEST_F(ChromeTraceTest, ProcessesAreRanksAndThreadsAreNamedStreams) {
  std::set<std::pair<int, std::string>> processes;
  std::set<std::tuple<int, int, std::string>> threads;
  for (const Json& event : Events("M")) {
    if (event["name"] == "process_name") processes.emplace(event["pid"], event["args"]["name"]);
    if (event["name"] == "thread_name") {
      threads.emplace(event["pid"], event["tid"], event["args"]["name"]);
    }
  }
  EXPECT_EQ(processes, (std::set<std::pair<int, std::string>>{{0, "rank 0"}, {1, "rank 1"}}));
  // Rank 0 made "compute" then "pp"; rank 1 made "pp" then "compute".
  EXPECT_EQ(threads, (std::set<std::tuple<int, int, std::string>>{
                         {0, 1, "compute"}, {0, 2, "pp"}, {1, 1, "pp"}, {1, 2, "compute"}}));
}

TEST_F(ChromeTraceTest, TimestampsAreMicrosecondsWithNanosecondPrecision) {
  EXPECT_NE(text_.find("\"ts\":0.000,\"dur\":1234.567"), std::string::npos) << text_;
  const std::vector<Json> slices = Events("X");
  const auto gemm = std::find_if(slices.begin(), slices.end(),
                                 [](const Json& e) { return e["name"] == "gemm \"qkv\""; });
  ASSERT_NE(gemm, slices.end());
  EXPECT_DOUBLE_EQ((*gemm)["dur"].get<double>(), 1234.567);
  EXPECT_EQ((*gemm)["cat"], "forward");
}

TEST_F(ChromeTraceTest, CommunicationsShowTheirWaitAndArguments) {
  // Rank 0's all-reduce post arrives at 1234.567 us (after the gemm on its stream); rank 1's,
  // first on its compute stream, at 0. So rank 1 waits from 0 for 1234.567 us.
  const std::vector<Json> slices = Events("X");
  int waits = 0;
  for (const Json& e : slices) {
    if (e["cat"] == "rendezvous_wait") {
      ++waits;
      EXPECT_EQ(e["pid"], 1);
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 0.0);
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 1234.567);
    }
    if (e["cat"] == "dp") {
      EXPECT_EQ(e["args"]["op"], "all_reduce");
      EXPECT_EQ(e["args"]["collective"], "grads");
      EXPECT_EQ(e["args"]["algorithm"], "ring");
      EXPECT_EQ(e["args"]["size_bytes"], 1000);
      EXPECT_EQ(e["args"]["group"], Json::array({0, 1}));
      EXPECT_FALSE(e["args"].contains("simulated_members"));  // every member simulated
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 1234.567);
    }
  }
  EXPECT_EQ(waits, 1);
  ASSERT_EQ(Events("s").size(), 1u);
  ASSERT_EQ(Events("f").size(), 1u);
  EXPECT_EQ(Events("s")[0]["id"], Events("f")[0]["id"]);
  EXPECT_EQ(Events("f")[0]["bp"], "e");
}

TEST_F(ChromeTraceTest, RanksWithMemoryGetACounterTrack) {
  // Rank 0: 1 GiB from the start, 1 + 3 − 1 = 3 GiB once the 1,234.567 us GEMM ends; rank 1 has
  // no memory given and no track.
  const std::vector<Json> counters = Events("C");
  ASSERT_EQ(counters.size(), 2u);
  for (const Json& counter : counters) {
    EXPECT_EQ(counter["name"], "memory");
    EXPECT_EQ(counter["pid"], 0);
  }
  EXPECT_DOUBLE_EQ(counters[0]["ts"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(counters[0]["args"]["GiB"].get<double>(), 1);
  EXPECT_DOUBLE_EQ(counters[1]["ts"].get<double>(), 1234.567);
  EXPECT_DOUBLE_EQ(counters[1]["args"]["GiB"].get<double>(), 3);
}

// A graph that simulates one rank per class of identical ranks (symmetric ranks) posts a
// collective on its simulated members and prices it over the whole group: the timeline names
// the whole group, and the simulated part apart.
TEST(ChromeTraceSymmetricTest, ACollectivePricedOverMoreRanksNamesTheWholeGroup) {
  TaskGraphBuilder builder;
  const graph::StreamId s0 = builder.Stream(0, "compute");
  const std::vector<int32_t> simulated = {0};
  const std::vector<int32_t> logical = {0, 8, 16, 24};
  const graph::CommId ar =
      builder.AddCollective(graph::CommKind::kAllReduce, Bytes(4096), simulated);
  builder.PriceAs(ar, logical);
  builder.AddCollectiveTask(s0, ar, "dp all-reduce", "dp");
  Expected<graph::TaskGraph> built = std::move(builder).Build();
  ASSERT_TRUE(built.ok()) << built.error().message();
  engine::FixedCostModel model(Microseconds(1), Bandwidth::BytesPerSecond(kGiga));
  engine::Simulator sim(*built, model);
  ASSERT_TRUE(sim.Run().ok());
  std::ostringstream out;
  WriteChromeTrace(out, *built, sim.times(), {.source = "test", .communication_model = "fixed"});
  const Json trace = Json::parse(out.str());
  int found = 0;
  for (const Json& e : trace["traceEvents"]) {
    if (e["ph"] != "X" || e["name"] != "dp all-reduce") continue;
    ++found;
    EXPECT_EQ(e["args"]["group"], Json::array({0, 8, 16, 24}));
    EXPECT_EQ(e["args"]["simulated_members"], Json::array({0}));
  }
  EXPECT_EQ(found, 1);
  // Only rank 0 has streams: only it is a process.
  int processes = 0;
  for (const Json& e : trace["traceEvents"]) processes += e["name"] == "process_name" ? 1 : 0;
  EXPECT_EQ(processes, 1);
}

}  // namespace
}  // namespace dtsim::traces
