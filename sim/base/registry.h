// Registries of named entries — network models, cost models — each a constexpr array of
// structs with a `name`: their names in registry order, and lookup by name whose error lists
// the registered names with the nearest one.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "sim/base/status.h"
#include "sim/base/strings.h"

namespace dtsim {

template <typename Entry, size_t N>
constexpr std::array<std::string_view, N> RegistryNames(const std::array<Entry, N>& entries) {
  std::array<std::string_view, N> names{};
  for (size_t i = 0; i < N; ++i) names[i] = entries[i].name;
  return names;
}

// The entry named `name`, or "unknown <what> (did you mean …?); registered: …" naming `name`.
template <typename Entry>
Expected<const Entry*> FindInRegistry(std::span<const Entry> entries,
                                      std::span<const std::string_view> names,
                                      std::string_view name, std::string_view what) {
  for (const Entry& entry : entries) {
    if (entry.name == name) return &entry;
  }
  return Error("unknown " + std::string(what) + DidYouMean(name, names) +
                   "; registered: " + JoinQuoted(names),
               "", Quote(name));
}

}  // namespace dtsim
