// PyTorch's dtype names as traces write them ("float", "c10::BFloat16", "long int",
// "unsigned char", "Float"): one table for every reader, giving the element size and, where
// dtsim prices that type, its DType.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "sim/base/dtype.h"

namespace dtsim::traces {

struct TorchDtype {
  int64_t bytes = 0;           // per element
  std::optional<DType> dtype;  // none for types dtsim does not price (bool, int16, complex)
};

// Case-insensitive, with or without the "c10::" prefix; nullopt when the name is unknown.
std::optional<TorchDtype> LookUpTorchDtype(std::string_view name);

}  // namespace dtsim::traces
