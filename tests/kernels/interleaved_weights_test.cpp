// Q8_0 and Q4_K weights interleaved once at load (interleave_for_matmul,
// TensorLayout::kInterleaved16) against the same weights row-major: matmul at every token count,
// the groups and their row-major tail, and the row accessors. ctest runs this suite once more with
// TANGRAM_CPU=avx2, so both kernel levels' in-place paths are covered.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace tangram {
namespace {

using testing::make_matrix;
using testing::random_normal;

// The matrix's bytes interleaved in place, with a view that says so.
struct InterleavedCopy {
  std::vector<uint8_t> bytes;
  TensorView view;
};

InterleavedCopy interleaved_copy(const testing::QuantMatrix& W) {
  InterleavedCopy c;
  c.bytes = W.bytes;
  c.view = W.view();
  c.view.data = c.bytes.data();
  c.view.layout = interleave_for_matmul(c.view, c.bytes.data());
  return c;
}

// Y of the interleaved copy against Y of the row-major matrix for n = 1..20 tokens. From 8
// tokens both run the interleaved kernels on the same groups (the row-major matrix repacked per
// panel), so the outputs are bit-identical; below 8 the row-major matrix runs the row-major
// kernels, which add the same exact integer block sums times the same scales in another float
// order: within 4e-6 of sum |w x| (the activations' own quantisation is common to both).
void check_matmul(GgmlType type, int64_t rows, int64_t cols, ThreadPool& pool) {
  SCOPED_TRACE(ggml_type_name(type));
  const auto W = make_matrix(type, rows, cols, static_cast<uint32_t>(rows * 3 + cols));
  const InterleavedCopy I = interleaved_copy(W);
  ASSERT_EQ(I.view.layout, rows >= 16 ? TensorLayout::kInterleaved16 : TensorLayout::kRowMajor)
      << rows;
  if (rows >= 16) {
    ASSERT_NE(std::memcmp(I.bytes.data(), W.bytes.data(), W.bytes.size()), 0);
  }
  for (int64_t n = 1; n <= 20; ++n) {
    const auto X =
        random_normal(static_cast<size_t>(n * cols), static_cast<uint32_t>(n + rows));  // [n][cols]
    std::vector<float> want(static_cast<size_t>(n * rows), std::nanf("")), got(want);   // [n][rows]
    matmul(W.view(), X.data(), n, want.data(), pool);
    matmul(I.view, X.data(), n, got.data(), pool);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t r = 0; r < rows; ++r) {
        const size_t i = static_cast<size_t>(t * rows + r);
        if (n >= 8) {
          ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0)
              << "rows=" << rows << " cols=" << cols << " n=" << n << " t=" << t << " r=" << r;
          continue;
        }
        double mag = 0;
        for (int64_t k = 0; k < cols; ++k)
          mag += std::fabs(static_cast<double>(W.deq[static_cast<size_t>(r * cols + k)]) *
                           static_cast<double>(X[static_cast<size_t>(t * cols + k)]));
        ASSERT_NEAR(got[i], want[i], 4e-6 * mag + 1e-6)
            << "rows=" << rows << " cols=" << cols << " n=" << n << " t=" << t << " r=" << r;
      }
  }
}

TEST(InterleavedWeights, MatmulMatchesRowMajor) {
  for (const int threads : {1, 2}) {
    ThreadPool pool(threads);
    for (const int64_t rows :
         {5, 16, 37, 100, 133})  // under one group; whole groups; tails of 5, 4, 5
      for (const int64_t cols : {32, 256, 2560}) {
        check_matmul(GgmlType::Q8_0, rows, cols, pool);
        if (cols % 256 == 0) check_matmul(GgmlType::Q4_K, rows, cols, pool);
      }
  }
}

// matmul_group and matmul_swiglu take the same paths as matmul on interleaved weights.
TEST(InterleavedWeights, GroupAndSwigluMatchSeparateCalls) {
  ThreadPool pool(2);
  const int64_t rows = 53, cols = 256;
  for (const GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_K}) {
    SCOPED_TRACE(ggml_type_name(type));
    const auto G = make_matrix(type, rows, cols, 11), U = make_matrix(type, rows, cols, 12);
    const InterleavedCopy gi = interleaved_copy(G), ui = interleaved_copy(U);
    for (const int64_t n : {1, 3, 9}) {
      const auto X = random_normal(static_cast<size_t>(n * cols), static_cast<uint32_t>(n));
      const size_t size = static_cast<size_t>(n * rows);
      std::vector<float> g1(size), u1(size), g2(size), u2(size);
      matmul(gi.view, X.data(), n, g1.data(), pool);
      matmul(ui.view, X.data(), n, u1.data(), pool);
      const MatmulOutput outs[] = {{&gi.view, g2.data()}, {&ui.view, u2.data()}};
      matmul_group(outs, X.data(), n, pool);
      EXPECT_EQ(g1, g2) << n;
      EXPECT_EQ(u1, u2) << n;
      matmul_swiglu(gi.view, ui.view, X.data(), n, g2.data(), u2.data(), pool);
      EXPECT_EQ(u1, u2) << n;
      for (int64_t t = 0; t < n; ++t) swiglu(g1.data() + t * rows, u1.data() + t * rows, rows);
      EXPECT_EQ(g1, g2) << n;
    }
  }
}

// copy_row, copy_bytes, get_row and row_dot on the interleaved copy give the row-major values.
TEST(InterleavedWeights, RowAccessorsGiveRowMajorRows) {
  const int64_t rows = 37;
  for (const GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_K})
    for (const int64_t cols : {256, 768}) {
      SCOPED_TRACE(std::string(ggml_type_name(type)) + " cols=" + std::to_string(cols));
      const auto W = make_matrix(type, rows, cols, 5);
      const InterleavedCopy I = interleaved_copy(W);
      ASSERT_EQ(I.view.interleaved_rows(), 32);
      const size_t rb = I.view.row_bytes();
      const auto x = random_normal(static_cast<size_t>(cols), 9);
      std::vector<uint8_t> row(rb);
      std::vector<float> a(static_cast<size_t>(cols)), b(a);
      for (int64_t r = 0; r < rows; ++r) {
        I.view.copy_row(r, row.data());
        ASSERT_EQ(std::memcmp(row.data(), W.bytes.data() + static_cast<size_t>(r) * rb, rb), 0)
            << r;
        get_row(I.view, r, a.data());
        get_row(W.view(), r, b.data());
        ASSERT_EQ(a, b) << r;
        ASSERT_EQ(row_dot(I.view, r, x.data()), row_dot(W.view(), r, x.data())) << r;
      }
      // Byte ranges across rows, groups and the tail.
      for (const size_t offset :
           {size_t{0}, size_t{1}, rb - 3, 15 * rb + 7, 31 * rb + 100, 36 * rb})
        for (const size_t n : {size_t{1}, size_t{64}, rb + 5}) {
          if (offset + n > W.bytes.size()) continue;
          std::vector<uint8_t> got(n);
          I.view.copy_bytes(offset, n, got.data());
          ASSERT_EQ(std::memcmp(got.data(), W.bytes.data() + offset, n), 0) << offset << " " << n;
        }
    }
}

// Only row-major Q8_0 and Q4_K of at least one group are rewritten; anything else keeps its
// bytes.
TEST(InterleavedWeights, OtherTypesAndLayoutsAreLeftAlone) {
  for (const GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::Q4_0, GgmlType::Q6_K}) {
    const auto W = make_matrix(type, 32, 256, 3);
    std::vector<uint8_t> bytes = W.bytes;
    EXPECT_EQ(interleave_for_matmul(W.view(), bytes.data()), TensorLayout::kRowMajor)
        << ggml_type_name(type);
    EXPECT_EQ(bytes, W.bytes) << ggml_type_name(type);
  }
  for (const GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_K}) {
    const auto W = make_matrix(type, 32, 256, 3);
    InterleavedCopy I = interleaved_copy(W);
    const std::vector<uint8_t> once = I.bytes;
    EXPECT_EQ(interleave_for_matmul(I.view, I.bytes.data()),
              TensorLayout::kInterleaved16);  // not twice
    EXPECT_EQ(I.bytes, once);
    const auto small = make_matrix(type, 15, 256, 3);  // under one group
    std::vector<uint8_t> bytes = small.bytes;
    EXPECT_EQ(interleave_for_matmul(small.view(), bytes.data()), TensorLayout::kRowMajor);
    EXPECT_EQ(bytes, small.bytes);
  }
}

// A view claiming the interleaved layout for a type that has none is malformed: zeros, no read.
TEST(InterleavedWeights, ImpossibleLayoutIsMalformed) {
  ThreadPool pool(1);
  const auto W = make_matrix(GgmlType::Q4_0, 32, 256, 3);
  TensorView v = W.view();
  v.layout = TensorLayout::kInterleaved16;
  const auto X = random_normal(256, 1);
  std::vector<float> Y(32, std::nanf(""));
  matmul(v, X.data(), 1, Y.data(), pool);
  for (const float y : Y) EXPECT_EQ(y, 0.0f);
}

}  // namespace
}  // namespace tangram
