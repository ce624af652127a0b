// Simulated time: int64 nanoseconds in two strong types, a point (TimeNs) and an interval
// (DurationNs). Doubles appear only at I/O (ToSecondsDouble, ToMicrosecondsDouble) and where
// a cost model computes a time (ClampedNs).
//
// Arithmetic saturates at ±int64 max instead of overflowing: a time past ~292 years comes
// only from an absurd input (a 2^63 ns task, an exabyte at 1 b/s), and saturating keeps it
// a huge number, which the simulator then refuses as past its horizon (engine::Simulator),
// rather than undefined behaviour or a negative time.
#pragma once

#include <compare>
#include <cstdint>
#include <limits>

namespace dtsim {
namespace time_detail {

inline constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
inline constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

constexpr int64_t Add(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return b > 0 ? kMax : kMin;
  return sum;
}
constexpr int64_t Subtract(int64_t a, int64_t b) {
  int64_t difference = 0;
  if (__builtin_sub_overflow(a, b, &difference)) return b < 0 ? kMax : kMin;
  return difference;
}
constexpr int64_t Multiply(int64_t a, int64_t b) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return (a < 0) == (b < 0) ? kMax : kMin;
  return product;
}

}  // namespace time_detail

// An interval of simulated time in nanoseconds. May be negative as the difference of two
// points; costs and delays are validated to be non-negative where they enter the system.
class DurationNs {
 public:
  constexpr DurationNs() = default;
  constexpr explicit DurationNs(int64_t ns) : ns_(ns) {}

  constexpr int64_t ns() const { return ns_; }
  constexpr double ToSecondsDouble() const { return static_cast<double>(ns_) * 1e-9; }
  constexpr double ToMicrosecondsDouble() const { return static_cast<double>(ns_) * 1e-3; }

  static constexpr DurationNs Zero() { return DurationNs(0); }
  static constexpr DurationNs Max() { return DurationNs(std::numeric_limits<int64_t>::max()); }

  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads a defaulted <=>
  constexpr auto operator<=>(const DurationNs&) const = default;
  constexpr DurationNs operator+(DurationNs other) const {
    return DurationNs(time_detail::Add(ns_, other.ns_));
  }
  constexpr DurationNs operator-(DurationNs other) const {
    return DurationNs(time_detail::Subtract(ns_, other.ns_));
  }
  constexpr DurationNs operator*(int64_t factor) const {
    return DurationNs(time_detail::Multiply(ns_, factor));
  }
  constexpr DurationNs& operator+=(DurationNs other) { return *this = *this + other; }
  constexpr DurationNs& operator-=(DurationNs other) { return *this = *this - other; }

 private:
  int64_t ns_ = 0;
};

// A point in simulated time, nanoseconds since the start of the simulation.
class TimeNs {
 public:
  constexpr TimeNs() = default;
  constexpr explicit TimeNs(int64_t ns) : ns_(ns) {}

  constexpr int64_t ns() const { return ns_; }
  constexpr double ToSecondsDouble() const { return static_cast<double>(ns_) * 1e-9; }

  static constexpr TimeNs Zero() { return TimeNs(0); }
  static constexpr TimeNs Max() { return TimeNs(std::numeric_limits<int64_t>::max()); }

  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads a defaulted <=>
  constexpr auto operator<=>(const TimeNs&) const = default;
  constexpr TimeNs operator+(DurationNs d) const { return TimeNs(time_detail::Add(ns_, d.ns())); }
  constexpr TimeNs operator-(DurationNs d) const {
    return TimeNs(time_detail::Subtract(ns_, d.ns()));
  }
  constexpr DurationNs operator-(TimeNs other) const {
    return DurationNs(time_detail::Subtract(ns_, other.ns_));
  }
  constexpr TimeNs& operator+=(DurationNs d) { return *this = *this + d; }

 private:
  int64_t ns_ = 0;
};

// A duration a cost model computed in floating point, already rounded as the model wants
// (std::ceil, std::round): values past the int64 range, and NaN, saturate like the
// arithmetic above (NaN to the maximum: a cost nobody can pay).
constexpr DurationNs ClampedNs(double ns) {
  // 2^63 exactly: every double below it converts to an int64 without overflow.
  constexpr double kLimit = 9223372036854775808.0;
  if (!(ns < kLimit)) return DurationNs::Max();
  if (ns < -kLimit) return DurationNs(time_detail::kMin);
  return DurationNs(static_cast<int64_t>(ns));
}

constexpr DurationNs Nanoseconds(int64_t n) { return DurationNs(n); }
constexpr DurationNs Microseconds(int64_t n) { return DurationNs(n * 1000); }
constexpr DurationNs Milliseconds(int64_t n) { return DurationNs(n * 1000 * 1000); }
constexpr DurationNs Seconds(int64_t n) { return DurationNs(n * 1000 * 1000 * 1000); }

}  // namespace dtsim
