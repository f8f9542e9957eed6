#include "attention/attention_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "attention/attention_kernel_avx512.h"
#include "attention/attention_kernel_q8.h"
#include "kernels/half.h"
#include "kernels/simd.h"

#if defined(TANGRAM_AVX2) && defined(__F16C__)
#define TANGRAM_KV_SIMD 1
#else
#define TANGRAM_KV_SIMD 0
#endif

namespace tangram {

namespace {

constexpr int kLaneGroup = 8;  // lanes sharing one pass over a block's rows
// A block whose key and value rows take at most this many bytes (32 cache lines) has its
// successor prefetched whole by head_block instead of row by row in the loops.
constexpr size_t kWholeBlockPrefetchBytes = 2048;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Key and value row of each entry of one block.
struct BlockRows {
  const uint8_t* k[kAttentionBlock];
  const uint8_t* v[kAttentionBlock];
};

// ---- scalar rows (any head size, any build) ----

template <typename Elem>
float element(const uint8_t* row, int i) {
  if constexpr (std::is_same_v<Elem, float>) {
    float x;
    std::memcpy(&x, row + static_cast<size_t>(i) * sizeof(float), sizeof(float));
    return x;
  } else {
    uint16_t h;
    std::memcpy(&h, row + static_cast<size_t>(i) * sizeof(uint16_t), sizeof(uint16_t));
    return half::fp16_to_fp32(h);
  }
}

// scores[lane][j] = q[lane] . k[j] for j < n. (No prefetch: this loop is far from memory-bound.)
template <typename Elem>
void scores_scalar(int n_lanes, const float* q, int hd, const uint8_t* const* k, int n,
                   float* scores, const uint8_t* const* /*next_k*/) {
  for (int j = 0; j < n; ++j)
    for (int ln = 0; ln < n_lanes; ++ln) {
      float s = 0.0f;
      for (int i = 0; i < hd; ++i) s += q[ln * hd + i] * element<Elem>(k[j], i);
      scores[ln * kAttentionBlock + j] = s;
    }
}

// acc[lane] += sum_j p[lane][j] * v[j].
template <typename Elem>
void accumulate_scalar(int n_lanes, const float* p, int hdv, const uint8_t* const* v, int n,
                       float* acc, const uint8_t* const* /*next_v*/) {
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < hdv; ++i) {
      const float vi = element<Elem>(v[j], i);
      for (int ln = 0; ln < n_lanes; ++ln) acc[ln * hdv + i] += p[ln * kAttentionBlock + j] * vi;
    }
}

#if TANGRAM_KV_SIMD

template <typename Elem>
inline __m256 load8(const uint8_t* row, int i) {
  if constexpr (std::is_same_v<Elem, float>) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
  } else {
    return _mm256_cvtph_ps(_mm_loadu_si128(
        reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(row) + i)));
  }
}

// The 8 horizontal sums of a[0..7], in order.
inline __m256 reduce8(const __m256 (&a)[8]) {
  const __m256 t0 = _mm256_hadd_ps(a[0], a[1]);
  const __m256 t1 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 t2 = _mm256_hadd_ps(a[4], a[5]);
  const __m256 t3 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1);  // sums of a0..a3, low | high halves
  const __m256 u1 = _mm256_hadd_ps(t2, t3);  // sums of a4..a7, low | high halves
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// Stores the NL x JB sums of one row group, sums[ln * JB + r] = score of lane ln and row j + r,
// into each lane's scores: JB = 8 and 4 as vector stores (the scattered scalar stores cost
// more than the dot products themselves when a row is one vector, head size 8).
template <int NL, int JB>
inline void store_scores(__m256 sums, float* scores, int j) {
  static_assert(NL * JB <= 8, "one __m256 holds the group's sums");
  if constexpr (JB == 8) {
    static_assert(NL == 1);
    _mm256_storeu_ps(scores + j, sums);
  } else if constexpr (JB == 4) {
    static_assert(NL == 2);
    _mm_storeu_ps(scores + j, _mm256_castps256_ps128(sums));
    _mm_storeu_ps(scores + kAttentionBlock + j, _mm256_extractf128_ps(sums, 1));
  } else {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, sums);
    for (int ln = 0; ln < NL; ++ln)
      for (int r = 0; r < JB; ++r) scores[ln * kAttentionBlock + j + r] = lanes[ln * JB + r];
  }
}

// scores[lane][j] = q[lane] . k[j] for NL lanes; JB rows at a time so NL * JB <= 8 dot
// products run in registers and are reduced together. Each group of rows first prefetches the
// same rows of the next block (next_k may be null; BlockKernels says why). HD: the head size
// when fixed at compile time (8, 16: the loops over it unroll away), 0 to read it from hd.
template <typename Elem, int NL, int HD>
void scores_simd(const float* q, int hd, const uint8_t* const* k, int n, float* scores,
                 const uint8_t* const* next_k) {
  constexpr int JB = NL >= 8 ? 1 : 8 / NL;
  const int d = HD > 0 ? HD : hd;
  const size_t row_bytes = static_cast<size_t>(d) * sizeof(Elem);
  int j = 0;
  for (; j + JB <= n; j += JB) {
    if (next_k)
      for (int r = 0; r < JB; ++r) prefetch_to_l2(next_k[j + r], row_bytes);
    __m256 acc[8];
    for (auto& a : acc) a = _mm256_setzero_ps();
    for (int c = 0; c < d; c += 8) {
      for (int r = 0; r < JB; ++r) {
        const __m256 kc = load8<Elem>(k[j + r], c);
        for (int ln = 0; ln < NL; ++ln)
          acc[ln * JB + r] = _mm256_fmadd_ps(_mm256_loadu_ps(q + ln * d + c), kc, acc[ln * JB + r]);
      }
    }
    store_scores<NL, JB>(reduce8(acc), scores, j);
  }
  for (; j < n; ++j) {
    if (next_k) prefetch_to_l2(next_k[j], row_bytes);
    __m256 acc[8];
    for (auto& a : acc) a = _mm256_setzero_ps();
    for (int c = 0; c < d; c += 8) {
      const __m256 kc = load8<Elem>(k[j], c);
      for (int ln = 0; ln < NL; ++ln)
        acc[ln] = _mm256_fmadd_ps(_mm256_loadu_ps(q + ln * d + c), kc, acc[ln]);
    }
    store_scores<NL, 1>(reduce8(acc), scores, j);
  }
}

// scores_simd for head size 8, where a row is one vector: eight rows at a time, each loaded
// (and widened) once for all NL lanes, and each lane's eight products reduced together into
// one vector store of its eight scores (scores_simd, with its row groups of 8 / NL, stores
// them one by one: most of its work at this size). The same products in the same reduction
// order, so the same scores (up to the sign of an exact zero). A last group of fewer than 8
// rows repeats the last row: the lanes' scores are written up to the next multiple of 8,
// inside their kAttentionBlock slots, where softmax_lanes overwrites them.
template <typename Elem, int NL>
void scores_rows8(const float* q, const uint8_t* const* k, int n, float* scores,
                  const uint8_t* const* next_k) {
  for (int j = 0; j < n; j += 8) {
    const int last = std::min(j + 8, n) - 1;
    if (next_k)
      for (int r = j; r <= last; ++r) prefetch_to_l2(next_k[r], 8 * sizeof(Elem));
    __m256 kr[8];
    if (last == j + 7) {
      for (int r = 0; r < 8; ++r) kr[r] = load8<Elem>(k[j + r], 0);
    } else {
      for (int r = 0; r < 8; ++r) kr[r] = load8<Elem>(k[std::min(j + r, last)], 0);
    }
    for (int ln = 0; ln < NL; ++ln) {
      const __m256 ql = _mm256_loadu_ps(q + ln * 8);
      __m256 prod[8];
      for (int r = 0; r < 8; ++r) prod[r] = _mm256_mul_ps(ql, kr[r]);
      _mm256_storeu_ps(scores + ln * kAttentionBlock + j, reduce8(prod));
    }
  }
}

// acc[lane] += sum_j p[lane][j] * v[j] for NL lanes, CW 8-wide column chunks per pass over the
// block's rows (accumulators stay in registers for the whole pass). The first pass (column 0)
// prefetches each row's successor in the next block (next_v may be null). HD as scores_simd's.
template <typename Elem, int NL, int CW, int HD>
int accumulate_pass(const float* p, int hdv, int c0, const uint8_t* const* v, int n, float* acc,
                    const uint8_t* const* next_v) {
  const int d = HD > 0 ? HD : hdv;
  int c = c0;
  for (; c + 8 * CW <= d; c += 8 * CW) {
    __m256 a[NL][CW];
    for (int ln = 0; ln < NL; ++ln)
      for (int w = 0; w < CW; ++w) a[ln][w] = _mm256_loadu_ps(acc + ln * d + c + 8 * w);
    // The rows, with or without prefetching each one's successor (two copies of the loop, so
    // the common case tests nothing per row).
    auto rows = [&]<bool kPrefetch>() {
      for (int j = 0; j < n; ++j) {
        if constexpr (kPrefetch) prefetch_to_l2(next_v[j], static_cast<size_t>(d) * sizeof(Elem));
        __m256 vc[CW];
        for (int w = 0; w < CW; ++w) vc[w] = load8<Elem>(v[j], c + 8 * w);
        for (int ln = 0; ln < NL; ++ln) {
          const __m256 pj = _mm256_broadcast_ss(p + ln * kAttentionBlock + j);
          for (int w = 0; w < CW; ++w) a[ln][w] = _mm256_fmadd_ps(pj, vc[w], a[ln][w]);
        }
      }
    };
    if (next_v && c == 0)
      rows.template operator()<true>();
    else
      rows.template operator()<false>();
    for (int ln = 0; ln < NL; ++ln)
      for (int w = 0; w < CW; ++w) _mm256_storeu_ps(acc + ln * d + c + 8 * w, a[ln][w]);
  }
  return c;
}

template <typename Elem, int NL, int HD>
void accumulate_simd(const float* p, int hdv, const uint8_t* const* v, int n, float* acc,
                     const uint8_t* const* next_v) {
  // Two chunks per pass where NL leaves the registers, unless the row is a single chunk.
  constexpr int CW = NL <= 4 && HD != 8 ? 2 : 1;
  int c = accumulate_pass<Elem, NL, CW, HD>(p, hdv, 0, v, n, acc, next_v);
  if constexpr (CW > 1) accumulate_pass<Elem, NL, 1, HD>(p, hdv, c, v, n, acc, next_v);
}

// The scores and the value step for n_lanes <= 8 lanes.
template <typename Elem, int HD>
void scores_step_simd(int n_lanes, const float* q, int hd, const uint8_t* const* k, int n,
                      float* scores, const uint8_t* const* next_k) {
  with_lane_count(n_lanes, [&]<int NL>() {
    if constexpr (HD == 8)
      scores_rows8<Elem, NL>(q, k, n, scores, next_k);
    else
      scores_simd<Elem, NL, HD>(q, hd, k, n, scores, next_k);
  });
}
template <typename Elem, int HD>
void accumulate_step_simd(int n_lanes, const float* p, int hdv, const uint8_t* const* v, int n,
                          float* acc, const uint8_t* const* next_v) {
  with_lane_count(n_lanes,
                  [&]<int NL>() { accumulate_simd<Elem, NL, HD>(p, hdv, v, n, acc, next_v); });
}

// The AVX2 loops for head sizes hd (keys) and hdv (values), multiples of 8: the small sizes
// (8, 16) with the size fixed at compile time, where the per-row loop overhead is most of
// the work.
template <typename Elem>
BlockKernels avx2_block_kernels(int hd, int hdv) {
  BlockKernels k{scores_step_simd<Elem, 0>, accumulate_step_simd<Elem, 0>, {}};
  if (hd == 8) k.scores = scores_step_simd<Elem, 8>;
  if (hd == 16) k.scores = scores_step_simd<Elem, 16>;
  if (hdv == 8) k.accumulate = accumulate_step_simd<Elem, 8>;
  if (hdv == 16) k.accumulate = accumulate_step_simd<Elem, 16>;
  return k;
}

#endif  // TANGRAM_KV_SIMD

// The largest of a lane's scores s[0 .. n_pad), padding included (-inf).
float block_max(const float* s, int n_pad) {
  float best = kNegInf;
  int j = 0;
#if TANGRAM_KV_SIMD
  __m256 vmax8 = _mm256_set1_ps(kNegInf);
  for (; j + 8 <= n_pad; j += 8) vmax8 = _mm256_max_ps(vmax8, _mm256_loadu_ps(s + j));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax8), _mm256_extractf128_ps(vmax8, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  best = _mm_cvtss_f32(m4);
#endif
  for (; j < n_pad; ++j) best = std::max(best, s[j]);
  return best;
}

}  // namespace

float attention_exp_weights(float* s, int n_pad, float m_new) {
  float sum = 0.0f;
  int j = 0;
#if TANGRAM_KV_SIMD
  const __m256 vmax = _mm256_set1_ps(m_new);
  __m256 vsum = _mm256_setzero_ps();
  for (; j + 8 <= n_pad; j += 8) {
    const __m256 e = simd::exp(_mm256_sub_ps(_mm256_loadu_ps(s + j), vmax));
    _mm256_storeu_ps(s + j, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  sum = simd::hsum(vsum);
#endif
  for (; j < n_pad; ++j) {
    s[j] = std::exp(s[j] - m_new);
    sum += s[j];
  }
  return sum;
}

namespace {

// Folds one block's scores into the running (m, l, acc) of each of the ng lanes of a group and
// turns them into the weights exp(s - m_new): lane ln's scores s[ln][0 .. visible[ln]) count,
// its slots from visible[ln] to n_pad become weight 0 (n_pad: a multiple of 8 no larger than
// kAttentionBlock). s: [ng][kAttentionBlock], acc: [ng][hdv]. Two passes over the lanes, the
// maxima and corrections (scalar exp) first, then the vector exps, so the exp's constants stay
// in registers across lanes: at head size 8 this bookkeeping is a third of a block's work.
// exp: the exponentials' loop (attention_exp_weights or the kernels' own,
// BlockKernels::exp_weights).
void softmax_lanes(float* s, const int* visible, int ng, int n_pad, float* m, float* l, float* acc,
                   int hdv, float (*exp)(float*, int, float)) {
  float m_new[kLaneGroup];
  float corr[kLaneGroup];
  for (int ln = 0; ln < ng; ++ln) {
    if (visible[ln] == 0) continue;
    float* sl = s + ln * kAttentionBlock;
    std::fill(sl + visible[ln], sl + n_pad, kNegInf);
    m_new[ln] = std::max(m[ln], block_max(sl, n_pad));
    // m == -inf only before the first visible entry, when l and acc are still 0.
    corr[ln] = m[ln] == m_new[ln] ? 1.0f : std::exp(m[ln] - m_new[ln]);
  }
  for (int ln = 0; ln < ng; ++ln) {
    float* sl = s + ln * kAttentionBlock;
    if (visible[ln] == 0) {
      std::fill_n(sl, n_pad, 0.0f);
      continue;
    }
    const float sum = exp(sl, n_pad, m_new[ln]);
    float* al = acc + static_cast<size_t>(ln) * static_cast<size_t>(hdv);
    if (corr[ln] != 1.0f)
      for (int i = 0; i < hdv; ++i) al[i] *= corr[ln];
    l[ln] = l[ln] * corr[ln] + sum;
    m[ln] = m_new[ln];
  }
}

template <typename Elem>
BlockKernels block_kernels(int hd, int hdv, cpu::KernelLevel level) {
#if TANGRAM_KV_SIMD
  if constexpr (std::is_same_v<Elem, uint16_t>) {
    if (level == cpu::KernelLevel::Avx512Vnni && cpu::supports(level) && hd % 16 == 0 &&
        hdv % 16 == 0)
      return {vec::avx512::attention_scores_f16,
              vec::avx512::attention_accumulate_f16,
              {},
              vec::avx512::attention_exp_weights};
  }
  if (hd % 8 == 0 && hdv % 8 == 0) return avx2_block_kernels<Elem>(hd, hdv);
#endif
  (void)level;
  return {scores_scalar<Elem>, accumulate_scalar<Elem>, {}};
}

// Where entries [blk, blk + nb) of a head lie: their key and value rows, or, for a head that
// keeps its keys in tiles (tiles non-null), their value rows and the key tiles' spans. One walk
// over the block's runs for both.
void block_rows(const KvHeadView& view, int64_t blk, int64_t nb, BlockRows& rows, KeyTiles* tiles) {
  const size_t kb = view.k_row_bytes, vb = view.v_row_bytes;
  if (tiles) {
    tiles->n = 0;
    tiles->run_tokens = view.run_length();
  }
  view.for_each_run_at(blk, blk + nb, [&](int64_t first, size_t off, int64_t token, int64_t count) {
    // Running pointers: with k + i * kb the compiler vectorised the fill through emulated
    // 64-bit multiplies, a few hundred instructions per block.
    const uint8_t** kd = rows.k + (first - blk);
    const uint8_t** vd = rows.v + (first - blk);
    const uint8_t* v = view.v_base + off + static_cast<size_t>(token) * vb;
    if (tiles) {
      tiles->span[tiles->n++] = {view.k_base + off, static_cast<int>(token),
                                 static_cast<int>(count), static_cast<int>(first - blk)};
      for (int64_t i = 0; i < count; ++i, v += vb) vd[i] = v;
      return;
    }
    const uint8_t* k = view.k_base + off + static_cast<size_t>(token) * kb;
    for (int64_t i = 0; i < count; ++i, k += kb, v += vb) {
      kd[i] = k;
      vd[i] = v;
    }
  });
}

// One block of one head: entries [blk, blk + nb) against the head's lanes. prepared: the
// lanes' queries in the form kern.prepared.scores reads ([n_lanes][query_bytes]), or null.
// The loops of the first lane group prefetch the head's next block (BlockKernels says why).
void head_block(const HeadLanes& h, int hd, int hdv, int64_t blk, int nb, const BlockKernels& kern,
                const uint8_t* prepared, size_t query_bytes) {
  // Key tiles: this block's and the next one's (prefetched by the score loop).
  const bool tiled = h.view->key_layout != KeyLayout::Rows;
  KeyTiles tiles, next_tiles;
  BlockRows rows;
  block_rows(*h.view, blk, nb, rows, tiled ? &tiles : nullptr);
  BlockRows next;
  const int64_t n_next = std::min<int64_t>(kAttentionBlock, h.end - (blk + nb));
  // Small rows: the next block is a few cache lines per run (16 for head size 8 in F16), issued
  // here at once, run by run; the per-row prefetches inside the loops would cost more than the
  // dot products.
  const bool small_rows =
      (h.view->k_row_bytes + h.view->v_row_bytes) * kAttentionBlock <= kWholeBlockPrefetchBytes;
  if (n_next > 0 && small_rows) {
    h.view->for_each_run(blk + nb, blk + nb + n_next,
                         [&](int64_t, const uint8_t* k, const uint8_t* v, int64_t count) {
                           prefetch_to_l2(k, static_cast<size_t>(count) * h.view->k_row_bytes);
                           prefetch_to_l2(v, static_cast<size_t>(count) * h.view->v_row_bytes);
                         });
  } else if (n_next > 0) {
    block_rows(*h.view, blk + nb, n_next, next, tiled ? &next_tiles : nullptr);
    for (auto i = static_cast<size_t>(n_next); i < static_cast<size_t>(nb);
         ++i) {  // one per row read
      if (!tiled) next.k[i] = next.k[n_next - 1];
      next.v[i] = next.v[n_next - 1];
    }
  }
  for (int g0 = 0; g0 < h.n_lanes; g0 += kLaneGroup) {
    const int ng = std::min(kLaneGroup, h.n_lanes - g0);
    int visible[kLaneGroup];
    int n_rows = 0;  // entries of the block any lane of the group sees
    for (int ln = 0; ln < ng; ++ln) {
      visible[ln] = static_cast<int>(std::clamp<int64_t>(h.limit[g0 + ln] - blk, 0, nb));
      n_rows = std::max(n_rows, visible[ln]);
    }
    if (n_rows == 0) continue;
    const bool prefetch = g0 == 0 && n_next > 0 && !small_rows;
    const float* qg = h.q + static_cast<size_t>(g0) * static_cast<size_t>(hd);
    float* sg = h.scores + static_cast<size_t>(g0) * kAttentionBlock;
    float* ag = h.acc + static_cast<size_t>(g0) * static_cast<size_t>(hdv);
    if (tiled)
      kern.prepared.tile_scores(ng, prepared + static_cast<size_t>(g0) * query_bytes, hd, tiles, sg,
                                prefetch ? &next_tiles : nullptr);
    else if (prepared)
      kern.prepared.scores(ng, prepared + static_cast<size_t>(g0) * query_bytes, hd, rows.k, n_rows,
                           sg, prefetch ? next.k : nullptr);
    else
      kern.scores(ng, qg, hd, rows.k, n_rows, sg, prefetch ? next.k : nullptr);
    softmax_lanes(sg, visible, ng, (n_rows + 7) / 8 * 8, h.m + g0, h.l + g0, ag, hdv,
                  kern.exp_weights);
    kern.accumulate(ng, sg, hdv, rows.v, n_rows, ag, prefetch ? next.v : nullptr);
  }
}

// Entries every head reads before the next head's turn in attend_heads_with: a page when pages
// hold a multiple of kAttentionBlock tokens, else one block.
int64_t attention_span(std::span<const HeadLanes> heads) {
  if (heads.empty() || heads[0].view->pages == nullptr) return kAttentionBlock;
  const int64_t p = heads[0].view->page_tokens;  // the heads of one call share a pool
  return p > kAttentionBlock && p % kAttentionBlock == 0 ? p : kAttentionBlock;
}

}  // namespace

void attend_heads_with(std::span<const HeadLanes> heads, const BlockKernels& kern, int hd, int hdv,
                       int64_t begin) {
  int64_t end = begin;
  for (const HeadLanes& h : heads) end = std::max(end, h.end);
  // Queries converted once per call, not per block: [heads][lanes][query_bytes].
  thread_local std::vector<uint8_t> prepared;
  thread_local std::vector<size_t> first_lane;  // [heads + 1]: lane offset of each head
  const size_t query_bytes = kern.prepared.scores ? kern.prepared.bytes(hd) : 0;
  if (query_bytes > 0) {
    first_lane.assign(heads.size() + 1, 0);
    for (size_t i = 0; i < heads.size(); ++i)
      first_lane[i + 1] = first_lane[i] + static_cast<size_t>(heads[i].n_lanes);
    prepared.resize(first_lane.back() * query_bytes);
    for (size_t i = 0; i < heads.size(); ++i)
      for (int ln = 0; ln < heads[i].n_lanes; ++ln)
        kern.prepared.prepare(
            heads[i].q + static_cast<size_t>(ln) * static_cast<size_t>(hd), hd,
            prepared.data() + (first_lane[i] + static_cast<size_t>(ln)) * query_bytes);
  }
  // Heads advance together one span at a time, each head reading its blocks of the span in a
  // row: with pages of a multiple of kAttentionBlock tokens the span is a page, so a head's
  // column of it (keys, then values) is read whole before the next head's, and the page is
  // swept in address order instead of as 2·P/kAttentionBlock interleaved streams. Every head
  // still sees its blocks in the same order, so the result does not depend on the span.
  const int64_t span = attention_span(heads);
  for (int64_t span0 = begin; span0 < end; span0 += span)
    for (size_t i = 0; i < heads.size(); ++i) {
      const int64_t span_end = std::min(span0 + span, heads[i].end);
      for (int64_t blk = span0; blk < span_end; blk += kAttentionBlock)
        head_block(heads[i], hd, hdv, blk,
                   static_cast<int>(std::min<int64_t>(kAttentionBlock, span_end - blk)), kern,
                   query_bytes > 0 ? prepared.data() + first_lane[i] * query_bytes : nullptr,
                   query_bytes);
    }
}

void attend_heads(std::span<const HeadLanes> heads, KvType type, int head_dim, int head_dim_v,
                  int64_t begin, cpu::KernelLevel level) {
  const BlockKernels kernels = type == KvType::Q8_0 ? kv_q8::block_kernels(level)
                               : type == KvType::F16
                                   ? block_kernels<uint16_t>(head_dim, head_dim_v, level)
                                   : block_kernels<float>(head_dim, head_dim_v, level);
  attend_heads_with(heads, kernels, head_dim, head_dim_v, begin);
}

void attend_heads(std::span<const HeadLanes> heads, KvType type, int head_dim, int head_dim_v,
                  int64_t begin) {
  attend_heads(heads, type, head_dim, head_dim_v, begin, cpu::active_level());
}

}  // namespace tangram
