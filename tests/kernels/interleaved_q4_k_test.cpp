// The interleaved Q4_K kernels (portable and every level this CPU runs) against the plain
// reference: dequantised weights dotted with the dequantised Q8_K activations, in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu_features.h"
#include "kernels/interleaved_q4_k.h"
#include "kernels/quant.h"

namespace tangram {
namespace {

using testing::make_matrix;
using testing::random_normal;

struct Activations {
  size_t row_bytes = 0;
  std::vector<uint8_t> q8k;     // [n][row_bytes]
  std::vector<float> deq;       // [n][cols]
  std::vector<int32_t> pairs;   // [n][cols / 256][4]
};

Activations make_activations(int64_t n, int64_t cols, uint32_t seed) {
  Activations a;
  a.row_bytes = ggml_row_bytes(GgmlType::Q8_K, cols);
  a.q8k.resize(a.row_bytes * static_cast<size_t>(n));
  a.deq.resize(static_cast<size_t>(n * cols));
  a.pairs.resize(static_cast<size_t>(n * cols / 256 * 4));
  const auto x = random_normal(static_cast<size_t>(n * cols), seed);
  for (int64_t t = 0; t < n; ++t) {
    uint8_t* row = a.q8k.data() + static_cast<size_t>(t) * a.row_bytes;
    quantize_row(GgmlType::Q8_K, x.data() + t * cols, row, cols);
    dequantize_row(GgmlType::Q8_K, row, a.deq.data() + t * cols, cols);
    vec::q8_k_pair_sums(row, cols, a.pairs.data() + t * cols / 256 * 4);
  }
  return a;
}

// Rows [r0, r0 + nr) of a Q4_K matrix, interleaved, times nt tokens, against the reference.
void check_group(vec::InterleavedGemmFn gemm, const char* name, int64_t rows, int64_t cols, int64_t r0, int nt) {
  const auto W = make_matrix(GgmlType::Q4_K, rows, cols, static_cast<uint32_t>(rows + cols));
  const auto A = make_activations(nt, cols, static_cast<uint32_t>(nt + cols));
  const int nr = static_cast<int>(std::min<int64_t>(vec::kInterleavedRows, rows - r0));
  const int64_t nblocks = cols / 256;
  const size_t rb = ggml_row_bytes(GgmlType::Q4_K, cols);
  std::vector<vec::InterleavedQ4_K> group(static_cast<size_t>(nblocks));
  vec::interleave_q4_k(W.bytes.data() + static_cast<size_t>(r0) * rb, rb, nr, cols, group.data());
  constexpr size_t kStride = vec::kInterleavedRows + 3;  // not the group width: stride is honoured
  std::vector<float> out(kStride * static_cast<size_t>(nt), std::nanf(""));
  gemm(group.data(), nblocks, A.q8k.data(), A.row_bytes, A.pairs.data(), static_cast<size_t>(nblocks * 4), nt,
       out.data(), kStride);
  for (int t = 0; t < nt; ++t)
    for (int r = 0; r < vec::kInterleavedRows; ++r) {
      double ref = 0, mag = 0;
      if (r < nr)
        for (int64_t k = 0; k < cols; ++k) {
          const double p = testing::dbl(W.deq[static_cast<size_t>((r0 + r) * cols + k)]) *
                           testing::dbl(A.deq[static_cast<size_t>(t * cols + k)]);
          ref += p;
          mag += std::fabs(p);
        }
      // Float rounding of the per-block scale products and the sums only: the integer part is exact.
      const double tol = 4e-6 * mag + 1e-6;
      ASSERT_NEAR(out[static_cast<size_t>(t) * kStride + static_cast<size_t>(r)], ref, tol)
          << name << " rows=" << rows << " cols=" << cols << " r0=" << r0 << " r=" << r << " t=" << t << " nt=" << nt;
    }
}

void check_kernel(vec::InterleavedGemmFn gemm, const char* name) {
  for (const int64_t cols : {256, 768, 2560})
    for (int nt = 1; nt <= vec::kInterleavedTokens; ++nt) {
      check_group(gemm, name, 16, cols, 0, nt);  // a full group
      check_group(gemm, name, 37, cols, 32, nt);  // the last 5 rows: zero rows fill the group
    }
}

TEST(InterleavedQ4K, PortableKernelMatchesReference) {
  check_kernel(vec::gemm_interleaved_q4_k_portable, "portable");
}

TEST(InterleavedQ4K, EveryLevelKernelMatchesReference) {
  int checked = 0;
  for (const cpu::KernelLevel level : cpu::supported_levels()) {
    const vec::InterleavedGemmFn gemm = vec::gemm_interleaved_q4_k_fn(level);
    if (gemm == nullptr) continue;  // that level keeps the row-major tiles (checked by matmul_test)
    check_kernel(gemm, std::string(cpu::level_name(level)).c_str());
    ++checked;
  }
  if (cpu::supports(cpu::KernelLevel::Avx512Vnni)) {
    EXPECT_GE(checked, 1);
  }
}

}  // namespace
}  // namespace tangram
