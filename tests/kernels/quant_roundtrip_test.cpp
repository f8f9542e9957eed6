// quantize_row -> dequantize_row on random data stays within each type's error bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/quant.h"
#include "kernels/quant_internal.h"

namespace tangram {
namespace {

using testing::random_normal;

constexpr int64_t kN = 256 * 64;  // 16384 elements: 512 Q8_0 blocks, 64 K-quant super-blocks

// Data with a realistic spread: mostly N(0, 1), plus a few large outliers per 256.
std::vector<float> test_data(uint32_t seed) {
  auto x = random_normal(kN, seed);
  for (int64_t i = 0; i < kN; i += 97) x[static_cast<size_t>(i)] *= 6.0f;
  return x;
}

std::vector<float> roundtrip(GgmlType t, const std::vector<float>& x,
                             std::vector<uint8_t>* bytes = nullptr) {
  std::vector<uint8_t> q(ggml_row_bytes(t, kN));
  quantize_row(t, x.data(), q.data(), kN);
  std::vector<float> y(kN);
  dequantize_row(t, q.data(), y.data(), kN);
  if (bytes) *bytes = q;
  return y;
}

double rms(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double e = testing::dbl(a[i]) - testing::dbl(b[i]);
    s += e * e;
  }
  return std::sqrt(s / static_cast<double>(a.size()));
}

TEST(QuantRoundtrip, FloatTypes) {
  const auto x = test_data(1);
  EXPECT_EQ(roundtrip(GgmlType::F32, x), x);
  const auto h = roundtrip(GgmlType::F16, x);
  const auto b = roundtrip(GgmlType::BF16, x);
  for (int64_t i = 0; i < kN; ++i) {
    const float ax = std::fabs(x[i]);
    // Half an ulp of 11 bits; below 2^-14 halves are subnormal with a fixed step of 2^-24.
    EXPECT_LE(std::fabs(h[i] - x[i]), std::max(ax * 0x1p-11f, 0x1p-25f)) << i;
    EXPECT_LE(std::fabs(b[i] - x[i]), ax * 0x1p-8f) << i;  // half an ulp of 8 bits
  }
}

TEST(QuantRoundtrip, Q8_0) {
  const auto x = test_data(2);
  const auto y = roundtrip(GgmlType::Q8_0, x);
  for (int64_t b = 0; b < kN; b += 32) {
    float amax = 0;
    for (int64_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    // Step d = amax/127: rounding costs d/2, the fp16 scale adds up to 127 * d * 2^-11.
    const float bound = amax / 127.0f * (0.5f + 127.0f / 2048.0f) * 1.001f;
    for (int64_t i = b; i < b + 32; ++i) ASSERT_LE(std::fabs(y[i] - x[i]), bound) << i;
  }
}

TEST(QuantRoundtrip, Q4_0) {
  const auto x = test_data(3);
  const auto y = roundtrip(GgmlType::Q4_0, x);
  for (int64_t b = 0; b < kN; b += 32) {
    float amax = 0;
    for (int64_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    // Step d = amax/8. The extreme maps to -8 exactly; values of the other sign may clamp at
    // +7, so the worst case is one full step (plus fp16 scale rounding: 8 * d * 2^-11).
    const float bound = amax / 8.0f * (1.0f + 8.0f / 2048.0f) * 1.001f;
    for (int64_t i = b; i < b + 32; ++i) ASSERT_LE(std::fabs(y[i] - x[i]), bound) << i;
  }
  // On average rounding costs about d/sqrt(12) ~ 0.29 d; allow 0.32 d for the clamped side.
  double allowed = 0;
  for (int64_t b = 0; b < kN; b += 32) {
    float amax = 0;
    for (int64_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    allowed += 32 * std::pow(0.32 * testing::dbl(amax) / 8, 2);
  }
  EXPECT_LT(rms(x, y), std::sqrt(allowed / kN));
}

TEST(QuantRoundtrip, Q8_K) {
  const auto x = test_data(4);
  std::vector<uint8_t> bytes;
  const auto y = roundtrip(GgmlType::Q8_K, x, &bytes);
  for (int64_t b = 0; b < kN; b += 256) {
    float amax = 0;
    for (int64_t i = b; i < b + 256; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float bound = amax / 127.0f * 0.5f * 1.0001f;
    for (int64_t i = b; i < b + 256; ++i) ASSERT_LE(std::fabs(y[i] - x[i]), bound) << i;
  }
  // Block sums: block layout is float d, int8 qs[256], int16 bsums[16].
  for (int64_t blk = 0; blk < kN / 256; ++blk) {
    const uint8_t* p = bytes.data() + blk * 292;
    for (int k = 0; k < 16; ++k) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += static_cast<int8_t>(p[4 + 16 * k + i]);
      int16_t stored;
      std::memcpy(&stored, p + 4 + 256 + 2 * k, 2);
      ASSERT_EQ(stored, sum) << blk << " " << k;
    }
  }
}

// K-quants. On Gaussian data (sub-blocks of similar spread) every element is within one code
// step of the sub-block's ideal step range/levels, allowing the 6-bit/int8 sub-block scales
// to be up to 1.5x coarser than ideal; the RMS error is within 20% of uniform rounding with the
// ideal step (range/levels/sqrt(12) per sub-block). With outliers some sub-blocks share a
// coarse super-block scale, so there we only bound the RMS error against that of Q4_0 / Q8_0
// (Q4_K must beat Q4_0 by 25% at the same 4.5 bits; Q6_K, two bits short of Q8_0, must stay
// within the 4x that costs).
double ideal_rms(const std::vector<float>& x, int sub, double levels) {
  double s = 0;
  for (size_t b = 0; b < x.size(); b += static_cast<size_t>(sub)) {
    float lo = 0, hi = 0;
    for (size_t i = b; i < b + static_cast<size_t>(sub); ++i) {
      lo = std::min(lo, x[i]);
      hi = std::max(hi, x[i]);
    }
    const double step = testing::dbl(hi - lo) / levels;
    s += step * step / 12.0 * sub;
  }
  return std::sqrt(s / static_cast<double>(x.size()));
}

void check_k_quant(GgmlType t, int sub, double levels, uint32_t seed) {
  const auto x = random_normal(kN, seed);
  const auto y = roundtrip(t, x);
  const double ideal = ideal_rms(x, sub, levels);
  EXPECT_LT(rms(x, y), 1.2 * ideal) << ggml_type_name(t);
  for (int64_t b = 0; b < kN; b += sub) {
    float lo = 0, hi = 0;
    for (int64_t i = b; i < b + sub; ++i) {
      lo = std::min(lo, x[i]);
      hi = std::max(hi, x[i]);
    }
    const double bound = 1.5 * testing::dbl(hi - lo) / levels;
    for (int64_t i = b; i < b + sub; ++i)
      ASSERT_LE(std::fabs(y[i] - x[i]), bound) << ggml_type_name(t) << " " << i;
  }
}

// Q4_K's min is an offset below zero, so its sub-block range always includes 0.
TEST(QuantRoundtrip, Q4_K) { check_k_quant(GgmlType::Q4_K, 32, 15.0, 5); }
TEST(QuantRoundtrip, Q6_K) { check_k_quant(GgmlType::Q6_K, 16, 63.0, 6); }

TEST(QuantRoundtrip, KQuantsWithOutliers) {
  const auto x = test_data(7);
  const double q4_0 = rms(x, roundtrip(GgmlType::Q4_0, x));
  const double q8_0 = rms(x, roundtrip(GgmlType::Q8_0, x));
  const double q4_k = rms(x, roundtrip(GgmlType::Q4_K, x));
  const double q6_k = rms(x, roundtrip(GgmlType::Q6_K, x));
  // Measured on this data: Q4_0 0.148, Q4_K 0.099, Q8_0 0.0093, Q6_K 0.027.
  EXPECT_LT(q4_k, 0.75 * q4_0);
  EXPECT_LT(q6_k, 4.0 * q8_0);  // two bits fewer: 4x the step
}

// The SIMD activation quantisers write the same bytes as the portable ones.
TEST(QuantRoundtrip, ActivationQuantisersMatchPortable) {
  auto x = test_data(8);
  x[5] = 0.5f / 127.0f * 3.0f;                        // values near rounding ties
  std::fill(x.begin() + 256, x.begin() + 512, 0.0f);  // an all-zero block
  using Fn = void (*)(const float*, void*, int64_t);
  struct Case {
    GgmlType type;
    Fn simd, portable;
  };
  for (const Case& c :
       {Case{GgmlType::Q8_0, quant::quantize_row_q8_0, quant::quantize_row_q8_0_portable},
        Case{GgmlType::Q8_K, quant::quantize_row_q8_k, quant::quantize_row_q8_k_portable}}) {
    const GgmlType type = c.type;
    std::vector<uint8_t> a(ggml_row_bytes(type, kN)), b(a.size());
    c.simd(x.data(), a.data(), kN);
    c.portable(x.data(), b.data(), kN);
    EXPECT_EQ(a, b) << ggml_type_name(type);
  }
}

TEST(QuantRoundtrip, ZerosAndConstantsAreExact) {
  for (const GgmlType t :
       {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_K}) {
    std::vector<float> zero(kN, 0.0f);
    EXPECT_EQ(roundtrip(t, zero), zero) << ggml_type_name(t);
  }
}

}  // namespace
}  // namespace tangram
