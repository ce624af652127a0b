// Strongly typed dense indices (task 17, stream 3) so that a task id cannot be passed where a
// stream id is expected. Zero-cost wrappers over uint32_t; value() indexes arrays.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <limits>

namespace dtsim {

template <typename Tag>
class Index {
 public:
  static constexpr uint32_t kInvalidValue = std::numeric_limits<uint32_t>::max();

  constexpr Index() = default;
  constexpr explicit Index(uint32_t value) : value_(value) {}
  static constexpr Index Invalid() { return Index(); }

  constexpr uint32_t value() const { return value_; }
  constexpr bool valid() const { return value_ != kInvalidValue; }
  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads a defaulted <=>
  constexpr auto operator<=>(const Index&) const = default;

 private:
  uint32_t value_ = kInvalidValue;
};

}  // namespace dtsim

template <typename Tag>
struct std::hash<dtsim::Index<Tag>> {
  size_t operator()(dtsim::Index<Tag> index) const { return std::hash<uint32_t>()(index.value()); }
};
