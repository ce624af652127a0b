// Measured op-cost tables from profiler traces (`dtsim ops`, docs/formats/op-costs.md): every
// GPU op (kernel, copy, set; NCCL collectives excluded) is attributed to the innermost
// framework op (cpu_op) open on its launching thread when the launching API call started; an
// op instance's GPU time is the sum of its GPU ops. Instances are grouped by signature and the
// table gives count, mean, median and min per signature.
//
// Signatures: aten::mm / addmm / bmm / baddbmm become `gemm` with m, n, k (and batch) from
// their input shapes; aten::linear and aten::matmul reach the table through the mm/addmm/bmm
// they call. Every other op keeps its ATen name with its tensor inputs' dimensions as
// in<i>_d<j> and the first tensor input's element count as `elements`. The dtype is the first
// tensor input's. Ops recorded without shapes (traces taken without record_shapes) or with a
// zero-sized or unknown-typed input cannot be keyed and are counted, not guessed.
#pragma once

#include <map>
#include <string>

#include "sim/base/status.h"
#include "traces/op_cost_table.h"
#include "traces/trace.h"

namespace dtsim::traces {

struct OpProfileStats {
  int64_t gpu_ops = 0;             // kernels, copies and sets, collectives excluded
  int64_t attributed_gpu_ops = 0;  // launched from inside a framework op
  int64_t op_instances = 0;        // framework ops that launched GPU work
  int64_t keyed_instances = 0;     // of which made it into the table
  // GPU ops that could not be attributed, and op instances left out, by reason.
  std::map<std::string, int64_t> left_out;
};

struct OpProfile {
  OpCostTable table;
  OpProfileStats stats;
};

// `gpu` names the table's GPU (the trace's device name when empty).
Expected<OpProfile> BuildOpProfile(const Trace& trace, std::string gpu = {});

}  // namespace dtsim::traces
