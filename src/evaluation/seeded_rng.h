// A small, fully specified random generator for benchmark workloads. The standard library's
// distributions are implementation-defined, so the same seed could give a different workload under
// another compiler; everything here is spelled out, so a seed names one workload everywhere.
#pragma once

#include <cmath>
#include <cstdint>

namespace tangram {

class SeededRng {
 public:
  // Independent streams from one seed: the stream id is mixed into the state, so stream k of a
  // seed does not depend on how many numbers other streams drew.
  SeededRng(uint64_t seed, uint64_t stream)
      : state_(mix(seed ^ mix(stream + 0x632BE59BD9B4E019ULL))) {}

  // splitmix64: a 64-bit counter passed through a strong bijective mixer.
  uint64_t next_u64() {
    state_ += 0x9E3779B97F4A7C15ULL;
    return mix(state_);
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform01() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

  // Uniform integer in [lo, hi); requires lo < hi. Rejection keeps it unbiased.
  int64_t uniform_int(int64_t lo, int64_t hi) {
    const uint64_t range = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
    const uint64_t threshold = (0 - range) % range;  // 2^64 mod range
    uint64_t r = next_u64();
    while (r < threshold) r = next_u64();
    return lo + static_cast<int64_t>(r % range);
  }

  // Standard normal by Box-Muller (one of the pair is used; simplicity over speed).
  double normal() {
    const double u1 = 1.0 - uniform01();  // (0, 1]: log stays finite
    const double u2 = uniform01();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2);
  }

  // Exponential with the given mean (inverse CDF).
  double exponential(double mean) { return -mean * std::log(1.0 - uniform01()); }

 private:
  static constexpr double kPi = 3.14159265358979323846;

  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

  uint64_t state_;
};

}  // namespace tangram
