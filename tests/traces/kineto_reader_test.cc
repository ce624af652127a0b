// The Kineto / Chrome trace reader on the shared real traces (import statistics per file,
// checked against a Python count of the same files' traceEvents) and on small synthetic
// traces: timestamp styles, B/E pairs, the legacy schema, NCCL collectives, and bad input.
#include "traces/kineto_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/testing/temp_dir.h"
#include "tests/traces/trace_test_files.h"

namespace dtsim::traces {
namespace {

using testing::HasSubstr;

TEST(MicrosecondsTextToNs, ReadsBothTimestampStylesExactly) {
  EXPECT_EQ(MicrosecondsTextToNs("1682725898079292"), 1682725898079292000);  // epoch µs
  EXPECT_EQ(MicrosecondsTextToNs("13336315.805"), 13336315805);  // relative, three decimals
  EXPECT_EQ(MicrosecondsTextToNs("0.5"), 500);
  EXPECT_EQ(MicrosecondsTextToNs("2.0004"), 2000);  // a fourth decimal rounds
  EXPECT_EQ(MicrosecondsTextToNs("2.0005"), 2001);
  EXPECT_EQ(MicrosecondsTextToNs("-3.25"), -3250);
  EXPECT_EQ(MicrosecondsTextToNs("1.5e3"), 1500000);
  EXPECT_EQ(MicrosecondsTextToNs(".25"), 250);
  EXPECT_FALSE(MicrosecondsTextToNs(""));
  EXPECT_FALSE(MicrosecondsTextToNs("12a"));
  EXPECT_FALSE(MicrosecondsTextToNs("1.2.3"));
  EXPECT_FALSE(MicrosecondsTextToNs("99999999999999999999"));  // would overflow int64 ns
}

TEST(NcclKernelKind, ReadsOldAndNewKernelNames) {
  using graph::CommKind;
  EXPECT_EQ(NcclKernelKind("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, ...)"),
            CommKind::kAllReduce);
  EXPECT_EQ(NcclKernelKind("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, ...)"),
            CommKind::kAllGather);
  EXPECT_EQ(NcclKernelKind("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(...)"),
            CommKind::kReduceScatter);
  EXPECT_EQ(NcclKernelKind("ncclKernel_Broadcast_RING_SIMPLE_Sum_int8_t(...)"),
            CommKind::kBroadcast);
  EXPECT_EQ(NcclKernelKind("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(...)"), CommKind::kSendRecv);
  EXPECT_EQ(NcclKernelKind("ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"),
            CommKind::kSendRecv);
  EXPECT_FALSE(NcclKernelKind("void at::native::vectorized_elementwise_kernel<4>(...)"));
}

// Import statistics of every shared Kineto trace. `events` is len(traceEvents) and the other
// counts are the events per category, both counted with Python's json module.
struct ExpectedImport {
  const char* file;
  int64_t events, host_ops, annotations, api_calls, kernels, memcpys, memsets, streams, syncs,
      collectives, collectives_inferred, steps, launches_without_gpu_op;
};

class SharedKinetoTrace : public testing::TestWithParam<ExpectedImport> {};

TEST_P(SharedKinetoTrace, ImportsWithTheExpectedStatistics) {
  const ExpectedImport& e = GetParam();
  const Expected<Trace> trace = ReadKinetoTrace(SharedKineto(e.file));
  ASSERT_TRUE(trace.ok()) << trace.error().ToString();
  const ImportStats& s = trace->stats;
  EXPECT_EQ(trace->format, "kineto");
  EXPECT_EQ(s.events, e.events);
  EXPECT_EQ(s.host_ops, e.host_ops);
  EXPECT_EQ(s.annotations, e.annotations);
  EXPECT_EQ(s.api_calls, e.api_calls);
  EXPECT_EQ(s.kernels, e.kernels);
  EXPECT_EQ(s.memcpys, e.memcpys);
  EXPECT_EQ(s.memsets, e.memsets);
  EXPECT_EQ(trace->StreamCount(), e.streams);
  EXPECT_EQ(s.syncs, e.syncs);
  EXPECT_EQ(s.collectives, e.collectives);
  EXPECT_EQ(s.collectives_inferred, e.collectives_inferred);
  EXPECT_EQ(static_cast<int64_t>(trace->steps.size()), e.steps);
  EXPECT_EQ(s.launches_without_gpu_op, e.launches_without_gpu_op);
  EXPECT_EQ(s.gpu_ops_without_launch, 0);
  EXPECT_TRUE(s.dropped.empty());
}

INSTANTIATE_TEST_SUITE_P(
    HtaTestData, SharedKinetoTrace,
    testing::Values(
        ExpectedImport{kAlexnetTrace, 1408, 359, 8, 361, 79, 16, 3, 2, 41, 0, 0, 0, 2},
        ExpectedImport{kEventSyncTrace, 92, 10, 1, 12, 4, 1, 0, 1, 4, 0, 0, 1, 0},
        ExpectedImport{kEventSyncMultiStreamTrace, 149, 6, 0, 39, 3, 0, 3, 3, 5, 0, 0, 0, 0},
        ExpectedImport{kSimpleAddTrace, 1348, 359, 8, 331, 79, 16, 3, 2, 41, 0, 0, 0, 2},
        ExpectedImport{kCuptiProfilerTrace, 4222, 375, 8, 1862, 0, 0, 0, 0, 0, 0, 0, 0, 104},
        ExpectedImport{kExecutionTraceDeviceTrace, 111, 28, 8, 15, 4, 0, 0, 1, 0, 0, 0, 0, 0},
        ExpectedImport{kSampledRank0Trace, 4855, 2329, 73, 1204, 1154, 40, 10, 5, 0, 10, 10, 2, 0},
        ExpectedImport{kSampledRank1Trace, 4720, 2302, 65, 1154, 1104, 40, 10, 5, 0, 10, 10, 2, 0},
        ExpectedImport{kTritonTrace, 71, 3, 1, 2, 1, 0, 0, 1, 0, 0, 0, 1, 0}),
    [](const testing::TestParamInfo<ExpectedImport>& param_info) {
      return TraceTestName(param_info.param.file);
    });

TEST(SharedKinetoTrace, ReadsDistributedInfoAndDeviceProperties) {
  const Expected<Trace> trace = ReadKinetoTrace(SharedKineto(kSampledRank1Trace));
  ASSERT_TRUE(trace.ok()) << trace.error().ToString();
  EXPECT_EQ(trace->rank, 1);
  EXPECT_EQ(trace->world_size, 128);
  EXPECT_EQ(trace->backend, "nccl");
  const Expected<Trace> alexnet = ReadKinetoTrace(SharedKineto(kAlexnetTrace));
  ASSERT_TRUE(alexnet.ok());
  EXPECT_EQ(alexnet->gpu_name, "NVIDIA A100-PG509-200");
}

TEST(SharedKinetoTrace, ReadsFractionalTimestampsNextToBaseTimeExactly) {
  // triton_example: baseTimeNanoseconds 1727743122000000000 and "dur": 13336315.805 on
  // ProfilerStep#1 — 13,336,315,805 ns, which a double would also hold, but only the text
  // path guarantees the last digit for every value.
  const Expected<Trace> trace = ReadKinetoTrace(SharedKineto(kTritonTrace));
  ASSERT_TRUE(trace.ok()) << trace.error().ToString();
  EXPECT_EQ(trace->base_time_ns, 1727743122000000000);
  ASSERT_EQ(trace->steps.size(), 1u);
  EXPECT_EQ(trace->steps[0].number, 1);
  EXPECT_EQ(trace->steps[0].duration, DurationNs(13336315805));
}

TEST(SharedKinetoTrace, InfersCollectivesFromTheNcclAnnotations) {
  // The 2023 sampled trace has no collective args on its kernels (every kernel is
  // ncclKernel_SendRecv); kind and size come from the enclosing nccl:* annotation's first input.
  const Expected<Trace> trace = ReadKinetoTrace(SharedKineto(kSampledRank0Trace));
  ASSERT_TRUE(trace.ok()) << trace.error().ToString();
  std::map<graph::CommKind, int> kinds;
  bool found_gradient_bucket = false;
  for (const CollectiveInfo& info : trace->collectives) {
    ++kinds[info.kind];
    EXPECT_TRUE(info.size_inferred);
    EXPECT_FALSE(info.size_unknown);
    EXPECT_EQ(info.group_size, 128);  // distributedInfo.world_size
    // nccl:all_reduce with Input Dims [[19618307]] and type float: 78,473,228 bytes.
    if (info.bytes == Bytes(19618307 * 4)) found_gradient_bucket = true;
  }
  EXPECT_EQ(kinds[graph::CommKind::kAllToAll], 4);
  EXPECT_EQ(kinds[graph::CommKind::kAllReduce], 4);
  EXPECT_EQ(kinds[graph::CommKind::kAllGather], 2);
  EXPECT_TRUE(found_gradient_bucket);
}

TEST(SharedKinetoTrace, ReadingNeverModifiesTheInput) {
  const std::string path = SharedKineto(kEventSyncTrace);
  const auto before = std::filesystem::last_write_time(path);
  const std::string bytes_before = FileBytes(path);
  ASSERT_TRUE(ReadKinetoTrace(path).ok());
  EXPECT_EQ(std::filesystem::last_write_time(path), before);
  EXPECT_EQ(FileBytes(path), bytes_before);
}

class KinetoReaderTest : public testing_support::TempDirTest {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = Path(name);
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
};

TEST_F(KinetoReaderTest, ReadsCollectiveArgsWhenKinetoCopiedThem) {
  const std::string path = Write("args.json", R"json({"schemaVersion": 1, "traceEvents": [
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 5, "tid": 5,
     "ts": 10, "dur": 4, "args": {"correlation": 9}},
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL(ncclDevComm*)",
     "pid": 0, "tid": 20, "ts": 12, "dur": 30,
     "args": {"correlation": 9, "stream": 20, "device": 0, "Collective name": "allgather",
              "In msg nelems": 1024, "dtype": "BFloat16", "Group size": 8,
              "Process Group Name": "3", "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]"}}]})json");
  const Expected<Trace> trace = ReadKinetoTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.error().ToString();
  ASSERT_EQ(trace->collectives.size(), 1u);
  const CollectiveInfo& info = trace->collectives[0];
  EXPECT_EQ(info.kind, graph::CommKind::kAllGather);
  EXPECT_EQ(info.bytes, Bytes(2048));  // 1024 bf16 elements
  EXPECT_EQ(info.group_size, 8);
  EXPECT_EQ(info.process_group, "3");
  EXPECT_EQ(info.group_ranks.size(), 8u);
  EXPECT_FALSE(info.size_inferred);
  EXPECT_EQ(trace->stats.collectives_inferred, 0);
}

// PyTorch 1.8 and 1.9 record ProfilerStep#N as an operator (category "Operator"), later ones
// as a user annotation; a trace that has both for a step counts it once.
TEST_F(KinetoReaderTest, FindsProfilerStepsRecordedAsOperators) {
  const std::string path = Write("torch18.json", R"({"traceEvents": [
    {"ph": "X", "cat": "Operator", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": 100, "dur": 50},
    {"ph": "X", "cat": "Operator", "name": "ProfilerStep#4", "pid": 1, "tid": 1, "ts": 150, "dur": 40},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#4", "pid": 1, "tid": 1, "ts": 150, "dur": 40},
    {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 101, "dur": 3, "args": {"correlation": 4}},
    {"ph": "X", "cat": "Kernel", "name": "sgemm", "pid": 0, "tid": 7, "ts": 105, "dur": 20, "args": {"correlation": 4, "stream": 7}}
  ]})");
  const Expected<Trace> trace = ReadKinetoTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.error().ToString();
  ASSERT_EQ(trace->steps.size(), 2u);
  EXPECT_EQ(trace->steps[0].number, 3);
  EXPECT_EQ(trace->steps[0].duration, Microseconds(50));
  EXPECT_EQ(trace->steps[1].number, 4);
}

TEST_F(KinetoReaderTest, ReadsBareArraysBeginEndPairsAndTheLegacySchema) {
  // A plain Chrome trace (bare array) in the 2021 schema: Runtime/Kernel categories, string
  // tids ("stream 7"), "external id" in lower case, and a B/E pair for the op.
  const std::string path = Write("legacy.json", R"([
    {"ph": "B", "cat": "Operator", "name": "aten::mm", "pid": 1, "tid": "24572", "ts": 100},
    {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": "24572",
     "ts": 101, "dur": 3, "args": {"correlation": 4, "external id": 2}},
    {"ph": "E", "cat": "Operator", "name": "aten::mm", "pid": 1, "tid": "24572", "ts": 110},
    {"ph": "X", "cat": "Kernel", "name": "sgemm", "pid": 0, "tid": "stream 7", "ts": 105,
     "dur": 20, "args": {"correlation": 4}},
    {"ph": "X", "cat": "Kernel", "name": "lost", "pid": 0, "tid": "stream 7", "ts": 0, "dur": 0},
    {"ph": "X", "name": "no duration", "pid": 1, "tid": 1, "ts": 3}
  ])");
  const Expected<Trace> trace = ReadKinetoTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.error().ToString();
  EXPECT_EQ(trace->format, "chrome");
  ASSERT_EQ(trace->device.size(), 1u);
  EXPECT_EQ(trace->device[0].stream, 7);
  EXPECT_EQ(trace->device[0].start, TimeNs(105000));
  EXPECT_EQ(trace->stats.host_ops, 1);
  EXPECT_EQ(trace->stats.api_calls, 1);
  EXPECT_EQ(trace->stats.zero_timestamp_gpu_ops, 1);
  EXPECT_EQ(trace->stats.dropped.at("complete event without duration"), 1);
  EXPECT_EQ(trace->stats.dropped.at("GPU op without timestamps (CUPTI lost them)"), 1);
  const HostEvent* op = nullptr;
  for (const HostEvent& event : trace->host) {
    if (event.kind == HostEventKind::kOp) op = &event;
  }
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->duration, Microseconds(10));
  EXPECT_EQ(trace->threads[op->thread].tid, 24572);
}

TEST_F(KinetoReaderTest, ErrorsNameTheFileAndTheProblem) {
  const auto error_of = [](const std::string& path) {
    const Expected<Trace> trace = ReadKinetoTrace(path);
    return trace.ok() ? std::string("ok") : trace.error().ToString();
  };
  EXPECT_THAT(error_of(Path("missing.json")), HasSubstr("missing.json: cannot open"));
  EXPECT_THAT(error_of(dir_.string()), HasSubstr("is a directory"));
  EXPECT_THAT(error_of(Write("empty.json", "")),
              HasSubstr("JSON syntax error at line 1, column 1 (byte 1): while parsing value - "
                        "unexpected end of input"));
  EXPECT_THAT(error_of(Write("object.json", R"({"schemaVersion": 1})")),
              HasSubstr("no \"traceEvents\" array"));
  EXPECT_THAT(error_of(Write("truncated.json",
                             R"({"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "du)")),
              HasSubstr("truncated.json: JSON syntax error at line 1, column 55 (byte 55): while "
                        "parsing object key - invalid string: missing closing quote"));
  EXPECT_THAT(error_of(SharedKineto(kExecutionTraceHost)), HasSubstr("a PyTorch execution trace"));
  // Half of a real gzip file: zlib reports the stream's early end.
  const std::string whole = FileBytes(SharedKineto(kAlexnetTrace));
  const std::string half = Write("half.json.gz", whole.substr(0, whole.size() / 2));
  EXPECT_THAT(error_of(half), HasSubstr("half.json.gz: unexpected end of the gzip stream"));
  // Nesting past kMaxJsonDepth, in an event's args and in the metadata, stops the parse.
  const std::string deep = std::string(100000, '[');
  EXPECT_EQ(error_of(Write("deep_args.json",
                           R"({"traceEvents": [{"ph": "X", "args": {"a": )" + deep + "}]}")),
            Path("deep_args.json") + ": JSON nested deeper than 256 levels");
  EXPECT_EQ(error_of(Write("deep_meta.json", R"({"deviceProperties": )" + deep)),
            Path("deep_meta.json") + ": JSON nested deeper than 256 levels");
  // A string past kMaxTraceStringBytes (16 MiB) names its event.
  const std::string huge(kMaxTraceStringBytes + 1, 'a');
  EXPECT_EQ(
      error_of(Write("huge.json", R"({"traceEvents": [{"ph": "i"}, {"name": ")" + huge + "\"}]}")),
      Path("huge.json") +
          ": a string of 16777217 bytes in traceEvents entry 1: more than "
          "the 16 MiB a name or argument may take");
}

}  // namespace
}  // namespace dtsim::traces
