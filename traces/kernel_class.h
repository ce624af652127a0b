// Classes of GPU ops that replay what-ifs speed up ("GEMMs ×1.5 on a newer GPU"), recognized
// by the kernel's name (docs/replay.md lists the patterns). A kernel may belong to several
// classes; a what-if applies the first of its speedups whose class matches.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "sim/base/status.h"
#include "traces/trace.h"

namespace dtsim::traces {

enum class KernelClass : uint8_t { kGemm, kAttention, kConvolution, kElementwise, kMemory, kAll };

std::string_view KernelClassName(KernelClass kind);
std::span<const std::string_view> KernelClassNames();
std::optional<KernelClass> KernelClassFromName(std::string_view name);

// Whether a GPU op of `kind` named `name` belongs to `kind_class`. NCCL kernels belong to no
// class: communication is re-priced by the network model, not sped up.
bool InKernelClass(KernelClass kind_class, DeviceEventKind kind, std::string_view name);

struct KernelSpeedup {
  KernelClass kernels = KernelClass::kAll;
  double factor = 1;  // durations are divided by it
  int32_t rank = -1;  // only the trace of this rank of a job (a straggler); -1: every rank
};

// "gemm=1.5" → {kGemm, 1.5}; "all=1.2@3" → {kAll, 1.2, rank 3}. Errors name the class (with the
// known ones), the factor or the rank.
Expected<KernelSpeedup> ParseKernelSpeedup(std::string_view text);

// The first speedup of a list (by position) whose class and rank an earlier one has: one of the
// two factors would be dropped silently (the first match wins). O(n log n): a what-if may list
// a speedup per rank of a large job.
std::optional<size_t> RepeatedSpeedup(std::span<const KernelSpeedup> speedups);
// The error for it: "a second speedup of the gemm class on rank 3: give each class once".
Error RepeatedSpeedupError(const KernelSpeedup& repeated, std::string text);

}  // namespace dtsim::traces
