// Vectorised conversions (block layouts in quant_blocks.h): dequantisers feeding the prefill
// path, which dequantises tiles of weight rows for sgemm, and the quantisers of activations
// (Q8_0, Q8_K), which run once per token before the dot products. Each produces exactly what
// its portable counterpart does; without AVX2 they forward to those.

#include "kernels/half.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"
#include "kernels/simd.h"

namespace tangram::quant {

using blocks::BlockQ4_0;
using blocks::BlockQ4_K;
using blocks::BlockQ6_K;
using blocks::BlockQ8_0;
using blocks::BlockQ8_K;
using blocks::kQK0;
using blocks::kQKK;

#if TANGRAM_AVX2
namespace {

// 8 int8 (low 64 bits of v) -> 8 floats.
inline __m256 i8x8_to_ps(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }

// y[32] = q[32] * scale (q: 32 int8).
inline void store_scaled(__m256i q, __m256 scale, float* y) {
  const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
  _mm256_storeu_ps(y + 0, _mm256_mul_ps(i8x8_to_ps(lo), scale));
  _mm256_storeu_ps(y + 8, _mm256_mul_ps(i8x8_to_ps(_mm_srli_si128(lo, 8)), scale));
  _mm256_storeu_ps(y + 16, _mm256_mul_ps(i8x8_to_ps(hi), scale));
  _mm256_storeu_ps(y + 24, _mm256_mul_ps(i8x8_to_ps(_mm_srli_si128(hi, 8)), scale));
}

// 32 floats * scale, rounded to nearest-even (as nearbyint does) and saturated to int8, in
// element order.
inline __m256i round_to_i8(const float* x, __m256 scale) {
  const __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 0), scale));
  const __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), scale));
  const __m256i c = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), scale));
  const __m256i d = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), scale));
  // Packing works per 128-bit lane; the permute restores element order.
  const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
  const __m256i q = _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  // Saturation gives -128 for values rounding below -127; the format keeps codes symmetric.
  return _mm256_max_epi8(q, _mm256_set1_epi8(-127));
}

inline float abs_max(const float* x, int n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8)
    m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace

void quantize_row_q8_0(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<BlockQ8_0*>(dst);
  for (int64_t b = 0; b < n / kQK0; ++b) {
    const float* x = src + b * kQK0;  // [32]
    const float d = abs_max(x, kQK0) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = half::fp32_to_fp16(d);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].qs), round_to_i8(x, _mm256_set1_ps(id)));
  }
}

void quantize_row_q8_k(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<BlockQ8_K*>(dst);
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const float* x = src + b * kQKK;  // [256]
    BlockQ8_K& blk = out[b];
    const float amax = abs_max(x, kQKK);
    blk.d = amax / 127.0f;
    const __m256 inv = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    for (int g = 0; g < kQKK / 32; ++g) {
      const __m256i q = round_to_i8(x + 32 * g, inv);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(blk.qs + 32 * g), q);
      // Sums of each 16 codes: widen pairs to int16, then to int32 quads, then fold.
      const __m256i pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q);
      const __m256i quads = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));  // 8 x int32
      const __m256i h = _mm256_hadd_epi32(quads, quads);  // per lane: [q0+q1, q2+q3, ...]
      const __m256i s = _mm256_hadd_epi32(h, h);          // per lane: the 16-element sum
      blk.bsums[2 * g] = static_cast<int16_t>(_mm256_extract_epi32(s, 0));
      blk.bsums[2 * g + 1] = static_cast<int16_t>(_mm256_extract_epi32(s, 4));
    }
  }
}

void dequantize_row_q8_0(const void* src, float* dst, int64_t n) {
  const auto* in = static_cast<const BlockQ8_0*>(src);
  for (int64_t b = 0; b < n / kQK0; ++b) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in[b].qs));
    store_scaled(q, _mm256_set1_ps(half::fp16_to_fp32(in[b].d)), dst + b * kQK0);
  }
}

void dequantize_row_q4_0(const void* src, float* dst, int64_t n) {
  const auto* in = static_cast<const BlockQ4_0*>(src);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < n / kQK0; ++b) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in[b].qs));
    // Low 128 bits: elements 0..15 (low nibbles); high 128 bits: 16..31 (high nibbles).
    __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), low4);
    q = _mm256_sub_epi8(q, _mm256_set1_epi8(8));
    store_scaled(q, _mm256_set1_ps(half::fp16_to_fp32(in[b].d)), dst + b * kQK0);
  }
}

void dequantize_row_q4_k(const void* src, float* dst, int64_t n) {
  const auto* in = static_cast<const BlockQ4_K*>(src);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const BlockQ4_K& x = in[b];
    const float d = half::fp16_to_fp32(x.d), dmin = half::fp16_to_fp32(x.dmin);
    float* y = dst + b * kQKK;  // [256]
    for (int g = 0; g < 4; ++g) {
      uint8_t sc0, m0, sc1, m1;
      blocks::q4k_scale_min(x.scales, 2 * g, &sc0, &m0);
      blocks::q4k_scale_min(x.scales, 2 * g + 1, &sc1, &m1);
      const __m256i q4 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + 32 * g));
      const __m256i lo = _mm256_and_si256(q4, low4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), low4);
      const __m256 s0 = _mm256_set1_ps(d * sc0), mm0 = _mm256_set1_ps(dmin * m0);
      const __m256 s1 = _mm256_set1_ps(d * sc1), mm1 = _mm256_set1_ps(dmin * m1);
      for (int k = 0; k < 4; ++k) {
        // Codes are 0..15, so the int8 widening is exact.
        const __m128i lo8 = k < 2 ? _mm256_castsi256_si128(lo) : _mm256_extracti128_si256(lo, 1);
        const __m128i hi8 = k < 2 ? _mm256_castsi256_si128(hi) : _mm256_extracti128_si256(hi, 1);
        const int shift = (k % 2) * 8;
        const __m128i lo_part = shift ? _mm_srli_si128(lo8, 8) : lo8;
        const __m128i hi_part = shift ? _mm_srli_si128(hi8, 8) : hi8;
        _mm256_storeu_ps(y + 64 * g + 8 * k, _mm256_fmsub_ps(i8x8_to_ps(lo_part), s0, mm0));
        _mm256_storeu_ps(y + 64 * g + 32 + 8 * k, _mm256_fmsub_ps(i8x8_to_ps(hi_part), s1, mm1));
      }
    }
  }
}

void dequantize_row_q6_k(const void* src, float* dst, int64_t n) {
  const auto* in = static_cast<const BlockQ6_K*>(src);
  const __m256i off = _mm256_set1_epi8(32);
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const BlockQ6_K& x = in[b];
    const float d = half::fp16_to_fp32(x.d);
    float* y = dst + b * kQKK;  // [256]
    for (int h = 0; h < 2; ++h) {
      __m256i q[4];
      simd::unpack_q6_k_half(x.ql, x.qh, h, q);
      for (int c = 0; c < 4; ++c) {
        const int k = 8 * h + 2 * c;  // scale of elements 0..15 of this group; k+1 for 16..31
        const __m256i qs = _mm256_sub_epi8(q[c], off);
        const __m128i lo = _mm256_castsi256_si128(qs), hi = _mm256_extracti128_si256(qs, 1);
        const __m256 s0 = _mm256_set1_ps(d * static_cast<float>(x.scales[k]));
        const __m256 s1 = _mm256_set1_ps(d * static_cast<float>(x.scales[k + 1]));
        float* yy = y + 128 * h + 32 * c;
        _mm256_storeu_ps(yy + 0, _mm256_mul_ps(i8x8_to_ps(lo), s0));
        _mm256_storeu_ps(yy + 8, _mm256_mul_ps(i8x8_to_ps(_mm_srli_si128(lo, 8)), s0));
        _mm256_storeu_ps(yy + 16, _mm256_mul_ps(i8x8_to_ps(hi), s1));
        _mm256_storeu_ps(yy + 24, _mm256_mul_ps(i8x8_to_ps(_mm_srli_si128(hi, 8)), s1));
      }
    }
  }
}

void dequantize_row_bf16(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i h =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
  }
  for (; i < n; ++i) dst[i] = half::bf16_to_fp32(src[i]);
}

#else  // portable build

void quantize_row_q8_0(const float* src, void* dst, int64_t n) {
  quantize_row_q8_0_portable(src, dst, n);
}
void quantize_row_q8_k(const float* src, void* dst, int64_t n) {
  quantize_row_q8_k_portable(src, dst, n);
}

void dequantize_row_q8_0(const void* src, float* dst, int64_t n) {
  dequantize_row_q8_0_portable(src, dst, n);
}
void dequantize_row_q4_0(const void* src, float* dst, int64_t n) {
  dequantize_row_q4_0_portable(src, dst, n);
}
void dequantize_row_q4_k(const void* src, float* dst, int64_t n) {
  dequantize_row_q4_k_portable(src, dst, n);
}
void dequantize_row_q6_k(const void* src, float* dst, int64_t n) {
  dequantize_row_q6_k_portable(src, dst, n);
}
void dequantize_row_bf16(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = half::bf16_to_fp32(src[i]);
}

#endif

}  // namespace tangram::quant
