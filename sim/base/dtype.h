// Element types of tensors, with their sizes: shared by op signatures (traces/), the models
// and the cost models. Names are the ones configs and op-cost tables use ("bf16", "fp32").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace dtsim {

enum class DType : uint8_t { kFp64, kFp32, kTf32, kFp16, kBf16, kFp8, kInt8, kInt32, kInt64 };

inline constexpr int kDTypeCount = 9;

// Bytes per element as stored in memory (tf32 is stored as fp32: 4).
int DTypeBytes(DType dtype);
std::string_view DTypeName(DType dtype);
std::optional<DType> DTypeFromName(std::string_view name);
std::span<const std::string_view> DTypeNames();

}  // namespace dtsim
