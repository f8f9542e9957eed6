// Helpers for the KV tests: a plain mirror of what a cache should store, and a reference
// attention over it in double precision.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "attention/paged_attention.h"
#include "common/thread_pool.h"
#include "kernels/quant.h"
#include "kv/kv_cache.h"
#include "kv/kv_row.h"
#include "kv/paged_kv_cache.h"

namespace tangram::testing {

inline double dbl(float v) { return static_cast<double>(v); }

inline std::vector<float> random_values(size_t n, std::mt19937& rng, float sigma = 1.0f) {
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// What the storage holds after rounding one row to its type (Q8_0 rounds per 32-element block).
inline std::vector<float> stored_row(const float* x, int dim, KvType type) {
  std::vector<uint8_t> bytes(kv_row_bytes(type, dim));
  std::vector<float> out(static_cast<size_t>(dim));
  store_kv_row(type, x, bytes.data(), dim);
  load_kv_row(type, bytes.data(), out.data(), dim);
  return out;
}

// A query as the Q8_0 score loops use it (kv_q8::quantise_query, recomputed here): each
// 32-element block rounded to d * round(x / d), d = amax / 127. q: [hd], hd a multiple of 32.
inline std::vector<float> rounded_query(const float* q, int hd) {
  std::vector<float> out(static_cast<size_t>(hd));
  for (int c = 0; c < hd; c += 32) {
    float amax = 0.0f;
    for (int i = c; i < c + 32; ++i) amax = std::max(amax, std::abs(q[i]));
    const float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
    for (int i = c; i < c + 32; ++i) out[static_cast<size_t>(i)] = d * std::nearbyint(q[i] * id);
  }
  return out;
}

// The levels the AVX-512 Q8_0 value loop rounds each weight p_j * d_j to (int16,
// attention_kernel_q8_avx512.cpp): a step of max p * max |d| / kQ8WeightLevels.
inline constexpr double kQ8WeightLevels = 32767.0;

// The geometry of a paged Q8_0 head whose runs keep their keys as key tiles (key_tiles.h): pages
// of page_bytes in `arena`, runs of `run` tokens (the key tile, then the value rows).
struct TiledHeadLayout {
  const uint8_t* arena = nullptr;
  const PageId* pages = nullptr;
  int64_t page_tokens = 0;
  size_t page_bytes = 0;
  int run = 0;
  int head_dim = 0;
  size_t v_row_bytes = 0;
  int64_t length = 0;
};
inline KvHeadView tiled_head_view(const TiledHeadLayout& l) {
  const size_t kr = kv_row_bytes(KvType::Q8_0, l.head_dim);
  KvHeadView w;
  w.k_base = l.arena;
  w.v_base = l.arena + static_cast<size_t>(l.run) * kr;
  w.pages = l.pages;
  w.page_tokens = l.page_tokens;
  w.page_bytes = l.page_bytes;
  w.run_tokens = l.run;
  w.run_bytes = static_cast<size_t>(l.run) * (kr + l.v_row_bytes);
  w.k_row_bytes = kr;
  w.v_row_bytes = l.v_row_bytes;
  w.key_layout = KeyLayout::Q8Tiles;
  w.head_dim = l.head_dim;
  w.length = l.length;
  return w;
}

struct MirrorEntry {
  int64_t pos = 0;
  std::vector<float> k;  // [head_dim], as stored
  std::vector<float> v;  // [head_dim_v], as stored
};

// The expected contents of a KvCache, one entry list per (layer, KV head), kept by hand.
class KvMirror {
 public:
  KvMirror(const KvShape& shape, KvType type) : shape_(shape), type_(type) {
    heads_.resize(static_cast<size_t>(shape.n_layers * shape.n_kv_head));
    positions_.assign(static_cast<size_t>(shape.n_layers), 0);
  }

  std::vector<MirrorEntry>& head(int layer, int h) {
    return heads_[static_cast<size_t>(layer * shape_.n_kv_head + h)];
  }
  const std::vector<MirrorEntry>& head(int layer, int h) const {
    return heads_[static_cast<size_t>(layer * shape_.n_kv_head + h)];
  }
  int64_t positions(int layer) const { return positions_[static_cast<size_t>(layer)]; }

  // k: [n][n_kv_head][head_dim]   v: [n][n_kv_head][head_dim_v]
  void write(int layer, const float* k, const float* v, int64_t n) {
    for (int64_t t = 0; t < n; ++t)
      for (int h = 0; h < shape_.n_kv_head; ++h) {
        MirrorEntry e;
        e.pos = positions(layer) + t;
        const float* ks = k + (t * shape_.n_kv_head + h) * shape_.head_dim;
        const float* vs = v + (t * shape_.n_kv_head + h) * shape_.head_dim_v;
        e.k = stored_row(ks, shape_.head_dim, type_);
        e.v = stored_row(vs, shape_.head_dim_v, type_);
        head(layer, h).push_back(std::move(e));
      }
    positions_[static_cast<size_t>(layer)] += n;
  }
  void compact(int layer, int h, std::span<const int64_t> keep) {
    std::vector<MirrorEntry> next;
    for (const int64_t e : keep) next.push_back(head(layer, h)[static_cast<size_t>(e)]);
    head(layer, h) = std::move(next);
  }
  void set_length(int layer, int h, int64_t n) { head(layer, h).resize(static_cast<size_t>(n)); }
  void truncate(int64_t n) {
    for (int l = 0; l < shape_.n_layers; ++l) {
      for (int h = 0; h < shape_.n_kv_head; ++h) {
        auto& entries = head(l, h);
        std::erase_if(entries, [&](const MirrorEntry& e) { return e.pos >= n; });
      }
      positions_[static_cast<size_t>(l)] = std::min(positions_[static_cast<size_t>(l)], n);
    }
  }

  // Causal attention in double: query row t (position pos0 + t), head hq sees the entries of
  // KV head hq / (n_head / n_kv_head) with position <= pos0 + t; zeros when it sees none. Over
  // Q8_0 rows the query is scaled in float and rounded as the integer-dot loops round it
  // (rounded_query), so the comparison keeps the float-vs-double tolerance plus the value
  // weights' rounding (weight_rounding_bound); both roundings' own error is bounded in
  // q8_attention_test.cpp.
  //   q: [n][n_head][head_dim]   returns [n][n_head][head_dim_v]
  std::vector<double> attend(int layer, const float* q, int64_t n, int64_t pos0) const {
    const int hdv = shape_.head_dim_v;
    std::vector<double> out(static_cast<size_t>(n * shape_.n_head * hdv), 0.0);
    for (int64_t t = 0; t < n; ++t)
      for (int hq = 0; hq < shape_.n_head; ++hq) {
        const LaneWeights w = weights(layer, q, t, hq, pos0);
        double* o = out.data() + (t * shape_.n_head + hq) * hdv;
        for (const auto& [j, p] : w.seen)
          for (int i = 0; i < hdv; ++i)
            o[i] += p / w.sum * dbl(w.entries[j].v[static_cast<size_t>(i)]);
      }
    return out;
  }

  // How far each output of attend may move from the Q8_0 value loops' rounding of the weights
  // (0 for other types; shaped as attend's result). The loops round p_j * d_j, within a walk
  // block of kAttentionBlock entries, to a step s = max p * max |d| / kQ8WeightLevels of that
  // block, so entry j's weight is off by at most s / 2 and its term by s / 2 * |v_int| <= s / 2 *
  // 127. Blocks may start anywhere (split plans), so each entry takes the largest p and |d| within
  // kAttentionBlock - 1 entries of it; |d| = max |v| / 127 (the row's largest element is
  // stored as +-127 d).
  std::vector<double> weight_rounding_bound(int layer, const float* q, int64_t n,
                                            int64_t pos0) const {
    const int hdv = shape_.head_dim_v;
    std::vector<double> out(static_cast<size_t>(n * shape_.n_head * hdv), 0.0);
    if (type_ != KvType::Q8_0) return out;
    for (int64_t t = 0; t < n; ++t)
      for (int hq = 0; hq < shape_.n_head; ++hq) {
        const LaneWeights w = weights(layer, q, t, hq, pos0);
        std::vector<double> p(w.entries.size(), 0.0), d(w.entries.size(), 0.0);
        for (const auto& [j, pj] : w.seen) p[j] = pj;
        for (size_t j = 0; j < d.size(); ++j)
          for (const float x : w.entries[j].v) d[j] = std::max(d[j], std::abs(dbl(x)) / 127.0);
        double err = 0.0;
        for (const auto& [j, pj] : w.seen) {
          const size_t lo = j >= 31 ? j - 31 : 0, hi = std::min(d.size(), j + 32);
          const double pmax = *std::max_element(p.begin() + static_cast<std::ptrdiff_t>(lo),
                                                p.begin() + static_cast<std::ptrdiff_t>(hi));
          const double dmax = *std::max_element(d.begin() + static_cast<std::ptrdiff_t>(lo),
                                                d.begin() + static_cast<std::ptrdiff_t>(hi));
          err += pmax * dmax / kQ8WeightLevels / 2.0 * 127.0;
        }
        std::fill_n(out.begin() + (t * shape_.n_head + hq) * hdv, hdv,
                    w.sum > 0.0 ? err / w.sum : 0.0);
      }
    return out;
  }

 private:
  // One query lane's softmax weights exp(score - max) over the entries it sees (index into
  // entries, weight) and their sum.
  struct LaneWeights {
    const std::vector<MirrorEntry>& entries;
    std::vector<std::pair<size_t, double>> seen;
    double sum = 0.0;
  };
  LaneWeights weights(int layer, const float* q, int64_t t, int hq, int64_t pos0) const {
    const int gq = shape_.n_head / shape_.n_kv_head;
    const int hd = shape_.head_dim;
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    const float* qv = q + (t * shape_.n_head + hq) * hd;
    std::vector<float> q8;  // Q8_0: the scaled query, rounded
    if (type_ == KvType::Q8_0) {
      std::vector<float> scaled(qv, qv + hd);
      for (float& x : scaled) x *= static_cast<float>(scale);
      q8 = rounded_query(scaled.data(), hd);
    }
    LaneWeights w{head(layer, hq / gq), {}, 0.0};
    for (size_t j = 0; j < w.entries.size(); ++j) {
      const MirrorEntry& e = w.entries[j];
      if (e.pos > pos0 + t) continue;
      double s = 0.0;
      if (q8.empty()) {
        for (int i = 0; i < hd; ++i) s += dbl(qv[i]) * dbl(e.k[static_cast<size_t>(i)]);
        s *= scale;
      } else {
        for (int i = 0; i < hd; ++i)
          s += dbl(q8[static_cast<size_t>(i)]) * dbl(e.k[static_cast<size_t>(i)]);
      }
      w.seen.emplace_back(j, s);
    }
    if (w.seen.empty()) return w;
    double mx = w.seen[0].second;
    for (const auto& [j, s] : w.seen) mx = std::max(mx, s);
    for (auto& [j, s] : w.seen) w.sum += (s = std::exp(s - mx));
    return w;
  }

  KvShape shape_;
  KvType type_;
  std::vector<std::vector<MirrorEntry>> heads_;  // [n_layers][n_kv_head]
  std::vector<int64_t> positions_;               // [n_layers]
};

// Causal attention of one sequence over its cache (attend_sequence), failing the test on error.
//   q: [n][n_head][head_dim]   out: [n][n_head][head_dim_v]
inline void attend_cache(const KvCache& cache, int layer, const float* q, int64_t n, int64_t pos0,
                         float* out, ThreadPool& pool) {
  AttentionWorkspace ws;
  const Status s = attend_sequence(cache, layer, q, n, pos0, out, pool, ws);
  EXPECT_TRUE(s.ok()) << s.message();
}

inline double max_abs_diff(const std::vector<double>& want, const std::vector<float>& got) {
  double worst = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = std::abs(want[i] - dbl(got[i]));
    if (!(d <= worst)) worst = std::isnan(d) ? std::numeric_limits<double>::infinity() : d;
  }
  return worst;
}

// The largest amount by which |want - got| exceeds bound, element by element (NaN: infinity).
inline double max_excess(const std::vector<double>& want, const std::vector<float>& got,
                         const std::vector<double>& bound) {
  double worst = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = std::abs(want[i] - dbl(got[i])) - bound[i];
    if (!(d <= worst)) worst = std::isnan(d) ? std::numeric_limits<double>::infinity() : d;
  }
  return worst;
}

// Reads back every stored entry of a paged cache and compares it with the mirror (exact: the
// mirror holds the stored, rounded values).
inline ::testing::AssertionResult cache_matches_mirror(const PagedKvCache& cache,
                                                       const KvMirror& mirror) {
  const KvShape& s = cache.shape();
  for (int l = 0; l < s.n_layers; ++l)
    for (int h = 0; h < s.n_kv_head; ++h) {
      const auto& entries = mirror.head(l, h);
      if (cache.length(l, h) != static_cast<int64_t>(entries.size()))
        return ::testing::AssertionFailure() << "layer " << l << " head " << h << " length "
                                             << cache.length(l, h) << " != " << entries.size();
      const KvHeadView view = cache.head_view(l, h);
      std::vector<float> k(static_cast<size_t>(s.head_dim)), v(static_cast<size_t>(s.head_dim_v));
      std::vector<uint8_t> key_rows(static_cast<size_t>(view.length) * view.k_row_bytes);
      view.copy_keys(0, view.length, key_rows.data());  // plain rows, whatever the page layout
      ::testing::AssertionResult result = ::testing::AssertionSuccess();
      view.for_each_run(
          0, view.length, [&](int64_t first, const uint8_t*, const uint8_t* vr, int64_t count) {
            for (int64_t i = 0; i < count && result; ++i) {
              const MirrorEntry& e = entries[static_cast<size_t>(first + i)];
              load_kv_row(cache.type(),
                          key_rows.data() + static_cast<size_t>(first + i) * view.k_row_bytes,
                          k.data(), s.head_dim);
              load_kv_row(cache.type(), vr + static_cast<size_t>(i) * view.v_row_bytes, v.data(),
                          s.head_dim_v);
              if (k != e.k || v != e.v)
                result = ::testing::AssertionFailure()
                         << "layer " << l << " head " << h << " entry " << first + i
                         << " holds other data";
              if (cache.entry_position(l, h, first + i) != e.pos)
                result = ::testing::AssertionFailure()
                         << "layer " << l << " head " << h << " entry " << first + i << " position "
                         << cache.entry_position(l, h, first + i) << " != " << e.pos;
            }
          });
      if (!result) return result;
    }
  return ::testing::AssertionSuccess();
}

}  // namespace tangram::testing
