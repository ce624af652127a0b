// What another tool's Chakra trace means by its sizes and operation counts
// (docs/formats/chakra.md, "Other tools' conventions").
//
// Chakra's schema leaves the units of `comm_size`, `tensor_size` and `num_ops` to the
// producer; ASTRA-sim reads the first two as bytes and `num_ops` as operations for its
// roofline. STAGE (astra-sim/symbolic_tensor_graph, recognized by its GlobalMetadata
// attribute `schema` = "symbolic_tensor_network") writes element counts in all three size
// attributes — Tensor.eval_size of the tensor's shape in graph/convert_chakra.py, for
// comm_size the tensor before the collective (an all-gather's per-rank shard, a reduce-
// scatter's whole input, as ASTRA-sim's collectives take them) — and, for its einsums
// (op_type "M", ops/einsum.py), num_ops as the product of the output and the reduced
// dimensions: multiply-adds, two FLOPs each; for the other ops it counts one operation per
// element. Its traces record no durations: compute comes from num_ops.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "traces/chakra_trace.h"

namespace dtsim::traces {

struct ChakraConventions {
  std::string producer;  // "STAGE", or empty: the schema's own reading (bytes, operations)
  bool sizes_in_elements = false;
  bool einsum_ops_are_multiply_adds = false;
};

ChakraConventions DetectChakraConventions(const ChakraTrace& trace);

// A COMP_NODE's work from its num_ops and tensor_size attributes, read in the trace's
// conventions with `element_bytes` bytes an element.
struct ChakraComputeWork {
  double flops = 0;
  double bytes = 0;     // tensor_size: the node's output (what ASTRA-sim's roofline divides by)
  bool matmul = false;  // on the tensor cores: STAGE's einsums; every node of other producers,
                        // whose ops ASTRA-sim prices at one peak
};
std::optional<ChakraComputeWork> ChakraNodeWork(const ChakraNode& node,
                                                const ChakraConventions& conventions,
                                                int64_t element_bytes);

}  // namespace dtsim::traces
