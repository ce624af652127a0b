// Hand-made Chakra traces of another tool, for tests of multi-rank import.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

#include "traces/chakra_trace.h"

namespace dtsim::traces {

// Rank `rank` (0..3) of a job with tensor-parallel pairs {0, 1}, {2, 3} and data-parallel pairs
// {0, 2}, {1, 3}: a 10 µs all-reduce of 1 MiB in its TP group ("tp0"/"tp1"), then one in its DP
// group ("dp0"/"dp1"), as GPU COMM_COLL_NODEs with comm_type, comm_size and pg_name.
inline ChakraTrace TwoGroupRank(int64_t rank) {
  ChakraTrace trace;
  trace.file = fmt::format("rank{}.et", rank);
  trace.metadata = {ChakraAttribute::Integer("rank", AttributeType::kInt64, rank)};
  for (const std::string& pg : {fmt::format("tp{}", rank / 2), fmt::format("dp{}", rank % 2)}) {
    ChakraNode collective;
    collective.id = trace.nodes.size() + 1;
    collective.type = ChakraNodeType::kCommCollective;
    if (!trace.nodes.empty()) collective.data_deps = {trace.nodes.back().id};
    collective.duration_micros = 10;
    collective.attrs = {ChakraAttribute::Integer("comm_type", AttributeType::kInt64, 0),
                        ChakraAttribute::Integer("comm_size", AttributeType::kInt64, 1 << 20),
                        ChakraAttribute::String("pg_name", pg)};
    trace.nodes.push_back(collective);
  }
  return trace;
}

// The comm group file of TwoGroupRank's job.
inline constexpr const char* kTwoGroupCommGroups =
    R"({"tp0": [0, 1], "tp1": [2, 3], "dp0": [0, 2], "dp1": [1, 3]})";

}  // namespace dtsim::traces
