// The Q8_0 attention inner loops, every one this build and CPU have (portable, AVX2 maddubs,
// AVX-512 VNNI), against plain double-precision attention over the same rows dequantised:
// lanes seeing different prefixes (causal limits, a lane seeing nothing), odd lengths and
// partial blocks, head sizes of an odd number of blocks, more lanes than one pass takes,
// several heads walked together, a chunk starting past entry 0 (split plans).
// Two roundings of the loops, each with its bound:
//  - the query, per 32-element block (d = amax / 127, q = round(x / d)). The references
//    round it as the loops do (recomputed here), or keep the float query
//    (dequantise-then-attend): the rounding moves each score by at most
//    delta = sum_i |k_i| * d_q(i) / 2, so each softmax weight by a factor within exp(+-2 delta)
//    and the output by at most (exp(2 delta) - 1) * max |v|; delta is computed from the data,
//    lane by lane (~1e-2 here, a bound of ~3e-2).
//  - the value weights (AVX-512): p_j * d_j (softmax weight times the row's block scale)
//    rounded to int16, a step s = max_j p_j * max_j |d_j| / 32767 of its lane, block of 32 entries
//    and column block, so each weight is off by at most s / 2 and an output column by
//    sum_j s / 2 * |v_int_j| over the sum of the weights (weight_rounding_bound).
// Beyond both, float vs double arithmetic and the vector exp: 2e-5 absolute for outputs of size ~1.
// Also: the value loops alone against the portable one, and the row codec's sizes and the
// refusal of head sizes Q8_0 cannot store.
#include "attention/attention_kernel_q8.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attention/attention_kernel_q8_avx512.h"
#include "kernels/cpu_features.h"
#include "kernels/half.h"
#include "kv/block_pool.h"
#include "kv/key_tiles.h"
#include "kv/kv_row.h"
#include "kv/kv_test_util.h"

namespace tangram {
namespace {

using testing::random_values;

constexpr double kTol = 2e-5;

// One dense head of Q8_0 rows and the same rows dequantised.
struct Q8Head {
  int hd = 0, hdv = 0;
  int64_t length = 0;
  std::vector<uint8_t> k, v;  // [length][row bytes]
  std::vector<float> kf, vf;  // [length][hd], [length][hdv]: what the rows hold

  Q8Head(int hd_, int hdv_, int64_t len, std::mt19937& rng)
      : hd(hd_),
        hdv(hdv_),
        length(len),
        k(static_cast<size_t>(len) * kv_row_bytes(KvType::Q8_0, hd_)),
        v(static_cast<size_t>(len) * kv_row_bytes(KvType::Q8_0, hdv_)),
        kf(random_values(static_cast<size_t>(len * hd_), rng)),
        vf(random_values(static_cast<size_t>(len * hdv_), rng)) {
    // kf, vf start as the unquantised inputs and end as what the rows hold.
    const size_t kr = kv_row_bytes(KvType::Q8_0, hd), vr = kv_row_bytes(KvType::Q8_0, hdv);
    for (int64_t e = 0; e < len; ++e) {
      const auto i = static_cast<size_t>(e);
      float* kx = kf.data() + i * static_cast<size_t>(hd);
      float* vx = vf.data() + i * static_cast<size_t>(hdv);
      store_kv_row(KvType::Q8_0, kx, k.data() + i * kr, hd);
      store_kv_row(KvType::Q8_0, vx, v.data() + i * vr, hdv);
      load_kv_row(KvType::Q8_0, k.data() + i * kr, kx, hd);
      load_kv_row(KvType::Q8_0, v.data() + i * vr, vx, hdv);
    }
  }
  KvHeadView view() const {
    KvHeadView w;
    w.k_base = k.data();
    w.v_base = v.data();
    w.k_row_bytes = kv_row_bytes(KvType::Q8_0, hd);
    w.v_row_bytes = kv_row_bytes(KvType::Q8_0, hdv);
    w.length = length;
    return w;
  }
};

// The lanes of one head and their running state.
struct Lanes {
  int n = 0;
  std::vector<float> q;        // [n][hd], already scaled
  std::vector<int64_t> limit;  // [n]
  std::vector<float> m, l, acc, scores;
  KvHeadView view;

  HeadLanes lanes(int64_t end) {
    return HeadLanes{&view,    n,        q.data(),   limit.data(), end,
                     m.data(), l.data(), acc.data(), scores.data()};
  }
};

Lanes make_lanes(const Q8Head& h, int n, int64_t begin, std::mt19937& rng) {
  Lanes s;
  s.n = n;
  s.view = h.view();
  s.q =
      random_values(static_cast<size_t>(n * h.hd), rng, 2.0f / std::sqrt(static_cast<float>(h.hd)));
  std::uniform_int_distribution<int64_t> lim(begin, h.length);
  for (int i = 0; i < n; ++i) s.limit.push_back(i == 0 ? h.length : i == 1 ? begin : lim(rng));
  s.m.assign(static_cast<size_t>(n), -std::numeric_limits<float>::infinity());
  s.l.assign(static_cast<size_t>(n), 0.0f);
  s.acc.assign(static_cast<size_t>(n * h.hdv), 0.0f);
  s.scores.assign(static_cast<size_t>(n * kAttentionBlock), 0.0f);
  return s;
}

// The lanes' queries ([n][hd]) as the loops see them.
std::vector<float> rounded_queries(const std::vector<float>& q, int hd) {
  std::vector<float> out;
  for (size_t at = 0; at < q.size(); at += static_cast<size_t>(hd)) {
    const auto lane = testing::rounded_query(q.data() + at, hd);
    out.insert(out.end(), lane.begin(), lane.end());
  }
  return out;
}

// The bound on the output's change from rounding the query (see the top): over the lanes,
// (exp(2 delta) - 1) * max |v| with delta the largest score shift any entry can see.
double query_rounding_bound(const Q8Head& h, const Lanes& s, int64_t begin) {
  double vmax = 0.0, bound = 0.0;
  for (const float x : h.vf) vmax = std::max(vmax, static_cast<double>(std::abs(x)));
  for (int ln = 0; ln < s.n; ++ln) {
    double delta = 0.0;
    for (int64_t e = begin; e < s.limit[static_cast<size_t>(ln)]; ++e) {
      double shift = 0.0;
      for (int c = 0; c < h.hd; c += 32) {
        double amax = 0.0, kabs = 0.0;
        for (int i = c; i < c + 32; ++i) {
          amax = std::max(amax,
                          static_cast<double>(std::abs(s.q[static_cast<size_t>(ln * h.hd + i)])));
          kabs += std::abs(static_cast<double>(h.kf[static_cast<size_t>(e * h.hd + i)]));
        }
        shift += kabs * amax / 127.0 / 2.0;
      }
      delta = std::max(delta, shift);
    }
    bound = std::max(bound, (std::exp(2.0 * delta) - 1.0) * vmax);
  }
  return bound;
}

// Block b's scale of a stored Q8_0 row.
double row_scale(const uint8_t* row, int b) {
  uint16_t bits;
  std::memcpy(&bits, row + static_cast<size_t>(b) * kKvQ8BlockBytes, sizeof(bits));
  return static_cast<double>(half::fp16_to_fp32(bits));
}

// The bound on the output's change from rounding the value weights (see the top), over the
// lanes: the walk's blocks of kAttentionBlock entries from `begin`, each weight off by half
// its step s = max_j P_j * max_j |d_j| / 32767 (P_j = exp(score_j - max score), the weights
// in the units of the final sum L), the values |v_int| <= 127. q: the queries the reference
// attends with ([n][hd]).
double weight_rounding_bound(const Q8Head& h, const Lanes& s, int64_t begin,
                             const std::vector<float>& q) {
  const size_t vr = kv_row_bytes(KvType::Q8_0, h.hdv);
  double bound = 0.0;
  for (int ln = 0; ln < s.n; ++ln) {
    const int64_t end = s.limit[static_cast<size_t>(ln)];
    if (end <= begin) continue;
    std::vector<double> sc;
    for (int64_t e = begin; e < end; ++e) {
      double d = 0.0;
      for (int i = 0; i < h.hd; ++i)
        d += static_cast<double>(q[static_cast<size_t>(ln * h.hd + i)]) *
             static_cast<double>(h.kf[static_cast<size_t>(e * h.hd + i)]);
      sc.push_back(d);
    }
    const double mx = *std::max_element(sc.begin(), sc.end());
    double sum = 0.0;
    for (double& x : sc) sum += (x = std::exp(x - mx));
    for (int b = 0; b < h.hdv / 32; ++b) {
      double err = 0.0;
      for (int64_t blk = begin; blk < end; blk += kAttentionBlock) {
        double pmax = 0.0, dmax = 0.0;
        for (int64_t e = blk; e < std::min(blk + kAttentionBlock, end); ++e)
          pmax = std::max(pmax, sc[static_cast<size_t>(e - begin)]);
        for (int64_t e = blk; e < std::min<int64_t>(blk + kAttentionBlock, h.length);
             ++e)  // rows another lane reads too
          dmax = std::max(dmax, std::abs(row_scale(h.v.data() + static_cast<size_t>(e) * vr, b)));
        err += pmax * dmax / testing::kQ8WeightLevels / 2.0 * 127.0 *
               static_cast<double>(std::min(blk + kAttentionBlock, end) - blk);
      }
      bound = std::max(bound, err / sum);
    }
  }
  return bound;
}

// Worst |kernel - reference| over the lanes, the reference attending with query q ([n][hd]);
// a lane seeing nothing must keep l = 0, acc = 0.
double worst_error(const Q8Head& h, const Lanes& s, int64_t begin, const std::vector<float>& q) {
  double worst = 0.0;
  for (int ln = 0; ln < s.n; ++ln) {
    const int64_t end = s.limit[static_cast<size_t>(ln)];
    std::vector<double> out(static_cast<size_t>(h.hdv), 0.0);
    if (end > begin) {
      std::vector<double> sc;
      for (int64_t e = begin; e < end; ++e) {
        double d = 0.0;
        for (int i = 0; i < h.hd; ++i)
          d += static_cast<double>(q[static_cast<size_t>(ln * h.hd + i)]) *
               static_cast<double>(h.kf[static_cast<size_t>(e * h.hd + i)]);
        sc.push_back(d);
      }
      const double mx = *std::max_element(sc.begin(), sc.end());
      double sum = 0.0;
      for (double& x : sc) sum += (x = std::exp(x - mx));
      for (int64_t e = begin; e < end; ++e)
        for (int i = 0; i < h.hdv; ++i)
          out[static_cast<size_t>(i)] +=
              sc[static_cast<size_t>(e - begin)] / sum *
              static_cast<double>(h.vf[static_cast<size_t>(e * h.hdv + i)]);
    }
    const float l = s.l[static_cast<size_t>(ln)];
    for (int i = 0; i < h.hdv; ++i) {
      const float a = s.acc[static_cast<size_t>(ln * h.hdv + i)];
      const double got = end > begin ? static_cast<double>(a / l)
                                     : static_cast<double>(a) + static_cast<double>(l);
      const double d = std::abs(got - out[static_cast<size_t>(i)]);
      worst = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(worst, d);
    }
  }
  return worst;
}

// Both checks of the top against one run's state.
void expect_close(const Q8Head& h, const Lanes& s, int64_t begin, const std::string& what) {
  const std::vector<float> rounded = rounded_queries(s.q, h.hd);
  const double weights = weight_rounding_bound(h, s, begin, rounded);
  const double to_rounded = worst_error(h, s, begin, rounded);
  EXPECT_LE(to_rounded, kTol + weights) << what << " (query rounded as the loops do)";
  const double bound = query_rounding_bound(h, s, begin) + weights + kTol;
  EXPECT_LE(worst_error(h, s, begin, s.q), bound) << what << " (float query)";
}

// The same entries as h in pages of two runs of `run` tokens each, keys as key tiles
// (key_tiles.h), the pages in reverse order of their entries. The slots no entry fills hold
// 0xFF bytes (NaN scales): a loop reading them would turn the output NaN.
struct TiledHead {
  std::vector<uint8_t> arena;
  std::vector<PageId> pages;
  KvHeadView view;
};
TiledHead tiled_copy(const Q8Head& h, int run) {
  TiledHead t;
  const size_t kr = kv_row_bytes(KvType::Q8_0, h.hd), vr = kv_row_bytes(KvType::Q8_0, h.hdv);
  const int64_t page_tokens = 2 * run;
  const size_t run_bytes = static_cast<size_t>(run) * (kr + vr);
  const size_t page_bytes = 2 * run_bytes + 64;
  const int64_t n_pages = (h.length + page_tokens - 1) / page_tokens;
  t.arena.assign(static_cast<size_t>(n_pages) * page_bytes, 0xFF);
  for (int64_t i = 0; i < n_pages; ++i) t.pages.push_back(static_cast<PageId>(n_pages - 1 - i));
  for (int64_t e = 0; e < h.length; ++e) {
    const int64_t slot = e % page_tokens;
    uint8_t* run_at =
        t.arena.data() +
        static_cast<size_t>(t.pages[static_cast<size_t>(e / page_tokens)]) * page_bytes +
        static_cast<size_t>(slot / run) * run_bytes;
    store_tiled_keys(h.k.data() + static_cast<size_t>(e) * kr, 1, run_at, run, slot % run, h.hd);
    std::memcpy(run_at + static_cast<size_t>(run) * kr + static_cast<size_t>(slot % run) * vr,
                h.v.data() + static_cast<size_t>(e) * vr, vr);
  }
  t.view = testing::tiled_head_view(
      {t.arena.data(), t.pages.data(), page_tokens, page_bytes, run, h.hd, vr, h.length});
  return t;
}

// Every Q8_0 loop this build has: the portable one and the ones attend_heads runs at each
// level this CPU supports (AVX2 in an AVX2 build, AVX-512 VNNI where the CPU has it), the
// AVX-512 value loop both ways it can read its rows' scales (cpu::KernelTuning picks one).
struct NamedKernels {
  std::string name;
  BlockKernels kernels;
};
std::vector<NamedKernels> q8_kernels() {
  std::vector<NamedKernels> all{{"portable", kv_q8::portable_kernels()}};
  for (const cpu::KernelLevel level : cpu::supported_levels()) {
    const std::string name(cpu::level_name(level));
    all.push_back({name, kv_q8::block_kernels(level)});
    if (level != cpu::KernelLevel::Avx512Vnni) continue;
    for (const bool gathered : {true, false}) {
      BlockKernels k = kv_q8::block_kernels(level);
      k.accumulate = gathered ? vec::avx512::attention_accumulate_q8_gathered_scales
                              : vec::avx512::attention_accumulate_q8_loaded_scales;
      all.push_back({name + (gathered ? " gathered scales" : " loaded scales"), k});
    }
  }
  return all;
}

TEST(Q8Attention, EveryPathMatchesDequantiseThenAttend) {
  std::mt19937 rng(5);
  for (const auto& [name, kernels] : q8_kernels())
    for (const auto& [hd, hdv] : {std::pair{32, 32}, std::pair{64, 96}, std::pair{96, 64},
                                  std::pair{128, 128}, std::pair{160, 32}})
      for (const int n_lanes : {1, 2, 3, 4, 5, 6, 7, 8, 11})
        for (const int64_t length : {1, 7, 31, 32, 33, 100})
          for (const int64_t begin : {int64_t{0}, std::min<int64_t>(length, 32)}) {
            const Q8Head h(hd, hdv, length, rng);
            Lanes s = make_lanes(h, n_lanes, begin, rng);
            const HeadLanes one = s.lanes(*std::max_element(s.limit.begin(), s.limit.end()));
            attend_heads_with(std::span(&one, 1), kernels, hd, hdv, begin);
            expect_close(h, s, begin,
                         name + " hd " + std::to_string(hd) + "/" + std::to_string(hdv) +
                             " lanes " + std::to_string(n_lanes) + " length " +
                             std::to_string(length) + " begin " + std::to_string(begin));
          }
}

// Keys in key tiles of 16 and 32 tokens (key_tiles.h) through every path: within the bounds
// above of dequantise-then-attend, and within float rounding (and the value weights' rounding)
// of the same loops over the same keys as rows (the same integer sums, scaled in another order).
// Blocks starting at any entry (begin 5, 20, 37), so a block's entries start, end and break
// anywhere inside the tiles.
TEST(Q8Attention, KeyTilesMatchRowsOnEveryPath) {
  std::mt19937 rng(15);
  for (const auto& [name, kernels] : q8_kernels())
    for (const int run : {16, 32})
      for (const auto& [hd, hdv] : {std::pair{32, 32}, std::pair{96, 64}, std::pair{128, 128}})
        for (const int n_lanes : {1, 3, 4, 5, 8, 11})
          for (const int64_t length : {1, 15, 32, 33, 100})
            for (const int64_t begin0 : {0, 5, 20, 37}) {
              const int64_t begin = std::min(begin0, length);
              const Q8Head h(hd, hdv, length, rng);
              const TiledHead t = tiled_copy(h, run);
              Lanes rows = make_lanes(h, n_lanes, begin, rng);
              Lanes tiles = rows;
              tiles.view = t.view;
              const int64_t end = *std::max_element(rows.limit.begin(), rows.limit.end());
              const HeadLanes r = rows.lanes(end), k = tiles.lanes(end);
              attend_heads_with(std::span(&r, 1), kernels, hd, hdv, begin);
              attend_heads_with(std::span(&k, 1), kernels, hd, hdv, begin);
              const std::string what = name + " run " + std::to_string(run) + " hd " +
                                       std::to_string(hd) + " lanes " + std::to_string(n_lanes) +
                                       " length " + std::to_string(length) + " begin " +
                                       std::to_string(begin);
              expect_close(h, tiles, begin, what);
              // The AVX-512 value loop rounds each weight to a step of its block's largest; the
              // scores' last-bit differences may move a weight by one step on each side.
              const double tol =
                  kTol + 2.0 * weight_rounding_bound(h, rows, begin, rounded_queries(rows.q, hd));
              for (size_t i = 0; i < rows.acc.size(); ++i) {
                const size_t lane = i / static_cast<size_t>(hdv);
                ASSERT_NEAR(tiles.acc[i] / std::max(tiles.l[lane], 1e-30f),
                            rows.acc[i] / std::max(rows.l[lane], 1e-30f), tol)
                    << what << " output " << i;
              }
            }
}

// The score loops alone: on key tiles they give the scores the row loop gives on the same keys
// (within float rounding), for blocks starting at any entry of 16- and 32-token tiles and of
// any length, and write nothing outside the lanes' kAttentionBlock slots (a guard lane after
// them keeps its sentinel).
TEST(Q8Attention, TileScoresEqualRowScoresInTheirSlots) {
  std::mt19937 rng(16);
  constexpr float kSentinel = 12345.0f;
  for (const auto& [name, kernels] : q8_kernels())
    for (const int run : {16, 32})
      for (const int hd : {32, 128}) {
        const Q8Head h(hd, 32, 100, rng);
        const TiledHead t = tiled_copy(h, run);
        for (const int n_lanes : {1, 2, 4, 5, 8}) {
          const auto q = random_values(static_cast<size_t>(n_lanes * hd), rng);
          std::vector<uint8_t> prepared(static_cast<size_t>(n_lanes) * kernels.prepared.bytes(hd));
          for (int ln = 0; ln < n_lanes; ++ln)
            kernels.prepared.prepare(
                q.data() + ln * hd, hd,
                prepared.data() + static_cast<size_t>(ln) * kernels.prepared.bytes(hd));
          for (const int64_t blk : {0, 5, 16, 27, 31, 68})
            for (const int nb : {1, 7, 16, 21, 32}) {
              if (blk + nb > h.length) continue;
              std::vector<const uint8_t*> rows;
              for (int64_t e = blk; e < blk + nb; ++e)
                rows.push_back(h.k.data() +
                               static_cast<size_t>(e) * kv_row_bytes(KvType::Q8_0, hd));
              KeyTiles tiles;
              tiles.run_tokens = run;
              t.view.for_each_key_tile(
                  blk, blk + nb,
                  [&](int64_t first, const uint8_t* tile, int64_t token, int64_t count) {
                    tiles.span[tiles.n++] = {tile, static_cast<int>(token), static_cast<int>(count),
                                             static_cast<int>(first - blk)};
                  });
              std::vector<float> want(static_cast<size_t>(n_lanes) * kAttentionBlock);
              std::vector<float> got(static_cast<size_t>(n_lanes + 1) * kAttentionBlock, kSentinel);
              kernels.prepared.scores(n_lanes, prepared.data(), hd, rows.data(), nb, want.data(),
                                      nullptr);
              kernels.prepared.tile_scores(n_lanes, prepared.data(), hd, tiles, got.data(), &tiles);
              const std::string what = name + " run " + std::to_string(run) + " hd " +
                                       std::to_string(hd) + " lanes " + std::to_string(n_lanes) +
                                       " block " + std::to_string(blk) + "+" + std::to_string(nb);
              for (int ln = 0; ln < n_lanes; ++ln)
                for (int j = 0; j < nb; ++j) {
                  const float w = want[static_cast<size_t>(ln * kAttentionBlock + j)];
                  ASSERT_NEAR(got[static_cast<size_t>(ln * kAttentionBlock + j)], w,
                              1e-5 * (1.0 + std::abs(static_cast<double>(w))))
                      << what << " lane " << ln << " entry " << j;
                }
              for (int j = 0; j < kAttentionBlock; ++j)
                ASSERT_EQ(got[static_cast<size_t>(n_lanes * kAttentionBlock + j)], kSentinel)
                    << what << " guard slot " << j;
            }
        }
      }
}

// The value loops alone against the portable one (plain float p * (d * v)) on the same weights:
// 1..8 lanes, 1..32 rows (odd counts leave the last row pair half empty), head sizes 32..160,
// lanes whose last weights are 0 (rows they do not see), weights past the n rows NaN (the
// walk leaves stale scores there: a loop reading them fails). Column c of a lane may differ
// by sum_j s_b / 2 * |v_int_jc| (s_b: the lane's weight step in column block b, see the top)
// plus float rounding, 1e-5 of the sum of the magnitudes added.
TEST(Q8Attention, ValueLoopsWithinTheirWeightRounding) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const BlockKernels portable = kv_q8::portable_kernels();
  for (const auto& [name, kernels] : q8_kernels())
    for (const int hdv : {32, 64, 96, 128, 160})
      for (int n_lanes = 1; n_lanes <= 8; ++n_lanes)
        for (const int n : {1, 2, 3, 4, 5, 7, 16, 29, 31, 32}) {
          const Q8Head h(32, hdv, n, rng);
          const size_t vr = kv_row_bytes(KvType::Q8_0, hdv);
          std::vector<const uint8_t*> rows;
          for (int j = 0; j < n; ++j) rows.push_back(h.v.data() + static_cast<size_t>(j) * vr);
          std::vector<float> p(static_cast<size_t>(n_lanes * kAttentionBlock),
                               std::numeric_limits<float>::quiet_NaN());
          for (int ln = 0; ln < n_lanes; ++ln) {
            const int seen = ln == 1 ? std::max(1, n / 2) : n;
            for (int j = 0; j < n; ++j)
              p[static_cast<size_t>(ln * kAttentionBlock + j)] = j < seen ? unit(rng) : 0.0f;
          }
          const auto start = random_values(static_cast<size_t>(n_lanes * hdv), rng);
          std::vector<float> want = start, got = start;
          portable.accumulate(n_lanes, p.data(), hdv, rows.data(), n, want.data(), nullptr);
          kernels.accumulate(n_lanes, p.data(), hdv, rows.data(), n, got.data(), nullptr);
          for (int ln = 0; ln < n_lanes; ++ln)
            for (int b = 0; b < hdv / 32; ++b) {
              double pmax = 0.0, dmax = 0.0;
              for (int j = 0; j < n; ++j) {
                pmax = std::max(
                    pmax, static_cast<double>(p[static_cast<size_t>(ln * kAttentionBlock + j)]));
                dmax = std::max(dmax, std::abs(row_scale(rows[static_cast<size_t>(j)], b)));
              }
              const double half_step = pmax * dmax / testing::kQ8WeightLevels / 2.0;
              for (int c = 32 * b; c < 32 * b + 32; ++c) {
                double rounding = 0.0,
                       magnitude =
                           std::abs(static_cast<double>(start[static_cast<size_t>(ln * hdv + c)]));
                for (int j = 0; j < n; ++j) {
                  const double d = row_scale(rows[static_cast<size_t>(j)], b);
                  const double v = static_cast<double>(h.vf[static_cast<size_t>(j * hdv + c)]);
                  rounding += d > 0.0 ? half_step * std::abs(v) / d : 0.0;  // |v_int| = |v| / d
                  magnitude +=
                      static_cast<double>(p[static_cast<size_t>(ln * kAttentionBlock + j)]) *
                      std::abs(v);
                }
                const auto at = static_cast<size_t>(ln * hdv + c);
                EXPECT_LE(std::abs(static_cast<double>(got[at]) - static_cast<double>(want[at])),
                          rounding + 1e-5 * magnitude)
                    << name << " hdv " << hdv << " lanes " << n_lanes << " rows " << n << " lane "
                    << ln << " column " << c;
              }
            }
        }
}

// A lane whose weights in a block of entries are all vanishingly small (scores ~80 below the
// running maximum: exp gives ~1e-35, where 32767 / max overflows float) adds at most what the
// float loop adds and never its opposite: the integer loop must not turn the overflow into
// weights saturated at -32768 (sign-flipped, zero weights included). The lane starts at 0 so
// that contributions this small are visible; a lane with ordinary weights beside it stays
// within its rounding.
TEST(Q8Attention, VanishingWeightsNeverFlipSign) {
  std::mt19937 rng(13);
  const BlockKernels portable = kv_q8::portable_kernels();
  const int hdv = 64, n = 16;
  const Q8Head h(32, hdv, n, rng);
  std::vector<const uint8_t*> rows;
  for (int j = 0; j < n; ++j)
    rows.push_back(h.v.data() + static_cast<size_t>(j) * kv_row_bytes(KvType::Q8_0, hdv));
  for (const auto& [name, kernels] : q8_kernels())
    for (const float tiny :
         {1e-35f, 1e-38f, 1e-44f}) {  // normal, subnormal, near the smallest subnormal
      std::vector<float> p(2 * kAttentionBlock, 0.0f);
      for (int j = 0; j < n; ++j) {
        p[static_cast<size_t>(j)] = j % 3 == 0 ? 0.0f : tiny;
        p[static_cast<size_t>(kAttentionBlock + j)] = 0.5f + 0.03f * static_cast<float>(j);
      }
      std::vector<float> start(static_cast<size_t>(2 * hdv), 0.0f);
      const auto ordinary = random_values(static_cast<size_t>(hdv), rng);
      std::copy(ordinary.begin(), ordinary.end(), start.begin() + hdv);
      std::vector<float> want = start, got = start;
      portable.accumulate(2, p.data(), hdv, rows.data(), n, want.data(), nullptr);
      kernels.accumulate(2, p.data(), hdv, rows.data(), n, got.data(), nullptr);
      for (int c = 0; c < hdv; ++c) {
        const auto at = static_cast<size_t>(c);
        double magnitude = 0.0;  // sum_j p_j |v_j|: all the float loop adds, at most
        for (int j = 0; j < n; ++j)
          magnitude += static_cast<double>(p[static_cast<size_t>(j)]) *
                       std::abs(static_cast<double>(h.vf[static_cast<size_t>(j * hdv + c)]));
        ASSERT_TRUE(std::isfinite(got[at])) << name << " tiny " << tiny << " column " << c;
        EXPECT_GE(static_cast<double>(got[at]) * static_cast<double>(want[at]), 0.0)
            << name << " tiny " << tiny << " column " << c;
        EXPECT_LE(std::abs(static_cast<double>(got[at]) - static_cast<double>(want[at])),
                  magnitude * 1.001)
            << name << " tiny " << tiny << " column " << c;
        // The ordinary lane: within its weight rounding (a step of max p * max d / 32767 per
        // row, 16 rows of |v_int| <= 127) and float rounding.
        const auto o = static_cast<size_t>(hdv + c);
        EXPECT_NEAR(got[o], want[o],
                    0.05 * static_cast<double>(std::abs(want[o] - start[o])) + 1e-3)
            << name << " column " << c;
      }
    }
}

// A value row whose block scale is not finite (a damaged page) turns that block's columns
// non-finite on every path, however its rows' scales are read (inf times a value of 0 is NaN
// too); the other block's columns stay finite.
TEST(Q8Attention, NonFiniteValueScaleIsNotHidden) {
  std::mt19937 rng(14);
  const int hdv = 64, n = 21;
  const Q8Head h(32, hdv, n, rng);
  const size_t vr = kv_row_bytes(KvType::Q8_0, hdv);
  for (const uint16_t bad : {uint16_t{0x7C00}, uint16_t{0x7E00}}) {  // fp16 inf, NaN
    std::vector<uint8_t> v = h.v;
    std::memcpy(v.data() + 9 * vr + kKvQ8BlockBytes, &bad, sizeof(bad));  // row 9, block 1
    std::vector<const uint8_t*> rows;
    for (int j = 0; j < n; ++j) rows.push_back(v.data() + static_cast<size_t>(j) * vr);
    std::vector<float> p(2 * kAttentionBlock, 0.0f);
    for (int j = 0; j < n; ++j)
      p[static_cast<size_t>(j)] = p[static_cast<size_t>(kAttentionBlock + j)] = 0.25f;
    for (const auto& [name, kernels] : q8_kernels()) {
      std::vector<float> acc(static_cast<size_t>(2 * hdv), 0.0f);
      kernels.accumulate(2, p.data(), hdv, rows.data(), n, acc.data(), nullptr);
      for (int ln = 0; ln < 2; ++ln)
        for (int c = 0; c < hdv; ++c) {
          const float x = acc[static_cast<size_t>(ln * hdv + c)];
          EXPECT_EQ(std::isfinite(x), c < 32) << name << " lane " << ln << " column " << c;
        }
    }
  }
}

// The query's rounding is real error, not noise of the reference: against the float query
// the loops differ by more than the float-vs-double tolerance, and stay within the bound.
TEST(Q8Attention, QueryRoundingIsMeasuredAndBounded) {
  std::mt19937 rng(9);
  const Q8Head h(128, 128, 200, rng);
  for (const auto& [name, kernels] : q8_kernels()) {
    Lanes s = make_lanes(h, 4, 0, rng);
    s.limit.assign(4, h.length);
    const HeadLanes one = s.lanes(h.length);
    attend_heads_with(std::span(&one, 1), kernels, 128, 128, 0);
    const double err = worst_error(h, s, 0, s.q);
    EXPECT_GT(err, kTol) << name;
    EXPECT_LE(err, query_rounding_bound(h, s, 0) +
                       weight_rounding_bound(h, s, 0, rounded_queries(s.q, 128)) + kTol)
        << name;
  }
}

// A NaN in a query (a broken model) makes that lane's scores NaN, as float scores would be,
// instead of being dropped by the rounding; the other lane's stay finite.
TEST(Q8Attention, NanQueryGivesNanScores) {
  std::mt19937 rng(10);
  const Q8Head h(64, 32, 40, rng);
  auto q = random_values(2 * 64, rng);
  q[5] = std::numeric_limits<float>::quiet_NaN();  // lane 0 only
  std::vector<const uint8_t*> rows;
  for (int j = 0; j < 8; ++j)
    rows.push_back(h.k.data() + static_cast<size_t>(j) * kv_row_bytes(KvType::Q8_0, 64));
  for (const auto& [name, kernels] : q8_kernels()) {
    std::vector<uint8_t> prepared(2 * kernels.prepared.bytes(64));
    for (int ln = 0; ln < 2; ++ln)
      kernels.prepared.prepare(
          q.data() + ln * 64, 64,
          prepared.data() + static_cast<size_t>(ln) * kernels.prepared.bytes(64));
    std::vector<float> scores(2 * kAttentionBlock, 0.0f);
    kernels.prepared.scores(2, prepared.data(), 64, rows.data(), 8, scores.data(), nullptr);
    for (int j = 0; j < 8; ++j) {
      EXPECT_TRUE(std::isnan(scores[static_cast<size_t>(j)])) << name << " row " << j;
      EXPECT_TRUE(std::isfinite(scores[static_cast<size_t>(kAttentionBlock + j)]))
          << name << " row " << j;
    }
  }
}

// Every level's query quantisation writes the same bytes as the portable one (scales,
// values, offsets), NaN and zero blocks included.
TEST(Q8Attention, QueryQuantisationSameOnEveryPath) {
  std::mt19937 rng(11);
  auto q = random_values(160, rng);
  std::fill(q.begin() + 32, q.begin() + 64, 0.0f);  // an all-zero block
  q[100] = std::numeric_limits<float>::quiet_NaN();
  q[10] = 1e4f;  // a block dominated by one element
  q[150] = std::numeric_limits<float>::infinity();
  const BlockKernels portable = kv_q8::portable_kernels();
  std::vector<uint8_t> want(kv_q8::query_bytes(160));
  portable.prepared.prepare(q.data(), 160, want.data());
  for (const auto& [name, kernels] : q8_kernels()) {
    std::vector<uint8_t> got(want.size(), 0xAA);
    kernels.prepared.prepare(q.data(), 160, got.data());
    EXPECT_EQ(got, want) << name;  // NaN scales too: both write the same quiet NaN
  }
}

TEST(Q8Attention, HeadsOfDifferentLengthsWalkedTogether) {
  std::mt19937 rng(6);
  for (const auto& [name, kernels] : q8_kernels()) {
    std::vector<Q8Head> heads;
    for (const int64_t len : {5, 70, 33, 128}) heads.emplace_back(64, 32, len, rng);
    std::vector<Lanes> lanes;
    for (const Q8Head& h : heads) lanes.push_back(make_lanes(h, 4, 0, rng));
    std::vector<HeadLanes> hl;
    for (Lanes& s : lanes) hl.push_back(s.lanes(*std::max_element(s.limit.begin(), s.limit.end())));
    attend_heads_with(hl, kernels, 64, 32, 0);
    for (size_t i = 0; i < heads.size(); ++i)
      expect_close(heads[i], lanes[i], 0, name + " head " + std::to_string(i));
  }
}

TEST(Q8Attention, DispatchThroughAttendHeadsRunsTheQ8Loop) {
  std::mt19937 rng(7);
  const Q8Head h(32, 64, 45, rng);
  for (const cpu::KernelLevel level : cpu::supported_levels()) {
    Lanes s = make_lanes(h, 3, 0, rng);
    const HeadLanes one = s.lanes(h.length);
    attend_heads(std::span(&one, 1), KvType::Q8_0, 32, 64, 0, level);
    expect_close(h, s, 0, std::string(cpu::level_name(level)));
  }
}

TEST(KvRow, SizesAndRoundTrip) {
  EXPECT_EQ(kv_row_bytes(KvType::F32, 64), 256u);
  EXPECT_EQ(kv_row_bytes(KvType::F16, 64), 128u);
  EXPECT_EQ(kv_row_bytes(KvType::Q8_0, 64), 68u);
  std::mt19937 rng(8);
  const auto x = random_values(96, rng);
  std::vector<uint8_t> bytes(kv_row_bytes(KvType::Q8_0, 96));
  std::vector<float> y(96);
  store_kv_row(KvType::Q8_0, x.data(), bytes.data(), 96);
  load_kv_row(KvType::Q8_0, bytes.data(), y.data(), 96);
  for (int b = 0; b < 3; ++b) {  // error at most half a step of the block's scale (amax / 127)
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i)
      amax = std::max(amax, std::abs(x[static_cast<size_t>(32 * b + i)]));
    for (int i = 0; i < 32; ++i)
      EXPECT_LE(std::abs(x[static_cast<size_t>(32 * b + i)] - y[static_cast<size_t>(32 * b + i)]),
                amax / 127.0f * 0.51f);
  }
  for (const KvType t : {KvType::F32, KvType::F16, KvType::Q8_0})
    EXPECT_EQ(parse_kv_type(kv_type_name(t)), t);
  EXPECT_FALSE(parse_kv_type("q4_0"));
}

TEST(KvRow, Q8RefusesHeadSizesNotMultipleOf32) {
  EXPECT_TRUE(check_kv_row_dims(KvType::Q8_0, 64, 128).ok());
  EXPECT_FALSE(check_kv_row_dims(KvType::Q8_0, 48, 64).ok());
  EXPECT_FALSE(check_kv_row_dims(KvType::Q8_0, 64, 8).ok());
  EXPECT_TRUE(check_kv_row_dims(KvType::F16, 48, 8).ok());
  PageGeometry g;
  g.head_dim = 48;
  g.head_dim_v = 48;
  g.type = KvType::Q8_0;
  EXPECT_FALSE(BlockPool::create(g, size_t{1} << 20).ok());
  g.head_dim = g.head_dim_v = 64;
  auto pool = BlockPool::create(g, size_t{1} << 20);
  ASSERT_TRUE(pool.ok());
  // 16 tokens x 4 heads x (68 + 68) bytes, already a multiple of 64.
  EXPECT_EQ((*pool)->page_bytes(), size_t{16 * 4 * 136});
}

}  // namespace
}  // namespace tangram
