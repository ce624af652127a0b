// Classes of GPU ops that replay what-ifs speed up ("GEMMs ×1.5 on a newer GPU"), recognized
// by the kernel's name (docs/replay.md lists the patterns). A kernel may belong to several
// classes; a what-if applies the first of its speedups whose class matches.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

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

// Parses `text` and appends it to `speedups`; a second speedup of the same class and rank in
// one list is an error (one of the two factors would be dropped silently).
Status AddKernelSpeedup(std::string_view text, std::vector<KernelSpeedup>& speedups);

}  // namespace dtsim::traces
