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

// Everything below is AVX-512 code, after every header (avx512_target_begin.h says why) but
// the loops shared with the other row type's file, which must be compiled inside the region.
#include "kernels/avx512_target_begin.h"

#include "kv/attention_kernel_avx512_shared.h"

namespace tangram::vec::avx512 {
namespace {

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
inline void score_chunk(const uint8_t* q, int hd, const uint8_t* const* k, int c,
                        __m512 (&acc)[kv_loops::kAccumulators]) {
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

// Q8_0 rows for the shared loops (attention_kernel_avx512_shared.h).
struct Q8Rows {
  static size_t bytes(int dim) { return static_cast<size_t>(dim / kKvQ8Block) * kKvQ8BlockBytes; }

  // Each row in flight holds its keys and scales in two more registers.
  template <int NL>
  static constexpr int rows_at_once() {
    return NL == 1 ? 8 : kv_loops::kAccumulators / NL < 4 ? kv_loops::kAccumulators / NL : 4;
  }

  // acc[ln * JB + r] += q[ln] . k[r], two Q8_0 blocks at a time, then a lone last block.
  template <int NL, int JB>
  static void dot_rows(const uint8_t* q, int hd, const uint8_t* const* k, __m512 (&acc)[kv_loops::kAccumulators]) {
    int c = 0;
    for (; c + 2 * kKvQ8Block <= hd; c += 2 * kKvQ8Block) score_chunk<NL, JB, true>(q, hd, k, c, acc);
    if (c < hd) score_chunk<NL, JB, false>(q, hd, k, c, acc);
  }

  // Each 16-column chunk widened and scaled by its block's scale (read again where a chunk
  // starts a block).
  template <int CW>
  static void widen(const uint8_t* row, int c, __m512 (&vc)[CW]) {
    __m512 d = _mm512_setzero_ps();
    for (int w = 0; w < CW; ++w) {
      const int col = c + 16 * w;
      const uint8_t* block = row + static_cast<size_t>(col / kKvQ8Block) * kKvQ8BlockBytes;
      if (w == 0 || col % kKvQ8Block == 0) d = _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(block_scale_bits(block))));
      const __m128i q8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2 + col % kKvQ8Block));
      vc[w] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q8)), d);
    }
  }
};

}  // namespace

void attention_scores_q8(int n_lanes, const uint8_t* q, int hd, const uint8_t* const* k, int n,
                         float* scores, const uint8_t* const* next_k) {
  kv_loops::scores<Q8Rows>(n_lanes, q, hd, k, n, scores, next_k);
}

void attention_accumulate_q8(int n_lanes, const float* p, int hdv, const uint8_t* const* v, int n,
                             float* acc, const uint8_t* const* next_v) {
  kv_loops::accumulate<Q8Rows>(n_lanes, p, hdv, v, n, acc, next_v);
}

}  // namespace tangram::vec::avx512

#include "kernels/avx512_target_end.h"
