// The interleaved-row kernels for Q4_K and Q8_0 (portable and every level this CPU runs)
// against the plain reference: dequantised weights dotted with the dequantised activations
// (Q8_K / Q8_0), in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu_features.h"
#include "kernels/interleaved_rows.h"
#include "kernels/quant.h"

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
  const int64_t sums_per_row = cols / Interleaved::kBlockElems * Interleaved::kSumsPerBlock;
  const size_t row_bytes = ggml_row_bytes(type, cols);
  Activations<Interleaved> a{row_bytes, std::vector<uint8_t>(row_bytes * static_cast<size_t>(n)),
                             std::vector<float>(static_cast<size_t>(n * cols)),
                             std::vector<int32_t>(static_cast<size_t>(n * sums_per_row))};
  const auto x = random_normal(static_cast<size_t>(n * cols), seed);
  for (int64_t t = 0; t < n; ++t) {
    uint8_t* row = a.quantized.data() + static_cast<size_t>(t) * a.row_bytes;
    quantize_row(type, x.data() + t * cols, row, cols);
    dequantize_row(type, row, a.deq.data() + t * cols, cols);
    vec::activation_sums(row, cols, static_cast<const Interleaved*>(nullptr), a.sums.data() + t * sums_per_row);
  }
  return a;
}

// Rows [r0, r0 + nr) of a matrix, interleaved, times nt tokens, against the reference.
template <typename Interleaved>
void check_group(vec::InterleavedGemmFn<Interleaved> gemm, const std::string& name, int64_t rows, int64_t cols,
                 int64_t r0, int nt) {
  constexpr GgmlType type = Types<Interleaved>::kWeight;
  const auto W = make_matrix(type, rows, cols, static_cast<uint32_t>(rows + cols));
  const auto A = make_activations<Interleaved>(nt, cols, static_cast<uint32_t>(nt + cols));
  const int nr = static_cast<int>(std::min<int64_t>(vec::kInterleavedRows, rows - r0));
  const int64_t nblocks = cols / Interleaved::kBlockElems;
  const size_t rb = ggml_row_bytes(type, cols);
  std::vector<Interleaved> group(static_cast<size_t>(nblocks));
  vec::interleave_rows(W.bytes.data() + static_cast<size_t>(r0) * rb, rb, nr, cols, group.data());
  constexpr size_t kStride = vec::kInterleavedRows + 3;  // not the group width: the stride is honoured
  std::vector<float> out(kStride * static_cast<size_t>(nt), std::nanf(""));
  gemm(group.data(), nblocks, A.quantized.data(), A.row_bytes, A.sums.data(),
       static_cast<size_t>(nblocks * Interleaved::kSumsPerBlock), nt, out.data(), kStride);
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
      // Float rounding of the per-block scale products and the sums only: the integer part is exact.
      const double tol = 4e-6 * mag + 1e-6;
      ASSERT_NEAR(out[static_cast<size_t>(t) * kStride + static_cast<size_t>(r)], ref, tol)
          << name << " " << ggml_type_name(type) << " rows=" << rows << " cols=" << cols << " r0=" << r0
          << " r=" << r << " t=" << t << " nt=" << nt;
    }
}

template <typename Interleaved>
void check_kernel(vec::InterleavedGemmFn<Interleaved> gemm, const std::string& name) {
  for (const int64_t cols : {256, 768, 2560})
    for (int nt = 1; nt <= vec::kInterleavedTokens; ++nt) {
      check_group(gemm, name, 16, cols, 0, nt);   // a full group
      check_group(gemm, name, 37, cols, 32, nt);  // the last 5 rows: zero rows fill the group
    }
}

TEST(InterleavedRows, PortableKernelsMatchReference) {
  check_kernel<vec::InterleavedQ4_K>(vec::gemm_interleaved_portable, "portable");
  check_kernel<vec::InterleavedQ8_0>(vec::gemm_interleaved_portable, "portable");
  check_group<vec::InterleavedQ8_0>(vec::gemm_interleaved_portable, "portable", 3, 32, 0, 3);  // one block
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
  // Q4_K has a kernel at every level (AVX2 the baseline), Q8_0 on AVX-512 VNNI.
  EXPECT_EQ(checked, cpu::supports(cpu::KernelLevel::Avx512Vnni) ? 3 : 1);
}

}  // namespace
}  // namespace tangram
