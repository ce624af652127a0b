// The task categories and the stream roles of the graphs the plan builders make (the breakdown
// of a result reads them).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "sim/graph/builder.h"

namespace dtsim::strategies {

inline constexpr std::string_view kComputeCategory = "compute";
inline constexpr std::string_view kRecomputeCategory = "recompute";
inline constexpr std::string_view kTensorCategory = "tp";
inline constexpr std::string_view kPipelineCategory = "pp";
inline constexpr std::string_view kExpertCategory = "ep";
inline constexpr std::string_view kContextCategory = "cp";
inline constexpr std::string_view kDataCategory = "dp";
inline constexpr std::string_view kOptimizerCategory = "optimizer";
// Activation offloading's copies to host memory and back (waiting for them is idle time).
inline constexpr std::string_view kOffloadCategory = "offload";

// The streams of a rank, by what runs on them. Every rank computes on kCompute (tensor-parallel
// collectives and pipeline receives block it, as in Megatron); SUMMA's broadcasts and reduces
// run on kTensor, joined to the compute stream by kTensorJoin; ring attention's K/V shifts on
// kContext; pipeline sends, gradient reduction, ZeRO-3's parameter gathers and activation
// offloading's copies out and back have their own streams.
enum class StreamRole : uint8_t {
  kCompute,
  kTensor,
  kTensorJoin,
  kContext,
  kSendForward,
  kSendBackward,
  kData,
  kZero,
  kOffload,     // both ways (Transformer Engine 2.10's handler)
  kOffloadOut,  // device to host (its v1 handler)
  kOffloadIn,   // host to device (v1)
  kHost,        // the host thread's own work the GPU waits for (DeepSpeed's list loops)
  kExpert,      // expert all-to-alls beside the compute (Megatron-Core's all-to-all overlap)
};

// The stream's name in the graph, its traces and timelines.
constexpr std::string_view StreamName(StreamRole role) {
  constexpr std::array<std::string_view, 13> kNames = {
      "compute", "tp",      "tp-join",     "cp",          "pp-send-fwd", "pp-send-bwd", "dp",
      "zero",    "offload", "offload-d2h", "offload-h2d", "host",        "ep"};
  return kNames[static_cast<size_t>(role)];
}

// `rank`'s stream of `role`.
inline graph::StreamId RoleStream(graph::TaskGraphBuilder& builder, int32_t rank, StreamRole role) {
  return builder.Stream(rank, StreamName(role));
}

}  // namespace dtsim::strategies
