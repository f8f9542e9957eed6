// Row dot products on quantised blocks: SIMD against portable kernels, and both against a
// double-precision dot of the dequantised weights with the float activation. Every kernel level
// this CPU can run is checked (cpu::supported_levels()), not only the one the process picked.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu_features.h"
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
  vec::RowDotFn portable;
};

const Case kCases[] = {
    {GgmlType::F16, vec::dot_f16_f32_portable},    {GgmlType::BF16, vec::dot_bf16_f32_portable},
    {GgmlType::Q4_0, vec::dot_q4_0_q8_0_portable}, {GgmlType::Q8_0, vec::dot_q8_0_q8_0_portable},
    {GgmlType::Q4_K, vec::dot_q4_k_q8_k_portable}, {GgmlType::Q6_K, vec::dot_q6_k_q8_k_portable},
};

// Column counts for a type: the usual widths, plus (32-element blocks) one, three and nine
// blocks, so the kernels that take blocks in pairs meet an odd one at the end.
std::vector<int64_t> widths(GgmlType type) {
  std::vector<int64_t> cols = {256, 512, 2816};
  if (ggml_type_info(type).block_elems == 32) cols.insert(cols.end(), {32, 96, 288});
  return cols;
}

std::string level_str(cpu::KernelLevel level) { return std::string(cpu::level_name(level)); }

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

TEST(VecDot, QuantisedKernelsMatchReferencesAtEveryLevel) {
  for (const cpu::KernelLevel level : cpu::supported_levels()) {
    for (const Case& c : kCases) {
      for (const int64_t cols : widths(c.type)) {
        const auto W = make_matrix(c.type, 5, cols,
                                   static_cast<uint32_t>(cols) + static_cast<uint32_t>(c.type));
        auto x = random_normal(static_cast<size_t>(cols), 99);
        x[3] = 9.0f;  // an outlier makes activation blocks uneven
        const GgmlType at = vec::activation_type(c.type);
        std::vector<uint8_t> act(ggml_row_bytes(at, cols));
        vec::quantize_activation(c.type, x.data(), act.data(), cols);
        std::vector<float> xq(static_cast<size_t>(cols));
        dequantize_row(at, act.data(), xq.data(), cols);
        const vec::RowDotFn simd_dot = vec::row_dot_fn(c.type, level);
        for (int64_t r = 0; r < W.rows; ++r) {
          const uint8_t* w = W.bytes.data() + r * ggml_row_bytes(c.type, cols);
          const float* wd = W.deq.data() + r * cols;
          const float simd = simd_dot(w, act.data(), cols);
          const float portable = c.portable(w, act.data(), cols);
          const double scale = abs_dot(wd, xq.data(), cols);
          SCOPED_TRACE(::testing::Message() << level_str(level) << " " << ggml_type_name(c.type)
                                            << " cols=" << cols << " row=" << r);
          // Same products, different float summation order: within a few ulp of sum |w x|.
          EXPECT_NEAR(simd, portable, 1e-6 * scale + 1e-30);
          // Exact arithmetic on the codes the kernel saw: only float rounding (n * 2^-24 bound).
          const double exact = dot_double(wd, xq.data(), cols);
          EXPECT_NEAR(simd, exact, (static_cast<double>(cols) * 6e-8 + 1e-6) * scale + 1e-30);
          // Against the float activation: also the activation's quantisation error, bounded.
          EXPECT_NEAR(simd, dot_double(wd, x.data(), cols),
                      activation_error_bound(c.type, wd, x.data(), cols));
        }
      }
    }
  }
}

// Activations of kMultiTokens tokens in the companion type of `t`: act [kMultiTokens][stride]
// and what they decode to, xq [kMultiTokens][cols].
struct TokenActivations {
  size_t stride = 0;
  std::vector<uint8_t> act;
  std::vector<float> xq;
};
TokenActivations make_activations(GgmlType t, int64_t cols) {
  const GgmlType at = vec::activation_type(t);
  TokenActivations a;
  a.stride = ggml_row_bytes(at, cols);
  a.act.resize(a.stride * vec::kMultiTokens);
  a.xq.resize(static_cast<size_t>(cols * vec::kMultiTokens));
  for (int k = 0; k < vec::kMultiTokens; ++k) {
    const auto x = random_normal(static_cast<size_t>(cols), 50 + static_cast<uint32_t>(k));
    vec::quantize_activation(t, x.data(), a.act.data() + k * a.stride, cols);
    dequantize_row(at, a.act.data() + k * a.stride, a.xq.data() + k * cols, cols);
  }
  return a;
}

const GgmlType kMultiTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,
                                GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_K};

// The multi-token kernels give each token what the single-token kernel gives it (up to float
// summation order), at every level.
TEST(VecDot, MultiTokenKernelsMatchSingle) {
  for (const cpu::KernelLevel level : cpu::supported_levels()) {
    for (const GgmlType t : kMultiTypes) {
      for (const int64_t cols : {int64_t{256}, int64_t{1280}, int64_t{288}}) {
        if (cols % ggml_type_info(t).block_elems != 0) continue;
        const auto W = make_matrix(t, 1, cols, 5);
        const TokenActivations a = make_activations(t, cols);
        for (int nt = 1; nt <= vec::kMultiTokens; ++nt) {
          float out[vec::kMultiTokens];
          vec::multi_dot_fn(t, level)(W.bytes.data(), a.act.data(), a.stride, nt, cols, out);
          for (int k = 0; k < nt; ++k) {
            const float single =
                vec::row_dot_fn(t, level)(W.bytes.data(), a.act.data() + k * a.stride, cols);
            const double scale = abs_dot(W.deq.data(), a.xq.data() + k * cols, cols);
            EXPECT_NEAR(out[k], single, 1e-6 * scale)
                << level_str(level) << " " << ggml_type_name(t) << " nt=" << nt << " k=" << k;
          }
        }
      }
    }
  }
}

// The register-tile kernels, for every row and token count of a tile, against the portable
// single-token kernel (summation order differs: a few ulp of sum |w x|).
TEST(VecDot, TileKernelsMatchPortableAtEveryLevel) {
  int tiles_checked = 0;
  for (const cpu::KernelLevel level : cpu::supported_levels()) {
    for (const Case& c : kCases) {
      const vec::TileDotFn tile = vec::tile_dot_fn(c.type, level);
      if (tile == nullptr) continue;
      for (const int64_t cols : widths(c.type)) {
        const auto W = make_matrix(c.type, vec::kTileRows, cols, 11);
        const size_t w_stride = ggml_row_bytes(c.type, cols);
        const TokenActivations a = make_activations(c.type, cols);
        for (int nr = 1; nr <= vec::kTileRows; ++nr) {
          for (int nt = 1; nt <= vec::kMultiTokens; ++nt) {
            float out[vec::kTileRows * vec::kMultiTokens];
            tile(W.bytes.data(), w_stride, nr, a.act.data(), a.stride, nt, cols, out);
            ++tiles_checked;
            for (int r = 0; r < nr; ++r) {
              for (int k = 0; k < nt; ++k) {
                const float ref =
                    c.portable(W.bytes.data() + r * w_stride, a.act.data() + k * a.stride, cols);
                const double scale = abs_dot(W.deq.data() + r * cols, a.xq.data() + k * cols, cols);
                EXPECT_NEAR(out[r * vec::kMultiTokens + k], ref, 1e-6 * scale + 1e-30)
                    << level_str(level) << " " << ggml_type_name(c.type) << " cols=" << cols
                    << " nr=" << nr << " nt=" << nt << " r=" << r << " k=" << k;
              }
            }
          }
        }
      }
    }
  }
  // Q8_0, Q4_0, Q4_K and Q6_K have AVX-512 tile kernels: checked wherever the CPU runs them.
  for (const GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K})
    EXPECT_NE(vec::tile_dot_fn(t, cpu::KernelLevel::Avx512Vnni), nullptr) << ggml_type_name(t);
  if (cpu::supports(cpu::KernelLevel::Avx512Vnni)) {
    EXPECT_GE(tiles_checked, 4 * vec::kTileRows * vec::kMultiTokens);
  }
}

// Q4_K's one-token tiles (AVX-512: q4_k_rows_one_token) take rows in pairs with the AVX2 row
// kernel's arithmetic, so each row's result is the row kernel's to the bit, whether the row sits
// first or second in a pair or alone at a tile's odd end. Rows differ (seeded apart), so a pair
// that swapped or shared rows would show.
TEST(VecDot, Q4_KOneTokenTilesEqualTheRowKernelBitForBit) {
  int checked = 0;
  for (const cpu::KernelLevel level : cpu::supported_levels()) {
    const vec::TileDotFn tile = vec::tile_dot_fn(GgmlType::Q4_K, level);
    if (tile == nullptr) continue;  // AVX2: no tiles, matmul runs the row kernel itself
    const vec::RowDotFn row_dot = vec::row_dot_fn(GgmlType::Q4_K, level);
    for (const int64_t cols : {int64_t{256}, int64_t{768}, int64_t{2816}}) {
      const auto W =
          make_matrix(GgmlType::Q4_K, vec::kTileRows, cols, 17 + static_cast<uint32_t>(cols));
      const size_t w_stride = ggml_row_bytes(GgmlType::Q4_K, cols);
      const TokenActivations a = make_activations(GgmlType::Q4_K, cols);
      for (int nr = 1; nr <= vec::kTileRows; ++nr) {
        float out[vec::kTileRows * vec::kMultiTokens];
        tile(W.bytes.data(), w_stride, nr, a.act.data(), a.stride, 1, cols, out);
        for (int r = 0; r < nr; ++r) {
          EXPECT_EQ(out[r * vec::kMultiTokens],
                    row_dot(W.bytes.data() + r * w_stride, a.act.data(), cols))
              << level_str(level) << " cols=" << cols << " nr=" << nr << " r=" << r;
          ++checked;
        }
      }
    }
  }
  if (cpu::supports(cpu::KernelLevel::Avx512Vnni)) {
    EXPECT_EQ(checked, 3 * 10);  // 3 widths x (1 + 2 + 3 + 4) rows
  }
}

TEST(VecDot, RowDotUsesExactWeightsAndFloatActivation) {
  for (const GgmlType t : testing::kAllWeightTypes) {
    const auto W = make_matrix(t, 3, 512, 17);
    const auto x = random_normal(512, 3);
    for (int64_t r = 0; r < 3; ++r) {
      const double ref = dot_double(W.deq.data() + r * 512, x.data(), 512);
      EXPECT_NEAR(row_dot(W.view(), r, x.data()), ref,
                  512 * 6e-8 * abs_dot(W.deq.data() + r * 512, x.data(), 512))
          << ggml_type_name(t);
    }
    EXPECT_EQ(row_dot(W.view(), 3, x.data()), 0.0f);  // out of range: defined, no read
    EXPECT_EQ(row_dot(W.view(), -1, x.data()), 0.0f);
  }
}

TEST(VecDot, GetRowMatchesDequantisation) {
  for (const GgmlType t : testing::kAllWeightTypes) {
    const auto W = make_matrix(t, 4, 256, 23);
    std::vector<float> out(256);
    for (int64_t r = 0; r < 4; ++r) {
      get_row(W.view(), r, out.data());
      for (int i = 0; i < 256; ++i)
        ASSERT_EQ(out[i], W.deq[static_cast<size_t>(r * 256 + i)]) << ggml_type_name(t);
    }
    get_row(W.view(), 4, out.data());
    for (float v : out) ASSERT_EQ(v, 0.0f);
  }
}

}  // namespace
}  // namespace tangram
