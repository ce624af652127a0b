#include "traces/torch_dtype.h"

#include <array>
#include <string>

#include "sim/base/strings.h"

namespace dtsim::traces {
namespace {

struct Entry {
  std::string_view name;  // lower case, without "c10::"
  TorchDtype type;
};

constexpr std::array<Entry, 27> kTypes = {{
    {"double", {8, DType::kFp64}},         {"float64", {8, DType::kFp64}},
    {"float", {4, DType::kFp32}},          {"float32", {4, DType::kFp32}},
    {"half", {2, DType::kFp16}},           {"float16", {2, DType::kFp16}},
    {"bfloat16", {2, DType::kBf16}},       {"float8_e4m3fn", {1, DType::kFp8}},
    {"float8_e5m2", {1, DType::kFp8}},     {"long", {8, DType::kInt64}},
    {"long int", {8, DType::kInt64}},      {"int64", {8, DType::kInt64}},
    {"int", {4, DType::kInt32}},           {"int32", {4, DType::kInt32}},
    {"short", {2, std::nullopt}},          {"int16", {2, std::nullopt}},
    {"char", {1, DType::kInt8}},           {"signed char", {1, DType::kInt8}},
    {"int8", {1, DType::kInt8}},           {"unsigned char", {1, DType::kInt8}},
    {"byte", {1, DType::kInt8}},           {"uint8", {1, DType::kInt8}},
    {"bool", {1, std::nullopt}},           {"complexfloat", {8, std::nullopt}},
    {"complexdouble", {16, std::nullopt}}, {"complexhalf", {4, std::nullopt}},
    {"float8_e4m3fnuz", {1, DType::kFp8}},
}};

}  // namespace

std::optional<TorchDtype> LookUpTorchDtype(std::string_view name) {
  std::string lower = ToLower(name);
  if (lower.starts_with("c10::")) lower.erase(0, 5);
  for (const Entry& entry : kTypes) {
    if (entry.name == lower) return entry.type;
  }
  return std::nullopt;
}

}  // namespace dtsim::traces
