// Checks of a parallel plan against the model that config.cc's Resolve runs (each error names
// the JSON path and the value): divisibility, and expert parallelism with its folding.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sim/base/status.h"
#include "strategies/config.h"

namespace dtsim::strategies {

// "<what> (<value>) is not divisible by <by_what> (<by>)" at `path`.
Status Divisible(int64_t value, std::string_view what, int64_t by, std::string_view by_what,
                 const std::string& path);

// Expert parallelism against the MoE model: the size divides the experts and the ranks it is
// carved out of (data × context, or under MoE parallel folding tensor × data × context); the
// expert tensor size is the tensor size or 1 (folding: 1D, sequence parallel, balanced
// routing); skewed routing at most the expert-parallel size.
Status CheckExpertPlan(const SimulationConfig& config);
// Whether Megatron-Core runs its expert all-to-all overlap on `plan` (core_r0.14
// transformer_config.py): expert parallelism, no pipeline or an interleaved one, no full
// recompute; under framework megatron. CheckExpertPlan says which of them fails; the search
// keeps a config's overlap on the plans that allow it.
bool ExpertOverlapAllowed(const ParallelPlan& plan, models::Recompute recompute,
                          models::Framework framework);

// The GPU has a matrix peak for the training's dtype (a V100 none for bf16: its GEMMs had no
// rate but the vector units' and its MFU printed "inf%") and, with FP8, FP8 tensor cores
// (MXFP8: microscaling). Errors at `precision_path` / `recipe_path`: a config's
// training.precision and training.fp8_recipe, dtsim model's dtype and fp8_recipe.
Status CheckGpuPrecision(const models::GpuSpec& gpu, DType dtype, models::Fp8Recipe recipe,
                         const std::string& precision_path, const std::string& recipe_path);
// A learned position table has max_seq rows: a longer sequence has no position to look up
// (Megatron-LM asserts max_position_embeddings >= seq_length), and the parameters counted would
// be the shorter table's; rotary positions have no table. The error is at `seq_path`; `table`
// says where max_seq comes from ("model.max_seq") and `remedy` ends the message.
Status CheckLearnedPositions(const models::TransformerSpec& transformer, int64_t seq_len,
                             const std::string& seq_path, std::string_view table,
                             std::string_view remedy);
// FP8 training: a transformer, 1D tensor parallelism (the GPU: CheckGpuPrecision).
Status CheckFp8(const SimulationConfig& config);
// Selective op checkpointing over 1D tensor parallelism only.
Status CheckRecompute(const SimulationConfig& config);
// The model's sizes, multiplied as its ops, memory and parameter counts multiply them, stay
// below kMaxElements: dtsim counts elements and bytes in int64, and sizes each within its own
// field's bound can still multiply past it (a hidden of 10^9 squared, a 10^13-token sequence's
// attention scores). Checked in floating point before any model computes them; the error names
// the product, its factors and the fields to reduce.
inline constexpr double kMaxElements = 72057594037927936.0;  // 2^56: ×128 for bytes and FLOPs
Status CheckSizesFit(const SimulationConfig& config);
// The same for one micro-batch of `micro_batch` sequences of `seq_len` tokens on `tensor`
// tensor-parallel ranks (`dtsim model`'s query); errors are at "model", naming `model_name`.
Status CheckSizesFit(const models::TransformerSpec& spec, int64_t micro_batch, int64_t seq_len,
                     int tensor, const std::string& model_name);
// Under "deepspeed": ZeRO stage 1 at most with a pipeline; ZeRO-3 before 0.5.5 on dense 1D
// plans with recompute none, selective or full.
Status CheckDeepSpeed(const SimulationConfig& config);
// training.reshard_after_forward false only under FSDP2 (framework pytorch, zero_stage 3).
Status CheckFsdp(const SimulationConfig& config);
// Activation offloading as Megatron-Core allows it (TransformerConfig.__post_init__): Megatron,
// fewer layers than the model's, no pipeline parallelism, no activation recompute; and a GPU
// whose host link is known.
Status CheckActivationOffload(const SimulationConfig& config);

}  // namespace dtsim::strategies
