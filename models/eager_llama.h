// The eager loop of models/eager_allocations.h over a Llama-style decoder, as
// tools/gpu_checks/llama_step.py builds it after torchtitan's Llama 3
// (torchtitan/models/llama3/model/model.py): RMSNorm (nn.RMSNorm), rotary positions applied in
// complex fp32 (apply_rotary_emb: the q and k heads cast to fp32, multiplied by the rotation
// table, cast back), grouped-query attention whose keys and values repeat_kv copies to every
// head before flash attention, a SwiGLU MLP (w2(silu(w1 x) * w3 x)), no biases, an untied
// output layer. Under bf16 autocast with fp32 parameters and fused AdamW; every tensor in the
// order and at the size the allocator's own record of H200 runs shows
// (tests/data/measured/allocator_history/llama-200m-*.json.gz, torch 2.11).
#pragma once

#include "models/eager_allocations.h"
#include "models/model_spec.h"
#include "sim/base/status.h"

namespace dtsim::models {

// Whether `spec` is a Llama-style decoder (RMSNorm, SwiGLU, rotary positions): the model
// ReplayLlamaEager takes, or names what it lacks.
bool IsLlamaStyle(const TransformerSpec& spec);
// The run as ReplayEagerTraining has checked it (its entry point: positive sizes and ranks).
Expected<EagerPeaks> ReplayLlamaEager(const TransformerSpec& spec, const EagerRun& run);

}  // namespace dtsim::models
