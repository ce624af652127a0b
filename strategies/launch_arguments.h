// A simulated plan as the launch arguments of the framework that would run it (issue 35: plans
// out). Megatron-LM's `pretrain_gpt.py` flags, for the release named in kMegatronRelease; what
// the plan has that no flag expresses is listed, never dropped.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "strategies/config.h"

namespace dtsim::strategies {

// The Megatron-LM release whose flag names the arguments use (Megatron-Core with Megatron-FSDP).
inline constexpr std::string_view kMegatronRelease = "Megatron-LM core_v0.14";

struct LaunchArguments {
  std::string framework;                   // "Megatron-LM core_v0.14"
  std::vector<std::string> arguments;      // "--tensor-model-parallel-size 2", one flag a line
  std::vector<std::string> not_expressed;  // settings of the plan no flag expresses
};

// The model shape, batch, precision and parallelism of `config` as pretrain_gpt.py flags:
// TP/SP/PP (interleaved: virtual pipeline size), CP, EP, ZeRO (1: the distributed optimizer;
// 2 and 3: Megatron-FSDP's sharding strategies), recompute, FP8, flash attention.
LaunchArguments MegatronArguments(const SimulationConfig& config);

}  // namespace dtsim::strategies
