// Row dot products on quantised blocks: SIMD against portable kernels, and both against a
// double-precision dot of the dequantised weights with the float activation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernels/vec_dot.h"

namespace tangram {
namespace {

using testing::activation_error_bound;
using testing::make_matrix;
using testing::random_normal;

struct Case {
  GgmlType type;
  vec::RowDotFn simd;
  vec::RowDotFn portable;
};

const Case kCases[] = {
    {GgmlType::F16, vec::dot_f16_f32, vec::dot_f16_f32_portable},
    {GgmlType::BF16, vec::dot_bf16_f32, vec::dot_bf16_f32_portable},
    {GgmlType::Q4_0, vec::dot_q4_0_q8_0, vec::dot_q4_0_q8_0_portable},
    {GgmlType::Q8_0, vec::dot_q8_0_q8_0, vec::dot_q8_0_q8_0_portable},
    {GgmlType::Q4_K, vec::dot_q4_k_q8_k, vec::dot_q4_k_q8_k_portable},
    {GgmlType::Q6_K, vec::dot_q6_k_q8_k, vec::dot_q6_k_q8_k_portable},
};

double dot_double(const float* a, const float* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += testing::dbl(a[i]) * testing::dbl(b[i]);
  return s;
}

double abs_dot(const float* a, const float* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::fabs(testing::dbl(a[i]) * testing::dbl(b[i]));
  return s;
}

TEST(VecDot, QuantisedKernelsMatchReferences) {
  for (const int64_t cols : {256, 512, 2816}) {
    for (const Case& c : kCases) {
      const auto W = make_matrix(c.type, 5, cols, static_cast<uint32_t>(cols) + static_cast<uint32_t>(c.type));
      auto x = random_normal(static_cast<size_t>(cols), 99);
      x[3] = 9.0f;  // an outlier makes activation blocks uneven
      const GgmlType at = vec::activation_type(c.type);
      std::vector<uint8_t> act(ggml_row_bytes(at, cols));
      vec::quantize_activation(c.type, x.data(), act.data(), cols);
      std::vector<float> xq(static_cast<size_t>(cols));
      dequantize_row(at, act.data(), xq.data(), cols);
      for (int64_t r = 0; r < W.rows; ++r) {
        const uint8_t* w = W.bytes.data() + r * ggml_row_bytes(c.type, cols);
        const float* wd = W.deq.data() + r * cols;
        const float simd = c.simd(w, act.data(), cols);
        const float portable = c.portable(w, act.data(), cols);
        const double scale = abs_dot(wd, xq.data(), cols);
        SCOPED_TRACE(::testing::Message() << ggml_type_name(c.type) << " cols=" << cols << " row=" << r);
        // Same products, different float summation order: within a few ulp of sum |w x|.
        EXPECT_NEAR(simd, portable, 1e-6 * scale + 1e-30);
        // Exact arithmetic on the codes the kernel saw: only float rounding (n * 2^-24 bound).
        const double exact = dot_double(wd, xq.data(), cols);
        EXPECT_NEAR(simd, exact, (static_cast<double>(cols) * 6e-8 + 1e-6) * scale + 1e-30);
        // Against the float activation: also the activation's quantisation error, bounded.
        EXPECT_NEAR(simd, dot_double(wd, x.data(), cols), activation_error_bound(c.type, wd, x.data(), cols));
      }
    }
  }
}

// The multi-token kernels give each token what the single-token kernel gives it (up to float
// summation order).
TEST(VecDot, MultiTokenKernelsMatchSingle) {
  for (const GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q8_0,
                           GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_K}) {
    for (const int64_t cols : {256, 1280}) {
      const auto W = make_matrix(t, 1, cols, 5);
      const GgmlType at = vec::activation_type(t);
      const size_t stride = ggml_row_bytes(at, cols);
      std::vector<uint8_t> act(stride * vec::kMultiTokens);
      std::vector<float> xq(static_cast<size_t>(cols * vec::kMultiTokens));
      for (int k = 0; k < vec::kMultiTokens; ++k) {
        const auto x = random_normal(static_cast<size_t>(cols), 50 + static_cast<uint32_t>(k));
        vec::quantize_activation(t, x.data(), act.data() + k * stride, cols);
        dequantize_row(at, act.data() + k * stride, xq.data() + k * cols, cols);
      }
      for (int nt = 1; nt <= vec::kMultiTokens; ++nt) {
        float out[vec::kMultiTokens];
        vec::multi_dot_fn(t)(W.bytes.data(), act.data(), stride, nt, cols, out);
        for (int k = 0; k < nt; ++k) {
          const float single = vec::row_dot_fn(t)(W.bytes.data(), act.data() + k * stride, cols);
          const double scale = abs_dot(W.deq.data(), xq.data() + k * cols, cols);
          EXPECT_NEAR(out[k], single, 1e-6 * scale) << ggml_type_name(t) << " nt=" << nt << " k=" << k;
        }
      }
    }
  }
}

TEST(VecDot, RowDotUsesExactWeightsAndFloatActivation) {
  for (const GgmlType t : testing::kAllWeightTypes) {
    const auto W = make_matrix(t, 3, 512, 17);
    const auto x = random_normal(512, 3);
    for (int64_t r = 0; r < 3; ++r) {
      const double ref = dot_double(W.deq.data() + r * 512, x.data(), 512);
      EXPECT_NEAR(row_dot(W.view(), r, x.data()), ref, 512 * 6e-8 * abs_dot(W.deq.data() + r * 512, x.data(), 512))
          << ggml_type_name(t);
    }
    EXPECT_EQ(row_dot(W.view(), 3, x.data()), 0.0f);   // out of range: defined, no read
    EXPECT_EQ(row_dot(W.view(), -1, x.data()), 0.0f);
  }
}

TEST(VecDot, GetRowMatchesDequantisation) {
  for (const GgmlType t : testing::kAllWeightTypes) {
    const auto W = make_matrix(t, 4, 256, 23);
    std::vector<float> out(256);
    for (int64_t r = 0; r < 4; ++r) {
      get_row(W.view(), r, out.data());
      for (int i = 0; i < 256; ++i) ASSERT_EQ(out[i], W.deq[static_cast<size_t>(r * 256 + i)]) << ggml_type_name(t);
    }
    get_row(W.view(), 4, out.data());
    for (float v : out) ASSERT_EQ(v, 0.0f);
  }
}

}  // namespace
}  // namespace tangram
