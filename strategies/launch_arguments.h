// A simulated plan as the launch arguments of the framework that would run it (issue 35: plans
// out). Megatron-LM's `pretrain_gpt.py` flags, for the release named in kMegatronRelease; what
// the plan has that no flag expresses is listed, never dropped.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sim/base/json_reader.h"
#include "strategies/config.h"

namespace dtsim::strategies {

// The Megatron-LM release whose flag names the arguments use (Megatron-Core with Megatron-FSDP).
inline constexpr std::string_view kMegatronRelease = "Megatron-LM core_v0.14";
// Megatron-DeepSpeed's commit whose pretrain_gpt.py flags (megatron/arguments.py) and example
// DeepSpeed configs (examples_deepspeed/) the DeepSpeed arguments follow.
inline constexpr std::string_view kDeepSpeedRelease = "Megatron-DeepSpeed f4157be (2024-12-24)";

// Megatron-Bridge's commit whose run_recipe.py overrides (and flag-to-override table,
// scripts/translate_mlm_to_bridge.py) the Bridge arguments follow.
inline constexpr std::string_view kBridgeRelease = "Megatron-Bridge 067f987 (2026-08-22)";

struct LaunchArguments {
  std::string framework;                       // "Megatron-LM core_v0.14"
  std::string what = "pretrain_gpt.py flags";  // what `arguments` are
  // Exported for the launch, before the flags: "NCCL_P2P_NET_CHUNKSIZE=2097152" (the config's
  // NCCL settings that differ from NCCL's defaults; LaunchEnvironment).
  std::vector<std::string> environment;
  std::vector<std::string> arguments;      // "--tensor-model-parallel-size 2", one flag a line
  std::vector<std::string> not_expressed;  // settings of the plan no flag expresses
  Json config_file;                        // DeepSpeed: the ds_config.json; else null
};

// The environment a launch exports for the config's cluster: NCCL_P2P_NET_CHUNKSIZE when
// `cluster.nccl.p2p_net_chunk_size` is not NCCL's 128 KiB. Every framework's arguments carry it.
std::vector<std::string> LaunchEnvironment(const SimulationConfig& config);

// The model shape, batch, precision and parallelism of `config` as pretrain_gpt.py flags:
// TP/SP/PP (interleaved: virtual pipeline size), CP, EP, ZeRO (1: the distributed optimizer;
// 2 and 3: Megatron-FSDP's sharding strategies), recompute, FP8, flash attention.
LaunchArguments MegatronArguments(const SimulationConfig& config);

// The same plan as Megatron-Bridge's ConfigContainer overrides for run_recipe.py (NeMo's
// Megatron-Core trainer): MegatronArguments' flags through Bridge's flag-to-override table, the
// precision as one of its named mixed-precision recipes; a flag without a key is listed.
LaunchArguments MegatronBridgeArguments(const SimulationConfig& config);

// The flags both GPT scripts spell alike — layers, hidden and FFN sizes, heads, the head size
// when not hidden/heads, position table, vocabulary padding — and the note that the
// vocabulary is the tokenizer's.
void SizeFlags(const models::TransformerSpec& spec, std::vector<std::string>& args);
// Micro and global batch, sequence length and recompute (selective, or full uniform over one
// layer; the rest listed): both scripts' flags.
void BatchAndRecomputeFlags(const TrainingConfig& training, std::vector<std::string>& args,
                            std::vector<std::string>& not_expressed);
// With a time_to_train section, the iterations it needs at the plan's batch: --train-iters
// (both scripts; docs/time_to_train.md). A budget that cannot be computed is listed instead.
void RunLengthFlags(const SimulationConfig& config, std::vector<std::string>& args,
                    std::vector<std::string>& not_expressed);
void TokenizerNote(const models::TransformerSpec& spec, std::vector<std::string>& not_expressed);
// What neither GPT script's layer has a flag for: a GeGLU MLP (Megatron-LM's --quick-geglu is
// another approximation) and norms after the attention and the MLP (Gemma's, which
// Megatron-Bridge builds with a layer spec of its own).
void GemmaLayerNotes(const models::TransformerSpec& spec, std::vector<std::string>& not_expressed);

// The same for DeepSpeed through Megatron-DeepSpeed's pretrain_gpt.py (`deepspeed` or
// `torchrun` launches it with `--deepspeed --deepspeed_config ds_config.json`): its flags for
// the model, TP/SP/PP, Ulysses sequence parallelism (all-to-all context parallelism), MoE
// expert parallelism, ZeRO stage and recompute, and the ds_config.json of the batch, ZeRO,
// precision and 1-bit optimizers. What DeepSpeed cannot run (ZeRO-2/3 with a pipeline,
// interleaved stages, ring context parallelism) is listed. The flags name the config file
// `config_path`.
LaunchArguments DeepSpeedArguments(const SimulationConfig& config,
                                   std::string_view config_path = "ds_config.json");

}  // namespace dtsim::strategies
