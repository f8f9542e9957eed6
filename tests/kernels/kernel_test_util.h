// Helpers for the kernel tests: random data, quantised matrices with their own storage, and
// plain double-precision references.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

#include "gguf/ggml_type.h"
#include "gguf/tensor_view.h"
#include "kernels/interleaved_rows.h"
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
  for (int64_t i = 0; i < n; ++i) abs_sum += std::fabs(static_cast<double>(w[i]) * static_cast<double>(x[i]));
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

// The interleaved kernel type of a layout: Q4_K's takes rows and per-token sums, Q8_0's token tiles.
template <typename Interleaved>
using InterleavedFnOf = std::conditional_t<std::is_same_v<Interleaved, vec::InterleavedQ8_0>,
                                           vec::InterleavedQ8_0GemmFn, vec::InterleavedGemmFn<Interleaved>>;

// An interleaved kernel over nt tokens of row-major companion-type activations (act_stride
// bytes apart), with the activations prepared as matmul prepares them: Q4_K's per-token sums,
// Q8_0's token tiles (run a tile at a time).
inline void run_interleaved(vec::InterleavedGemmFn<vec::InterleavedQ4_K> gemm, const vec::InterleavedQ4_K* w,
                            int64_t nblocks, const uint8_t* act, size_t act_stride, int nt, float* out,
                            size_t out_stride) {
  const size_t sums_stride = static_cast<size_t>(nblocks) * vec::InterleavedKernel<vec::InterleavedQ4_K>::kSumsPerBlock;
  std::vector<int32_t> sums(sums_stride * static_cast<size_t>(nt));
  for (int t = 0; t < nt; ++t)
    vec::activation_sums(act + static_cast<size_t>(t) * act_stride, nblocks * vec::InterleavedQ4_K::kBlockElems,
                         static_cast<const vec::InterleavedQ4_K*>(nullptr), sums.data() + static_cast<size_t>(t) * sums_stride);
  gemm(w, nblocks, act, act_stride, sums.data(), sums_stride, nt, out, out_stride);
}
inline void run_interleaved(vec::InterleavedQ8_0GemmFn gemm, const vec::InterleavedQ8_0* w, int64_t nblocks,
                            const uint8_t* act, size_t act_stride, int nt, float* out, size_t out_stride) {
  std::vector<uint8_t> tiles(vec::q8_0_tiles_bytes(nt, nblocks));
  vec::pack_q8_0_tiles(act, act_stride, nt, nblocks * vec::InterleavedQ8_0::kBlockElems, tiles.data());
  vec::gemm_interleaved_q8_0_tiles(gemm, w, nblocks, tiles.data(), nt, out, out_stride);
}

}  // namespace tangram::testing
