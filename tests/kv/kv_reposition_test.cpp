// Re-positioning (PagedKvCache::remove_positions, llama.cpp's context shift): after positions
// [from, to) are forgotten and the later ones moved down, attention over the cache equals dense
// attention (in double) over exactly the entries each head kept, with their keys at their new
// positions: for every KV type, for heads compressed to different subsets, with pages of plain
// rows and of Q8_0 key tiles, and while a fork still shares the pages (which keeps what it had).
// The reference key of a moved entry is its stored row rotated back in float and stored again,
// which is what a rotation of stored keys can give (for F32 within 1e-5 of RoPE applied at the
// new position from scratch; F16 and Q8_0 round once more). A cache left un-rotated misses by
// far more than the tolerance, so the check can fail.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kv_test_util.h"

namespace tangram::testing {
namespace {

constexpr KvShape kShape32{2, 8, 4, 32, 32};  // layers, query heads, KV heads, key / value width

// NeoX RoPE over the whole head, base 10000, in double: x rotated to position pos.
void rope(float* x, int dim, double pos) {
  for (int i = 0; i < dim / 2; ++i) {
    const double a = pos * std::pow(10000.0, -2.0 * i / dim);
    const double c = std::cos(a), s = std::sin(a);
    const double x0 = x[i], x1 = x[i + dim / 2];
    x[i] = static_cast<float>(x0 * c - x1 * s);
    x[i + dim / 2] = static_cast<float>(x0 * s + x1 * c);
  }
}

struct Case {
  KvType type;
  int page_tokens;
  double tolerance;  // of attention outputs against the double reference
};

class Reposition : public ::testing::TestWithParam<Case> {};

TEST_P(Reposition, AttentionEqualsDenseAttentionOverTheKeptEntriesAtTheirNewPositions) {
  const Case c = GetParam();
  const KvShape& s = kShape32;
  PageGeometry g;
  g.page_tokens = c.page_tokens;
  g.group_size = 2;
  g.head_dim = s.head_dim;
  g.head_dim_v = s.head_dim_v;
  g.type = c.type;
  auto pool = std::move(BlockPool::create(g, 400 * g.page_bytes()).value());
  auto map = std::make_shared<const HeadGroupMap>(
      HeadGroupMap::contiguous(s.n_layers, s.n_kv_head, 2).value());
  auto cache = std::move(PagedKvCache::create(s, 1000, *pool, map).value());
  std::mt19937 rng(11);

  // 50 positions: keys before RoPE kept by hand, rotated to their positions when written.
  const int64_t n = 50;
  std::vector<std::vector<float>> pre_k(static_cast<size_t>(s.n_layers));  // [l][pos][h][d]
  std::vector<std::vector<float>> vals(static_cast<size_t>(s.n_layers));
  ASSERT_TRUE(cache->reserve(n).ok());
  for (int l = 0; l < s.n_layers; ++l) {
    pre_k[l] = random_values(static_cast<size_t>(n * s.n_kv_head * s.head_dim), rng);
    vals[l] = random_values(static_cast<size_t>(n * s.n_kv_head * s.head_dim_v), rng);
    std::vector<float> k = pre_k[l];
    for (int64_t p = 0; p < n; ++p)
      for (int h = 0; h < s.n_kv_head; ++h)
        rope(k.data() + (p * s.n_kv_head + h) * s.head_dim, s.head_dim, static_cast<double>(p));
    ASSERT_TRUE(cache->write(l, 0, k.data(), vals[l].data(), n).ok());
  }
  // Compression kept different entries per head (one head keeps all).
  std::vector<std::vector<int64_t>> kept_pos(static_cast<size_t>(s.n_layers * s.n_kv_head));
  for (int l = 0; l < s.n_layers; ++l)
    for (int h = 0; h < s.n_kv_head; ++h) {
      std::vector<int64_t> keep;
      for (int64_t e = 0; e < n; ++e)
        if (h == 0 || e < 3 || std::bernoulli_distribution(0.5)(rng)) keep.push_back(e);
      ASSERT_TRUE(cache->compact_head(l, h, keep).ok());
      kept_pos[static_cast<size_t>(l * s.n_kv_head + h)] = keep;
    }
  KvMirror before(s, c.type);  // what the cache holds now, for the fork
  for (int l = 0; l < s.n_layers; ++l)
    for (int h = 0; h < s.n_kv_head; ++h)
      for (const int64_t p : kept_pos[static_cast<size_t>(l * s.n_kv_head + h)]) {
        MirrorEntry e;
        e.pos = p;
        std::vector<float> k(pre_k[l].begin() + (p * s.n_kv_head + h) * s.head_dim,
                             pre_k[l].begin() + (p * s.n_kv_head + h + 1) * s.head_dim);
        rope(k.data(), s.head_dim, static_cast<double>(p));
        e.k = stored_row(k.data(), s.head_dim, c.type);
        const float* v = vals[l].data() + (p * s.n_kv_head + h) * s.head_dim_v;
        e.v = stored_row(v, s.head_dim_v, c.type);
        before.head(l, h).push_back(std::move(e));
      }
  auto fork = std::move(cache->fork().value());

  // Forget [4, 21): positions 21.. become 4.., keys rotated back by 17.
  const int64_t from = 4, to = 21, delta = to - from;
  const auto rotate = [&](float* keys, int64_t rows, int64_t d) {
    for (int64_t r = 0; r < rows; ++r)
      rope(keys + r * s.head_dim, s.head_dim, -static_cast<double>(d));
  };
  EXPECT_FALSE(cache->remove_positions(5, 5, rotate).ok());
  EXPECT_FALSE(cache->remove_positions(-1, 3, rotate).ok());
  EXPECT_FALSE(cache->remove_positions(0, n + 1, rotate).ok());
  ASSERT_TRUE(cache->remove_positions(from, to, rotate).ok());
  EXPECT_EQ(cache->n_positions(), n - delta);

  // The reference: each head's kept entries outside [from, to), keys rotated from scratch at
  // their new positions; and the same entries left at their old rotation (a missing rotation).
  KvMirror want(s, c.type), unrotated(s, c.type);
  for (int l = 0; l < s.n_layers; ++l)
    for (int h = 0; h < s.n_kv_head; ++h) {
      int64_t entry = 0;
      for (const int64_t p : kept_pos[static_cast<size_t>(l * s.n_kv_head + h)]) {
        if (p >= from && p < to) continue;
        const int64_t q = p < from ? p : p - delta;
        EXPECT_EQ(cache->entry_position(l, h, entry++), q);
        MirrorEntry e;
        e.pos = q;
        std::vector<float> k(pre_k[l].begin() + (p * s.n_kv_head + h) * s.head_dim,
                             pre_k[l].begin() + (p * s.n_kv_head + h + 1) * s.head_dim);
        rope(k.data(), s.head_dim, static_cast<double>(p));
        std::vector<float> old = stored_row(k.data(), s.head_dim, c.type);
        if (p >= to) {
          k = old;
          rope(k.data(), s.head_dim, -static_cast<double>(delta));  // the stored row, moved
          if (c.type == KvType::F32) {  // as if RoPE had put it at its new position at once
            std::vector<float> fresh(pre_k[l].begin() + (p * s.n_kv_head + h) * s.head_dim,
                                     pre_k[l].begin() + (p * s.n_kv_head + h + 1) * s.head_dim);
            rope(fresh.data(), s.head_dim, static_cast<double>(q));
            for (int i = 0; i < s.head_dim; ++i)
              ASSERT_NEAR(k[static_cast<size_t>(i)], fresh[static_cast<size_t>(i)], 1e-5);
          }
        }
        const float* v = vals[l].data() + (p * s.n_kv_head + h) * s.head_dim_v;
        e.v = stored_row(v, s.head_dim_v, c.type);
        MirrorEntry u = e;
        e.k = stored_row(k.data(), s.head_dim, c.type);
        u.k = stored_row(old.data(), s.head_dim, c.type);
        want.head(l, h).push_back(std::move(e));
        unrotated.head(l, h).push_back(std::move(u));
      }
      EXPECT_EQ(cache->length(l, h), entry);
    }

  // Two new tokens at the new positions, then attention from them.
  ThreadPool threads(2);
  ASSERT_TRUE(cache->reserve(n - delta + 2).ok());
  for (int l = 0; l < s.n_layers; ++l) {
    auto k = random_values(static_cast<size_t>(2 * s.n_kv_head * s.head_dim), rng);
    const auto v = random_values(static_cast<size_t>(2 * s.n_kv_head * s.head_dim_v), rng);
    for (int t = 0; t < 2; ++t)
      for (int h = 0; h < s.n_kv_head; ++h)
        rope(k.data() + (t * s.n_kv_head + h) * s.head_dim, s.head_dim,
             static_cast<double>(n - delta + t));
    ASSERT_TRUE(cache->write(l, n - delta, k.data(), v.data(), 2).ok());
    for (KvMirror* m : {&want, &unrotated}) {
      for (int t = 0; t < 2; ++t)
        for (int h = 0; h < s.n_kv_head; ++h) {
          MirrorEntry e;
          e.pos = n - delta + t;
          e.k = stored_row(k.data() + (t * s.n_kv_head + h) * s.head_dim, s.head_dim, c.type);
          e.v = stored_row(v.data() + (t * s.n_kv_head + h) * s.head_dim_v, s.head_dim_v, c.type);
          m->head(l, h).push_back(std::move(e));
        }
    }
    auto q = random_values(static_cast<size_t>(2 * s.n_head * s.head_dim), rng, 2.0f);
    for (int t = 0; t < 2; ++t)
      for (int h = 0; h < s.n_head; ++h)
        rope(q.data() + (t * s.n_head + h) * s.head_dim, s.head_dim,
             static_cast<double>(n - delta + t));
    std::vector<float> got(static_cast<size_t>(2 * s.n_head * s.head_dim_v));
    attend_cache(*cache, l, q.data(), 2, n - delta, got.data(), threads);
    const double err = max_excess(want.attend(l, q.data(), 2, n - delta), got,
                                  want.weight_rounding_bound(l, q.data(), 2, n - delta));
    EXPECT_LT(err, c.tolerance) << "layer " << l;
    const double missed = max_abs_diff(unrotated.attend(l, q.data(), 2, n - delta), got);
    EXPECT_GT(missed, 10 * c.tolerance) << "layer " << l << ": the check cannot tell a rotation";
  }
  // The fork shared the pages: it still holds what it had.
  EXPECT_TRUE(cache_matches_mirror(*fork, before));
  fork.reset();
  cache.reset();
  EXPECT_EQ(pool->used_pages(), 0);
  EXPECT_TRUE(pool->check_consistency().ok());
}

INSTANTIATE_TEST_SUITE_P(Types, Reposition,
                         ::testing::Values(Case{KvType::F32, 4, 1e-5}, Case{KvType::F16, 8, 1e-4},
                                           Case{KvType::Q8_0, 8, 1e-4},
                                           Case{KvType::Q8_0, 16, 1e-4}),
                         [](const auto& param) {
                           return std::string(kv_type_name(param.param.type)) + "_pages" +
                                  std::to_string(param.param.page_tokens);
                         });

}  // namespace
}  // namespace tangram::testing
