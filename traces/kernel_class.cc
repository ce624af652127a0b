#include "traces/kernel_class.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <tuple>
#include <vector>

#include "sim/base/strings.h"

namespace dtsim::traces {
namespace {

constexpr std::array<std::string_view, 6> kNames = {"gemm",        "attention", "conv",
                                                    "elementwise", "memory",    "all"};

// Lower-case name fragments per class (cuBLAS/cuBLASLt, CUTLASS and Hopper wgmma GEMMs;
// FlashAttention and cuDNN fused attention; cuDNN convolutions; PyTorch's elementwise and
// reduction kernels).
constexpr std::array<std::string_view, 6> kGemmPatterns = {"gemm",   "cutlass", "xmma",
                                                           "cublas", "wgmma",   "matmul"};
constexpr std::array<std::string_view, 5> kAttentionPatterns = {"flash", "fmha", "attention",
                                                                "sdpa", "mha_"};
constexpr std::array<std::string_view, 3> kConvolutionPatterns = {"conv", "winograd", "dgrad"};
constexpr std::array<std::string_view, 4> kElementwisePatterns = {"elementwise", "vectorized",
                                                                  "unrolled", "reduce_kernel"};

template <size_t N>
bool Contains(const std::string& lower, const std::array<std::string_view, N>& patterns) {
  return std::any_of(patterns.begin(), patterns.end(),
                     [&](std::string_view p) { return lower.find(p) != std::string::npos; });
}

}  // namespace

std::string_view KernelClassName(KernelClass kind) { return kNames[static_cast<size_t>(kind)]; }

std::span<const std::string_view> KernelClassNames() { return kNames; }

std::optional<KernelClass> KernelClassFromName(std::string_view name) {
  const auto it = std::find(kNames.begin(), kNames.end(), name);
  if (it == kNames.end()) return std::nullopt;
  return static_cast<KernelClass>(it - kNames.begin());
}

bool InKernelClass(KernelClass kind_class, DeviceEventKind kind, std::string_view name) {
  if (kind != DeviceEventKind::kKernel) return kind_class == KernelClass::kMemory;
  const std::string lower = ToLower(name);
  if (lower.find("nccl") != std::string::npos) return false;
  switch (kind_class) {
    case KernelClass::kGemm:
      return Contains(lower, kGemmPatterns);
    case KernelClass::kAttention:
      return Contains(lower, kAttentionPatterns);
    case KernelClass::kConvolution:
      return Contains(lower, kConvolutionPatterns);
    case KernelClass::kElementwise:
      return Contains(lower, kElementwisePatterns);
    case KernelClass::kMemory:
      return false;
    case KernelClass::kAll:
      return true;
  }
  return false;
}

Expected<KernelSpeedup> ParseKernelSpeedup(std::string_view text) {
  const size_t equals = text.find('=');
  if (equals == std::string_view::npos) {
    return Error("a speedup is CLASS=FACTOR, e.g. gemm=1.5", "", std::string(text));
  }
  const std::string_view name = text.substr(0, equals);
  const std::optional<KernelClass> kind = KernelClassFromName(name);
  if (!kind) {
    return Error(fmt::format("unknown kernel class{}; known: {}", DidYouMean(name, kNames),
                             JoinQuoted(kNames)),
                 "", Quote(name));
  }
  std::string_view factor_text = text.substr(equals + 1);
  int32_t rank = -1;
  if (const size_t at = factor_text.find('@'); at != std::string_view::npos) {
    const std::string_view rank_text = factor_text.substr(at + 1);
    const auto [rank_end, rank_ec] =
        std::from_chars(rank_text.data(), rank_text.data() + rank_text.size(), rank);
    if (rank_ec != std::errc() || rank_end != rank_text.data() + rank_text.size() || rank < 0) {
      return Error("the rank after @ is a rank number of the job, e.g. all=1.2@3", "",
                   std::string(rank_text));
    }
    factor_text = factor_text.substr(0, at);
  }
  double factor = 0;
  const auto [end, ec] =
      std::from_chars(factor_text.data(), factor_text.data() + factor_text.size(), factor);
  if (ec != std::errc() || end != factor_text.data() + factor_text.size() ||
      !std::isfinite(factor) || factor <= 0) {
    return Error("a speedup factor is a positive number", "", std::string(factor_text));
  }
  return KernelSpeedup{*kind, factor, rank};
}

std::optional<size_t> RepeatedSpeedup(std::span<const KernelSpeedup> speedups) {
  std::vector<std::tuple<KernelClass, int32_t, size_t>> keys;
  keys.reserve(speedups.size());
  for (size_t i = 0; i < speedups.size(); ++i) {
    keys.emplace_back(speedups[i].kernels, speedups[i].rank, i);
  }
  std::sort(keys.begin(), keys.end());
  std::optional<size_t> first;
  for (size_t k = 1; k < keys.size(); ++k) {
    const auto& [kind, rank, index] = keys[k];
    const auto& [previous_kind, previous_rank, previous_index] = keys[k - 1];
    // Within a group of equal keys the indices ascend: the second is the group's repeat.
    const bool second =
        kind == previous_kind && rank == previous_rank &&
        (k < 2 || std::get<0>(keys[k - 2]) != kind || std::get<1>(keys[k - 2]) != rank);
    if (second && (!first || index < *first)) first = index;
  }
  return first;
}

Error RepeatedSpeedupError(const KernelSpeedup& repeated, std::string text) {
  return Error(fmt::format("a second speedup of the {} class{}: give each class once",
                           KernelClassName(repeated.kernels),
                           repeated.rank < 0 ? "" : fmt::format(" on rank {}", repeated.rank)),
               "", std::move(text));
}

}  // namespace dtsim::traces
