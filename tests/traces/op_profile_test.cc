// Op-cost tables from profiler traces: the sampled rank-0 trace checked against an independent
// Python attribution of the same file (innermost cpu_op on the launching thread, GPU time
// summed per op instance), nesting and left-out cases on a synthetic trace, and the table's
// median/min fields through JSON.
#include "traces/op_profile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "tests/testing/temp_dir.h"
#include "tests/traces/trace_test_files.h"
#include "traces/kineto_reader.h"

namespace dtsim::traces {
namespace {

using testing::HasSubstr;

OpSignature Gemm(DType dtype, int64_t m, int64_t n, int64_t k, int64_t batch = 1) {
  OpSignature signature{"gemm", dtype, {}};
  signature.SetDim("m", m);
  signature.SetDim("n", n);
  signature.SetDim("k", k);
  if (batch > 1) signature.SetDim("batch", batch);
  return signature;
}

// Python over the same file: 1,194 non-NCCL GPU ops, 16 launched outside any cpu_op, 1,062 op
// instances; aten::bmm [[2048, 606, 160], [2048, 160, 20]] took 634, 645, 688 and 837 µs;
// aten::mm [[8192, 512], [512, 8192]] 1251 and 1252 µs.
TEST(OpProfile, AggregatesTheSampledTraceLikeAnIndependentCount) {
  const Expected<Trace> trace = ReadKinetoTrace(SharedKineto(kSampledRank0Trace));
  ASSERT_TRUE(trace.ok()) << trace.error().ToString();
  const Expected<OpProfile> profile = BuildOpProfile(*trace, "a100-sxm4-80gb");
  ASSERT_TRUE(profile.ok()) << profile.error().ToString();
  const OpProfileStats& s = profile->stats;
  EXPECT_EQ(s.gpu_ops, 1194);
  EXPECT_EQ(s.attributed_gpu_ops, 1178);
  EXPECT_EQ(s.op_instances, 1062);
  EXPECT_EQ(s.left_out.at("GPU op launched outside any framework op"), 16);
  EXPECT_EQ(s.keyed_instances + s.left_out.at("op instance with unreadable, zero-sized or untyped "
                                              "inputs"),
            s.op_instances);
  const MeasuredOp* bmm = profile->table.Find(Gemm(DType::kFp32, 606, 20, 160, 2048));
  ASSERT_NE(bmm, nullptr);
  EXPECT_EQ(bmm->samples, 4);
  EXPECT_EQ(bmm->duration, Microseconds(701));  // (634+645+688+837)/4
  EXPECT_EQ(bmm->median, DurationNs(666500));   // (645+688)/2
  EXPECT_EQ(bmm->min, Microseconds(634));
  const MeasuredOp* mm = profile->table.Find(Gemm(DType::kFp32, 8192, 8192, 512));
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->samples, 2);
  EXPECT_EQ(mm->duration, DurationNs(1251500));
  EXPECT_EQ(profile->table.gpu(), "a100-sxm4-80gb");
}

TEST(OpProfile, TracesWithoutShapesKeyNothingAndSayWhy) {
  const Expected<Trace> trace = ReadKinetoTrace(SharedKineto(kAlexnetTrace));
  ASSERT_TRUE(trace.ok());
  const Expected<OpProfile> profile = BuildOpProfile(*trace);
  ASSERT_TRUE(profile.ok()) << profile.error().ToString();
  EXPECT_TRUE(profile->table.empty());
  EXPECT_GT(profile->stats.left_out.at("op instance recorded without input shapes"), 0);
}

class OpProfileTest : public testing_support::TempDirTest {};

// linear → addmm → two kernels (their times add up); a kernel launched outside any op; an op
// without shapes; a bf16 bmm.
TEST_F(OpProfileTest, AttributesKernelsToTheInnermostOp) {
  const std::string path = Path("ops.json");
  std::ofstream(path) << R"json({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 0, "dur": 100,
     "args": {"Input Dims": [[64, 32], [16, 32], [16]], "Input type": ["float", "float", "float"]}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 10, "dur": 50,
     "args": {"Input Dims": [[16], [64, 32], [32, 16]], "Input type": ["float", "float", "float"]}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 20,
     "dur": 5, "args": {"correlation": 1}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 30,
     "dur": 5, "args": {"correlation": 2}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 70,
     "dur": 5, "args": {"correlation": 3}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 200,
     "dur": 5, "args": {"correlation": 4}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 300, "dur": 20},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 305,
     "dur": 5, "args": {"correlation": 5}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::bmm", "pid": 1, "tid": 1, "ts": 400, "dur": 20,
     "args": {"Input Dims": [[4, 8, 16], [4, 16, 2]],
              "Input type": ["c10::BFloat16", "c10::BFloat16"]}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 405,
     "dur": 5, "args": {"correlation": 6}},
    {"ph": "X", "cat": "kernel", "name": "gemm_a", "pid": 0, "tid": 7, "ts": 40, "dur": 30,
     "args": {"correlation": 1, "stream": 7}},
    {"ph": "X", "cat": "kernel", "name": "gemm_b", "pid": 0, "tid": 7, "ts": 70, "dur": 12,
     "args": {"correlation": 2, "stream": 7}},
    {"ph": "X", "cat": "kernel", "name": "bias", "pid": 0, "tid": 7, "ts": 90, "dur": 3,
     "args": {"correlation": 3, "stream": 7}},
    {"ph": "X", "cat": "kernel", "name": "loose", "pid": 0, "tid": 7, "ts": 210, "dur": 3,
     "args": {"correlation": 4, "stream": 7}},
    {"ph": "X", "cat": "kernel", "name": "relu", "pid": 0, "tid": 7, "ts": 310, "dur": 3,
     "args": {"correlation": 5, "stream": 7}},
    {"ph": "X", "cat": "kernel", "name": "bmm", "pid": 0, "tid": 7, "ts": 410, "dur": 9,
     "args": {"correlation": 6, "stream": 7}}]})json";
  const Expected<Trace> trace = ReadKinetoTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.error().ToString();
  const Expected<OpProfile> profile = BuildOpProfile(*trace, "test-gpu");
  ASSERT_TRUE(profile.ok()) << profile.error().ToString();
  const MeasuredOp* addmm = profile->table.Find(Gemm(DType::kFp32, 64, 16, 32));
  ASSERT_NE(addmm, nullptr);
  EXPECT_EQ(addmm->duration, Microseconds(42));  // gemm_a 30 + gemm_b 12, inside aten::addmm
  OpSignature linear{"aten::linear", DType::kFp32, {}};
  for (auto [name, value] : {std::pair{"elements", 2048},
                             {"in0_d0", 64},
                             {"in0_d1", 32},
                             {"in1_d0", 16},
                             {"in1_d1", 32},
                             {"in2_d0", 16}}) {
    linear.SetDim(name, value);
  }
  const MeasuredOp* bias = profile->table.Find(linear);  // the bias kernel, launched at 70
  ASSERT_NE(bias, nullptr);
  EXPECT_EQ(bias->duration, Microseconds(3));
  const MeasuredOp* bmm = profile->table.Find(Gemm(DType::kBf16, 8, 2, 16, 4));
  ASSERT_NE(bmm, nullptr);
  EXPECT_EQ(bmm->duration, Microseconds(9));
  EXPECT_EQ(profile->stats.left_out.at("GPU op launched outside any framework op"), 1);
  EXPECT_EQ(profile->stats.left_out.at("op instance recorded without input shapes"), 1);
  EXPECT_EQ(profile->table.ops().size(), 3u);

  // The table keeps median and min through its JSON form; a min above the mean is an error.
  const std::string table_path = Path("profile.json");
  ASSERT_TRUE(WriteOpCostTable(profile->table, table_path).ok());
  const Expected<OpCostTable> back = ReadOpCostTable(table_path);
  ASSERT_TRUE(back.ok()) << back.error().ToString();
  EXPECT_EQ(back->Find(Gemm(DType::kFp32, 64, 16, 32))->median, Microseconds(42));
  Json json = OpCostTableToJson(*back);
  json["ops"][0]["min"] = "1 s";
  EXPECT_THAT(OpCostTableFromJson(json).error().ToString(),
              HasSubstr("ops[0].min: min must not exceed the mean (time) or the median"));
}

}  // namespace
}  // namespace dtsim::traces
