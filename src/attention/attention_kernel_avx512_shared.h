// Internal: what the F16 and the Q8_0 AVX-512 attention loops share (attention_kernel_avx512.cpp,
// attention_kernel_q8_avx512.cpp): the reduction of 16 dot products, the shell of the score
// loop (row groups, prefetch, reduction) and the whole value loop around a row type's own
// widening (F16 only: Q8_0 accumulates values in integers, in its own file), with their
// dispatch on the lane count. A row type supplies:
//   static size_t bytes(int dim)                   bytes of a row of dim elements
//   template <int NL> static constexpr int rows_at_once()   rows per score group at NL lanes
//   template <int NL, int JB> static void dot_rows(const Query* q, int hd,
//       const uint8_t* const* k, __m512 (&acc)[kAccumulators])   adds the NL x JB products
//   template <int CW> static void widen(const uint8_t* row, int c, __m512 (&vc)[CW])
//       columns [c, c + 16 * CW) of a value row as floats (for accumulate)
//
// This is AVX-512 code with no include of its own: include it only after <immintrin.h> and
// attention/attention_kernel.h, and after kernels/avx512_target_begin.h, in the
// files above and no other, so that every copy of these functions is compiled for AVX-512 and
// named tangram::vec::avx512 (tests/kernels/avx512_confined.sh checks the binary).
#pragma once

namespace tangram::vec::avx512::kv_loops {

inline constexpr int kAccumulators =
    16;  // of the 32 registers: the rest hold rows, queries, temporaries

// The 16 horizontal sums of a[0..15], in order, in one vector: pairs of vectors are folded
// with unpacks, then 128-bit lanes with shuffles (4 levels, 45 instructions for 16 sums).
inline __m512 reduce16(const __m512 (&a)[kAccumulators]) {
  __m512 x[8], y[4], z[2];
  for (int i = 0; i < 8; ++i)  // per 128-bit lane: [a2i 0+2, a2i+1 0+2, a2i 1+3, a2i+1 1+3]
    x[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]),
                         _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
  for (int i = 0; i < 4; ++i) {  // per 128-bit lane: that lane's sums of a4i .. a4i+3
    const __m512d lo =
        _mm512_unpacklo_pd(_mm512_castps_pd(x[2 * i]), _mm512_castps_pd(x[2 * i + 1]));
    const __m512d hi =
        _mm512_unpackhi_pd(_mm512_castps_pd(x[2 * i]), _mm512_castps_pd(x[2 * i + 1]));
    y[i] = _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi));
  }
  for (int i = 0; i < 2; ++i)  // lanes [y2i 0+1, y2i 2+3, y2i+1 0+1, y2i+1 2+3]
    z[i] = _mm512_add_ps(_mm512_shuffle_f32x4(y[2 * i], y[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(y[2 * i], y[2 * i + 1], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_f32x4(z[0], z[1], 0x88),
                       _mm512_shuffle_f32x4(z[0], z[1], 0xDD));
}

// JB rows at a time for NL lanes: NL * JB <= 16 dot products in registers, reduced together.
// Each group of rows first prefetches the same rows of the next block (next_k may be null).
template <typename Row, int NL, int JB, typename Query>
int scores_rows(const Query* q, int hd, const uint8_t* const* k, int j, int n, float* scores,
                const uint8_t* const* next_k) {
  static_assert(NL * JB <= kAccumulators);
  const size_t row_bytes = Row::bytes(hd);
  for (; j + JB <= n; j += JB) {
    if (next_k)
      for (int r = 0; r < JB; ++r) prefetch_to_l2(next_k[j + r], row_bytes);
    __m512 acc[kAccumulators];
    for (auto& a : acc) a = _mm512_setzero_ps();
    Row::template dot_rows<NL, JB>(q, hd, k + j, acc);
    alignas(64) float sums[kAccumulators];
    _mm512_store_ps(sums, reduce16(acc));
    for (int ln = 0; ln < NL; ++ln)
      for (int r = 0; r < JB; ++r) scores[ln * kAttentionBlock + j + r] = sums[ln * JB + r];
  }
  return j;
}

template <typename Row, int NL, typename Query>
void scores_lanes(const Query* q, int hd, const uint8_t* const* k, int n, float* scores,
                  const uint8_t* const* next_k) {
  constexpr int JB = Row::template rows_at_once<NL>();
  const int j = scores_rows<Row, NL, JB>(q, hd, k, 0, n, scores, next_k);
  if constexpr (JB > 1) scores_rows<Row, NL, 1>(q, hd, k, j, n, scores, next_k);
}

// scores[lane * kAttentionBlock + j] = q[lane] . k[j] for lane < n_lanes <= 8, j < n.
template <typename Row, typename Query>
void scores(int n_lanes, const Query* q, int hd, const uint8_t* const* k, int n, float* scores,
            const uint8_t* const* next_k) {
  switch (n_lanes) {
    case 1:
      return scores_lanes<Row, 1>(q, hd, k, n, scores, next_k);
    case 2:
      return scores_lanes<Row, 2>(q, hd, k, n, scores, next_k);
    case 3:
      return scores_lanes<Row, 3>(q, hd, k, n, scores, next_k);
    case 4:
      return scores_lanes<Row, 4>(q, hd, k, n, scores, next_k);
    case 5:
      return scores_lanes<Row, 5>(q, hd, k, n, scores, next_k);
    case 6:
      return scores_lanes<Row, 6>(q, hd, k, n, scores, next_k);
    case 7:
      return scores_lanes<Row, 7>(q, hd, k, n, scores, next_k);
    default:
      return scores_lanes<Row, 8>(q, hd, k, n, scores, next_k);
  }
}

// CW 16-column chunks of NL lanes' accumulators stay in registers for one pass over the rows;
// each row's chunk is widened once for every lane. The first pass (column 0) prefetches each
// row's successor in the next block (next_v may be null).
template <typename Row, int NL, int CW>
int accumulate_pass(const float* p, int hdv, int c, const uint8_t* const* v, int n, float* acc,
                    const uint8_t* const* next_v) {
  static_assert(NL * CW <= kAccumulators);
  const size_t row_bytes = Row::bytes(hdv);
  for (; c + 16 * CW <= hdv; c += 16 * CW) {
    __m512 a[NL][CW];
    for (int ln = 0; ln < NL; ++ln)
      for (int w = 0; w < CW; ++w) a[ln][w] = _mm512_loadu_ps(acc + ln * hdv + c + 16 * w);
    for (int j = 0; j < n; ++j) {
      if (next_v && c == 0) prefetch_to_l2(next_v[j], row_bytes);
      __m512 vc[CW];
      Row::template widen<CW>(v[j], c, vc);
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
template <typename Row, int NL, int CW>
void accumulate_from(const float* p, int hdv, int c, const uint8_t* const* v, int n, float* acc,
                     const uint8_t* const* next_v) {
  c = accumulate_pass<Row, NL, CW>(p, hdv, c, v, n, acc, next_v);
  if constexpr (CW > 1) accumulate_from<Row, NL, CW / 2>(p, hdv, c, v, n, acc, next_v);
}

template <typename Row, int NL>
void accumulate_lanes(const float* p, int hdv, const uint8_t* const* v, int n, float* acc,
                      const uint8_t* const* next_v) {
  constexpr int fit = kAccumulators / NL;
  constexpr int CW = fit >= 8 ? 8 : fit >= 4 ? 4 : fit >= 2 ? 2 : 1;
  accumulate_from<Row, NL, CW>(p, hdv, 0, v, n, acc, next_v);
}

// acc[lane] += sum_j p[lane * kAttentionBlock + j] * v[j] for lane < n_lanes <= 8, j < n.
template <typename Row>
void accumulate(int n_lanes, const float* p, int hdv, const uint8_t* const* v, int n, float* acc,
                const uint8_t* const* next_v) {
  switch (n_lanes) {
    case 1:
      return accumulate_lanes<Row, 1>(p, hdv, v, n, acc, next_v);
    case 2:
      return accumulate_lanes<Row, 2>(p, hdv, v, n, acc, next_v);
    case 3:
      return accumulate_lanes<Row, 3>(p, hdv, v, n, acc, next_v);
    case 4:
      return accumulate_lanes<Row, 4>(p, hdv, v, n, acc, next_v);
    case 5:
      return accumulate_lanes<Row, 5>(p, hdv, v, n, acc, next_v);
    case 6:
      return accumulate_lanes<Row, 6>(p, hdv, v, n, acc, next_v);
    case 7:
      return accumulate_lanes<Row, 7>(p, hdv, v, n, acc, next_v);
    default:
      return accumulate_lanes<Row, 8>(p, hdv, v, n, acc, next_v);
  }
}

}  // namespace tangram::vec::avx512::kv_loops
