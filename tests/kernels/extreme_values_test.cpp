// Every integer kernel the matmul can run, at the edges of its integer ranges, against a plain
// double-precision dot of the dequantised weights and activations. Random inputs never reach the
// sums where an int16 intermediate (vpmaddubsw saturates at +-32767; packed int16 group sums wrap)
// goes wrong: a sub-block of 32 Q4_K codes of 15 times 32 activations of 127 sums to 60960. So
// the weights here are built block by block with every code at its maximum (and minimum), the
// largest scales and mins, both signs of Q6_K's int8 scales, and Q8_0's -128 (a file may hold it;
// the quantiser never writes it); the activations with every code +127, every code -127 (the
// activation quantisers clamp to [-127, 127], so -128 never reaches a kernel), alternating signs,
// and random codes. Rows and tokens mix the patterns, some block by block.
//
// Kernels: row dot (every level), multi-token dot, the 4x4 tiles (AVX-512), the interleaved-row
// GEMMs (portable and every level), and matmul's decode path at token counts that take every
// tile, interleaved group and tail (at the active level; ctest runs this binary again under
// TANGRAM_CPU=avx2).
//
// Tolerance, per output: kTolerance * M, where M = sum_i |w_i x_i| over the dequantised values,
// plus for Q4_K sum_i |dmin m_i x_i| (the kernels sum the min term apart and scale it in float, so
// its rounding is relative to that term, not to the weight after cancellation). The integer sums
// are exact; what remains is float rounding of the per-block scale products and of the sum over
// blocks (a few ulp of M at these widths). A saturated or wrapped int16 sum is off by a large
// fraction of M.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/cpu_features.h"
#include "kernels/half.h"
#include "kernels/interleaved_rows.h"
#include "kernels/matmul_paths.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "kernels/vec_dot.h"

namespace tangram {
namespace {

constexpr double kTolerance = 1e-5;

// Weight block patterns. Not every pattern means something for every type (see fill_weight_block).
enum class WeightPattern {
  kMaxCodes,      // every code at its largest, largest scales (Q4_K: and mins)
  kMinCodes,      // every code at its smallest (Q8_0: -127), largest scales and mins
  kMostNegative,  // Q8_0: -128; Q6_K: largest codes with scales -128; others: as kMinCodes
  kMixedSigns,    // Q8_0: +127/-128 alternating; Q6_K: scales alternating 127/-128, codes max
  kRandom,        // every byte random (valid for every layout), random scales
};
constexpr WeightPattern kWeightPatterns[] = {WeightPattern::kMaxCodes, WeightPattern::kMinCodes,
                                             WeightPattern::kMostNegative,
                                             WeightPattern::kMixedSigns, WeightPattern::kRandom};
constexpr int kNumWeightPatterns = 5;

enum class ActivationPattern { kAllMax, kAllMin, kAlternating, kHalves, kRandom };
constexpr ActivationPattern kActivationPatterns[] = {
    ActivationPattern::kAllMax, ActivationPattern::kAllMin, ActivationPattern::kAlternating,
    ActivationPattern::kHalves, ActivationPattern::kRandom};
constexpr int kNumActivationPatterns = 5;

uint16_t fp16(float v) { return half::fp32_to_fp16(v); }

void fill_weight_block(GgmlType type, WeightPattern p, std::mt19937& rng, uint8_t* dst) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  const bool max_codes = p == WeightPattern::kMaxCodes || p == WeightPattern::kMixedSigns;
  switch (type) {
    case GgmlType::Q8_0: {
      auto* b = reinterpret_cast<blocks::BlockQ8_0*>(dst);
      b->d = fp16(scale(rng));
      for (int i = 0; i < blocks::kQK0; ++i) {
        int q = 0;
        switch (p) {
          case WeightPattern::kMaxCodes:
            q = 127;
            break;
          case WeightPattern::kMinCodes:
            q = -127;
            break;
          case WeightPattern::kMostNegative:
            q = -128;
            break;
          case WeightPattern::kMixedSigns:
            q = i % 2 == 0 ? 127 : -128;
            break;
          case WeightPattern::kRandom:
            q = byte(rng) - 128;
            break;
        }
        b->qs[i] = static_cast<int8_t>(q);
      }
      return;
    }
    case GgmlType::Q4_0: {
      auto* b = reinterpret_cast<blocks::BlockQ4_0*>(dst);
      b->d = fp16(scale(rng));
      for (auto& q : b->qs)
        q = p == WeightPattern::kRandom ? static_cast<uint8_t>(byte(rng))
            : max_codes                 ? uint8_t{0xFF}
                                        : uint8_t{0x00};
      return;
    }
    case GgmlType::Q4_K: {
      auto* b = reinterpret_cast<blocks::BlockQ4_K*>(dst);
      b->d = fp16(scale(rng));
      b->dmin = fp16(scale(rng));
      // All scale bytes 0xFF: every 6-bit scale and min is 63.
      for (auto& s : b->scales)
        s = p == WeightPattern::kRandom ? static_cast<uint8_t>(byte(rng)) : uint8_t{0xFF};
      for (auto& q : b->qs)
        q = p == WeightPattern::kRandom ? static_cast<uint8_t>(byte(rng))
            : max_codes                 ? uint8_t{0xFF}
                                        : uint8_t{0x00};
      return;
    }
    case GgmlType::Q6_K: {
      auto* b = reinterpret_cast<blocks::BlockQ6_K*>(dst);
      b->d = fp16(scale(rng));
      // Codes: all bits set is 63 (+31), none is 0 (-32).
      const bool top = max_codes || p == WeightPattern::kMostNegative;
      for (auto& q : b->ql)
        q = p == WeightPattern::kRandom ? static_cast<uint8_t>(byte(rng)) : top ? 0xFF : 0x00;
      for (auto& q : b->qh)
        q = p == WeightPattern::kRandom ? static_cast<uint8_t>(byte(rng)) : top ? 0xFF : 0x00;
      for (int j = 0; j < blocks::kQKK / 16; ++j) {
        int s = 127;
        if (p == WeightPattern::kMostNegative) s = -128;
        if (p == WeightPattern::kMixedSigns) s = j % 2 == 0 ? 127 : -128;
        if (p == WeightPattern::kRandom) s = byte(rng) - 128;
        b->scales[j] = static_cast<int8_t>(s);
      }
      return;
    }
    default:
      FAIL() << "no extreme pattern for " << ggml_type_name(type);
  }
}

int8_t activation_code(ActivationPattern p, int i, int block_elems, std::mt19937& rng) {
  switch (p) {
    case ActivationPattern::kAllMax:
      return 127;
    case ActivationPattern::kAllMin:
      return -127;
    case ActivationPattern::kAlternating:
      return i % 2 == 0 ? 127 : -127;
    case ActivationPattern::kHalves:
      return i % block_elems < block_elems / 2 ? 127 : -127;
    case ActivationPattern::kRandom:
      return static_cast<int8_t>(std::uniform_int_distribution<int>(-127, 127)(rng));
  }
  return 0;
}

// Row r of a matrix: rows below kNumWeightPatterns' multiple take one pattern for every block
// (pattern r % (kNumWeightPatterns + 2)); the other two of each cycle mix them block by block.
WeightPattern weight_pattern(int64_t row, int64_t block) {
  const int64_t k = row % (kNumWeightPatterns + 2);
  if (k < kNumWeightPatterns) return kWeightPatterns[k];
  return kWeightPatterns[(block + k + row / (kNumWeightPatterns + 2)) % kNumWeightPatterns];
}
ActivationPattern activation_pattern(int64_t token, int64_t block) {
  const int64_t k = token % (kNumActivationPatterns + 2);
  if (k < kNumActivationPatterns) return kActivationPatterns[k];
  return kActivationPatterns[(block + k + token / (kNumActivationPatterns + 2)) %
                             kNumActivationPatterns];
}

// A weight matrix with, per row, the magnitude part of the tolerance that the min term adds
// (Q4_K: |dmin m_i| per element, else zero): minpart [rows][cols].
struct ExtremeWeights {
  testing::QuantMatrix m;
  std::vector<float> minpart;
};

ExtremeWeights make_weights(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  const auto& info = ggml_type_info(type);
  const size_t rb = ggml_row_bytes(type, cols);
  ExtremeWeights w{{type, rows, cols, std::vector<uint8_t>(rb * static_cast<size_t>(rows)),
                    std::vector<float>(static_cast<size_t>(rows * cols))},
                   std::vector<float>(static_cast<size_t>(rows * cols), 0.0f)};
  std::mt19937 rng(seed);
  const int64_t nblocks = cols / info.block_elems;
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = w.m.bytes.data() + static_cast<size_t>(r) * rb;
    for (int64_t b = 0; b < nblocks; ++b)
      fill_weight_block(type, weight_pattern(r, b), rng,
                        row + static_cast<size_t>(b) * info.block_bytes);
    dequantize_row(type, row, w.m.deq.data() + r * cols, cols);
    if (type != GgmlType::Q4_K) continue;
    for (int64_t b = 0; b < nblocks; ++b) {
      const auto* blk = reinterpret_cast<const blocks::BlockQ4_K*>(row) + b;
      for (int j = 0; j < 8; ++j) {
        uint8_t sc = 0, mn = 0;
        blocks::q4k_scale_min(blk->scales, j, &sc, &mn);
        const float part = half::fp16_to_fp32(blk->dmin) * static_cast<float>(mn);
        std::fill_n(w.minpart.data() + r * cols + b * blocks::kQKK + 32 * j, 32, part);
      }
    }
  }
  return w;
}

// Activation rows in the companion type of `weight`, built code by code: act [n][stride], and
// what they decode to, deq [n][cols].
struct ExtremeActivations {
  size_t stride = 0;
  std::vector<uint8_t> act;
  std::vector<float> deq;
};

ExtremeActivations make_activations(GgmlType weight, int64_t n, int64_t cols, uint32_t seed) {
  const GgmlType at = vec::activation_type(weight);
  ExtremeActivations a;
  a.stride = ggml_row_bytes(at, cols);
  a.act.assign(a.stride * static_cast<size_t>(n), 0);
  a.deq.assign(static_cast<size_t>(n * cols), 0.0f);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> scale(0.002f, 0.05f);
  for (int64_t t = 0; t < n; ++t) {
    uint8_t* row = a.act.data() + static_cast<size_t>(t) * a.stride;
    if (at == GgmlType::Q8_0) {
      auto* blk = reinterpret_cast<blocks::BlockQ8_0*>(row);
      for (int64_t b = 0; b < cols / blocks::kQK0; ++b) {
        blk[b].d = fp16(scale(rng));
        for (int i = 0; i < blocks::kQK0; ++i)
          blk[b].qs[i] = activation_code(activation_pattern(t, b), i, blocks::kQK0, rng);
      }
    } else {
      auto* blk = reinterpret_cast<blocks::BlockQ8_K*>(row);
      for (int64_t b = 0; b < cols / blocks::kQKK; ++b) {
        blk[b].d = scale(rng);
        for (int i = 0; i < blocks::kQKK; ++i)
          blk[b].qs[i] = activation_code(activation_pattern(t, b), i, blocks::kQKK, rng);
        for (int g = 0; g < blocks::kQKK / 16; ++g) {
          int sum = 0;
          for (int i = 0; i < 16; ++i) sum += blk[b].qs[16 * g + i];
          blk[b].bsums[g] = static_cast<int16_t>(sum);
        }
      }
    }
    dequantize_row(at, row, a.deq.data() + t * cols, cols);
  }
  return a;
}

// The reference and its tolerance for row r of W times token t.
struct Expected {
  double value = 0, tol = 0;
};
Expected expected(const ExtremeWeights& W, const float* x, int64_t r) {
  const int64_t cols = W.m.cols;
  const float* w = W.m.deq.data() + r * cols;
  const float* mp = W.minpart.data() + r * cols;
  double ref = 0, mag = 0;
  for (int64_t k = 0; k < cols; ++k) {
    const double xk = testing::dbl(x[k]);
    ref += testing::dbl(w[k]) * xk;
    mag += std::fabs(testing::dbl(w[k]) * xk) + std::fabs(testing::dbl(mp[k]) * xk);
  }
  return {ref, kTolerance * mag + 1e-30};
}

std::vector<int64_t> widths(GgmlType type) {
  if (ggml_type_info(type).block_elems == 32)
    return {32, 96, 288, 512};  // odd block counts: pair tails
  return {256, 512, 768};
}

const GgmlType kIntegerTypes[] = {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K};

// Enough rows and tokens that every weight pattern meets every activation pattern.
constexpr int64_t kRows = kNumWeightPatterns + 2;
constexpr int64_t kTokens = kNumActivationPatterns + 2;

TEST(ExtremeValues, RowMultiAndTileKernelsAtEveryLevel) {
  int tiles = 0;
  for (const cpu::KernelLevel level : cpu::supported_levels()) {
    const std::string lname(cpu::level_name(level));
    for (const GgmlType type : kIntegerTypes) {
      for (const int64_t cols : widths(type)) {
        const auto W = make_weights(type, kRows, cols, static_cast<uint32_t>(cols));
        const auto A = make_activations(type, kTokens, cols, static_cast<uint32_t>(cols) + 1);
        const size_t w_stride = ggml_row_bytes(type, cols);
        auto check = [&](float got, int64_t r, int64_t t, const char* kernel, int nr, int nt) {
          const Expected e = expected(W, A.deq.data() + t * cols, r);
          ASSERT_NEAR(got, e.value, e.tol)
              << lname << " " << kernel << " " << ggml_type_name(type) << " cols=" << cols
              << " r=" << r << " t=" << t << " nr=" << nr << " nt=" << nt;
        };
        const vec::RowDotFn row_dot = vec::row_dot_fn(type, level);
        for (int64_t r = 0; r < kRows; ++r)
          for (int64_t t = 0; t < kTokens; ++t)
            check(row_dot(W.m.bytes.data() + r * w_stride, A.act.data() + t * A.stride, cols), r, t,
                  "row", 1, 1);
        const vec::MultiDotFn multi = vec::multi_dot_fn(type, level);
        for (int nt = 1; nt <= vec::kMultiTokens; ++nt)
          for (int64_t t0 = 0; t0 + nt <= kTokens; ++t0)
            for (int64_t r = 0; r < kRows; ++r) {
              float out[vec::kMultiTokens];
              multi(W.m.bytes.data() + r * w_stride, A.act.data() + t0 * A.stride, A.stride, nt,
                    cols, out);
              for (int k = 0; k < nt; ++k) check(out[k], r, t0 + k, "multi", 1, nt);
            }
        const vec::TileDotFn tile = vec::tile_dot_fn(type, level);
        if (tile == nullptr) continue;
        for (int nr = 1; nr <= vec::kTileRows; ++nr)
          for (int nt = 1; nt <= vec::kMultiTokens; ++nt)
            for (int64_t r0 = 0; r0 + nr <= kRows; ++r0)
              for (int64_t t0 = 0; t0 + nt <= kTokens; ++t0) {
                float out[vec::kTileRows * vec::kMultiTokens];
                tile(W.m.bytes.data() + r0 * w_stride, w_stride, nr, A.act.data() + t0 * A.stride,
                     A.stride, nt, cols, out);
                ++tiles;
                for (int i = 0; i < nr; ++i)
                  for (int k = 0; k < nt; ++k)
                    check(out[i * vec::kMultiTokens + k], r0 + i, t0 + k, "tile", nr, nt);
              }
      }
    }
  }
  // Every type has an AVX-512 tile kernel: they all ran where the CPU has the level.
  if (cpu::supports(cpu::KernelLevel::Avx512Vnni)) {
    EXPECT_GT(tiles, 0);
  }
}

// The interleaved-row GEMMs (portable and every level that has one): a full group of 16 rows and
// a partial one, 1 to kTileTokens + 2 tokens (a tile is 8 for Q4_K, 16 for Q8_0; past it the
// kernels run a tile at a time) at several offsets.
template <typename Interleaved>
void check_interleaved(vec::InterleavedGemmFn<Interleaved> gemm, GgmlType type,
                       const std::string& name) {
  constexpr int64_t kGroupRows = vec::kInterleavedRows;
  constexpr int64_t kMatrixRows = kGroupRows + 3;
  constexpr int64_t kGemmTokens = vec::InterleavedKernel<Interleaved>::kTileTokens + 2;
  for (const int64_t cols : {int64_t{256}, int64_t{768}}) {
    const auto W = make_weights(type, kMatrixRows, cols, static_cast<uint32_t>(cols) + 7);
    const auto A = make_activations(type, kGemmTokens, cols, static_cast<uint32_t>(cols) + 8);
    const int64_t nblocks = cols / Interleaved::kBlockElems;
    const size_t sums_stride =
        static_cast<size_t>(nblocks * vec::InterleavedKernel<Interleaved>::kSumsPerBlock);
    std::vector<int32_t> sums(sums_stride *
                              static_cast<size_t>(kGemmTokens));  // [token][block][sum]
    for (int64_t t = 0; t < kGemmTokens; ++t)
      vec::activation_sums(A.act.data() + static_cast<size_t>(t) * A.stride, cols,
                           static_cast<const Interleaved*>(nullptr),
                           sums.data() + static_cast<size_t>(t) * sums_stride);
    const size_t rb = ggml_row_bytes(type, cols);
    std::vector<Interleaved> group(static_cast<size_t>(nblocks));
    for (const int64_t r0 : {int64_t{0}, kGroupRows}) {
      const int nr = static_cast<int>(std::min(kGroupRows, kMatrixRows - r0));
      vec::interleave_rows(W.m.bytes.data() + static_cast<size_t>(r0) * rb, rb, nr, cols,
                           group.data());
      for (int nt = 1; nt <= kGemmTokens; ++nt)  // past a tile too: run a tile at a time
        for (int64_t t0 = 0; t0 + nt <= kGemmTokens; t0 += 1 + (nt < 4 ? 2 : 0)) {
          float out[kGemmTokens * vec::kInterleavedRows];  // [token][row of the group]
          gemm(group.data(), nblocks, A.act.data() + static_cast<size_t>(t0) * A.stride, A.stride,
               sums.data() + static_cast<size_t>(t0) * sums_stride, sums_stride, nt, out,
               vec::kInterleavedRows);
          for (int k = 0; k < nt; ++k)
            for (int i = 0; i < nr; ++i) {
              const Expected e = expected(W, A.deq.data() + (t0 + k) * cols, r0 + i);
              ASSERT_NEAR(out[k * vec::kInterleavedRows + i], e.value, e.tol)
                  << name << " interleaved " << ggml_type_name(type) << " cols=" << cols
                  << " r=" << r0 + i << " t=" << t0 + k << " nt=" << nt;
            }
        }
    }
  }
}

TEST(ExtremeValues, InterleavedKernelsAtEveryLevel) {
  check_interleaved<vec::InterleavedQ4_K>(vec::gemm_interleaved_portable, GgmlType::Q4_K,
                                          "portable");
  check_interleaved<vec::InterleavedQ8_0>(vec::gemm_interleaved_portable, GgmlType::Q8_0,
                                          "portable");
  int checked = 0;
  for (const cpu::KernelLevel level : cpu::supported_levels()) {
    const std::string name(cpu::level_name(level));
    if (const auto gemm = vec::gemm_interleaved_q4_k_fn(level)) {
      check_interleaved<vec::InterleavedQ4_K>(gemm, GgmlType::Q4_K, name);
      ++checked;
    }
    if (const auto gemm = vec::gemm_interleaved_q8_0_fn(level)) {
      check_interleaved<vec::InterleavedQ8_0>(gemm, GgmlType::Q8_0, name);
      ++checked;
    }
  }
  EXPECT_GE(checked, 1);  // Q4_K has one at every level
}

// matmul's decode path end to end, at the active level, on float activations chosen so the
// activation quantiser writes the extreme codes (x = code * s per block: amax = 127 s), at token
// counts that take the single-token kernel, full and partial tiles, the interleaved groups of 8
// and their tails. Rows 37: two full groups of 16 and a partial one, and a partial tile.
TEST(ExtremeValues, MatmulDecodeAtTokenCounts) {
  ThreadPool pool(2);
  constexpr int64_t kMatRows = 37;
  for (const GgmlType type : kIntegerTypes) {
    const int64_t cols = ggml_type_info(type).block_elems == 32 ? 288 : 768;
    const int64_t block =
        vec::activation_type(type) == GgmlType::Q8_0 ? blocks::kQK0 : blocks::kQKK;
    const auto W = make_weights(type, kMatRows, cols, 77);
    for (const int64_t n : {1, 4, 5, 8, 16, 33}) {
      std::mt19937 rng(static_cast<uint32_t>(n));
      std::uniform_real_distribution<float> scale(0.002f, 0.05f);
      std::vector<float> X(static_cast<size_t>(n * cols));  // [n][cols]
      for (int64_t t = 0; t < n; ++t)
        for (int64_t b = 0; b < cols / block; ++b) {
          const float s = scale(rng);
          for (int64_t i = 0; i < block; ++i)
            X[static_cast<size_t>(t * cols + b * block + i)] =
                s * activation_code(activation_pattern(t, b), static_cast<int>(i),
                                    static_cast<int>(block), rng);
        }
      // What the kernels see: X through the activation quantiser, decoded.
      const GgmlType at = vec::activation_type(type);
      std::vector<uint8_t> q(ggml_row_bytes(at, cols));
      std::vector<float> xq(static_cast<size_t>(n * cols));  // [n][cols]
      for (int64_t t = 0; t < n; ++t) {
        vec::quantize_activation(type, X.data() + t * cols, q.data(), cols);
        dequantize_row(at, q.data(), xq.data() + t * cols, cols);
        if (t == 0) {  // token 0 is all +127: the extreme codes reach the kernels
          const int8_t first = at == GgmlType::Q8_0
                                   ? reinterpret_cast<const blocks::BlockQ8_0*>(q.data())->qs[0]
                                   : reinterpret_cast<const blocks::BlockQ8_K*>(q.data())->qs[0];
          ASSERT_EQ(first, 127) << ggml_type_name(type);
        }
      }
      std::vector<float> Y(static_cast<size_t>(n * kMatRows), std::nanf(""));  // [n][rows]
      matmul_paths::decode(W.m.view(), X.data(), n, Y.data(), pool);
      for (int64_t t = 0; t < n; ++t)
        for (int64_t r = 0; r < kMatRows; ++r) {
          const Expected e = expected(W, xq.data() + t * cols, r);
          ASSERT_NEAR(Y[static_cast<size_t>(t * kMatRows + r)], e.value, e.tol)
              << cpu::level_name(cpu::active_level()) << " matmul decode " << ggml_type_name(type)
              << " n=" << n << " t=" << t << " r=" << r;
        }
    }
  }
}

}  // namespace
}  // namespace tangram
