// matmul for every weight type, decode and prefill token counts, 1 and 2 threads, against a
// double-accumulation reference on the dequantised weights.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include "common/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/matmul.h"
#include "kernels/matmul_paths.h"
#include "kernels/ops.h"

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
  const auto X =
      random_normal(static_cast<size_t>(n * cols), static_cast<uint32_t>(n) + 5);  // [n][cols]
  std::vector<float> Y(static_cast<size_t>(n * rows), std::nanf(""));              // [n][rows]
  switch (path) {
    case Path::kAuto:
      matmul(W.view(), X.data(), n, Y.data(), pool);
      break;
    case Path::kDecode:
      matmul_paths::decode(W.view(), X.data(), n, Y.data(), pool);
      break;
    case Path::kPrefill:
      matmul_paths::prefill(W.view(), X.data(), n, Y.data(), pool);
      break;
  }
  for (int64_t t = 0; t < n; ++t) {
    const float* x = X.data() + t * cols;
    for (int64_t r = 0; r < rows; ++r) {
      const float* w = W.deq.data() + r * cols;
      double ref = 0;
      for (int64_t k = 0; k < cols; ++k) ref += testing::dbl(w[k]) * testing::dbl(x[k]);
      const double tol = activation_error_bound(type, w, x, cols);
      ASSERT_NEAR(Y[static_cast<size_t>(t * rows + r)], ref, tol)
          << ggml_type_name(type) << " rows=" << rows << " cols=" << cols << " n=" << n
          << " t=" << t << " r=" << r << " threads=" << pool.size()
          << " path=" << static_cast<int>(path);
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
      for (const Path path : {Path::kDecode, Path::kPrefill})
        check_matmul(type, 67, 768, n, pool, path);
}

TEST(Matmul, WideRowsAcrossTiles) {
  ThreadPool pool(2);
  for (const GgmlType type : {GgmlType::F32, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K})
    for (const int64_t n : {8, 9, 33}) check_matmul(type, 301, 1280, n, pool);
  // F32/F16/BF16 rows need not be a multiple of 8 or 16 (SIMD tails).
  for (const GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16})
    for (const int64_t cols : {1, 7, 13, 37})
      for (const Path path : {Path::kDecode, Path::kPrefill})
        check_matmul(type, 5, cols, 6, pool, path);
}

// Q4_K and Q8_0 from 8 tokens run on panels repacked into 16 interleaved rows (where the level
// has those kernels): across several panels and both threads, with a partial last group, and on
// either side of the switch.
TEST(Matmul, InterleavedPanels) {
  ThreadPool pool(2);
  check_matmul(GgmlType::Q4_K, 2900, 512, 41, pool);  // 384 KiB panels of 1360 rows at 512 columns
  check_matmul(GgmlType::Q8_0, 1500, 512, 41, pool);  // 384 KiB panels of 720 rows
  for (const GgmlType type : {GgmlType::Q4_K, GgmlType::Q8_0})
    for (const int64_t n : {7, 8, 9, 15, 16, 17})
      check_matmul(type, 53, 2560, n, pool, Path::kDecode);
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
          const auto X = random_normal(static_cast<size_t>(n * cols), static_cast<uint32_t>(n),
                                       2.0f);  // [n][cols]
          std::vector<float> many(static_cast<size_t>(n * rows)),
              one(static_cast<size_t>(rows));  // [n][rows], [rows]
          matmul_paths::decode(W.view(), X.data(), n, many.data(), pool);
          for (int64_t t = 0; t < n; ++t) {
            matmul_paths::decode(W.view(), X.data() + t * cols, 1, one.data(), pool);
            for (int64_t r = 0; r < rows; ++r) {
              double mag = 0;
              for (int64_t k = 0; k < cols; ++k)
                mag += std::fabs(testing::dbl(W.deq[static_cast<size_t>(r * cols + k)]) *
                                 testing::dbl(X[static_cast<size_t>(t * cols + k)]));
              ASSERT_NEAR(many[static_cast<size_t>(t * rows + r)], one[static_cast<size_t>(r)],
                          1e-5 * mag + 1e-6)
                  << ggml_type_name(type) << " rows=" << rows << " cols=" << cols << " n=" << n
                  << " t=" << t << " r=" << r;
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

// matmul_group / matmul_swiglu against separate matmul calls on the same pool: every row comes
// from the same kernel on the same activations, so the outputs must match bit for bit.
void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want,
                      std::string_view what, int64_t n, int threads) {
  ASSERT_EQ(got.size(), want.size());
  ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
      << what << " n=" << n << " threads=" << threads;
}

// Each group: matrices of the types given (mixed types share or split the quantised
// activations), row counts that are not multiples of a tile, group or grain.
void check_group(std::span<const GgmlType> types, int64_t cols, int64_t n, ThreadPool& pool) {
  const int64_t row_counts[] = {96, 37, 131, 16};
  std::vector<testing::QuantMatrix> mats;
  for (size_t i = 0; i < types.size(); ++i)
    mats.push_back(
        make_matrix(types[i], row_counts[i % 4], cols, static_cast<uint32_t>(i * 11 + n)));
  std::vector<TensorView> views;
  for (const auto& m : mats) views.push_back(m.view());
  const auto X =
      random_normal(static_cast<size_t>(n * cols), static_cast<uint32_t>(n) + 3);  // [n][cols]
  std::vector<std::vector<float>> grouped, separate;
  std::vector<MatmulOutput> outputs;
  for (const auto& v : views) {
    grouped.emplace_back(static_cast<size_t>(n * v.rows()), std::nanf(""));
    separate.emplace_back(static_cast<size_t>(n * v.rows()), std::nanf(""));
  }
  for (size_t i = 0; i < views.size(); ++i) {
    outputs.push_back(MatmulOutput{&views[i], grouped[i].data()});
    matmul(views[i], X.data(), n, separate[i].data(), pool);
  }
  matmul_group(outputs, X.data(), n, pool);
  for (size_t i = 0; i < views.size(); ++i)
    expect_same_bits(grouped[i], separate[i], ggml_type_name(types[i]), n, pool.size());
}

TEST(MatmulGroup, EveryTypeTokenCountAndThreadCountMatchesSeparateCalls) {
  const GgmlType mixed_k[] = {GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::Q6_K};
  const GgmlType mixed_32[] = {GgmlType::Q8_0, GgmlType::F16, GgmlType::Q4_0, GgmlType::Q8_0,
                               GgmlType::F32};
  for (const int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (const int64_t n : {1, 4, 16, 33, 512}) {
      for (const GgmlType type : kTypes) {
        const GgmlType same[] = {type, type, type};
        check_group(same, 512, n, pool);
      }
      check_group(mixed_k, 512, n, pool);
      check_group(mixed_32, 256, n, pool);  // more than one region's worth of products
    }
  }
}

// The threads take units of rows (panels, or a share per thread) from a shared counter, so which
// thread computes a row, and how the rows are cut, changes with the thread count and from run to
// run: on the decode paths every row must come out the same bit for bit. Matrices of several
// panels, row-major and interleaved. (The prefill path's sgemm blocks by the size of its share,
// which follows the thread count as it always has.)
TEST(Matmul, OutputDoesNotDependOnHowRowsAreSplit) {
  ThreadPool one(1), two(2), three(3);
  const std::pair<GgmlType, int64_t> shapes[] = {
      {GgmlType::Q8_0, 1500}, {GgmlType::Q4_K, 2900}, {GgmlType::Q6_K, 1100}, {GgmlType::F16, 420}};
  for (const auto& [type, rows] : shapes)
    for (const int64_t n : {1, 8, 16, 41, 300}) {
      if (n > matmul_paths::decode_max_tokens(type)) continue;
      const int64_t cols = 512;
      const auto W = make_matrix(type, rows, cols, static_cast<uint32_t>(rows + n));
      const auto X =
          random_normal(static_cast<size_t>(n * cols), static_cast<uint32_t>(n) + 5);  // [n][cols]
      std::vector<float> want(static_cast<size_t>(n * rows));                          // [n][rows]
      matmul(W.view(), X.data(), n, want.data(), one);
      for (ThreadPool* pool : {&two, &three, &two})
        for (int repeat = 0; repeat < 2; ++repeat) {
          std::vector<float> got(want.size(), std::nanf(""));
          matmul(W.view(), X.data(), n, got.data(), *pool);
          expect_same_bits(got, want, ggml_type_name(type), n, pool->size());
        }
    }
}

TEST(MatmulGroup, MalformedMemberGivesZerosOthersComputed) {
  ThreadPool pool(2);
  const auto good = make_matrix(GgmlType::Q8_0, 40, 256, 1);
  const auto bad = make_matrix(GgmlType::Q4_K, 4, 256, 2);
  TensorView good_view = good.view(), bad_view = bad.view();
  bad_view.nbytes -= 1;
  const auto X = random_normal(256 * 3, 4);
  std::vector<float> y_good(40 * 3), y_bad(4 * 3, 5.0f), want(40 * 3);
  const MatmulOutput outputs[] = {{&bad_view, y_bad.data()}, {&good_view, y_good.data()}};
  matmul_group(outputs, X.data(), 3, pool);
  matmul(good_view, X.data(), 3, want.data(), pool);
  for (float y : y_bad) EXPECT_EQ(y, 0.0f);
  expect_same_bits(y_good, want, "Q8_0 beside a malformed view", 3, 2);
}

// gate/up with swiglu fused against matmul, matmul and swiglu over each token's row (over the
// rows both have, where their shapes differ).
void check_swiglu(GgmlType type, int64_t rows, int64_t up_rows, int64_t n, ThreadPool& pool) {
  const int64_t cols = 512;
  const auto G = make_matrix(type, rows, cols, static_cast<uint32_t>(n) + 1);
  const auto U = make_matrix(type, up_rows, cols, static_cast<uint32_t>(n) + 2);
  const auto X =
      random_normal(static_cast<size_t>(n * cols), static_cast<uint32_t>(n) + 9);  // [n][cols]
  std::vector<float> gate(static_cast<size_t>(n * rows)), up(static_cast<size_t>(n * up_rows));
  std::vector<float> want_gate(gate.size()), want_up(up.size());
  matmul_swiglu(G.view(), U.view(), X.data(), n, gate.data(), up.data(), pool);
  matmul(G.view(), X.data(), n, want_gate.data(), pool);
  matmul(U.view(), X.data(), n, want_up.data(), pool);
  for (int64_t t = 0; t < n; ++t)
    swiglu(want_gate.data() + t * rows, want_up.data() + t * up_rows, std::min(rows, up_rows));
  expect_same_bits(up, want_up, ggml_type_name(type), n, pool.size());
  expect_same_bits(gate, want_gate, ggml_type_name(type), n, pool.size());
}

TEST(MatmulSwiglu, EveryTypeTokenCountAndThreadCountMatchesSeparateCalls) {
  for (const int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (const int64_t n : {1, 4, 16, 33, 512})
      for (const GgmlType type : kTypes)
        for (const int64_t rows : {131, 16, 5}) check_swiglu(type, rows, rows, n, pool);
    check_swiglu(GgmlType::Q8_0, 37, 40, 4,
                 pool);  // shapes that cannot share a split: one after the other
  }
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
