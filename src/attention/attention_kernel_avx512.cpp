// AVX-512 versions of the two F16 inner loops of KV attention (attention_kernel.cpp has the
// AVX2 ones and the walk around them): q . k for the lanes sharing a KV head, and p . v into
// their accumulators. A 512-bit vector widens 16 halves at once and holds 16 accumulators'
// worth of columns, so each key or value row is converted with half the instructions and up to
// 16 (lane, row) dot products or (lane, column chunk) sums stay in the 32 registers. The loops
// themselves are shared with the Q8_0 ones (attention_kernel_avx512_shared.h); this file says
// how F16 rows are widened and dotted.
#include "attention/attention_kernel_avx512.h"

#include <immintrin.h>

#include "kernels/simd.h"

// Everything below is AVX-512 code, after every header (avx512_target_begin.h says why) but
// the loops shared with the other row type's file, which must be compiled inside the region.
#include "kernels/avx512_target_begin.h"

#include "attention/attention_kernel_avx512_shared.h"

namespace tangram::vec::avx512 {
namespace {

inline __m512 load16_f16(const uint8_t* row, int i) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row) + i / 16));
}

// F16 rows for the shared loops (attention_kernel_avx512_shared.h).
struct F16Rows {
  static size_t bytes(int dim) { return static_cast<size_t>(dim) * 2; }

  // At most 8 rows: with their widened keys the accumulators still fit the registers.
  template <int NL>
  static constexpr int rows_at_once() {
    return kv_loops::kAccumulators / NL < 8 ? kv_loops::kAccumulators / NL : 8;
  }

  // acc[ln * JB + r] += q[ln] . k[r], 16 columns at a time, each key chunk widened once.
  template <int NL, int JB>
  static void dot_rows(const float* q, int hd, const uint8_t* const* k,
                       __m512 (&acc)[kv_loops::kAccumulators]) {
    for (int c = 0; c < hd; c += 16) {
      __m512 kc[JB];
      for (int r = 0; r < JB; ++r) kc[r] = load16_f16(k[r], c);
      for (int ln = 0; ln < NL; ++ln) {
        const __m512 qc = _mm512_loadu_ps(q + ln * hd + c);
        for (int r = 0; r < JB; ++r)
          acc[ln * JB + r] = _mm512_fmadd_ps(qc, kc[r], acc[ln * JB + r]);
      }
    }
  }

  template <int CW>
  static void widen(const uint8_t* row, int c, __m512 (&vc)[CW]) {
    for (int w = 0; w < CW; ++w) vc[w] = load16_f16(row, c + 16 * w);
  }
};

// e^x for 16 floats: simd.h's exp (its constants and accuracy), with vscalefps building
// p * 2^k in one instruction where the 8-float one splits 2^k into two exponent-bit factors.
// max(x, lo) before min(x, hi), as there, so NaN becomes lo.
inline __m512 exp16(__m512 x) {
  const __mmask16 too_small = _mm512_cmp_ps_mask(x, _mm512_set1_ps(simd::kExpMin), _CMP_LT_OQ);
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(simd::kExpMin)), _mm512_set1_ps(simd::kExpMax));
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(simd::kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(simd::kLn2High), x);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(simd::kLn2Low), r);
  __m512 p = _mm512_set1_ps(simd::kExpTaylor[0]);
  for (int i = 1; i < 8; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(simd::kExpTaylor[i]));
  return _mm512_maskz_scalef_ps(static_cast<__mmask16>(~too_small), p, k);
}

}  // namespace

float attention_exp_weights(float* s, int n_pad, float m_new) {
  const __m512 vmax = _mm512_set1_ps(m_new);
  __m512 sum = _mm512_setzero_ps();
  for (int j = 0; j < n_pad; j += 16) {
    const auto m = static_cast<__mmask16>(n_pad - j >= 16 ? 0xFFFF : (1u << (n_pad - j)) - 1);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + j), vmax));
    _mm512_mask_storeu_ps(s + j, m, e);
    sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(m, e));
  }
  return _mm512_reduce_add_ps(sum);
}

void attention_scores_f16(int n_lanes, const float* q, int hd, const uint8_t* const* k, int n,
                          float* scores, const uint8_t* const* next_k) {
  kv_loops::scores<F16Rows>(n_lanes, q, hd, k, n, scores, next_k);
}

void attention_accumulate_f16(int n_lanes, const float* p, int hdv, const uint8_t* const* v, int n,
                              float* acc, const uint8_t* const* next_v) {
  kv_loops::accumulate<F16Rows>(n_lanes, p, hdv, v, n, acc, next_v);
}

}  // namespace tangram::vec::avx512

#include "kernels/avx512_target_end.h"
