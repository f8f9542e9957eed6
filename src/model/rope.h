// Rotary position embedding. Angles are computed in double (position x inverse frequency) and
// only then rounded, so long positions keep full float precision.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace tangram {

class Rope {
 public:
  Rope() = default;
  // freq_factors: [rope_dim / 2] Llama-3 divisors, or empty.
  Rope(const ModelConfig& config, const std::vector<float>& freq_factors);

  int half() const { return static_cast<int>(inv_freq_.size()); }

  // cos_out, sin_out: [n][rope_dim / 2] for positions pos0 .. pos0+n-1.
  void tables(int64_t pos0, int64_t n, float* cos_out, float* sin_out) const;

  // Rotates the first rope_dim elements of every head in place.
  //   x: [n][n_heads][head_dim]   cos, sin: [n][rope_dim / 2] from tables()
  void apply(float* x, int64_t n, int n_heads, int head_dim, const float* cos,
             const float* sin) const;

 private:
  std::vector<double> inv_freq_;  // [rope_dim / 2] radians per position
  RopeLayout layout_ = RopeLayout::Interleaved;
};

}  // namespace tangram
