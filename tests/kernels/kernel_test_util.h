// Helpers for the kernel tests: random data, quantised matrices with their own storage, and
// plain double-precision references.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gguf/ggml_type.h"
#include "gguf/tensor_view.h"
#include "kernels/quant.h"

namespace tangram::testing {

// float -> double without tripping -Wdouble-promotion.
inline double dbl(float v) { return static_cast<double>(v); }

inline std::vector<float> random_normal(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// A rows x cols matrix stored as `type`, with its TensorView and dequantised values.
struct QuantMatrix {
  GgmlType type;
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> bytes;  // [rows][row_bytes]
  std::vector<float> deq;      // [rows][cols]: exactly what the stored blocks decode to

  TensorView view() const {
    TensorView v;
    v.type = type;
    v.ne = {cols, rows, 1, 1};
    v.n_dims = 2;
    v.data = bytes.data();
    v.nbytes = bytes.size();
    return v;
  }
};

inline QuantMatrix make_matrix(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  QuantMatrix m{type, rows, cols, {}, {}};
  const size_t rb = ggml_row_bytes(type, cols);
  m.bytes.assign(rb * static_cast<size_t>(rows), 0);
  m.deq.assign(static_cast<size_t>(rows * cols), 0.0f);
  const auto src = random_normal(static_cast<size_t>(rows * cols), seed, 0.05f);
  for (int64_t r = 0; r < rows; ++r) {
    quantize_row(type, src.data() + r * cols, m.bytes.data() + r * rb, cols);
    dequantize_row(type, m.bytes.data() + r * rb, m.deq.data() + r * cols, cols);
  }
  return m;
}

inline const GgmlType kAllWeightTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16,
                                           GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K,
                                           GgmlType::Q6_K};

// Upper bound on |dot(w, x) - dot(w, x_hat)| where x_hat is x quantised the way the decode
// kernels quantise activations for a weight of type `wtype`: per block of B elements the code
// step is d = amax/127 (stored as fp16 for Q8_0), so |x - x_hat| <= d/2 + 127 d 2^-11 (fp16
// rounding of d). Float accumulation adds at most about n * 2^-24 of sum |w x| (the classic
// worst-case bound for a length-n dot product), plus slack for the per-block scale products.
inline double activation_error_bound(GgmlType wtype, const float* w, const float* x, int64_t n) {
  int block = 0;
  double fp16_slack = 0.0;
  if (wtype == GgmlType::Q4_0 || wtype == GgmlType::Q8_0) {
    block = 32;
    fp16_slack = 127.0 / 2048.0;
  } else if (wtype == GgmlType::Q4_K || wtype == GgmlType::Q6_K) {
    block = 256;
  }
  double abs_sum = 0.0, bound = 0.0;
  for (int64_t i = 0; i < n; ++i)
    abs_sum += std::fabs(static_cast<double>(w[i]) * static_cast<double>(x[i]));
  if (block > 0) {
    for (int64_t b = 0; b < n; b += block) {
      double amax = 0.0, wsum = 0.0;
      for (int64_t i = b; i < b + block; ++i) {
        amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
        wsum += std::fabs(static_cast<double>(w[i]));
      }
      bound += wsum * (amax / 127.0) * (0.5 + fp16_slack) * 1.001;
    }
  }
  return bound + (static_cast<double>(n) * 6e-8 + 1e-6) * abs_sum + 1e-30;
}

}  // namespace tangram::testing
