// Simulated time: int64 nanoseconds in two strong types, a point (TimeNs) and an interval
// (DurationNs). Doubles appear only at I/O (ToSecondsDouble, ToMicrosecondsDouble).
#pragma once

#include <compare>
#include <cstdint>
#include <limits>

namespace dtsim {

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
  constexpr DurationNs operator+(DurationNs other) const { return DurationNs(ns_ + other.ns_); }
  constexpr DurationNs operator-(DurationNs other) const { return DurationNs(ns_ - other.ns_); }
  constexpr DurationNs operator*(int64_t factor) const { return DurationNs(ns_ * factor); }
  constexpr DurationNs& operator+=(DurationNs other) {
    ns_ += other.ns_;
    return *this;
  }
  constexpr DurationNs& operator-=(DurationNs other) {
    ns_ -= other.ns_;
    return *this;
  }

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
  constexpr TimeNs operator+(DurationNs d) const { return TimeNs(ns_ + d.ns()); }
  constexpr TimeNs operator-(DurationNs d) const { return TimeNs(ns_ - d.ns()); }
  constexpr DurationNs operator-(TimeNs other) const { return DurationNs(ns_ - other.ns_); }
  constexpr TimeNs& operator+=(DurationNs d) {
    ns_ += d.ns();
    return *this;
  }

 private:
  int64_t ns_ = 0;
};

constexpr DurationNs Nanoseconds(int64_t n) { return DurationNs(n); }
constexpr DurationNs Microseconds(int64_t n) { return DurationNs(n * 1000); }
constexpr DurationNs Milliseconds(int64_t n) { return DurationNs(n * 1000 * 1000); }
constexpr DurationNs Seconds(int64_t n) { return DurationNs(n * 1000 * 1000 * 1000); }

}  // namespace dtsim
