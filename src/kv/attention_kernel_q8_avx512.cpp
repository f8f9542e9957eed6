// AVX-512 versions of the two Q8_0 inner loops of KV attention (attention_kernel_q8.cpp has the
// AVX2 and portable ones). Scores: VNNI's vpdpbusd multiplies unsigned by signed bytes, so the
// keys are read as k + 128 (one xor per row, shared by every lane) and each 4-element sum starts
// from the query's precomputed -128 * sum(q) (kv_q8::quantise_query), which leaves the exact
// signed sum; one instruction does 64 multiply-adds, two Q8_0 blocks, against the AVX2 loop's
// sign, maddubs and madd per 32. Values: 16 int8 widened per instruction.
#include "kv/attention_kernel_q8_avx512.h"

#include <immintrin.h>

#include <cstring>

#include "kv/attention_kernel.h"
#include "kv/attention_kernel_q8.h"
#include "kv/kv_row.h"

// Everything below is AVX-512 code, after every header (avx512_target_begin.h says why).
#include "kernels/avx512_target_begin.h"

namespace tangram::vec::avx512 {
namespace {

constexpr int kAccumulators = 16;  // of the 32 registers: the rest hold rows, scales, temporaries

// The 16 horizontal sums of a[0..15], in order, in one vector (as the F16 loops reduce them):
// pairs folded with unpacks, then 128-bit lanes with shuffles.
inline __m512 reduce16(const __m512 (&a)[kAccumulators]) {
  __m512 x[8], y[4], z[2];
  for (int i = 0; i < 8; ++i)
    x[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
  for (int i = 0; i < 4; ++i) {
    const __m512d lo = _mm512_unpacklo_pd(_mm512_castps_pd(x[2 * i]), _mm512_castps_pd(x[2 * i + 1]));
    const __m512d hi = _mm512_unpackhi_pd(_mm512_castps_pd(x[2 * i]), _mm512_castps_pd(x[2 * i + 1]));
    y[i] = _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi));
  }
  for (int i = 0; i < 2; ++i)
    z[i] = _mm512_add_ps(_mm512_shuffle_f32x4(y[2 * i], y[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(y[2 * i], y[2 * i + 1], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_f32x4(z[0], z[1], 0x88), _mm512_shuffle_f32x4(z[0], z[1], 0xDD));
}

inline uint16_t block_scale_bits(const uint8_t* block) {
  uint16_t h;
  std::memcpy(&h, block, sizeof(h));
  return h;
}

// Elements [c, c + 64) of a key row (Full; two blocks) or [c, c + 32) (the zero-padded last
// block of a head size that is an odd number of blocks) as unsigned bytes k + 128, with each
// element group's block scale in the matching float lanes.
template <bool Full>
inline void load_keys(const uint8_t* row, int c, __m512i& u, __m512& d) {
  const uint8_t* b0 = row + static_cast<size_t>(c / kKvQ8Block) * kKvQ8BlockBytes;
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0 + 2));
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  const auto h0 = static_cast<short>(block_scale_bits(b0));
  if constexpr (Full) {
    const uint8_t* b1 = b0 + kKvQ8BlockBytes;
    const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b1 + 2));
    u = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), bias);
    const auto h1 = static_cast<short>(block_scale_bits(b1));
    d = _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16(h1), _mm_set1_epi16(h0)));
  } else {
    u = _mm512_xor_si512(_mm512_zextsi256_si512(lo), bias);
    d = _mm512_cvtph_ps(_mm256_set1_epi16(h0));
  }
}

// Adds elements [c, c + 64) (or the last 32) of JB rows' dot products with NL lanes to acc.
template <int NL, int JB, bool Full>
inline void score_chunk(const uint8_t* q, int hd, const uint8_t* const* k, int c, __m512 (&acc)[kAccumulators]) {
  __m512i u[JB];
  __m512 dk[JB];
  for (int r = 0; r < JB; ++r) load_keys<Full>(k[r], c, u[r], dk[r]);
  const size_t lane_bytes = kv_q8::query_bytes(hd);
  for (int ln = 0; ln < NL; ++ln) {
    const uint8_t* lane = q + static_cast<size_t>(ln) * lane_bytes;
    const float* dq_at = reinterpret_cast<const float*>(lane) + c / 4;
    const uint8_t* q_at = lane + hd + c;
    const uint8_t* off_at = lane + 2 * static_cast<size_t>(hd) + c;
    __m512i qq, off;
    __m512 dq;
    if constexpr (Full) {
      qq = _mm512_loadu_si512(q_at);
      off = _mm512_loadu_si512(off_at);
      dq = _mm512_loadu_ps(dq_at);
    } else {  // the upper half zero: no products, offset 0, scale 0
      qq = _mm512_maskz_loadu_epi8(0xFFFFFFFFull, q_at);
      off = _mm512_maskz_loadu_epi32(0x00FF, off_at);
      dq = _mm512_maskz_loadu_ps(0x00FF, dq_at);
    }
    for (int r = 0; r < JB; ++r)
      acc[ln * JB + r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(off, u[r], qq)),
                                         _mm512_mul_ps(dk[r], dq), acc[ln * JB + r]);
  }
}

// JB rows at a time for NL lanes: NL * JB <= 16 dot products in registers, reduced together.
// Each group of rows first prefetches the same rows of the next block (next_k may be null).
template <int NL, int JB>
int scores_rows(const uint8_t* q, int hd, const uint8_t* const* k, int j, int n, float* scores,
                const uint8_t* const* next_k) {
  static_assert(NL * JB <= kAccumulators);
  const size_t row_bytes = static_cast<size_t>(hd / kKvQ8Block) * kKvQ8BlockBytes;
  for (; j + JB <= n; j += JB) {
    if (next_k)
      for (int r = 0; r < JB; ++r) prefetch_to_l2(next_k[j + r], row_bytes);
    __m512 acc[kAccumulators];
    for (auto& a : acc) a = _mm512_setzero_ps();
    int c = 0;
    for (; c + 2 * kKvQ8Block <= hd; c += 2 * kKvQ8Block) score_chunk<NL, JB, true>(q, hd, k + j, c, acc);
    if (c < hd) score_chunk<NL, JB, false>(q, hd, k + j, c, acc);
    alignas(64) float sums[kAccumulators];
    _mm512_store_ps(sums, reduce16(acc));
    for (int ln = 0; ln < NL; ++ln)
      for (int r = 0; r < JB; ++r) scores[ln * kAttentionBlock + j + r] = sums[ln * JB + r];
  }
  return j;
}

template <int NL>
void scores_lanes(const uint8_t* q, int hd, const uint8_t* const* k, int n, float* scores,
                  const uint8_t* const* next_k) {
  // Each row in flight holds its keys and scales in two more registers.
  constexpr int JB = NL == 1 ? 8 : kAccumulators / NL < 4 ? kAccumulators / NL : 4;
  const int j = scores_rows<NL, JB>(q, hd, k, 0, n, scores, next_k);
  if constexpr (JB > 1) scores_rows<NL, 1>(q, hd, k, j, n, scores, next_k);
}

// CW 16-column chunks of NL lanes' accumulators stay in registers for one pass over the rows;
// each row's chunk is widened and scaled once for every lane. The first pass (column 0)
// prefetches each row's successor in the next block (next_v may be null).
template <int NL, int CW>
int accumulate_pass(const float* p, int hdv, int c, const uint8_t* const* v, int n, float* acc,
                    const uint8_t* const* next_v) {
  static_assert(NL * CW <= kAccumulators);
  const size_t row_bytes = static_cast<size_t>(hdv / kKvQ8Block) * kKvQ8BlockBytes;
  for (; c + 16 * CW <= hdv; c += 16 * CW) {
    __m512 a[NL][CW];
    for (int ln = 0; ln < NL; ++ln)
      for (int w = 0; w < CW; ++w) a[ln][w] = _mm512_loadu_ps(acc + ln * hdv + c + 16 * w);
    for (int j = 0; j < n; ++j) {
      if (next_v && c == 0) prefetch_to_l2(next_v[j], row_bytes);
      __m512 vc[CW];
      __m512 d = _mm512_setzero_ps();
      for (int w = 0; w < CW; ++w) {
        const int col = c + 16 * w;
        const uint8_t* block = v[j] + static_cast<size_t>(col / kKvQ8Block) * kKvQ8BlockBytes;
        if (w == 0 || col % kKvQ8Block == 0) d = _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(block_scale_bits(block))));
        const __m128i q8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2 + col % kKvQ8Block));
        vc[w] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q8)), d);
      }
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

void attention_scores_q8(int n_lanes, const uint8_t* q, int hd, const uint8_t* const* k, int n,
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

void attention_accumulate_q8(int n_lanes, const float* p, int hdv, const uint8_t* const* v, int n,
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
