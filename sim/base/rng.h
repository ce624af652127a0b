// A seeded, portable random number generator (xoshiro256** seeded by splitmix64), so that
// synthetic inputs are the same on every machine and standard library. Not for cryptography.
#pragma once

#include <cstdint>

namespace dtsim {

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (uint64_t& word : state_) word = SplitMix(seed);
  }

  uint64_t Next() {
    const uint64_t result = RotateLeft(state_[1] * 5, 7) * 9;
    const uint64_t shifted = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= shifted;
    state_[3] = RotateLeft(state_[3], 45);
    return result;
  }

  // Uniform in [0, bound). Precondition: bound > 0. Uses Lemire's multiply-shift; the bias is
  // below 2^-32 for bounds under 2^32, irrelevant for synthetic workloads.
  uint64_t Uniform(uint64_t bound) {
    __extension__ typedef unsigned __int128 Uint128;  // NOLINT(modernize-use-using)
    return static_cast<uint64_t>((static_cast<Uint128>(Next()) * bound) >> 64);
  }

 private:
  static uint64_t RotateLeft(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t SplitMix(uint64_t& seed) {
    uint64_t z = (seed += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  uint64_t state_[4] = {};
};

}  // namespace dtsim
