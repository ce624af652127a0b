// A training job's launch arguments read back as a dtsim config (issue 30: launch arguments
// in) — the inverse of launch_arguments.h. Megatron-LM's pretrain_gpt.py flags (the release
// of kMegatronRelease, and the older spellings still common in published scripts), or
// Megatron-DeepSpeed's with DeepSpeed's config JSON, become the
// model's shape, the batch, the precision, TP/SP/PP/VP/CP/EP, ZeRO (the distributed optimizer,
// Megatron-FSDP), recompute and the overlap of the gradient reduction. A flag dtsim does not
// model is listed, never dropped silently.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/json_reader.h"
#include "sim/base/status.h"

namespace dtsim::strategies {

struct ImportedConfig {
  Json config;  // a dtsim config: model, training, cluster, parallelism
  // The flags read but not modelled ("--lr 3e-4": optimizer settings, data, logging, ...).
  std::vector<std::string> not_modelled;
};

struct ImportTarget {
  Json cluster;                  // the config's cluster section; its `nodes` sizes the job
  std::optional<int64_t> vocab;  // the tokenizer's vocabulary when no --vocab-size gives it
};

// A launch script's arguments as words: whitespace-separated, `\` line continuations and
// # comments dropped (dtsim search --emit's plan-K.megatron.txt reads back this way).
std::vector<std::string> SplitLaunchArguments(std::string_view text);

// `args`: the arguments of pretrain_gpt.py, as a shell splits them ("--num-layers", "96", or
// "--num-layers=96"), after the environment assignments the launch exports, if any
// ("NCCL_P2P_NET_CHUNKSIZE=2097152": cluster.nccl; the others listed as not modelled). Errors
// name the flag or variable and its value; a config the flags leave invalid is an error from
// the config reader, naming the JSON path.
Expected<ImportedConfig> ImportMegatronArguments(std::span<const std::string> args,
                                                 const ImportTarget& target);

// Megatron-DeepSpeed's pretrain_gpt.py arguments (the flags launch_arguments.h's
// DeepSpeedArguments writes: Megatron-LM's older spellings, DeepSpeed's MoE and Ulysses flags)
// with DeepSpeed's configuration JSON, which gives the batch, ZeRO's stage and overlap, the
// precision and the reduction's dtype or 1-bit optimizer; where both give a setting they must
// agree. Keys of the JSON dtsim does not read are listed with the flags ("ds_config KEY: VALUE").
// Errors in the JSON name `ds_config_file` and the key path.
Expected<ImportedConfig> ImportDeepSpeedArguments(std::span<const std::string> args,
                                                  const Json& ds_config,
                                                  const std::string& ds_config_file,
                                                  const ImportTarget& target);

}  // namespace dtsim::strategies
