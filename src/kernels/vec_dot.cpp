// Row dot products on the stored blocks. The quantised kernels multiply integer codes with
// AVX2 (maddubs: u8 x s8 -> s16 pairs, madd: s16 -> s32) and apply the block scales in float.
#include "kernels/vec_dot.h"

#include "kernels/half.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "kernels/simd.h"

namespace tangram::vec {

using blocks::BlockQ4_0;
using blocks::BlockQ4_K;
using blocks::BlockQ6_K;
using blocks::BlockQ8_0;
using blocks::BlockQ8_K;
using blocks::kQK0;
using blocks::kQKK;

// ---------------------------------------------------------------------------------------------
// Portable versions: integer sums per (sub-)block, scales applied in float.

float dot_f16_f32_portable(const void* w, const void* a, int64_t n) {
  const auto* wh = static_cast<const uint16_t*>(w);
  const auto* x = static_cast<const float*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += half::fp16_to_fp32_portable(wh[i]) * x[i];
  return sum;
}

float dot_bf16_f32_portable(const void* w, const void* a, int64_t n) {
  const auto* wh = static_cast<const uint16_t*>(w);
  const auto* x = static_cast<const float*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += half::bf16_to_fp32(wh[i]) * x[i];
  return sum;
}

float dot_q4_0_q8_0_portable(const void* w, const void* a, int64_t n) {
  const auto* wb = static_cast<const BlockQ4_0*>(w);
  const auto* ab = static_cast<const BlockQ8_0*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK0; ++b) {
    int isum = 0;
    for (int j = 0; j < kQK0 / 2; ++j) {
      isum += ((wb[b].qs[j] & 0x0F) - 8) * ab[b].qs[j];
      isum += ((wb[b].qs[j] >> 4) - 8) * ab[b].qs[j + 16];
    }
    sum += static_cast<float>(isum) * half::fp16_to_fp32(wb[b].d) * half::fp16_to_fp32(ab[b].d);
  }
  return sum;
}

float dot_q8_0_q8_0_portable(const void* w, const void* a, int64_t n) {
  const auto* wb = static_cast<const BlockQ8_0*>(w);
  const auto* ab = static_cast<const BlockQ8_0*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK0; ++b) {
    int isum = 0;
    for (int j = 0; j < kQK0; ++j) isum += wb[b].qs[j] * ab[b].qs[j];
    sum += static_cast<float>(isum) * half::fp16_to_fp32(wb[b].d) * half::fp16_to_fp32(ab[b].d);
  }
  return sum;
}

float dot_q4_k_q8_k_portable(const void* w, const void* a, int64_t n) {
  const auto* wb = static_cast<const BlockQ4_K*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const BlockQ4_K& x = wb[b];
    const BlockQ8_K& y = ab[b];
    int scaled = 0;  // sum_j sc_j * sum_{i in j} q_i * y_i
    int mins = 0;    // sum_j m_j * sum_{i in j} y_i
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      blocks::q4k_scale_min(x.scales, j, &sc, &m);
      const uint8_t* qs = x.qs + 32 * (j / 2);
      const int shift = (j % 2) * 4;
      int isum = 0;
      for (int l = 0; l < 32; ++l) isum += ((qs[l] >> shift) & 0x0F) * y.qs[32 * j + l];
      scaled += sc * isum;
      mins += m * (y.bsums[2 * j] + y.bsums[2 * j + 1]);
    }
    sum += y.d * (half::fp16_to_fp32(x.d) * static_cast<float>(scaled) -
                  half::fp16_to_fp32(x.dmin) * static_cast<float>(mins));
  }
  return sum;
}

float dot_q6_k_q8_k_portable(const void* w, const void* a, int64_t n) {
  const auto* wb = static_cast<const BlockQ6_K*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const BlockQ6_K& x = wb[b];
    const BlockQ8_K& y = ab[b];
    int q[kQKK];
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = x.ql + 64 * h;
      const uint8_t* qh = x.qh + 32 * h;
      for (int l = 0; l < 32; ++l) {
        q[128 * h + l] = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
        q[128 * h + l + 32] = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
        q[128 * h + l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        q[128 * h + l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      }
    }
    int scaled = 0;
    for (int k = 0; k < 16; ++k) {
      int isum = 0;
      for (int i = 0; i < 16; ++i) isum += q[16 * k + i] * y.qs[16 * k + i];
      scaled += x.scales[k] * isum;
    }
    sum += half::fp16_to_fp32(x.d) * y.d * static_cast<float>(scaled);
  }
  return sum;
}

// ---------------------------------------------------------------------------------------------
// SIMD versions.

#if TANGRAM_AVX2
namespace {

// Signed x signed int8 products of 32 lanes summed in adjacent pairs... then in fours: the
// maddubs instruction wants an unsigned left operand, so move w's sign onto a.
inline __m256i dot_s8_pairs(__m256i w, __m256i a) {
  const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
  return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

}  // namespace
#endif

float dot_f32_f32(const void* w, const void* a, int64_t n) {
  return dot_f32(static_cast<const float*>(w), static_cast<const float*>(a), n);
}

float dot_f16_f32(const void* w, const void* a, int64_t n) {
#if TANGRAM_AVX2 && defined(__F16C__)
  const auto* wh = static_cast<const uint16_t*>(w);
  const auto* x = static_cast<const float*>(a);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 w0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wh + i)));
    const __m256 w1 =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wh + i + 8)));
    acc0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i), acc0);
    acc1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + i + 8), acc1);
  }
  float sum = simd::hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) sum += half::fp16_to_fp32(wh[i]) * x[i];
  return sum;
#else
  return dot_f16_f32_portable(w, a, n);
#endif
}

float dot_bf16_f32(const void* w, const void* a, int64_t n) {
#if TANGRAM_AVX2
  const auto* wh = static_cast<const uint16_t*>(w);
  const auto* x = static_cast<const float*>(a);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h0 =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wh + i)));
    const __m256i h1 =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wh + i + 8)));
    acc0 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(h0, 16)), _mm256_loadu_ps(x + i),
                           acc0);
    acc1 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(h1, 16)),
                           _mm256_loadu_ps(x + i + 8), acc1);
  }
  float sum = simd::hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) sum += half::bf16_to_fp32(wh[i]) * x[i];
  return sum;
#else
  return dot_bf16_f32_portable(w, a, n);
#endif
}

float dot_q8_k_f32(const void* w, const void* a, int64_t n) {
  const auto* wb = static_cast<const BlockQ8_K*>(w);
  const auto* x = static_cast<const float*>(a);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQKK; ++b) {
    float s = 0.0f;
    for (int i = 0; i < kQKK; ++i) s += static_cast<float>(wb[b].qs[i]) * x[b * kQKK + i];
    sum += s * wb[b].d;
  }
  return sum;
}

#if TANGRAM_AVX2
// Sums block(i, acc) over blocks 0..nb-1 with two independent accumulators, so consecutive
// blocks' FMAs do not wait on each other.
template <typename BlockFn>
float sum_blocks_2way(int64_t nb, BlockFn block) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    acc0 = block(b, acc0);
    acc1 = block(b + 1, acc1);
  }
  for (; b < nb; ++b) acc0 = block(b, acc0);
  return simd::hsum(_mm256_add_ps(acc0, acc1));
}
#endif

float dot_q4_0_q8_0(const void* w, const void* a, int64_t n) {
#if TANGRAM_AVX2
  const auto* wb = static_cast<const BlockQ4_0*>(w);
  const auto* ab = static_cast<const BlockQ8_0*>(a);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i eight = _mm256_set1_epi8(8);
  const int64_t nb = n / kQK0;
  auto block = [&](int64_t i, __m256 acc) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb[i].qs));
    // Low 128 bits: elements 0..15 (low nibbles); high 128 bits: 16..31 (high nibbles).
    __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), low4);
    q = _mm256_sub_epi8(q, eight);
    const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab[i].qs));
    const float d = half::fp16_to_fp32(wb[i].d) * half::fp16_to_fp32(ab[i].d);
    return _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(dot_s8_pairs(q, y)), acc);
  };
  return sum_blocks_2way(nb, block);
#else
  return dot_q4_0_q8_0_portable(w, a, n);
#endif
}

float dot_q8_0_q8_0(const void* w, const void* a, int64_t n) {
#if TANGRAM_AVX2
  const auto* wb = static_cast<const BlockQ8_0*>(w);
  const auto* ab = static_cast<const BlockQ8_0*>(a);
  const int64_t nb = n / kQK0;
  auto block = [&](int64_t i, __m256 acc) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[i].qs));
    const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab[i].qs));
    const float d = half::fp16_to_fp32(wb[i].d) * half::fp16_to_fp32(ab[i].d);
    return _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(dot_s8_pairs(q, y)), acc);
  };
  return sum_blocks_2way(nb, block);
#else
  return dot_q8_0_q8_0_portable(w, a, n);
#endif
}

float dot_q4_k_q8_k(const void* w, const void* a, int64_t n) {
#if TANGRAM_AVX2
  const auto* wb = static_cast<const BlockQ4_K*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(a);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m256 acc = _mm256_setzero_ps();
  __m256 acc_min = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const BlockQ4_K& x = wb[b];
    const BlockQ8_K& y = ab[b];
    const __m128i sm = blocks::q4k_scales_mins(x.scales);  // [8 scales][8 mins]
    // Scales as int16 in both 128-bit lanes; shuffles broadcast one per sub-block below.
    const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
    // Mins: m_j * (bsums[2j] + bsums[2j+1]) for the 8 sub-blocks via one madd.
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));  // m0 m0 m1 m1 ...
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums));
    const __m256i min_prod = _mm256_madd_epi16(bsums, mins16);

    __m256i isum = _mm256_setzero_si256();
    for (int g = 0; g < 4; ++g) {
      const __m256i q4 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + 32 * g));
      const __m256i lo = _mm256_and_si256(q4, low4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), low4);
      const __m256i y0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs + 64 * g));
      const __m256i y1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs + 64 * g + 32));
      const __m256i s0 = _mm256_shuffle_epi8(
          sc16, _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * (2 * g))));
      const __m256i s1 = _mm256_shuffle_epi8(
          sc16, _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * (2 * g + 1))));
      const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y0), s0);
      const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y1), s1);
      isum = _mm256_add_epi32(isum, _mm256_add_epi32(p0, p1));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(half::fp16_to_fp32(x.d) * y.d), _mm256_cvtepi32_ps(isum),
                          acc);
    acc_min = _mm256_fmadd_ps(_mm256_set1_ps(half::fp16_to_fp32(x.dmin) * y.d),
                              _mm256_cvtepi32_ps(min_prod), acc_min);
  }
  return simd::hsum(_mm256_sub_ps(acc, acc_min));
#else
  return dot_q4_k_q8_k_portable(w, a, n);
#endif
}

float dot_q6_k_q8_k(const void* w, const void* a, int64_t n) {
#if TANGRAM_AVX2
  const auto* wb = static_cast<const BlockQ6_K*>(w);
  const auto* ab = static_cast<const BlockQ8_K*>(a);
  // Byte shuffles picking, for the 32 elements of group c of a half, scale 2c (low 128 bits,
  // elements 0..15) and scale 2c+1 (high 128 bits) out of 8 int16 scales in each lane.
  const __m256i pick[4] = {
      _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3,
                       2, 3, 2, 3, 2, 3),
      _mm256_setr_epi8(4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7,
                       6, 7, 6, 7, 6, 7),
      _mm256_setr_epi8(8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 10, 11, 10, 11, 10, 11, 10,
                       11, 10, 11, 10, 11, 10, 11, 10, 11),
      _mm256_setr_epi8(12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 14, 15, 14,
                       15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15),
  };
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const BlockQ6_K& x = wb[b];
    const BlockQ8_K& y = ab[b];
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.scales));
    // Codes are stored as q + 32 (0..63, fine for maddubs' unsigned operand); subtract
    // 32 * sum_k sc_k * bsums_k afterwards.
    const __m256i offset = _mm256_slli_epi32(
        _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc8),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums))),
        5);
    __m256i isum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i sc16 =
          _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(h == 0 ? sc8 : _mm_srli_si128(sc8, 8)));
      __m256i q[4];
      simd::unpack_q6_k_half(x.ql, x.qh, h, q);
      for (int c = 0; c < 4; ++c) {
        const __m256i y8 =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs + 128 * h + 32 * c));
        const __m256i scales = _mm256_shuffle_epi8(sc16, pick[c]);
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(q[c], y8), scales));
      }
    }
    const float d = half::fp16_to_fp32(x.d) * y.d;
    acc =
        _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_sub_epi32(isum, offset)), acc);
  }
  return simd::hsum(acc);
#else
  return dot_q6_k_q8_k_portable(w, a, n);
#endif
}

// ---------------------------------------------------------------------------------------------

GgmlType activation_type(GgmlType weight) {
  switch (weight) {
    case GgmlType::Q4_0:
    case GgmlType::Q8_0:
      return GgmlType::Q8_0;
    case GgmlType::Q4_K:
    case GgmlType::Q6_K:
      return GgmlType::Q8_K;
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_K:
      break;
  }
  return GgmlType::F32;
}

RowDotFn row_dot_fn(GgmlType weight, cpu::KernelLevel /*level*/) {
  // The single-token kernels are AVX2 at every level (vec_dot_avx512.h says why).
  switch (weight) {
    case GgmlType::F32:
      return dot_f32_f32;
    case GgmlType::F16:
      return dot_f16_f32;
    case GgmlType::BF16:
      return dot_bf16_f32;
    case GgmlType::Q4_0:
      return dot_q4_0_q8_0;
    case GgmlType::Q8_0:
      return dot_q8_0_q8_0;
    case GgmlType::Q4_K:
      return dot_q4_k_q8_k;
    case GgmlType::Q6_K:
      return dot_q6_k_q8_k;
    case GgmlType::Q8_K:
      return dot_q8_k_f32;
  }
  return dot_f32_f32;
}

void quantize_activation(GgmlType weight, const float* x, void* dst, int64_t n) {
  quantize_row(activation_type(weight), x, dst, n);
}

}  // namespace tangram::vec
