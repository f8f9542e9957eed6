// AVX-512 VNNI kernels for the 32-element block types (Q8_0, Q4_0 weights against Q8_0
// activations): several tokens, and register tiles of several rows x several tokens (one
// token keeps the AVX2 kernel). Two blocks share one 512-bit vector; one vpdpbusd does the multiply-adds of
// a (row, token) pair where AVX2 needs sign fixes, maddubs and madd.
// The K-quant kernels keep their AVX2 versions at this level.
#include "kernels/vec_dot_avx512.h"

#include <immintrin.h>

#include "kernels/half.h"
#include "kernels/quant_blocks.h"
#include "kernels/simd.h"

// Everything below is compiled for AVX-512 F/BW/VL + VNNI. The headers above are included
// before this point, so the out-of-line copies of their inline functions stay baseline
// (x86-64-v3) code and the linker cannot hand AVX-512 versions of them to other files.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni")
#endif

namespace tangram::vec::avx512 {
namespace {

using blocks::BlockQ4_0;
using blocks::BlockQ8_0;
using blocks::kQK0;

// The 32 signed codes of one block.
struct CodesQ8_0 {
  __m256i operator()(const BlockQ8_0& b) const { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)); }
};
struct CodesQ4_0 {
  __m256i operator()(const BlockQ4_0& b) const {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    // Low 128 bits: elements 0..15 (low nibbles); high 128 bits: 16..31 (high nibbles).
    const __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0F));
    return _mm256_sub_epi8(q, _mm256_set1_epi8(8));
  }
};

// Codes of blocks b (low 256 bits) and b + 1 (high 256 bits).
template <typename Block, typename Codes>
inline __m512i codes_of_two(const Block* x, int64_t b, Codes codes) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(codes(x[b])), codes(x[b + 1]), 1);
}

// [lo x 8 | hi x 8]: the scales of two blocks, lined up with codes_of_two's int32 sums.
inline __m512 scales_of_two(float lo, float hi) {
  return _mm512_castpd_ps(
      _mm512_insertf64x4(_mm512_castps_pd(_mm512_set1_ps(lo)), _mm256_castps_pd(_mm256_set1_ps(hi)), 1));
}

// Signed x signed int8 products through vpdpbusd (unsigned x signed): activation codes
// (-127..127) are offset by 128 into unsigned bytes, and the 128 * (sum of the weight codes)
// that adds is taken off by starting each pair's sum at its negation, computed once per weight
// block for all tokens of the tile. Activation scales are converted to float once per block
// for all rows. out[r * kMultiTokens + t] for r < NR, t < NT.
template <int NR, int NT, typename Block, typename Codes>
void q8_0_family_tile(const uint8_t* w, size_t w_stride, const uint8_t* act, size_t act_stride, int64_t n,
                      float* out) {
  const Codes codes;
  const Block* wb[NR];
  const BlockQ8_0* ab[NT];
  for (int r = 0; r < NR; ++r) wb[r] = reinterpret_cast<const Block*>(w + static_cast<size_t>(r) * w_stride);
  for (int t = 0; t < NT; ++t) ab[t] = reinterpret_cast<const BlockQ8_0*>(act + static_cast<size_t>(t) * act_stride);
  const int64_t nb = n / kQK0;
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    __m512i wq[NR], start[NR];
    __m512 wd[NR];
    for (int r = 0; r < NR; ++r) {
      wq[r] = codes_of_two(wb[r], b, codes);
      start[r] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), offset, wq[r]));
      wd[r] = scales_of_two(half::fp16_to_fp32(wb[r][b].d), half::fp16_to_fp32(wb[r][b + 1].d));
    }
    for (int t = 0; t < NT; ++t) {
      const __m512i au = _mm512_xor_si512(codes_of_two(ab[t], b, CodesQ8_0{}), offset);
      const __m512 ad = scales_of_two(half::fp16_to_fp32(ab[t][b].d), half::fp16_to_fp32(ab[t][b + 1].d));
      for (int r = 0; r < NR; ++r) {
        const __m512i p = _mm512_dpbusd_epi32(start[r], au, wq[r]);
        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(wd[r], ad), acc[r][t]);
      }
    }
  }
  float tail[NR][NT] = {};
  if (b < nb) {  // an odd block count: the last block alone, in 256-bit vectors
    const __m256i offset256 = _mm256_set1_epi8(static_cast<char>(0x80));
    for (int r = 0; r < NR; ++r) {
      const __m256i wq = codes(wb[r][b]);
      const __m256i start =
          _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_dpbusd_epi32(_mm256_setzero_si256(), offset256, wq));
      for (int t = 0; t < NT; ++t) {
        const __m256i au = _mm256_xor_si256(CodesQ8_0{}(ab[t][b]), offset256);
        const int isum = simd::hsum_i32(_mm256_dpbusd_epi32(start, au, wq));
        tail[r][t] = static_cast<float>(isum) * half::fp16_to_fp32(wb[r][b].d) * half::fp16_to_fp32(ab[t][b].d);
      }
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) out[r * kMultiTokens + t] = _mm512_reduce_add_ps(acc[r][t]) + tail[r][t];
}

// Rows per register tile: 4 rows x up to 4 tokens keeps 16 accumulators, the rows' codes and
// sum offsets in the 32 zmm registers.
constexpr int kRowsPerKernel = 4;
static_assert(kTileRows % kRowsPerKernel == 0);

template <int NT, typename Block, typename Codes, RowDotFn Single>
void tile_rows(const uint8_t* w, size_t w_stride, int nr, const uint8_t* act, size_t act_stride, int64_t n,
               float* out) {
  if constexpr (NT == 1) {
    // One token is bound by memory bandwidth; the AVX2 single-token kernel measured faster here
    // (BM_Matvec, bench-model decode) than a 4 x 1 tile, so it keeps that case.
    for (int r = 0; r < nr; ++r) out[r * kMultiTokens] = Single(w + static_cast<size_t>(r) * w_stride, act, n);
  } else if (nr == kRowsPerKernel) {
    q8_0_family_tile<kRowsPerKernel, NT, Block, Codes>(w, w_stride, act, act_stride, n, out);
  } else {
    for (int r = 0; r < nr; ++r)  // a partial tile (the end of a thread's rows): one row at a time
      q8_0_family_tile<1, NT, Block, Codes>(w + static_cast<size_t>(r) * w_stride, w_stride, act, act_stride, n,
                                            out + r * kMultiTokens);
  }
}

template <typename Block, typename Codes, RowDotFn Single>
void tile(const uint8_t* w, size_t w_stride, int nr, const uint8_t* act, size_t act_stride, int nt, int64_t n,
          float* out) {
  switch (nt) {
    case 1: return tile_rows<1, Block, Codes, Single>(w, w_stride, nr, act, act_stride, n, out);
    case 2: return tile_rows<2, Block, Codes, Single>(w, w_stride, nr, act, act_stride, n, out);
    case 3: return tile_rows<3, Block, Codes, Single>(w, w_stride, nr, act, act_stride, n, out);
    default: return tile_rows<4, Block, Codes, Single>(w, w_stride, nr, act, act_stride, n, out);
  }
}

template <typename Block, typename Codes, RowDotFn Single>
void multi(const void* w, const uint8_t* act, size_t act_stride, int nt, int64_t n, float* out) {
  tile<Block, Codes, Single>(static_cast<const uint8_t*>(w), 0, 1, act, act_stride, nt, n, out);
}

}  // namespace

MultiDotFn multi_dot(GgmlType weight) {
  if (weight == GgmlType::Q8_0) return multi<BlockQ8_0, CodesQ8_0, dot_q8_0_q8_0>;
  if (weight == GgmlType::Q4_0) return multi<BlockQ4_0, CodesQ4_0, dot_q4_0_q8_0>;
  return nullptr;
}

TileDotFn tile_dot(GgmlType weight) {
  if (weight == GgmlType::Q8_0) return tile<BlockQ8_0, CodesQ8_0, dot_q8_0_q8_0>;
  if (weight == GgmlType::Q4_0) return tile<BlockQ4_0, CodesQ4_0, dot_q4_0_q8_0>;
  return nullptr;
}

}  // namespace tangram::vec::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
