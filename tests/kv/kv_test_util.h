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
#include <vector>

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
  // (rounded_query), so the comparison keeps the float-vs-double tolerance; the rounding's own
  // error is bounded in q8_attention_test.cpp.
  //   q: [n][n_head][head_dim]   returns [n][n_head][head_dim_v]
  std::vector<double> attend(int layer, const float* q, int64_t n, int64_t pos0) const {
    const int gq = shape_.n_head / shape_.n_kv_head;
    const int hd = shape_.head_dim, hdv = shape_.head_dim_v;
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    std::vector<double> out(static_cast<size_t>(n * shape_.n_head * hdv), 0.0);
    for (int64_t t = 0; t < n; ++t)
      for (int hq = 0; hq < shape_.n_head; ++hq) {
        const float* qv = q + (t * shape_.n_head + hq) * hd;
        std::vector<float> q8;  // Q8_0: the scaled query, rounded
        if (type_ == KvType::Q8_0) {
          std::vector<float> scaled(qv, qv + hd);
          for (float& x : scaled) x *= static_cast<float>(scale);
          q8 = rounded_query(scaled.data(), hd);
        }
        std::vector<double> scores;
        std::vector<const MirrorEntry*> seen;
        for (const MirrorEntry& e : head(layer, hq / gq)) {
          if (e.pos > pos0 + t) continue;
          double s = 0.0;
          if (q8.empty()) {
            for (int i = 0; i < hd; ++i) s += dbl(qv[i]) * dbl(e.k[static_cast<size_t>(i)]);
            s *= scale;
          } else {
            for (int i = 0; i < hd; ++i) s += dbl(q8[static_cast<size_t>(i)]) * dbl(e.k[static_cast<size_t>(i)]);
          }
          scores.push_back(s);
          seen.push_back(&e);
        }
        if (scores.empty()) continue;
        const double mx = *std::max_element(scores.begin(), scores.end());
        double sum = 0.0;
        for (double& s : scores) sum += (s = std::exp(s - mx));
        double* o = out.data() + (t * shape_.n_head + hq) * hdv;
        for (size_t j = 0; j < seen.size(); ++j)
          for (int i = 0; i < hdv; ++i) o[i] += scores[j] / sum * dbl(seen[j]->v[static_cast<size_t>(i)]);
      }
    return out;
  }

 private:
  KvShape shape_;
  KvType type_;
  std::vector<std::vector<MirrorEntry>> heads_;  // [n_layers][n_kv_head]
  std::vector<int64_t> positions_;               // [n_layers]
};

inline double max_abs_diff(const std::vector<double>& want, const std::vector<float>& got) {
  double worst = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = std::abs(want[i] - dbl(got[i]));
    if (!(d <= worst)) worst = std::isnan(d) ? std::numeric_limits<double>::infinity() : d;
  }
  return worst;
}

// Reads back every stored entry of a paged cache and compares it with the mirror (exact: the
// mirror holds the stored, rounded values).
inline ::testing::AssertionResult cache_matches_mirror(const PagedKvCache& cache, const KvMirror& mirror) {
  const KvShape& s = cache.shape();
  for (int l = 0; l < s.n_layers; ++l)
    for (int h = 0; h < s.n_kv_head; ++h) {
      const auto& entries = mirror.head(l, h);
      if (cache.length(l, h) != static_cast<int64_t>(entries.size()))
        return ::testing::AssertionFailure() << "layer " << l << " head " << h << " length "
                                             << cache.length(l, h) << " != " << entries.size();
      const KvHeadView view = cache.head_view(l, h);
      std::vector<float> k(static_cast<size_t>(s.head_dim)), v(static_cast<size_t>(s.head_dim_v));
      ::testing::AssertionResult result = ::testing::AssertionSuccess();
      view.for_each_run(0, view.length, [&](int64_t first, const uint8_t* kr, const uint8_t* vr,
                                            int64_t count) {
        for (int64_t i = 0; i < count && result; ++i) {
          const MirrorEntry& e = entries[static_cast<size_t>(first + i)];
          load_kv_row(cache.type(), kr + static_cast<size_t>(i) * view.k_row_bytes, k.data(), s.head_dim);
          load_kv_row(cache.type(), vr + static_cast<size_t>(i) * view.v_row_bytes, v.data(), s.head_dim_v);
          if (k != e.k || v != e.v)
            result = ::testing::AssertionFailure() << "layer " << l << " head " << h << " entry "
                                                   << first + i << " holds other data";
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
