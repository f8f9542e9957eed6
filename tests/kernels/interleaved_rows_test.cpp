// The interleaved-row kernels for Q4_K and Q8_0 (portable and every level this CPU runs)
// against the plain reference: dequantised weights dotted with the dequantised activations
// (Q8_K / Q8_0), in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gguf/interleaved_layout.h"
#include "kernel_test_util.h"
#include "kernels/cpu_features.h"
#include "kernels/half.h"
#include "kernels/interleaved_rows.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"

namespace tangram {
namespace {

using testing::make_matrix;
using testing::random_normal;

template <typename Interleaved>
struct Types;
template <>
struct Types<vec::InterleavedQ4_K> {
  static constexpr GgmlType kWeight = GgmlType::Q4_K, kActivation = GgmlType::Q8_K;
};
template <>
struct Types<vec::InterleavedQ8_0> {
  static constexpr GgmlType kWeight = GgmlType::Q8_0, kActivation = GgmlType::Q8_0;
};

template <typename Interleaved>
struct Activations {
  size_t row_bytes = 0;
  std::vector<uint8_t> quantized;  // [n][row_bytes]
  std::vector<float> deq;          // [n][cols]
  std::vector<int32_t> sums;       // [n][cols / kBlockElems][kSumsPerBlock]
};

template <typename Interleaved>
Activations<Interleaved> make_activations(int64_t n, int64_t cols, uint32_t seed) {
  constexpr GgmlType type = Types<Interleaved>::kActivation;
  const int64_t sums_per_row =
      cols / Interleaved::kBlockElems * vec::InterleavedKernel<Interleaved>::kSumsPerBlock;
  const size_t row_bytes = ggml_row_bytes(type, cols);
  Activations<Interleaved> a{row_bytes, std::vector<uint8_t>(row_bytes * static_cast<size_t>(n)),
                             std::vector<float>(static_cast<size_t>(n * cols)),
                             std::vector<int32_t>(static_cast<size_t>(n * sums_per_row))};
  const auto x = random_normal(static_cast<size_t>(n * cols), seed);
  for (int64_t t = 0; t < n; ++t) {
    uint8_t* row = a.quantized.data() + static_cast<size_t>(t) * a.row_bytes;
    quantize_row(type, x.data() + t * cols, row, cols);
    dequantize_row(type, row, a.deq.data() + t * cols, cols);
    vec::activation_sums(row, cols, static_cast<const Interleaved*>(nullptr),
                         a.sums.data() + t * sums_per_row);
  }
  return a;
}

// Rows [r0, r0 + nr) of a matrix, interleaved, times nt tokens, against the reference.
template <typename Interleaved>
void check_group(vec::InterleavedGemmFn<Interleaved> gemm, const std::string& name, int64_t rows,
                 int64_t cols, int64_t r0, int nt) {
  constexpr GgmlType type = Types<Interleaved>::kWeight;
  const auto W = make_matrix(type, rows, cols, static_cast<uint32_t>(rows + cols));
  const auto A = make_activations<Interleaved>(nt, cols, static_cast<uint32_t>(nt + cols));
  const int nr = static_cast<int>(std::min<int64_t>(vec::kInterleavedRows, rows - r0));
  const int64_t nblocks = cols / Interleaved::kBlockElems;
  const size_t rb = ggml_row_bytes(type, cols);
  std::vector<Interleaved> group(static_cast<size_t>(nblocks));
  vec::interleave_rows(W.bytes.data() + static_cast<size_t>(r0) * rb, rb, nr, cols, group.data());
  constexpr size_t kStride =
      vec::kInterleavedRows + 3;  // not the group width: the stride is honoured
  std::vector<float> out(kStride * static_cast<size_t>(nt), std::nanf(""));
  gemm(group.data(), nblocks, A.quantized.data(), A.row_bytes, A.sums.data(),
       static_cast<size_t>(nblocks * vec::InterleavedKernel<Interleaved>::kSumsPerBlock), nt,
       out.data(), kStride);
  for (int t = 0; t < nt; ++t)
    for (int r = 0; r < vec::kInterleavedRows; ++r) {
      double ref = 0, mag = 0;
      if (r < nr)  // rows past the matrix's end come out as zero
        for (int64_t k = 0; k < cols; ++k) {
          const double p = testing::dbl(W.deq[static_cast<size_t>((r0 + r) * cols + k)]) *
                           testing::dbl(A.deq[static_cast<size_t>(t * cols + k)]);
          ref += p;
          mag += std::fabs(p);
        }
      // Float rounding of the per-block scale products and the sums only: the integer part is
      // exact.
      const double tol = 4e-6 * mag + 1e-6;
      ASSERT_NEAR(out[static_cast<size_t>(t) * kStride + static_cast<size_t>(r)], ref, tol)
          << name << " " << ggml_type_name(type) << " rows=" << rows << " cols=" << cols
          << " r0=" << r0 << " r=" << r << " t=" << t << " nt=" << nt;
    }
}

template <typename Interleaved>
void check_kernel(vec::InterleavedGemmFn<Interleaved> gemm, const std::string& name) {
  for (const int64_t cols : {256, 768, 2560})
    for (int nt = 1; nt <= vec::InterleavedKernel<Interleaved>::kTileTokens; ++nt) {
      check_group(gemm, name, 16, cols, 0, nt);   // a full group
      check_group(gemm, name, 37, cols, 32, nt);  // the last 5 rows: zero rows fill the group
    }
}

TEST(InterleavedRows, PortableKernelsMatchReference) {
  check_kernel<vec::InterleavedQ4_K>(vec::gemm_interleaved_portable, "portable");
  check_kernel<vec::InterleavedQ8_0>(vec::gemm_interleaved_portable, "portable");
  check_group<vec::InterleavedQ8_0>(vec::gemm_interleaved_portable, "portable", 3, 32, 0,
                                    3);  // one block
}

TEST(InterleavedRows, EveryLevelKernelMatchesReference) {
  int checked = 0;
  for (const cpu::KernelLevel level : cpu::supported_levels()) {
    const std::string name(cpu::level_name(level));
    // A level without a kernel keeps the row-major ones (checked by matmul_test).
    if (const auto gemm = vec::gemm_interleaved_q4_k_fn(level)) {
      check_kernel<vec::InterleavedQ4_K>(gemm, name);
      ++checked;
    }
    if (const auto gemm = vec::gemm_interleaved_q8_0_fn(level)) {
      check_kernel<vec::InterleavedQ8_0>(gemm, name);
      check_group<vec::InterleavedQ8_0>(gemm, name, 3, 32, 0, 3);
      ++checked;
    }
  }
  // Q4_K and Q8_0 have a kernel at every level (AVX2 the baseline).
  EXPECT_EQ(checked, cpu::supports(cpu::KernelLevel::Avx512Vnni) ? 4 : 2);
}

// The Q8_0 repack (8 x 8 transposes of 4-byte steps) against the layout gguf/interleaved_layout.h
// states, element by element: qs[s][4r + i] = code 4s + i of row r, plus 128; d[r] = row r's scale;
// rows past nr all zero. Every partial group size, rows further apart than their bytes, codes
// over the whole int8 range.
TEST(InterleavedRows, Q8_0RepackMatchesStatedLayout) {
  for (const int64_t cols : {32, 256, 2560})
    for (int nr = 1; nr <= vec::kInterleavedRows; ++nr) {
      const int64_t nblocks = cols / 32;
      const size_t stride =
          static_cast<size_t>(nblocks) * sizeof(blocks::BlockQ8_0) + 6;  // padded rows
      std::vector<uint8_t> bytes(stride * static_cast<size_t>(nr));
      for (size_t i = 0; i < bytes.size(); ++i)
        bytes[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
      std::vector<vec::InterleavedQ8_0> group(static_cast<size_t>(nblocks));
      std::memset(group.data(), 0x5A,
                  group.size() * sizeof(vec::InterleavedQ8_0));  // stale scratch
      vec::interleave_rows(bytes.data(), stride, nr, cols, group.data());
      for (int64_t b = 0; b < nblocks; ++b)
        for (int r = 0; r < vec::kInterleavedRows; ++r) {
          const auto* x =
              r < nr ? reinterpret_cast<const blocks::BlockQ8_0*>(bytes.data() + r * stride) + b
                     : nullptr;
          const auto& g = group[static_cast<size_t>(b)];
          const uint16_t d = x != nullptr ? x->d : uint16_t{0};
          ASSERT_EQ(g.d[r], d) << "cols=" << cols << " nr=" << nr << " b=" << b << " r=" << r;
          for (int k = 0; k < 32; ++k) {
            const uint8_t want = x != nullptr ? static_cast<uint8_t>(x->qs[k] + 128) : 0;
            ASSERT_EQ(g.qs[k / 4][4 * r + k % 4], want)
                << "cols=" << cols << " nr=" << nr << " b=" << b << " r=" << r << " k=" << k;
          }
        }
    }
}

// The Q4_K repack (codes in step order, then 8 x 8 transposes) against the layout
// gguf/interleaved_layout.h states, element by element, from the plain Q4_K format: codes of
// sub-block j are the low (j even) or high (j odd) nibbles of qs[32 (j / 2) ..]; the 6-bit scales
// and mins unpacked as dequantisation does, against the packed ones read back by
// interleaved_q4_k_scale / _min (the kernels' vector unpack is checked against them through the
// portable kernel). Every partial group size, padded rows, random bytes.
TEST(InterleavedRows, Q4_KRepackMatchesStatedLayout) {
  for (const int64_t cols : {256, 768})
    for (int nr = 1; nr <= vec::kInterleavedRows; ++nr) {
      const int64_t nblocks = cols / 256;
      const size_t stride =
          static_cast<size_t>(nblocks) * sizeof(blocks::BlockQ4_K) + 10;  // padded rows
      std::vector<uint8_t> bytes(stride * static_cast<size_t>(nr) + 16);
      for (size_t i = 0; i < bytes.size(); ++i)
        bytes[i] = static_cast<uint8_t>((i * 2246822519u) >> 11);
      std::vector<vec::InterleavedQ4_K> group(static_cast<size_t>(nblocks));
      std::memset(group.data(), 0x5A,
                  group.size() * sizeof(vec::InterleavedQ4_K));  // stale scratch
      vec::interleave_rows(bytes.data(), stride, nr, cols, group.data());
      for (int64_t b = 0; b < nblocks; ++b)
        for (int r = 0; r < vec::kInterleavedRows; ++r) {
          const auto& g = group[static_cast<size_t>(b)];
          const auto* x =
              r < nr ? reinterpret_cast<const blocks::BlockQ4_K*>(bytes.data() + r * stride) + b
                     : nullptr;
          const std::string where = "cols=" + std::to_string(cols) + " nr=" + std::to_string(nr) +
                                    " b=" + std::to_string(b) + " r=" + std::to_string(r);
          ASSERT_EQ(g.d[r], x != nullptr ? x->d : 0) << where;  // fp16 bits
          ASSERT_EQ(g.dmin[r], x != nullptr ? x->dmin : 0) << where;
          for (int j = 0; j < 8; ++j) {
            // 6-bit scale and min of sub-block j (the Q4_K packing: j < 4 in the low 6 bits of
            // bytes j and j + 4; j >= 4 split over byte j + 4 and the top 2 bits of j - 4, j).
            uint8_t sc = 0, mn = 0;
            if (x != nullptr) {
              const uint8_t* q = x->scales;
              sc = j < 4 ? q[j] & 63
                         : static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
              mn = j < 4 ? q[j + 4] & 63
                         : static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
            }
            ASSERT_EQ(vec::interleaved_q4_k_scale(g, j, r), sc) << where << " j=" << j;
            ASSERT_EQ(vec::interleaved_q4_k_min(g, j, r), mn) << where << " j=" << j;
            for (int e = 0; e < 32; ++e) {
              const uint8_t code =
                  x != nullptr
                      ? static_cast<uint8_t>((x->qs[32 * (j / 2) + e] >> (4 * (j % 2))) & 0xF)
                      : 0;
              const uint8_t stored = g.qs[j][e / 8][4 * r + e % 4];
              ASSERT_EQ(e % 8 < 4 ? stored & 0xF : stored >> 4, code)
                  << where << " j=" << j << " e=" << e;
            }
          }
        }
    }
}

// gguf's deinterleave_row undoes the kernels' interleave_rows for every row of every partial
// group, on random bytes (every bit of ggml's Q4_K scale packing and of Q8_0's codes is used, so
// the round trip is exact): the two directions of the layout agree.
template <typename Interleaved, typename RowBlock>
void expect_round_trip(int64_t cols) {
  const int64_t nblocks = cols / Interleaved::kBlockElems;
  const size_t row_bytes = static_cast<size_t>(nblocks) * sizeof(RowBlock);
  for (int nr = 1; nr <= vec::kInterleavedRows; ++nr) {
    std::vector<uint8_t> bytes(row_bytes * static_cast<size_t>(nr));
    for (size_t i = 0; i < bytes.size(); ++i)
      bytes[i] = static_cast<uint8_t>((i * 2654435761u + nr) >> 9);
    std::vector<Interleaved> group(static_cast<size_t>(nblocks));
    vec::interleave_rows(bytes.data(), row_bytes, nr, cols, group.data());
    std::vector<uint8_t> row(row_bytes);
    for (int r = 0; r < nr; ++r) {
      deinterleave_row(group.data(), cols, r, row.data());
      ASSERT_EQ(
          std::memcmp(row.data(), bytes.data() + static_cast<size_t>(r) * row_bytes, row_bytes), 0)
          << "cols=" << cols << " nr=" << nr << " r=" << r;
    }
  }
}

TEST(InterleavedRows, DeinterleaveRowUndoesTheRepack) {
  for (const int64_t cols : {32, 96, 2560})
    expect_round_trip<vec::InterleavedQ8_0, blocks::BlockQ8_0>(cols);
  for (const int64_t cols : {256, 768})
    expect_round_trip<vec::InterleavedQ4_K, blocks::BlockQ4_K>(cols);
}

// Q8_0 at the extremes of its codes: weights -128, -127 and 127 (-128 is not what quantize
// writes but a file may hold it) against activations of -127 and 127, the most any quantised
// activation reaches. On AVX2 these are the pair sums closest to vpmaddubsw's int16 limit
// (2 x 128 x 127); a saturated sum would be off by far more than the tolerance.
TEST(InterleavedRows, Q8_0ExtremeCodesMatchReference) {
  constexpr int64_t kCols = 256, kBlocks = kCols / 32,
                    kTokens = vec::InterleavedKernel<vec::InterleavedQ8_0>::kTileTokens;
  constexpr int64_t kTerms = vec::InterleavedKernel<vec::InterleavedQ8_0>::kSumsPerBlock;
  constexpr int8_t kWeightCodes[] = {-128, 127, -127, -128, 127, 127, -128, -127};
  const int nr = 13;  // a partial group
  std::vector<blocks::BlockQ8_0> W(static_cast<size_t>(nr * kBlocks)),
      A(static_cast<size_t>(kTokens * kBlocks));
  for (size_t i = 0; i < W.size(); ++i) {
    W[i].d = half::fp32_to_fp16(0.01f * static_cast<float>(1 + i % 7));
    for (int k = 0; k < 32; ++k)
      W[i].qs[k] = kWeightCodes[(i + static_cast<size_t>(k) / (1 + i % 3)) % 8];
  }
  for (size_t i = 0; i < A.size(); ++i) {
    A[i].d = half::fp32_to_fp16(0.02f * static_cast<float>(1 + i % 5));
    for (int k = 0; k < 32; ++k)
      A[i].qs[k] = static_cast<int8_t>(((i + static_cast<size_t>(k) / 3) % 2) ? 127 : -127);
  }
  std::vector<int32_t> sums(static_cast<size_t>(kTokens * kBlocks * kTerms));
  for (int t = 0; t < kTokens; ++t)
    vec::activation_sums(reinterpret_cast<const uint8_t*>(A.data() + t * kBlocks), kCols,
                         static_cast<const vec::InterleavedQ8_0*>(nullptr),
                         sums.data() + t * kBlocks * kTerms);
  std::vector<vec::InterleavedQ8_0> group(kBlocks);
  vec::interleave_rows(reinterpret_cast<const uint8_t*>(W.data()),
                       kBlocks * sizeof(blocks::BlockQ8_0), nr, kCols, group.data());
  std::vector<std::pair<std::string, vec::InterleavedGemmFn<vec::InterleavedQ8_0>>> kernels = {
      {"portable", vec::gemm_interleaved_portable}};
  for (const cpu::KernelLevel level : cpu::supported_levels())
    if (const auto gemm = vec::gemm_interleaved_q8_0_fn(level))
      kernels.emplace_back(cpu::level_name(level), gemm);
  for (const auto& [name, gemm] : kernels) {
    std::vector<float> out(static_cast<size_t>(kTokens * vec::kInterleavedRows), std::nanf(""));
    gemm(group.data(), kBlocks, reinterpret_cast<const uint8_t*>(A.data()),
         kBlocks * sizeof(blocks::BlockQ8_0), sums.data(), kBlocks * kTerms, kTokens, out.data(),
         vec::kInterleavedRows);
    for (int t = 0; t < kTokens; ++t)
      for (int r = 0; r < vec::kInterleavedRows; ++r) {
        double ref = 0, mag = 0;
        for (int64_t b = 0; r < nr && b < kBlocks; ++b) {
          const auto& w = W[static_cast<size_t>(r * kBlocks + b)];
          const auto& a = A[static_cast<size_t>(t * kBlocks + b)];
          int64_t isum = 0;
          for (int k = 0; k < 32; ++k) isum += int64_t{w.qs[k]} * a.qs[k];
          const double scale = double{half::fp16_to_fp32(w.d)} * double{half::fp16_to_fp32(a.d)};
          ref += scale * static_cast<double>(isum);
          mag += scale * 32 * 128 * 127;
        }
        ASSERT_NEAR(out[static_cast<size_t>(t * vec::kInterleavedRows + r)], ref, 4e-6 * mag + 1e-6)
            << name << " r=" << r << " t=" << t;
      }
  }
}

}  // namespace
}  // namespace tangram
