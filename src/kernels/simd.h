// Internal: small AVX2 helpers shared by the kernels (horizontal sums, a vector exp).
#pragma once

#if defined(__AVX2__) && defined(__FMA__)
#define TANGRAM_AVX2 1
#include <immintrin.h>

#include <cstdint>

namespace tangram::simd {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// The constants of the vector exps (this 8-float one and the attention walk's 16-float one,
// attention_kernel_avx512.cpp): inputs are clamped to [kExpMin, kExpMax], x = k ln2 + r with
// ln2 split in a high part exact in float and a low part, and e^r by its Taylor polynomial of
// degree 7 (truncation error < 1e-8 relative for |r| <= ln2/2), highest coefficient first.
inline constexpr float kExpMin = -87.3f, kExpMax = 88.7f;
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2High = 0.693145751953125f, kLn2Low = 1.42860682e-06f;
inline constexpr float kExpTaylor[] = {1.0f / 5040.0f, 1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f,
                                       1.0f / 6.0f,    0.5f,          1.0f,          1.0f};

// e^x for 8 floats, within ~2 ulp for x in [-87.3, 88.7]; below that 0, above that clamps to
// e^88.7 (about 3.3e38). 2^k is built in the exponent bits.
inline __m256 exp(__m256 x) {
  const __m256 too_small = _mm256_cmp_ps(x, _mm256_set1_ps(kExpMin), _CMP_LT_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kExpMin)), _mm256_set1_ps(kExpMax));
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(kLn2High), x);
  r = _mm256_fnmadd_ps(k, _mm256_set1_ps(kLn2Low), r);
  __m256 p = _mm256_set1_ps(kExpTaylor[0]);
  for (int i = 1; i < 8; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpTaylor[i]));
  // k is in [-126, 128]; split 2^k into two factors so k = 128 does not overflow the exponent.
  const __m256i ki = _mm256_cvtps_epi32(k);
  const __m256i k1 = _mm256_srai_epi32(ki, 1);
  const __m256i k2 = _mm256_sub_epi32(ki, k1);
  const __m256 s1 =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, _mm256_set1_epi32(127)), 23));
  const __m256 s2 =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, _mm256_set1_epi32(127)), 23));
  const __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  return _mm256_andnot_ps(too_small, y);
}

// Unpacks half h (0 or 1: elements 128h .. 128h+127) of a Q6_K block into four vectors of 32
// unsigned 6-bit codes (q + 32): q[c] holds elements 128h + 32c .. +31. ql: [128], qh: [64].
inline void unpack_q6_k_half(const uint8_t* ql, const uint8_t* qh, int h, __m256i q[4]) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i bits45 = _mm256_set1_epi8(0x30);
  const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 64 * h));
  const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 64 * h + 32));
  const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh + 32 * h));
  q[0] = _mm256_or_si256(_mm256_and_si256(l0, low4),
                         _mm256_and_si256(_mm256_slli_epi16(hi, 4), bits45));
  q[1] = _mm256_or_si256(_mm256_and_si256(l1, low4),
                         _mm256_and_si256(_mm256_slli_epi16(hi, 2), bits45));
  q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4),
                         _mm256_and_si256(hi, bits45));
  q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                         _mm256_and_si256(_mm256_srli_epi16(hi, 2), bits45));
}

}  // namespace tangram::simd
#endif
