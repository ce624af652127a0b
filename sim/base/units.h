// Physical quantities in strong types. Decimal prefixes are powers of 10 (GB = 10^9 bytes) and
// binary prefixes powers of 2 (GiB = 2^30 bytes); the constants below are the only definitions.
#pragma once

#include <compare>
#include <cstdint>

#include "sim/base/time.h"

namespace dtsim {

inline constexpr int64_t kKilo = 1000;
inline constexpr int64_t kMega = kKilo * 1000;
inline constexpr int64_t kGiga = kMega * 1000;
inline constexpr int64_t kTera = kGiga * 1000;
inline constexpr int64_t kPeta = kTera * 1000;
inline constexpr int64_t kKibi = int64_t{1} << 10;
inline constexpr int64_t kMebi = int64_t{1} << 20;
inline constexpr int64_t kGibi = int64_t{1} << 30;
inline constexpr int64_t kTebi = int64_t{1} << 40;

// A non-negative amount of data in bytes.
class Bytes {
 public:
  constexpr Bytes() = default;
  constexpr explicit Bytes(int64_t count) : count_(count) {}

  constexpr int64_t count() const { return count_; }
  constexpr auto operator<=>(const Bytes&) const = default;
  constexpr Bytes operator+(Bytes other) const { return Bytes(count_ + other.count_); }
  constexpr Bytes operator*(int64_t factor) const { return Bytes(count_ * factor); }

 private:
  int64_t count_ = 0;
};

// A data rate. Stored as integer bits per second so that both "100 Gbps" (network) and
// "25 GB/s" (memory, NVLink) are exact; bytes_per_second() is for reports only.
class Bandwidth {
 public:
  constexpr Bandwidth() = default;
  static constexpr Bandwidth BitsPerSecond(int64_t bits) { return Bandwidth(bits); }
  static constexpr Bandwidth BytesPerSecond(int64_t bytes) { return Bandwidth(bytes * 8); }

  constexpr int64_t bits_per_second() const { return bits_per_second_; }
  constexpr double bytes_per_second() const { return static_cast<double>(bits_per_second_) / 8; }
  constexpr auto operator<=>(const Bandwidth&) const = default;

 private:
  constexpr explicit Bandwidth(int64_t bits) : bits_per_second_(bits) {}
  int64_t bits_per_second_ = 0;
};

// A floating-point operation rate (e.g. a GPU's dense bf16 peak), in FLOP per second.
class FlopRate {
 public:
  constexpr FlopRate() = default;
  constexpr explicit FlopRate(double flop_per_second) : flop_per_second_(flop_per_second) {}
  constexpr double flop_per_second() const { return flop_per_second_; }
  constexpr auto operator<=>(const FlopRate&) const = default;

 private:
  double flop_per_second_ = 0;
};

// The time to move `size` over `bandwidth`: ceil(bits / bits_per_second), in whole ns.
// Exact integer arithmetic (128-bit intermediate); a non-empty transfer never takes 0 ns;
// a time past the int64 range saturates (sim/base/time.h). Precondition: bandwidth is positive and
// size non-negative.
DurationNs TransferTime(Bytes size, Bandwidth bandwidth);

}  // namespace dtsim
