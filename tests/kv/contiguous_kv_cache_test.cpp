// ContiguousKvCache: storage, growth, truncation and the causal GQA attention against a plain
// double-precision implementation in this file.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/quant.h"
#include "kv/contiguous_kv_cache.h"
#include "kv/kv_test_util.h"

namespace tangram::testing {
namespace {

// Causal attention in double over K/V of all positions so far.
//   q: [n][H][D] at positions pos0.., k: [len][KVH][D], v: [len][KVH][Dv], out: [n][H][Dv]
std::vector<double> naive_attention(const KvShape& s, const std::vector<float>& q, int64_t n,
                                    int64_t pos0, const std::vector<float>& k,
                                    const std::vector<float>& v) {
  const int H = s.n_head, KVH = s.n_kv_head, D = s.head_dim, Dv = s.head_dim_v;
  std::vector<double> out(static_cast<size_t>(n * H * Dv));
  for (int64_t t = 0; t < n; ++t) {
    for (int h = 0; h < H; ++h) {
      const int g = h / (H / KVH);
      const int64_t keys = pos0 + t + 1;
      std::vector<double> w(static_cast<size_t>(keys));
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j < keys; ++j) {
        double d = 0;
        for (int i = 0; i < D; ++i)
          d += static_cast<double>(q[static_cast<size_t>((t * H + h) * D + i)]) *
               static_cast<double>(k[static_cast<size_t>((j * KVH + g) * D + i)]);
        w[static_cast<size_t>(j)] = d / std::sqrt(static_cast<double>(D));
        mx = std::max(mx, w[static_cast<size_t>(j)]);
      }
      for (double& x : w) sum += (x = std::exp(x - mx));
      for (int i = 0; i < Dv; ++i) {
        double acc = 0;
        for (int64_t j = 0; j < keys; ++j)
          acc += w[static_cast<size_t>(j)] / sum *
                 static_cast<double>(v[static_cast<size_t>((j * KVH + g) * Dv + i)]);
        out[static_cast<size_t>((t * H + h) * Dv + i)] = acc;
      }
    }
  }
  return out;
}

std::vector<float> random_floats(size_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> x(n);
  for (float& f : x) f = dist(rng);
  return x;
}

std::vector<float> rounded_to_f16(std::vector<float> x) {
  for (float& f : x) f = fp16_to_fp32(fp32_to_fp16(f));
  return x;
}

double max_diff(const std::vector<float>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  return m;
}

struct AttnCase {
  int n_head, n_kv_head, head_dim, head_dim_v;
  KvType type;
  int threads;
};

class KvAttention : public ::testing::TestWithParam<AttnCase> {};

// Writes a prompt in one batch, then single tokens, across layers, and checks every
// attention output against the naive version.
TEST_P(KvAttention, MatchesNaiveAttention) {
  const AttnCase& c = GetParam();
  const KvShape shape{2, c.n_head, c.n_kv_head, c.head_dim, c.head_dim_v};
  ContiguousKvCache cache(shape, 64, c.type);
  ThreadPool pool(c.threads);
  std::mt19937 rng(11);
  const int64_t kv_row = int64_t{c.n_kv_head} * c.head_dim;
  const int64_t v_row = int64_t{c.n_kv_head} * c.head_dim_v;
  std::vector<std::vector<float>> all_k(2), all_v(2);  // per layer [len][...]
  // F32 storage: float accumulation only. F16: keys/values are rounded; the naive version
  // sees the rounded values, so only accumulation differs again.
  const double tol = 2e-5;
  int64_t pos = 0;
  for (int64_t n : {13, 1, 1, 5, 1}) {
    ASSERT_TRUE(cache.reserve(pos + n).ok());
    for (int layer = 0; layer < 2; ++layer) {
      auto k = random_floats(static_cast<size_t>(n * kv_row), rng, 1.0f);
      auto v = random_floats(static_cast<size_t>(n * v_row), rng, 1.0f);
      auto q = random_floats(static_cast<size_t>(n * c.n_head * c.head_dim), rng, 1.5f);
      ASSERT_TRUE(cache.write(layer, pos, k.data(), v.data(), n).ok());
      if (c.type == KvType::F16) {
        k = rounded_to_f16(k);
        v = rounded_to_f16(v);
      }
      all_k[layer].insert(all_k[layer].end(), k.begin(), k.end());
      all_v[layer].insert(all_v[layer].end(), v.begin(), v.end());
      std::vector<float> out(static_cast<size_t>(n * c.n_head * c.head_dim_v));
      attend_cache(cache, layer, q.data(), n, pos, out.data(), pool);
      const auto want = naive_attention(shape, q, n, pos, all_k[layer], all_v[layer]);
      EXPECT_LE(max_diff(out, want), tol) << "layer " << layer << " pos " << pos << " n " << n;
    }
    pos += n;
    EXPECT_EQ(cache.n_positions(), pos);
    EXPECT_EQ(cache.length(1, c.n_kv_head - 1), pos);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, KvAttention,
                         ::testing::Values(AttnCase{8, 2, 32, 32, KvType::F32, 1},
                                           AttnCase{8, 2, 32, 32, KvType::F32, 2},
                                           AttnCase{8, 8, 16, 16, KvType::F32, 3},
                                           AttnCase{4, 1, 64, 64, KvType::F32, 2},
                                           AttnCase{8, 2, 32, 32, KvType::F16, 1},
                                           AttnCase{8, 2, 32, 32, KvType::F16, 2},
                                           AttnCase{6, 3, 8, 12, KvType::F32, 2}));

TEST(KvCache, ReserveGrowsAndRefusesPastCapacity) {
  const KvShape shape{1, 2, 1, 4, 4};
  ContiguousKvCache cache(shape, 100, KvType::F32);
  EXPECT_EQ(cache.allocated(), 0);
  ASSERT_TRUE(cache.reserve(3).ok());
  EXPECT_GE(cache.allocated(), 3);
  const Status st = cache.reserve(101);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("capacity"), std::string::npos);
  ASSERT_TRUE(cache.reserve(100).ok());
  EXPECT_EQ(cache.allocated(), 100);
}

// Growth re-lays out storage: attention after growing equals attention on a cache that had
// room from the start.
TEST(KvCache, GrowthKeepsContents) {
  const KvShape shape{1, 4, 2, 8, 8};
  ContiguousKvCache grown(shape, 200, KvType::F16), fixed(shape, 200, KvType::F16);
  ASSERT_TRUE(fixed.reserve(200).ok());
  ThreadPool pool(1);
  std::mt19937 rng(3);
  int64_t pos = 0;
  for (int64_t n : {5, 20, 1, 90}) {
    ASSERT_TRUE(grown.reserve(pos + n).ok());
    const auto k = random_floats(static_cast<size_t>(n * 16), rng, 1.0f);
    const auto v = random_floats(static_cast<size_t>(n * 16), rng, 1.0f);
    ASSERT_TRUE(grown.write(0, pos, k.data(), v.data(), n).ok());
    ASSERT_TRUE(fixed.write(0, pos, k.data(), v.data(), n).ok());
    pos += n;
  }
  const auto q = random_floats(32, rng, 1.0f);
  std::vector<float> a(32), b(32);
  attend_cache(grown, 0, q.data(), 1, pos - 1, a.data(), pool);
  attend_cache(fixed, 0, q.data(), 1, pos - 1, b.data(), pool);
  EXPECT_EQ(a, b);
}

TEST(KvCache, WriteChecksPositions) {
  const KvShape shape{2, 2, 2, 4, 4};
  ContiguousKvCache cache(shape, 8, KvType::F32);
  std::vector<float> kv(2 * 8, 0.5f);
  EXPECT_FALSE(cache.write(0, 0, kv.data(), kv.data(), 1).ok());  // nothing reserved
  ASSERT_TRUE(cache.reserve(4).ok());
  EXPECT_FALSE(cache.write(0, 1, kv.data(), kv.data(), 1).ok());  // gap
  EXPECT_FALSE(cache.write(2, 0, kv.data(), kv.data(), 1).ok());  // no such layer
  ASSERT_TRUE(cache.write(0, 0, kv.data(), kv.data(), 2).ok());
  EXPECT_EQ(cache.length(0, 0), 2);
  EXPECT_EQ(cache.n_positions(), 0);  // last layer not written yet
  ASSERT_TRUE(cache.write(1, 0, kv.data(), kv.data(), 2).ok());
  EXPECT_EQ(cache.n_positions(), 2);
  cache.truncate(1);
  EXPECT_EQ(cache.n_positions(), 1);
  EXPECT_EQ(cache.length(0, 1), 1);
  cache.clear();
  EXPECT_EQ(cache.n_positions(), 0);
  EXPECT_EQ(cache.length(7, 0), 0);  // out-of-range queries are answered, not crashed
}

}  // namespace
}  // namespace tangram::testing
