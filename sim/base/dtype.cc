#include "sim/base/dtype.h"

#include <array>

namespace dtsim {
namespace {

constexpr std::array<std::string_view, kDTypeCount> kNames = {
    "fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "int32", "int64"};
constexpr std::array<int, kDTypeCount> kBytes = {8, 4, 4, 2, 2, 1, 1, 4, 8};

}  // namespace

int DTypeBytes(DType dtype) { return kBytes[static_cast<size_t>(dtype)]; }

std::string_view DTypeName(DType dtype) { return kNames[static_cast<size_t>(dtype)]; }

std::optional<DType> DTypeFromName(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<DType>(i);
  }
  return std::nullopt;
}

std::span<const std::string_view> DTypeNames() { return kNames; }

}  // namespace dtsim
