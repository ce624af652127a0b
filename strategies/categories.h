// The task categories and the compute stream of the graphs the plan builders make (the
// breakdown of a result reads them).
#pragma once

#include <string_view>

namespace dtsim::strategies {

inline constexpr std::string_view kComputeCategory = "compute";
inline constexpr std::string_view kRecomputeCategory = "recompute";
inline constexpr std::string_view kTensorCategory = "tp";
inline constexpr std::string_view kPipelineCategory = "pp";
inline constexpr std::string_view kExpertCategory = "ep";
inline constexpr std::string_view kDataCategory = "dp";
inline constexpr std::string_view kOptimizerCategory = "optimizer";
// The stream every rank computes on (tensor-parallel collectives and pipeline receives block
// it, as in Megatron); sends and gradient reduction have their own streams.
inline constexpr std::string_view kComputeStream = "compute";

}  // namespace dtsim::strategies
