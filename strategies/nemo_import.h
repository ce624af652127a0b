// A NeMo training config read back as a dtsim config (issue 30: launch arguments in). NeMo
// 1.x trains GPT-style models from one YAML file — the NeMo Framework Launcher ships them as
// conf/training/<family>/<size>.yaml (gpt3/175b.yaml, llama/llama2_70b.yaml), NeMo's
// megatron_gpt_pretraining.py reads the same `trainer:` and `model:` sections. Its keys are
// Megatron-Core's settings under NeMo's names, so each one dtsim models becomes the
// pretrain_gpt.py flag it stands for and ImportMegatronArguments reads them: one reading of
// Megatron's semantics for both. Every key dtsim does not model is listed by its path.
//
// OmegaConf's interpolations are resolved where a key is read: `${model.hidden_size}` (the
// launcher's `${training.model.hidden_size}` too: its training config sits under `training`),
// the relative `${.hidden_size}` and `${..x}`, and NeMo's resolvers `${multiply:a,b}`,
// `${divide_ceil:a,b}` and `${divide_floor:a,b}`. Scalars are typed as OmegaConf's YAML loader
// types them (`1e-5` a number; yes/no/on/off booleans).
#pragma once

#include <string>

#include "sim/base/json_reader.h"
#include "sim/base/status.h"
#include "strategies/launch_import.h"

namespace dtsim::strategies {

// `yaml`: the config as sim/base/yaml_reader.h reads it (scalars as text); errors name `file`
// and the key's path ("model.num_layers"). The job's size is trainer.num_nodes nodes of
// trainer.devices GPUs: `target.cluster` gives the preset and GPU, and its `nodes`, when
// given, must agree; its GPUs per node must be trainer.devices. The vocabulary is the
// tokenizer's: GPT-2's BPE (Megatron's GPT2BPETokenizer) has 50,257 tokens, any other comes
// from `target.vocab`.
Expected<ImportedConfig> ImportNemoConfig(const Json& yaml, const std::string& file,
                                          const ImportTarget& target);

}  // namespace dtsim::strategies
