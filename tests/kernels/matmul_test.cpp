// matmul for every weight type, decode and prefill token counts, 1 and 2 threads, against a
// double-accumulation reference on the dequantised weights.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "common/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/matmul.h"
#include "kernels/matmul_paths.h"

namespace tangram {
namespace {

using testing::activation_error_bound;
using testing::make_matrix;
using testing::random_normal;

enum class Path { kAuto, kDecode, kPrefill };

// Tolerance per output: the activation-quantisation bound of the decode path (the prefill path
// uses float activations and lands well inside it) plus float accumulation error.
void check_matmul(GgmlType type, int64_t rows, int64_t cols, int64_t n, ThreadPool& pool,
                  Path path = Path::kAuto) {
  const auto W = make_matrix(type, rows, cols, static_cast<uint32_t>(rows * 7 + cols + n));
  const auto X = random_normal(static_cast<size_t>(n * cols), static_cast<uint32_t>(n) + 5);  // [n][cols]
  std::vector<float> Y(static_cast<size_t>(n * rows), std::nanf(""));                         // [n][rows]
  switch (path) {
    case Path::kAuto: matmul(W.view(), X.data(), n, Y.data(), pool); break;
    case Path::kDecode: matmul_paths::decode(W.view(), X.data(), n, Y.data(), pool); break;
    case Path::kPrefill: matmul_paths::prefill(W.view(), X.data(), n, Y.data(), pool); break;
  }
  for (int64_t t = 0; t < n; ++t) {
    const float* x = X.data() + t * cols;
    for (int64_t r = 0; r < rows; ++r) {
      const float* w = W.deq.data() + r * cols;
      double ref = 0;
      for (int64_t k = 0; k < cols; ++k) ref += testing::dbl(w[k]) * testing::dbl(x[k]);
      const double tol = activation_error_bound(type, w, x, cols);
      ASSERT_NEAR(Y[static_cast<size_t>(t * rows + r)], ref, tol)
          << ggml_type_name(type) << " rows=" << rows << " cols=" << cols << " n=" << n << " t=" << t
          << " r=" << r << " threads=" << pool.size() << " path=" << static_cast<int>(path);
    }
  }
}

const GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,
                           GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_K};

TEST(Matmul, AllTypesTokenCountsAndThreads) {
  for (const int threads : {1, 2}) {
    ThreadPool pool(threads);
    for (const GgmlType type : kTypes)
      for (const int64_t n : {1, 2, 3, 7, 16, 64, 200})
        for (const int64_t rows : {1, 37, 131}) check_matmul(type, rows, 512, n, pool);
  }
}

// Both strategies at token counts on either side of every type's crossover.
TEST(Matmul, EachPathAtEveryTokenCount) {
  ThreadPool pool(2);
  for (const GgmlType type : kTypes)
    for (const int64_t n : {1, 2, 3, 4, 5, 8, 9, 17})
      for (const Path path : {Path::kDecode, Path::kPrefill}) check_matmul(type, 67, 768, n, pool, path);
}

TEST(Matmul, WideRowsAcrossTiles) {
  ThreadPool pool(2);
  for (const GgmlType type : {GgmlType::F32, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K})
    for (const int64_t n : {8, 9, 33}) check_matmul(type, 301, 1280, n, pool);
  // F32/F16/BF16 rows need not be a multiple of 8 or 16 (SIMD tails).
  for (const GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16})
    for (const int64_t cols : {1, 7, 13, 37})
      for (const Path path : {Path::kDecode, Path::kPrefill}) check_matmul(type, 5, cols, 6, pool, path);
}

// Q4_K and Q8_0 from 16 tokens run on panels repacked into 16 interleaved rows (where the level
// has those kernels): across several panels and both threads' slices, with a partial last
// group, and on either side of both switches.
TEST(Matmul, InterleavedPanels) {
  ThreadPool pool(2);
  check_matmul(GgmlType::Q4_K, 2900, 512, 41, pool);  // 384 KiB panels of 1360 rows at 512 columns
  check_matmul(GgmlType::Q8_0, 1500, 512, 41, pool);  // 384 KiB panels of 720 rows
  for (const GgmlType type : {GgmlType::Q4_K, GgmlType::Q8_0})
    for (const int64_t n : {7, 8, 9, 15, 16, 17}) check_matmul(type, 53, 2560, n, pool, Path::kDecode);
}

// Many tokens (interleaved rows where the level has them) against the same tokens one at a time
// (row-major kernels): both quantise the activations the same way and sum the same integers, so
// they agree to float rounding, far tighter than check_matmul's activation-quantisation bound.
TEST(Matmul, ManyTokensMatchOneAtATime) {
  ThreadPool pool(2);
  for (const GgmlType type : {GgmlType::Q4_K, GgmlType::Q8_0})
    for (const int64_t rows : {64, 37, 512})
      for (const int64_t cols : {256, 512})
        for (const int64_t n : {8, 17, 30, 70}) {
          const auto W = make_matrix(type, rows, cols, static_cast<uint32_t>(rows + cols));
          const auto X = random_normal(static_cast<size_t>(n * cols), static_cast<uint32_t>(n), 2.0f);  // [n][cols]
          std::vector<float> many(static_cast<size_t>(n * rows)), one(static_cast<size_t>(rows));  // [n][rows], [rows]
          matmul_paths::decode(W.view(), X.data(), n, many.data(), pool);
          for (int64_t t = 0; t < n; ++t) {
            matmul_paths::decode(W.view(), X.data() + t * cols, 1, one.data(), pool);
            for (int64_t r = 0; r < rows; ++r) {
              double mag = 0;
              for (int64_t k = 0; k < cols; ++k)
                mag += std::fabs(testing::dbl(W.deq[static_cast<size_t>(r * cols + k)]) *
                                 testing::dbl(X[static_cast<size_t>(t * cols + k)]));
              ASSERT_NEAR(many[static_cast<size_t>(t * rows + r)], one[static_cast<size_t>(r)], 1e-5 * mag + 1e-6)
                  << ggml_type_name(type) << " rows=" << rows << " cols=" << cols << " n=" << n << " t=" << t
                  << " r=" << r;
            }
          }
        }
}

// The prefill path makes its BLAS calls single-threaded per pool thread through the OpenMP
// thread-count setting; the caller's setting must come back unchanged.
TEST(Matmul, LeavesCallersOpenMpThreadCountAlone) {
  ThreadPool pool(2);
  const int before = omp_get_max_threads();
  omp_set_num_threads(3);
  check_matmul(GgmlType::F32, 40, 256, 64, pool, Path::kPrefill);
  check_matmul(GgmlType::Q8_0, 40, 256, 64, pool, Path::kPrefill);
  EXPECT_EQ(omp_get_max_threads(), 3);
  omp_set_num_threads(before);
}

TEST(Matmul, MalformedViewGivesZeros) {
  ThreadPool pool(2);
  auto W = make_matrix(GgmlType::Q4_K, 4, 256, 1);
  TensorView v = W.view();
  v.nbytes -= 1;  // short of rows * row_bytes
  std::vector<float> X(256 * 2, 1.0f), Y(4 * 2, 5.0f);
  matmul(v, X.data(), 2, Y.data(), pool);
  for (float y : Y) EXPECT_EQ(y, 0.0f);
  v = W.view();
  v.ne[0] = 200;  // not a multiple of the block size
  std::fill(Y.begin(), Y.end(), 5.0f);
  matmul(v, X.data(), 1, Y.data(), pool);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(Y[static_cast<size_t>(i)], 0.0f);
}

}  // namespace
}  // namespace tangram
