// A PyTorch host execution trace linked with the Kineto trace recorded beside it, as Chakra's
// trace_link does (docs/formats/chakra.md, "Host execution trace and Kineto trace"): the host
// trace says which ops ran and how they nest, not for how long; the Kineto trace has their
// durations and the GPU work they launched.
//
// Each host op (an ET node with an rf_id) is matched with the Kineto op of the same record
// function: its "Record function id", or — traces before PyTorch 2.1 have none — its
// "External id", which then is the record function's id; the names must agree. A matched node
// takes the Kineto op's duration less its matched children's (its exclusive time, what Chakra's
// converter simulates a CPU op for), and its start. Each GPU op (kernel, copy, set) of the Kineto
// trace becomes a GPU node depending on the innermost matched op whose thread launched it (the
// op containing its launch call), on its CUDA stream. The result replays as any other Chakra
// trace: CPU ops in id order per thread, GPU ops per stream after the ops that launched them.
#pragma once

#include <cstdint>
#include <string>

#include "sim/base/status.h"
#include "traces/chakra_trace.h"
#include "traces/trace.h"

namespace dtsim::traces {

struct TraceLinkStats {
  std::string key;               // "Record function id" or "External id"
  int64_t host_ops = 0;          // ET nodes with an rf_id (metadata nodes aside)
  int64_t linked = 0;            // of them, matched with a Kineto op
  int64_t gpu_ops = 0;           // Kineto GPU ops added
  int64_t gpu_ops_unlinked = 0;  // of them, whose launch no matched op contains (no dependency)
};

// The host trace `execution_trace` (form "pytorch_execution_trace") with durations and GPU nodes
// from `kineto`. Errors when the host trace is of another form, or the traces are not of one run:
// the host trace's process (its "pid") has no thread in the Kineto trace, or fewer than half of
// its ops match a Kineto op.
Expected<ChakraTrace> LinkExecutionTrace(const ChakraTrace& execution_trace, const Trace& kineto,
                                         TraceLinkStats& stats);

}  // namespace dtsim::traces
