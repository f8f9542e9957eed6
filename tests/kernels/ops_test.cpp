// Element-wise kernels against plain double-precision references.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/ops.h"

namespace tangram {
namespace {

using testing::dbl;
using testing::random_normal;

const int64_t kSizes[] = {1, 7, 8, 31, 33, 1000, 4099};

TEST(Ops, DotF32) {
  for (const int64_t n : kSizes) {
    const auto a = random_normal(static_cast<size_t>(n), 1),
               b = random_normal(static_cast<size_t>(n), 2);
    double ref = 0, abs = 0;
    for (int64_t i = 0; i < n; ++i) {
      ref += dbl(a[i]) * dbl(b[i]);
      abs += std::fabs(dbl(a[i]) * dbl(b[i]));
    }
    // Worst-case float summation error n * 2^-24 of sum |a b|.
    EXPECT_NEAR(dot_f32(a.data(), b.data(), n), ref, static_cast<double>(n) * 6e-8 * abs) << n;
  }
}

TEST(Ops, AxpyAndAdd) {
  for (const int64_t n : kSizes) {
    const auto x = random_normal(static_cast<size_t>(n), 3);
    auto y = random_normal(static_cast<size_t>(n), 4);
    auto y2 = y;
    axpy(y.data(), 0.75f, x.data(), n);
    add(y2.data(), x.data(), n);
    const auto y0 = random_normal(static_cast<size_t>(n), 4);
    for (int64_t i = 0; i < n; ++i) {
      // One fused or two separately rounded operations: within 1 ulp-ish of the exact value.
      const double ax = 0.75 * dbl(x[i]) + dbl(y0[i]);
      EXPECT_NEAR(y[i], ax, 2.4e-7 * (std::fabs(0.75 * dbl(x[i])) + std::fabs(dbl(y0[i])))) << i;
      EXPECT_EQ(y2[i], y0[i] + x[i]) << i;
    }
  }
}

TEST(Ops, RmsNorm) {
  for (const int64_t n : kSizes) {
    const auto x = random_normal(static_cast<size_t>(n), 5, 3.0f);
    const auto w = random_normal(static_cast<size_t>(n), 6);
    std::vector<float> out(static_cast<size_t>(n));
    rmsnorm(x.data(), w.data(), out.data(), n, 1e-5f);
    double ss = 0;
    for (float v : x) ss += dbl(v) * dbl(v);
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + 1e-5);
    for (int64_t i = 0; i < n; ++i) {
      const double ref = dbl(x[i]) * inv * dbl(w[i]);
      EXPECT_NEAR(out[i], ref, 1e-5 * std::fabs(ref) + 1e-7) << i;
    }
    // In place.
    auto y = x;
    rmsnorm(y.data(), w.data(), y.data(), n, 1e-5f);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(y[i], out[i]);
  }
}

TEST(Ops, SoftmaxIsStableAndAccurate) {
  for (const int64_t n : kSizes) {
    auto x = random_normal(static_cast<size_t>(n), 7, 10.0f);
    for (auto& v : x) v += 1000.0f;  // would overflow without the max subtraction
    if (n > 3) x[2] = -std::numeric_limits<float>::infinity();  // a masked position
    std::vector<double> ref(x.begin(), x.end());
    double mx = -INFINITY, sum = 0;
    for (double v : ref) mx = std::max(mx, v);
    for (double& v : ref) sum += (v = std::exp(v - mx));
    softmax(x.data(), n);
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      // exp within a few ulp, then one division: 2e-6 relative.
      EXPECT_NEAR(x[i], ref[i] / sum, 2e-6 * ref[i] / sum + 1e-12) << n << " " << i;
      total += dbl(x[i]);
    }
    EXPECT_NEAR(total, 1.0, 1e-5);
    if (n > 3) {
      EXPECT_EQ(x[2], 0.0f);
    }
  }
}

TEST(Ops, SoftmaxAllMaskedIsUniform) {
  std::vector<float> x(5, -std::numeric_limits<float>::infinity());
  softmax(x.data(), 5);
  for (float v : x) EXPECT_FLOAT_EQ(v, 0.2f);
}

TEST(Ops, SwiGlu) {
  for (const int64_t n : kSizes) {
    auto g = random_normal(static_cast<size_t>(n), 8, 4.0f);
    if (n > 4) {
      g[0] = 95.0f;   // exp(-g) underflows: silu = g
      g[1] = -95.0f;  // exp(-g) overflows: silu -> -0
      g[2] = 0.0f;
    }
    const auto up = random_normal(static_cast<size_t>(n), 9);
    const auto g0 = g;
    swiglu(g.data(), up.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double ref = dbl(g0[i]) / (1.0 + std::exp(-dbl(g0[i]))) * dbl(up[i]);
      EXPECT_NEAR(g[i], ref, 1e-6 * std::fabs(ref) + 1e-30) << i << " g=" << g0[i];
    }
  }
}

TEST(Ops, ExpMatchesStdOverTheRange) {
  // softmax of {x, 0} = {e^x / (e^x + 1), 1 / (e^x + 1)} exercises the vector exp with 8+ lanes.
  for (float x = -80.0f; x <= 80.0f; x += 0.37f) {
    std::vector<float> v(16, -std::numeric_limits<float>::infinity());
    v[0] = x;
    v[9] = 0.0f;
    softmax(v.data(), 16);
    const double ex = std::exp(static_cast<double>(x));
    EXPECT_NEAR(v[0], ex / (ex + 1), 2e-6 * ex / (ex + 1)) << x;
    EXPECT_NEAR(v[9], 1 / (ex + 1), 2e-6 / (ex + 1)) << x;
  }
}

}  // namespace
}  // namespace tangram
