// Session round-trip helpers: ragged caches built by hand (as compression leaves them), and
// comparisons that two paged caches hold the same entries (lengths, positions, key and value
// bytes) and give the same attention outputs.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/thread_pool.h"
#include "kv/kv_test_util.h"
#include "kv/paged_kv_cache.h"
#include "store/session_fingerprint.h"

namespace tangram::testing {

inline constexpr KvShape kSessionShape{2, 8, 4, 8,
                                       16};  // layers, heads, KV heads, head_dim, head_dim_v
// The same layout with head sizes Q8_0 can store (multiples of its 32-element blocks).
inline constexpr KvShape kSessionShapeQ8{2, 8, 4, 32, 64};
inline KvShape session_shape(KvType type) {
  return type == KvType::Q8_0 ? kSessionShapeQ8 : kSessionShape;
}

inline std::shared_ptr<const HeadGroupMap> contiguous_map(int group) {
  return std::make_shared<const HeadGroupMap>(
      HeadGroupMap::contiguous(kSessionShape.n_layers, kSessionShape.n_kv_head, group).value());
}
// Irregular groups of up to 3 heads, columns out of head order.
inline std::shared_ptr<const HeadGroupMap> clustered_map() {
  return std::make_shared<const HeadGroupMap>(
      HeadGroupMap::from_groups(kSessionShape.n_kv_head, 3, {{{2, 0}, {3}, {1}}, {{1, 2, 3}, {0}}})
          .value());
}

// Groups of up to 3 heads mixing both layers (flat head = layer * 4 + kv_head), columns out of
// order, one group shorter: the layout of a global clustering.
inline std::shared_ptr<const HeadGroupMap> cross_layer_map() {
  return std::make_shared<const HeadGroupMap>(
      HeadGroupMap::from_flat_groups(kSessionShape.n_layers, kSessionShape.n_kv_head, 3,
                                     {{5, 0, 7}, {2, 4}, {1, 6, 3}})
          .value());
}

inline std::unique_ptr<BlockPool> make_pool(KvType type, int page_tokens, int group,
                                            int64_t pages) {
  const KvShape shape = session_shape(type);
  PageGeometry g{page_tokens, group, shape.head_dim, shape.head_dim_v, type};
  return std::move(
      BlockPool::create(g, static_cast<size_t>(pages) * g.page_bytes(), false).value());
}

inline SessionFingerprint fingerprint_of(KvType type, const HeadGroupMap& map) {
  return SessionFingerprint{0x1234abcd, type, 0x77, group_map_fingerprint(map)};
}

inline void write_positions(PagedKvCache& c, int64_t n, std::mt19937& rng) {
  ASSERT_TRUE(c.reserve(c.n_positions() + n).ok());
  const int64_t pos0 = c.n_positions();
  const KvShape& s = c.shape();
  for (int l = 0; l < s.n_layers; ++l) {
    const auto k = random_values(static_cast<size_t>(n * s.n_kv_head * s.head_dim), rng);
    const auto v = random_values(static_cast<size_t>(n * s.n_kv_head * s.head_dim_v), rng);
    ASSERT_TRUE(c.write(l, pos0, k.data(), v.data(), n).ok());
  }
}

// A cache as compression leaves it: some heads compacted to random subsets, some shortened, one
// emptied, pages released, then `tail` more positions appended after the compaction; with an odd
// seed, layer 0 head 1 is emptied at the end.
struct Ragged {
  std::unique_ptr<BlockPool> pool;
  std::shared_ptr<const HeadGroupMap> map;
  std::unique_ptr<PagedKvCache> cache;
  std::vector<int32_t> tokens;
};

inline Ragged ragged(KvType type, std::shared_ptr<const HeadGroupMap> map, int page_tokens,
                     uint32_t seed, int64_t n = 70, int64_t tail = 11) {
  Ragged r;
  r.map = std::move(map);
  r.pool = make_pool(type, page_tokens, 4, 256);
  r.cache = std::move(PagedKvCache::create(session_shape(type), 512, *r.pool, r.map).value());
  std::mt19937 rng(seed);
  write_positions(*r.cache, n, rng);
  for (int l = 0; l < kSessionShape.n_layers; ++l)
    for (int h = 0; h < kSessionShape.n_kv_head; ++h) {
      const int64_t len = r.cache->length(l, h);
      const int kind = (l * kSessionShape.n_kv_head + h + static_cast<int>(seed)) % 4;
      if (kind == 1) {
        std::vector<int64_t> keep;
        for (int64_t e = 0; e < len; ++e)
          if (rng() % 3 == 0) keep.push_back(e);
        EXPECT_TRUE(r.cache->compact_head(l, h, keep).ok());
      } else if (kind == 2) {
        EXPECT_TRUE(r.cache->set_head_length(l, h, len / 2).ok());
      } else if (kind == 3 && l == 1) {
        EXPECT_TRUE(r.cache->compact_head(l, h, {}).ok());  // an empty head
      }
    }
  r.cache->release_unused_pages();
  write_positions(*r.cache, tail, rng);
  if (seed % 2 == 1) {
    EXPECT_TRUE(r.cache->set_head_length(0, 1, 0).ok());
  }
  for (int64_t i = 0; i < r.cache->n_positions(); ++i)
    r.tokens.push_back(static_cast<int32_t>(rng() % 5000));
  return r;
}

// Pages a cache needs for what it stores: every group sized for its longest head (what a
// restore allocates; a live cache may hold more until release_unused_pages()).
inline int64_t pages_for_entries(const PagedKvCache& c) {
  const HeadGroupMap& map = c.head_groups();
  const int64_t P = c.pool().geometry().page_tokens;
  int64_t pages = 0;
  for (int fg = 0; fg < map.total_groups(); ++fg) {
    int64_t longest = 0;
    for (const int f : map.members(fg))
      longest = std::max(longest, c.length(map.layer_of_head(f), map.kv_head_of(f)));
    pages += (longest + P - 1) / P;
  }
  return pages;
}

// The stored bytes of one head: keys [length][k_row_bytes] (as plain rows) then values
// [length][v_row_bytes].
inline std::vector<uint8_t> head_bytes(const PagedKvCache& c, int layer, int h) {
  const KvHeadView v = c.head_view(layer, h);
  std::vector<uint8_t> out(static_cast<size_t>(v.length) * v.k_row_bytes);
  v.copy_keys(0, v.length, out.data());
  v.for_each_run(0, v.length, [&](int64_t, const uint8_t*, const uint8_t* val, int64_t n) {
    out.insert(out.end(), val, val + static_cast<size_t>(n) * v.v_row_bytes);
  });
  return out;
}

inline ::testing::AssertionResult same_cache(const PagedKvCache& a, const PagedKvCache& b) {
  const KvShape& s = a.shape();
  if (a.n_positions() != b.n_positions())
    return ::testing::AssertionFailure()
           << "positions " << a.n_positions() << " != " << b.n_positions();
  if (a.type() != b.type()) return ::testing::AssertionFailure() << "element types differ";
  if (a.used_slots() != b.used_slots())
    return ::testing::AssertionFailure()
           << "used slots " << a.used_slots() << " != " << b.used_slots();
  for (int l = 0; l < s.n_layers; ++l) {
    if (a.layer_positions(l) != b.layer_positions(l))
      return ::testing::AssertionFailure() << "layer " << l << " positions differ";
    for (int h = 0; h < s.n_kv_head; ++h) {
      const KvHeadView va = a.head_view(l, h), vb = b.head_view(l, h);
      if (va.length != vb.length || va.n_kept != vb.n_kept || va.tail_pos0 != vb.tail_pos0)
        return ::testing::AssertionFailure()
               << "layer " << l << " head " << h << ": length " << va.length << "/" << vb.length
               << ", kept " << va.n_kept << "/" << vb.n_kept << ", tail " << va.tail_pos0 << "/"
               << vb.tail_pos0;
      for (int64_t e = 0; e < va.length; ++e)
        if (a.entry_position(l, h, e) != b.entry_position(l, h, e))
          return ::testing::AssertionFailure()
                 << "layer " << l << " head " << h << " entry " << e << " position";
      if (head_bytes(a, l, h) != head_bytes(b, l, h))
        return ::testing::AssertionFailure() << "layer " << l << " head " << h << " rows differ";
    }
  }
  return ::testing::AssertionSuccess();
}

// Attention of random queries at the last min(4, n) positions of every layer; equal when every
// output differs by at most tol (0: bit for bit).
inline ::testing::AssertionResult same_attention(const PagedKvCache& a, const PagedKvCache& b,
                                                 uint32_t seed, ThreadPool& threads,
                                                 float tol = 0.0f) {
  const KvShape& s = a.shape();
  const int64_t n = std::min<int64_t>(4, a.n_positions());
  if (n == 0) return ::testing::AssertionSuccess();
  const int64_t pos0 = a.n_positions() - n;
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> q(static_cast<size_t>(n * s.n_head * s.head_dim));  // [n][n_head][head_dim]
  const size_t out_size = static_cast<size_t>(n * s.n_head * s.head_dim_v);
  std::vector<float> oa(out_size), ob(out_size);  // [n][n_head][head_dim_v]
  for (int l = 0; l < s.n_layers; ++l) {
    for (auto& x : q) x = d(rng);
    attend_cache(a, l, q.data(), n, pos0, oa.data(), threads);
    attend_cache(b, l, q.data(), n, pos0, ob.data(), threads);
    for (size_t i = 0; i < out_size; ++i) {
      const bool equal = tol == 0.0f ? std::memcmp(&oa[i], &ob[i], sizeof(float)) == 0
                                     : std::fabs(oa[i] - ob[i]) <= tol;
      if (!equal)
        return ::testing::AssertionFailure()
               << "layer " << l << " output " << i << ": " << oa[i] << " vs " << ob[i];
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace tangram::testing
