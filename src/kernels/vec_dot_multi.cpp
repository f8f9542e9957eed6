// Row dot products against up to kMultiTokens activations at once (decode with several
// tokens). Each weight block is unpacked into registers once and multiplied with every
// token's block, so the per-token cost is roughly the multiply-add work alone.

#include "kernels/half.h"
#include "kernels/quant_blocks.h"
#include "kernels/simd.h"
#include "kernels/vec_dot.h"
#include "kernels/vec_dot_avx512.h"

namespace tangram::vec {

using blocks::BlockQ4_0;
using blocks::BlockQ4_K;
using blocks::BlockQ6_K;
using blocks::BlockQ8_0;
using blocks::BlockQ8_K;
using blocks::kQK0;
using blocks::kQKK;

namespace {

#if TANGRAM_AVX2

template <typename Block>
const Block* token_blocks(const uint8_t* act, size_t stride, int t) {
  return reinterpret_cast<const Block*>(act + static_cast<size_t>(t) * stride);
}

// Float weights (converted 8 at a time by Load) against float activations.
template <int NT, typename Load>
void float_multi(const void* w, const uint8_t* act, size_t stride, int64_t n, float* out,
                 Load load) {
  __m256 acc0[NT], acc1[NT];
  for (int t = 0; t < NT; ++t) acc0[t] = acc1[t] = _mm256_setzero_ps();
  const float* x[NT];
  for (int t = 0; t < NT; ++t)
    x[t] = reinterpret_cast<const float*>(act + static_cast<size_t>(t) * stride);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 w0 = load(w, i), w1 = load(w, i + 8);
    for (int t = 0; t < NT; ++t) {
      acc0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x[t] + i), acc0[t]);
      acc1[t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x[t] + i + 8), acc1[t]);
    }
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 w0 = load(w, i);
    for (int t = 0; t < NT; ++t) acc0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x[t] + i), acc0[t]);
  }
  for (int t = 0; t < NT; ++t) out[t] = simd::hsum(_mm256_add_ps(acc0[t], acc1[t]));
  for (; i < n; ++i)
    for (int t = 0; t < NT; ++t) out[t] += load.scalar(w, i) * x[t][i];
}

struct LoadF32 {
  __m256 operator()(const void* w, int64_t i) const {
    return _mm256_loadu_ps(static_cast<const float*>(w) + i);
  }
  float scalar(const void* w, int64_t i) const { return static_cast<const float*>(w)[i]; }
};
struct LoadF16 {
  __m256 operator()(const void* w, int64_t i) const {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(w) + i)));
  }
  float scalar(const void* w, int64_t i) const {
    return half::fp16_to_fp32(static_cast<const uint16_t*>(w)[i]);
  }
};
struct LoadBF16 {
  __m256 operator()(const void* w, int64_t i) const {
    const __m256i h = _mm256_cvtepu16_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(w) + i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
  }
  float scalar(const void* w, int64_t i) const {
    return half::bf16_to_fp32(static_cast<const uint16_t*>(w)[i]);
  }
};

// Q4_0 / Q8_0 weights against Q8_0 activations. Unpack gives the 32 signed weight codes.
template <int NT, typename Block, typename Unpack>
void q8_0_family_multi(const void* w, const uint8_t* act, size_t stride, int64_t n, float* out,
                       Unpack unpack) {
  const auto* wb = static_cast<const Block*>(w);
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < n / kQK0; ++b) {
    const __m256i q = unpack(wb[b]);
    const __m256i q_abs = _mm256_sign_epi8(q, q);
    const float dw = half::fp16_to_fp32(wb[b].d);
    for (int t = 0; t < NT; ++t) {
      const BlockQ8_0& y = token_blocks<BlockQ8_0>(act, stride, t)[b];
      const __m256i yv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs));
      const __m256i p =
          _mm256_madd_epi16(_mm256_maddubs_epi16(q_abs, _mm256_sign_epi8(yv, q)), ones);
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * half::fp16_to_fp32(y.d)), _mm256_cvtepi32_ps(p),
                               acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = simd::hsum(acc[t]);
}

struct UnpackQ8_0 {
  __m256i operator()(const BlockQ8_0& b) const {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  }
};
struct UnpackQ4_0 {
  __m256i operator()(const BlockQ4_0& b) const {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m256i q =
        _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0F));
    return _mm256_sub_epi8(q, _mm256_set1_epi8(8));
  }
};

template <int NT>
void q4_k_multi(const void* w, const uint8_t* act, size_t stride, int64_t n, float* out) {
  const auto* wb = static_cast<const BlockQ4_K*>(w);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const BlockQ4_K& x = wb[b];
    // Scales and mins as in dot_q4_k_q8_k.
    const __m128i sm = blocks::q4k_scales_mins(x.scales);
    const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));
    __m256i isum[NT];
    for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
    for (int g = 0; g < 4; ++g) {
      const __m256i q4 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + 32 * g));
      const __m256i lo = _mm256_and_si256(q4, low4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), low4);
      const __m256i s0 = _mm256_shuffle_epi8(
          sc16, _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * (2 * g))));
      const __m256i s1 = _mm256_shuffle_epi8(
          sc16, _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * (2 * g + 1))));
      for (int t = 0; t < NT; ++t) {
        const int8_t* yq = token_blocks<BlockQ8_K>(act, stride, t)[b].qs + 64 * g;
        const __m256i y0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yq));
        const __m256i y1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yq + 32));
        isum[t] = _mm256_add_epi32(
            isum[t], _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(lo, y0), s0),
                                      _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y1), s1)));
      }
    }
    const float dw = half::fp16_to_fp32(x.d), dmw = half::fp16_to_fp32(x.dmin);
    for (int t = 0; t < NT; ++t) {
      const BlockQ8_K& y = token_blocks<BlockQ8_K>(act, stride, t)[b];
      const __m256i mp =
          _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums)), mins16);
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * y.d), _mm256_cvtepi32_ps(isum[t]), acc[t]);
      acc[t] = _mm256_fnmadd_ps(_mm256_set1_ps(dmw * y.d), _mm256_cvtepi32_ps(mp), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = simd::hsum(acc[t]);
}

template <int NT>
void q6_k_multi(const void* w, const uint8_t* act, size_t stride, int64_t n, float* out) {
  const auto* wb = static_cast<const BlockQ6_K*>(w);
  alignas(32) static constexpr int8_t kPick[4][32] = {
      {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,
       2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3},
      {4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5,
       6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7},
      {8,  9,  8,  9,  8,  9,  8,  9,  8,  9,  8,  9,  8,  9,  8,  9,
       10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11},
      {12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13,
       14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15},
  };
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const BlockQ6_K& x = wb[b];
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.scales));
    const __m256i sc_all = _mm256_cvtepi8_epi16(sc8);
    __m256i isum[NT];
    for (int t = 0; t < NT; ++t) {
      // Start from -32 * sum_k sc_k * bsums_k: the codes below are stored as q + 32.
      const BlockQ8_K& y = token_blocks<BlockQ8_K>(act, stride, t)[b];
      const __m256i off =
          _mm256_madd_epi16(sc_all, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums)));
      isum[t] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
    }
    for (int h = 0; h < 2; ++h) {
      const __m256i sc16 =
          _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(h == 0 ? sc8 : _mm_srli_si128(sc8, 8)));
      __m256i q[4];
      simd::unpack_q6_k_half(x.ql, x.qh, h, q);
      for (int c = 0; c < 4; ++c) {
        const __m256i scales = _mm256_shuffle_epi8(
            sc16, _mm256_load_si256(reinterpret_cast<const __m256i*>(kPick[c])));
        for (int t = 0; t < NT; ++t) {
          const int8_t* yq = token_blocks<BlockQ8_K>(act, stride, t)[b].qs + 128 * h + 32 * c;
          const __m256i y8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yq));
          isum[t] =
              _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q[c], y8), scales));
        }
      }
    }
    const float dw = half::fp16_to_fp32(x.d);
    for (int t = 0; t < NT; ++t) {
      const float yd = token_blocks<BlockQ8_K>(act, stride, t)[b].d;
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * yd), _mm256_cvtepi32_ps(isum[t]), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = simd::hsum(acc[t]);
}

// Dispatches nt = 1..4 to the template instances; nt = 1 keeps the single-token kernel, whose
// extra accumulators hide more latency.
#define TANGRAM_MULTI_DISPATCH(single, call) \
  switch (nt) {                              \
    case 1:                                  \
      out[0] = single(w, act, n);            \
      return;                                \
    case 2:                                  \
      call(2);                               \
      return;                                \
    case 3:                                  \
      call(3);                               \
      return;                                \
    default:                                 \
      call(4);                               \
      return;                                \
  }

void multi_f32(const void* w, const uint8_t* act, size_t stride, int nt, int64_t n, float* out) {
#define CALL(N) float_multi<N>(w, act, stride, n, out, LoadF32{})
  TANGRAM_MULTI_DISPATCH(dot_f32_f32, CALL)
#undef CALL
}
void multi_f16(const void* w, const uint8_t* act, size_t stride, int nt, int64_t n, float* out) {
#define CALL(N) float_multi<N>(w, act, stride, n, out, LoadF16{})
  TANGRAM_MULTI_DISPATCH(dot_f16_f32, CALL)
#undef CALL
}
void multi_bf16(const void* w, const uint8_t* act, size_t stride, int nt, int64_t n, float* out) {
#define CALL(N) float_multi<N>(w, act, stride, n, out, LoadBF16{})
  TANGRAM_MULTI_DISPATCH(dot_bf16_f32, CALL)
#undef CALL
}
void multi_q4_0(const void* w, const uint8_t* act, size_t stride, int nt, int64_t n, float* out) {
#define CALL(N) q8_0_family_multi<N, BlockQ4_0>(w, act, stride, n, out, UnpackQ4_0{})
  TANGRAM_MULTI_DISPATCH(dot_q4_0_q8_0, CALL)
#undef CALL
}
void multi_q8_0(const void* w, const uint8_t* act, size_t stride, int nt, int64_t n, float* out) {
#define CALL(N) q8_0_family_multi<N, BlockQ8_0>(w, act, stride, n, out, UnpackQ8_0{})
  TANGRAM_MULTI_DISPATCH(dot_q8_0_q8_0, CALL)
#undef CALL
}
void multi_q4_k(const void* w, const uint8_t* act, size_t stride, int nt, int64_t n, float* out) {
#define CALL(N) q4_k_multi<N>(w, act, stride, n, out)
  TANGRAM_MULTI_DISPATCH(dot_q4_k_q8_k, CALL)
#undef CALL
}
void multi_q6_k(const void* w, const uint8_t* act, size_t stride, int nt, int64_t n, float* out) {
#define CALL(N) q6_k_multi<N>(w, act, stride, n, out)
  TANGRAM_MULTI_DISPATCH(dot_q6_k_q8_k, CALL)
#undef CALL
}
#undef TANGRAM_MULTI_DISPATCH

#endif  // TANGRAM_AVX2

// Any type: one single-token dot per activation.
template <RowDotFn Dot>
void multi_by_single(const void* w, const uint8_t* act, size_t stride, int nt, int64_t n,
                     float* out) {
  for (int t = 0; t < nt; ++t) out[t] = Dot(w, act + static_cast<size_t>(t) * stride, n);
}

}  // namespace

MultiDotFn multi_dot_fn(GgmlType weight, cpu::KernelLevel level) {
  if (level == cpu::KernelLevel::Avx512Vnni)
    if (const MultiDotFn f = avx512::multi_dot(weight)) return f;
  switch (weight) {
#if TANGRAM_AVX2
    case GgmlType::F32:
      return multi_f32;
    case GgmlType::F16:
      return multi_f16;
    case GgmlType::BF16:
      return multi_bf16;
    case GgmlType::Q4_0:
      return multi_q4_0;
    case GgmlType::Q8_0:
      return multi_q8_0;
    case GgmlType::Q4_K:
      return multi_q4_k;
    case GgmlType::Q6_K:
      return multi_q6_k;
#else
    case GgmlType::F32:
      return multi_by_single<dot_f32_f32>;
    case GgmlType::F16:
      return multi_by_single<dot_f16_f32>;
    case GgmlType::BF16:
      return multi_by_single<dot_bf16_f32>;
    case GgmlType::Q4_0:
      return multi_by_single<dot_q4_0_q8_0>;
    case GgmlType::Q8_0:
      return multi_by_single<dot_q8_0_q8_0>;
    case GgmlType::Q4_K:
      return multi_by_single<dot_q4_k_q8_k>;
    case GgmlType::Q6_K:
      return multi_by_single<dot_q6_k_q8_k>;
#endif
    case GgmlType::Q8_K:
      return multi_by_single<dot_q8_k_f32>;
  }
  return multi_by_single<dot_f32_f32>;
}

TileDotFn tile_dot_fn(GgmlType weight, cpu::KernelLevel level) {
  // AVX2's 16 ymm registers hold no tile larger than the multi-token kernel's 1 x 4 without
  // spilling (a 2 x 4 tile measured slower), so tiles are AVX-512 only.
  if (level == cpu::KernelLevel::Avx512Vnni) return avx512::tile_dot(weight);
  return nullptr;
}

}  // namespace tangram::vec
