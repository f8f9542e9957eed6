#include "model/rope.h"

#include <cmath>

namespace tangram {

Rope::Rope(const ModelConfig& c, const std::vector<float>& freq_factors) : layout_(c.rope_layout) {
  const int half = c.rope_dim / 2;
  const double pos_scale = c.rope_scaling == RopeScaling::Linear ? 1.0 / c.rope_scale_factor : 1.0;
  inv_freq_.resize(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) {
    double f = std::pow(c.rope_base, -2.0 * i / c.rope_dim) * pos_scale;
    if (!freq_factors.empty()) f /= static_cast<double>(freq_factors[static_cast<size_t>(i)]);
    inv_freq_[static_cast<size_t>(i)] = f;
  }
}

void Rope::tables(int64_t pos0, int64_t n, float* cos_out, float* sin_out) const {
  const auto h = static_cast<int64_t>(inv_freq_.size());
  for (int64_t t = 0; t < n; ++t) {
    const auto pos = static_cast<double>(pos0 + t);
    for (int64_t i = 0; i < h; ++i) {
      const double angle = pos * inv_freq_[static_cast<size_t>(i)];
      cos_out[t * h + i] = static_cast<float>(std::cos(angle));
      sin_out[t * h + i] = static_cast<float>(std::sin(angle));
    }
  }
}

void Rope::apply(float* x, int64_t n, int n_heads, int head_dim, const float* cos,
                 const float* sin) const {
  const auto h = static_cast<int64_t>(inv_freq_.size());
  for (int64_t t = 0; t < n; ++t) {
    const float* c = cos + t * h;
    const float* s = sin + t * h;
    for (int64_t head = 0; head < n_heads; ++head) {
      float* v = x + (t * n_heads + head) * head_dim;
      if (layout_ == RopeLayout::Interleaved) {
        for (int64_t i = 0; i < h; ++i) {
          const float a = v[2 * i], b = v[2 * i + 1];
          v[2 * i] = a * c[i] - b * s[i];
          v[2 * i + 1] = a * s[i] + b * c[i];
        }
      } else {
        for (int64_t i = 0; i < h; ++i) {
          const float a = v[i], b = v[i + h];
          v[i] = a * c[i] - b * s[i];
          v[i + h] = a * s[i] + b * c[i];
        }
      }
    }
  }
}

}  // namespace tangram
