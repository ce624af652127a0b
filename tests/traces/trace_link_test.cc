// A PyTorch host execution trace linked with its Kineto trace (traces/trace_link.h): the shared
// pair of one run, a hand-written pair whose ops carry record function ids, and traces of
// different runs.
#include "traces/trace_link.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>

#include "tests/testing/temp_dir.h"
#include "tests/traces/trace_test_files.h"
#include "traces/chakra_reader.h"
#include "traces/kineto_reader.h"

namespace dtsim::traces {
namespace {

using testing::HasSubstr;

class TraceLinkTest : public testing_support::TempDirTest {
 protected:
  static ChakraTrace Host(const std::string& path) {
    Expected<ChakraTrace> trace = ReadChakraTrace(path);
    EXPECT_TRUE(trace.ok()) << trace.error().ToString();
    return std::move(trace).value();
  }
  static Trace Kineto(const std::string& path) {
    Expected<Trace> trace = ReadKinetoTrace(path);
    EXPECT_TRUE(trace.ok()) << trace.error().ToString();
    return std::move(trace).value();
  }
  static const ChakraNode& NodeOf(const ChakraTrace& trace, uint64_t id) {
    return *std::find_if(trace.nodes.begin(), trace.nodes.end(),
                         [&](const ChakraNode& node) { return node.id == id; });
  }
};

// HTA's simple_add benchmark: 36 host ops (38 nodes less the process and thread roots), each the
// Kineto op whose External id is its rf_id (PyTorch 2.0 writes no Record function id). aten::rand
// ran 19,583,658 µs, of which its children aten::empty 19,583,280 and aten::uniform_ 189: 189 µs
// its own. The four kernels hang off the ops whose cudaLaunchKernel they came from: two
// aten::uniform_ and two aten::add.
TEST_F(TraceLinkTest, TheSharedPairOfOneRunLinksEveryOp) {
  const ChakraTrace host = Host(SharedKineto("execution_trace__benchmark_simple_add_et.json.gz"));
  const Trace kineto = Kineto(SharedKineto("execution_trace__benchmark_simple_add_trace.json.gz"));
  TraceLinkStats stats;
  const Expected<ChakraTrace> linked = LinkExecutionTrace(host, kineto, stats);
  ASSERT_TRUE(linked.ok()) << linked.error().ToString();
  EXPECT_EQ(stats.key, "External id");
  EXPECT_EQ(stats.host_ops, 36);
  EXPECT_EQ(stats.linked, 36);
  EXPECT_EQ(stats.gpu_ops, 4);
  EXPECT_EQ(stats.gpu_ops_unlinked, 0);
  EXPECT_EQ(NodeOf(*linked, 4).name, "aten::rand");
  EXPECT_EQ(NodeOf(*linked, 4).duration_micros, 189u);
  std::vector<std::string> launchers;
  for (const ChakraNode& node : linked->nodes) {
    if (node.is_cpu_op() || node.type == ChakraNodeType::kMetadata) continue;
    ASSERT_EQ(node.data_deps.size(), 1u) << node.name;
    launchers.push_back(NodeOf(*linked, node.data_deps[0]).name);
  }
  EXPECT_EQ(launchers, (std::vector<std::string>{"aten::uniform_", "aten::uniform_", "aten::add",
                                                 "aten::add"}));
  EXPECT_EQ(linked->stats.nodes_without_duration, 2);  // the process and thread roots
}

// PyTorch ≥ 2.1: Kineto ops carry the record function id (here 7 and 8) apart from their
// External id (100, 101). aten::linear (rf 7) ran 50 µs around aten::mm (rf 8, 30 µs), which
// launched the GEMM: linear keeps 20 µs, mm 30, and the kernel depends on mm.
TEST_F(TraceLinkTest, RecordFunctionIdsLinkWhenTheTraceHasThem) {
  std::ofstream(Path("et.json")) << R"({"schema": "1.0.2-chakra.0.0.4", "pid": 42, "nodes": [
    {"name": "[pytorch|profiler|execution_trace|thread]", "id": 1, "rf_id": 0, "parent": 1, "tid": 1},
    {"name": "aten::linear", "id": 2, "rf_id": 7, "parent": 1, "tid": 1},
    {"name": "aten::mm", "id": 3, "rf_id": 8, "parent": 2, "tid": 1}]})";
  std::ofstream(Path("kineto.json")) << R"({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 42, "tid": 42, "ts": 1000, "dur": 50, "args": {"External id": 100, "Record function id": 7}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 42, "tid": 42, "ts": 1010, "dur": 30, "args": {"External id": 101, "Record function id": 8}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 42, "tid": 42, "ts": 1020, "dur": 5, "args": {"correlation": 9}},
    {"ph": "X", "cat": "kernel", "name": "sm90_gemm", "pid": 0, "tid": 7, "ts": 1030, "dur": 40, "args": {"correlation": 9, "stream": 7, "device": 0}}]})";
  TraceLinkStats stats;
  const Expected<ChakraTrace> linked =
      LinkExecutionTrace(Host(Path("et.json")), Kineto(Path("kineto.json")), stats);
  ASSERT_TRUE(linked.ok()) << linked.error().ToString();
  EXPECT_EQ(stats.key, "Record function id");
  EXPECT_EQ(stats.linked, 2);
  EXPECT_EQ(NodeOf(*linked, 2).duration_micros, 20u);
  EXPECT_EQ(NodeOf(*linked, 3).duration_micros, 30u);
  const ChakraNode& kernel = NodeOf(*linked, 4);
  EXPECT_EQ(kernel.name, "sm90_gemm");
  EXPECT_EQ(kernel.duration_micros, 40u);
  EXPECT_EQ(kernel.data_deps, (std::vector<uint64_t>{3}));
  EXPECT_FALSE(kernel.is_cpu_op());
}

TEST_F(TraceLinkTest, TracesOfDifferentRunsAreRefused) {
  const ChakraTrace host = Host(SharedKineto("execution_trace__benchmark_simple_add_et.json.gz"));
  TraceLinkStats stats;
  // Another process.
  EXPECT_THAT(LinkExecutionTrace(host,
                                 Kineto(SharedKineto("critical_path__alexnet__benchmark_"
                                                     "result_2869224_1695835535_trace."
                                                     "json.gz")),
                                 stats)
                  .error()
                  .ToString(),
              HasSubstr("the host execution trace is of process 563677, and"));
  // The same process number, other ops: 2 of 36 match by chance (small ids, common names).
  ChakraTrace no_pid = host;
  no_pid.metadata.clear();
  EXPECT_THAT(LinkExecutionTrace(no_pid,
                                 Kineto(SharedKineto("critical_path__alexnet__benchmark_result_"
                                                     "2869224_1695835535_trace.json.gz")),
                                 stats)
                  .error()
                  .ToString(),
              HasSubstr("only 2 of the host execution trace's 36 ops have a Kineto op"));
  const ChakraTrace chakra = Host(SharedChakra("small_chakra.0.json"));
  EXPECT_THAT(
      LinkExecutionTrace(
          chakra, Kineto(SharedKineto("execution_trace__benchmark_simple_add_trace.json.gz")),
          stats)
          .error()
          .ToString(),
      HasSubstr("a PyTorch host execution trace is linked with a Kineto trace"));
}

}  // namespace
}  // namespace dtsim::traces
