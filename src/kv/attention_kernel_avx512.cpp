// AVX-512 versions of the two F16 inner loops of KV attention (attention_kernel.cpp has the
// AVX2 ones and the walk around them): q . k for the lanes sharing a KV head, and p . v into
// their accumulators. A 512-bit vector widens 16 halves at once and holds 16 accumulators'
// worth of columns, so each key or value row is converted with half the instructions and up to
// 16 (lane, row) dot products or (lane, column chunk) sums stay in the 32 registers.
#include "kv/attention_kernel_avx512.h"

#include <immintrin.h>

// Everything below is AVX-512 code, after every header (avx512_target_begin.h says why).
#include "kernels/avx512_target_begin.h"

namespace tangram::vec::avx512 {
namespace {

constexpr int kAccumulators = 16;  // of the 32 registers: the rest hold rows, q and temporaries

inline __m512 load16_f16(const uint8_t* row, int i) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row) + i / 16));
}

// The 16 horizontal sums of a[0..15], in order, in one vector: pairs of vectors are folded
// with unpacks, then 128-bit lanes with shuffles (4 levels, 45 instructions for 16 sums).
inline __m512 reduce16(const __m512 (&a)[kAccumulators]) {
  __m512 x[8], y[4], z[2];
  for (int i = 0; i < 8; ++i)  // per 128-bit lane: [a2i 0+2, a2i+1 0+2, a2i 1+3, a2i+1 1+3]
    x[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
  for (int i = 0; i < 4; ++i) {  // per 128-bit lane: that lane's sums of a4i .. a4i+3
    const __m512d lo = _mm512_unpacklo_pd(_mm512_castps_pd(x[2 * i]), _mm512_castps_pd(x[2 * i + 1]));
    const __m512d hi = _mm512_unpackhi_pd(_mm512_castps_pd(x[2 * i]), _mm512_castps_pd(x[2 * i + 1]));
    y[i] = _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi));
  }
  for (int i = 0; i < 2; ++i)  // lanes [y2i 0+1, y2i 2+3, y2i+1 0+1, y2i+1 2+3]
    z[i] = _mm512_add_ps(_mm512_shuffle_f32x4(y[2 * i], y[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(y[2 * i], y[2 * i + 1], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_f32x4(z[0], z[1], 0x88), _mm512_shuffle_f32x4(z[0], z[1], 0xDD));
}

// JB rows at a time for NL lanes: NL * JB <= 16 dot products in registers, reduced together.
// Each group of rows first prefetches the same rows of the next block (next_k may be null).
template <int NL, int JB>
int scores_rows(const float* q, int hd, const uint8_t* const* k, int j, int n, float* scores,
                const uint8_t* const* next_k) {
  static_assert(NL * JB <= kAccumulators);
  const auto row_bytes = static_cast<size_t>(hd) * 2;
  for (; j + JB <= n; j += JB) {
    if (next_k)
      for (int r = 0; r < JB; ++r) prefetch_to_l2(next_k[j + r], row_bytes);
    __m512 acc[kAccumulators];
    for (auto& a : acc) a = _mm512_setzero_ps();
    for (int c = 0; c < hd; c += 16) {
      __m512 kc[JB];
      for (int r = 0; r < JB; ++r) kc[r] = load16_f16(k[j + r], c);
      for (int ln = 0; ln < NL; ++ln) {
        const __m512 qc = _mm512_loadu_ps(q + ln * hd + c);
        for (int r = 0; r < JB; ++r) acc[ln * JB + r] = _mm512_fmadd_ps(qc, kc[r], acc[ln * JB + r]);
      }
    }
    alignas(64) float sums[kAccumulators];
    _mm512_store_ps(sums, reduce16(acc));
    for (int ln = 0; ln < NL; ++ln)
      for (int r = 0; r < JB; ++r) scores[ln * kAttentionBlock + j + r] = sums[ln * JB + r];
  }
  return j;
}

template <int NL>
void scores_lanes(const float* q, int hd, const uint8_t* const* k, int n, float* scores,
                  const uint8_t* const* next_k) {
  // At most 8 rows: with their widened keys the accumulators still fit the registers.
  constexpr int JB = kAccumulators / NL < 8 ? kAccumulators / NL : 8;
  const int j = scores_rows<NL, JB>(q, hd, k, 0, n, scores, next_k);
  if constexpr (JB > 1) scores_rows<NL, 1>(q, hd, k, j, n, scores, next_k);
}

// CW 16-column chunks of NL lanes' accumulators stay in registers for one pass over the rows.
// The first pass (column 0) prefetches each row's successor in the next block (next_v may be null).
template <int NL, int CW>
int accumulate_pass(const float* p, int hdv, int c, const uint8_t* const* v, int n, float* acc,
                    const uint8_t* const* next_v) {
  static_assert(NL * CW <= kAccumulators);
  for (; c + 16 * CW <= hdv; c += 16 * CW) {
    __m512 a[NL][CW];
    for (int ln = 0; ln < NL; ++ln)
      for (int w = 0; w < CW; ++w) a[ln][w] = _mm512_loadu_ps(acc + ln * hdv + c + 16 * w);
    for (int j = 0; j < n; ++j) {
      if (next_v && c == 0) prefetch_to_l2(next_v[j], static_cast<size_t>(hdv) * 2);
      __m512 vc[CW];
      for (int w = 0; w < CW; ++w) vc[w] = load16_f16(v[j], c + 16 * w);
      for (int ln = 0; ln < NL; ++ln) {
        const __m512 pj = _mm512_set1_ps(p[ln * kAttentionBlock + j]);
        for (int w = 0; w < CW; ++w) a[ln][w] = _mm512_fmadd_ps(pj, vc[w], a[ln][w]);
      }
    }
    for (int ln = 0; ln < NL; ++ln)
      for (int w = 0; w < CW; ++w) _mm512_storeu_ps(acc + ln * hdv + c + 16 * w, a[ln][w]);
  }
  return c;
}

// The widest chunk count that fits (a power of two up to 8: 128 columns), then narrower passes
// for what is left.
template <int NL, int CW>
void accumulate_from(const float* p, int hdv, int c, const uint8_t* const* v, int n, float* acc,
                     const uint8_t* const* next_v) {
  c = accumulate_pass<NL, CW>(p, hdv, c, v, n, acc, next_v);
  if constexpr (CW > 1) accumulate_from<NL, CW / 2>(p, hdv, c, v, n, acc, next_v);
}

template <int NL>
void accumulate_lanes(const float* p, int hdv, const uint8_t* const* v, int n, float* acc,
                      const uint8_t* const* next_v) {
  constexpr int fit = kAccumulators / NL;
  constexpr int CW = fit >= 8 ? 8 : fit >= 4 ? 4 : fit >= 2 ? 2 : 1;
  accumulate_from<NL, CW>(p, hdv, 0, v, n, acc, next_v);
}

}  // namespace

void attention_scores_f16(int n_lanes, const float* q, int hd, const uint8_t* const* k, int n,
                          float* scores, const uint8_t* const* next_k) {
  switch (n_lanes) {
    case 1: return scores_lanes<1>(q, hd, k, n, scores, next_k);
    case 2: return scores_lanes<2>(q, hd, k, n, scores, next_k);
    case 3: return scores_lanes<3>(q, hd, k, n, scores, next_k);
    case 4: return scores_lanes<4>(q, hd, k, n, scores, next_k);
    case 5: return scores_lanes<5>(q, hd, k, n, scores, next_k);
    case 6: return scores_lanes<6>(q, hd, k, n, scores, next_k);
    case 7: return scores_lanes<7>(q, hd, k, n, scores, next_k);
    default: return scores_lanes<8>(q, hd, k, n, scores, next_k);
  }
}

void attention_accumulate_f16(int n_lanes, const float* p, int hdv, const uint8_t* const* v, int n,
                              float* acc, const uint8_t* const* next_v) {
  switch (n_lanes) {
    case 1: return accumulate_lanes<1>(p, hdv, v, n, acc, next_v);
    case 2: return accumulate_lanes<2>(p, hdv, v, n, acc, next_v);
    case 3: return accumulate_lanes<3>(p, hdv, v, n, acc, next_v);
    case 4: return accumulate_lanes<4>(p, hdv, v, n, acc, next_v);
    case 5: return accumulate_lanes<5>(p, hdv, v, n, acc, next_v);
    case 6: return accumulate_lanes<6>(p, hdv, v, n, acc, next_v);
    case 7: return accumulate_lanes<7>(p, hdv, v, n, acc, next_v);
    default: return accumulate_lanes<8>(p, hdv, v, n, acc, next_v);
  }
}

}  // namespace tangram::vec::avx512

#include "kernels/avx512_target_end.h"
