// A model from a Hugging Face `config.json` (`"model": {"hf_config": "path/config.json"}`,
// docs/models.md "From a Hugging Face config"): the architectures dtsim models — Llama,
// Mistral, Mixtral, Qwen2, Qwen3, Qwen2/3-MoE, DeepSeek-V3, GPT-OSS, Gemma 3, Llama 4, GPT-2,
// BERT — read into a model spec; a field dtsim cannot model is an error naming it.
#pragma once

#include <string>

#include "sim/base/json_reader.h"
#include "sim/base/status.h"

namespace dtsim::models {

// The model spec (docs/models.md's JSON form, "family": "transformer") of the Hugging Face
// config `hf`. Errors name the config's field and value; the caller adds the file.
Expected<Json> ModelJsonFromHfConfig(const Json& hf);

}  // namespace dtsim::models
