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

// Rank `rank` of ASTRA-sim's custom ring all-reduce example (a ring of `ranks`): `steps` times,
// a COMM_SEND_NODE of `chunk` bytes to the next rank, then a COMM_RECV_NODE from the previous
// one, each send after the previous step's recv (it forwards what arrived), each recv after its
// step's send. Every rank sends first: it runs only if a send completes without its recv.
inline ChakraTrace SendFirstRingRank(int64_t rank, int64_t ranks, int steps, int64_t chunk) {
  ChakraTrace trace;
  trace.file = fmt::format("ring.{}.et", rank);
  trace.metadata = {ChakraAttribute::Integer("rank", AttributeType::kInt64, rank)};
  for (int step = 0; step < steps; ++step) {
    ChakraNode send;
    send.id = trace.nodes.size() + 1;
    send.name = fmt::format("send {}", step);
    send.type = ChakraNodeType::kCommSend;
    if (!trace.nodes.empty()) send.data_deps = {trace.nodes.back().id};
    send.attrs = {ChakraAttribute::Integer("comm_dst", AttributeType::kInt32, (rank + 1) % ranks),
                  ChakraAttribute::Integer("comm_size", AttributeType::kInt64, chunk),
                  ChakraAttribute::Integer("comm_tag", AttributeType::kInt32, step)};
    trace.nodes.push_back(send);
    ChakraNode recv;
    recv.id = trace.nodes.size() + 1;
    recv.name = fmt::format("recv {}", step);
    recv.type = ChakraNodeType::kCommRecv;
    recv.data_deps = {send.id};
    recv.attrs = {
        ChakraAttribute::Integer("comm_src", AttributeType::kInt32, (rank + ranks - 1) % ranks),
        ChakraAttribute::Integer("comm_size", AttributeType::kInt64, chunk),
        ChakraAttribute::Integer("comm_tag", AttributeType::kInt32, step)};
    trace.nodes.push_back(recv);
  }
  return trace;
}

// The comm group file of TwoGroupRank's job.
inline constexpr const char* kTwoGroupCommGroups =
    R"({"tp0": [0, 1], "tp1": [2, 3], "dp0": [0, 2], "dp1": [1, 3]})";

}  // namespace dtsim::traces
