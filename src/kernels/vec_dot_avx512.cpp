// AVX-512 VNNI kernels: several tokens, and register tiles of several rows x several tokens
// (one token keeps the AVX2 kernels, but for Q4_K rows in pairs). Q8_0 / Q4_0 weights against Q8_0
// activations: two blocks share one 512-bit vector; one vpdpbusd does the multiply-adds of a
// (row, token) pair where AVX2 needs sign fixes, maddubs and madd. Q4_K / Q6_K weights against
// Q8_K activations: vpmaddubsw on 64 unsigned codes, then vpdpwssd applies the sub-block
// scales and accumulates.
#include "kernels/vec_dot_avx512.h"

#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "kernels/half.h"
#include "kernels/quant_blocks.h"
#include "kernels/simd.h"

// Everything below is AVX-512 code, after every header (avx512_target_begin.h says why).
#include "kernels/avx512_target_begin.h"

namespace tangram::vec::avx512 {
namespace {

using blocks::BlockQ4_0;
using blocks::BlockQ4_K;
using blocks::BlockQ6_K;
using blocks::BlockQ8_0;
using blocks::BlockQ8_K;
using blocks::kQK0;
using blocks::kQKK;

// The 32 signed codes of one block.
struct CodesQ8_0 {
  __m256i operator()(const BlockQ8_0& b) const {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  }
};
struct CodesQ4_0 {
  __m256i operator()(const BlockQ4_0& b) const {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    // Low 128 bits: elements 0..15 (low nibbles); high 128 bits: 16..31 (high nibbles).
    const __m256i q =
        _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0F));
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
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_set1_ps(lo)),
                                             _mm256_castps_pd(_mm256_set1_ps(hi)), 1));
}
// The same from two fp16 scales: both converted by one vcvtph2ps and spread by one vpermps
// (converting and broadcasting each on its own took twice the vector instructions, and the
// 4 x 4 tile does this for every row and token of each block pair).
inline __m512 scales_of_two_f16(uint16_t lo, uint16_t hi) {
  const __m128i halves = _mm_cvtsi32_si128(static_cast<int>(uint32_t{lo} | (uint32_t{hi} << 16)));
  const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  return _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(_mm_cvtph_ps(halves)));
}

// A tile walks NR rows side by side, which the hardware prefetcher follows poorly from memory
// (a 4 x 1 Q4_K tile ran 2.4x slower in the model than the one-row kernel, though no slower
// with the weights in L2). The next tile's rows are contiguous ([NR * w_stride] bytes after
// this tile's first row), so each step of a tile's walk asks for its share of them, in order:
// one sequential stream a tile ahead. Prefetches never fault, and the address is computed in
// integers, so asking past the end of the matrix is harmless.
inline void prefetch_next_tile(const uint8_t* w, size_t tile_bytes, int64_t step, int64_t steps) {
  const uintptr_t next = reinterpret_cast<uintptr_t>(w) + tile_bytes;
  const size_t begin =
      tile_bytes * static_cast<size_t>(step) / static_cast<size_t>(steps) & ~size_t{63};
  const size_t end = tile_bytes * static_cast<size_t>(step + 1) / static_cast<size_t>(steps);
  for (size_t off = begin; off < end; off += 64)
    _mm_prefetch(reinterpret_cast<const char*>(next + off), _MM_HINT_T0);
}

// Signed x signed int8 products through vpdpbusd (unsigned x signed): activation codes
// (-127..127) are offset by 128 into unsigned bytes, and the 128 * (sum of the weight codes)
// that adds is taken off by starting each pair's sum at its negation, computed once per weight
// block for all tokens of the tile. Activation scales are converted to float once per block
// for all rows. out[r * kMultiTokens + t] for r < NR, t < NT.
template <int NR, int NT, typename Block, typename Codes>
void q8_0_family_tile(const uint8_t* w, size_t w_stride, const uint8_t* act, size_t act_stride,
                      int64_t n, float* out) {
  const Codes codes;
  const Block* wb[NR];
  const BlockQ8_0* ab[NT];
  for (int r = 0; r < NR; ++r)
    wb[r] = reinterpret_cast<const Block*>(w + static_cast<size_t>(r) * w_stride);
  for (int t = 0; t < NT; ++t)
    ab[t] = reinterpret_cast<const BlockQ8_0*>(act + static_cast<size_t>(t) * act_stride);
  const int64_t nb = n / kQK0;
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    prefetch_next_tile(w, NR * w_stride, b, nb);
    __m512i wq[NR], start[NR];
    __m512 wd[NR];
    for (int r = 0; r < NR; ++r) {
      wq[r] = codes_of_two(wb[r], b, codes);
      start[r] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                  _mm512_dpbusd_epi32(_mm512_setzero_si512(), offset, wq[r]));
      wd[r] = scales_of_two_f16(wb[r][b].d, wb[r][b + 1].d);
    }
    for (int t = 0; t < NT; ++t) {
      const __m512i au = _mm512_xor_si512(codes_of_two(ab[t], b, CodesQ8_0{}), offset);
      const __m512 ad = scales_of_two_f16(ab[t][b].d, ab[t][b + 1].d);
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
      const __m256i start = _mm256_sub_epi32(
          _mm256_setzero_si256(), _mm256_dpbusd_epi32(_mm256_setzero_si256(), offset256, wq));
      for (int t = 0; t < NT; ++t) {
        const __m256i au = _mm256_xor_si256(CodesQ8_0{}(ab[t][b]), offset256);
        const int isum = simd::hsum_i32(_mm256_dpbusd_epi32(start, au, wq));
        tail[r][t] = static_cast<float>(isum) * half::fp16_to_fp32(wb[r][b].d) *
                     half::fp16_to_fp32(ab[t][b].d);
      }
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t)
      out[r * kMultiTokens + t] = _mm512_reduce_add_ps(acc[r][t]) + tail[r][t];
}

// Lanes of the 32 16-bit pair products maddubs makes from 64 codes, mapped to their sub-block's
// scale for vpermw: lane l takes scale first + l / lanes_per_scale.
inline __m512i scale_lanes(int first, int lanes_per_scale) {
  alignas(64) int16_t idx[32];
  for (int l = 0; l < 32; ++l) idx[l] = static_cast<int16_t>(first + l / lanes_per_scale);
  return _mm512_load_si512(idx);
}

// Q4_K weights against Q8_K activations. The codes are unsigned (0..15), so vpmaddubsw takes
// them as they are; vpdpwssd multiplies the pair sums by the 6-bit sub-block scales and adds
// them up in one instruction. 64 codes (two sub-blocks) per 512-bit vector, unpacked once per
// row for every token of the tile; each activation vector is loaded once for every row. The
// mins term uses the activations' 16-element sums (bsums), once per (row, token) and block.
template <int NR, int NT>
void q4_k_tile(const uint8_t* w, size_t w_stride, const uint8_t* act, size_t act_stride, int64_t n,
               float* out) {
  const BlockQ4_K* wb[NR];
  const BlockQ8_K* ab[NT];
  for (int r = 0; r < NR; ++r)
    wb[r] = reinterpret_cast<const BlockQ4_K*>(w + static_cast<size_t>(r) * w_stride);
  for (int t = 0; t < NT; ++t)
    ab[t] = reinterpret_cast<const BlockQ8_K*>(act + static_cast<size_t>(t) * act_stride);
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  // 32 bytes of codes hold elements 64g..64g+31 (low nibbles) and 64g+32..64g+63 (high).
  const __m512i nibble_shift = _mm512_setr_epi64(0, 0, 0, 0, 4, 4, 4, 4);
  const __m512i scale_of_group[4] = {scale_lanes(0, 16), scale_lanes(2, 16), scale_lanes(4, 16),
                                     scale_lanes(6, 16)};
  __m512 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n / kQKK; ++b) {
    prefetch_next_tile(w, NR * w_stride, b, n / kQKK);
    __m512i scales[NR];  // int16 lanes 0..7: the sub-block scales
    __m256i mins[NR];    // int16: each sub-block's min twice, lined up with the bsums
    for (int r = 0; r < NR; ++r) {
      const __m128i sm = blocks::q4k_scales_mins(wb[r][b].scales);
      scales[r] = _mm512_zextsi256_si512(_mm256_cvtepu8_epi16(sm));
      mins[r] = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));
    }
    __m512i isum[NR][NT];
    for (int r = 0; r < NR; ++r)
      for (int t = 0; t < NT; ++t) isum[r][t] = _mm512_setzero_si512();
    for (int g = 0; g < 4; ++g) {
      __m512i wq[NR], ws[NR];
      for (int r = 0; r < NR; ++r) {
        const __m512i q4 = _mm512_broadcast_i64x4(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[r][b].qs + 32 * g)));
        wq[r] = _mm512_and_si512(_mm512_srlv_epi64(q4, nibble_shift), low4);
        ws[r] = _mm512_permutexvar_epi16(scale_of_group[g], scales[r]);
      }
      for (int t = 0; t < NT; ++t) {
        const __m512i y = _mm512_loadu_si512(ab[t][b].qs + 64 * g);
        for (int r = 0; r < NR; ++r)
          isum[r][t] = _mm512_dpwssd_epi32(isum[r][t], _mm512_maddubs_epi16(wq[r], y), ws[r]);
      }
    }
    // One float multiply-add per (row, token): the scaled sum's two halves added into 8 lanes,
    // the mins' products in the other 8, times [d x 8 | -dmin x 8] of the row and the token's d.
    __m512 token_d[NT];
    for (int t = 0; t < NT; ++t) token_d[t] = _mm512_set1_ps(ab[t][b].d);
    for (int r = 0; r < NR; ++r) {
      const __m512 row_d =
          scales_of_two(half::fp16_to_fp32(wb[r][b].d), -half::fp16_to_fp32(wb[r][b].dmin));
      for (int t = 0; t < NT; ++t) {
        const __m256i mp = _mm256_madd_epi16(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab[t][b].bsums)), mins[r]);
        const __m256i scaled = _mm256_add_epi32(_mm512_castsi512_si256(isum[r][t]),
                                                _mm512_extracti64x4_epi64(isum[r][t], 1));
        const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(scaled), mp, 1);
        acc[r][t] =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(both), _mm512_mul_ps(row_d, token_d[t]), acc[r][t]);
      }
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) out[r * kMultiTokens + t] = _mm512_reduce_add_ps(acc[r][t]);
}

// Q6_K weights against Q8_K activations: the 6-bit codes are kept unsigned (q + 32) for
// vpmaddubsw, and the 32 * (scale-weighted activation sums) this adds is taken off by starting
// each (row, token) sum at its negation (from the bsums). 64 codes (four 16-element sub-blocks)
// per 512-bit vector, unpacked once per row for every token; vpdpwssd applies the scales.
template <int NR, int NT>
void q6_k_tile(const uint8_t* w, size_t w_stride, const uint8_t* act, size_t act_stride, int64_t n,
               float* out) {
  const BlockQ6_K* wb[NR];
  const BlockQ8_K* ab[NT];
  for (int r = 0; r < NR; ++r)
    wb[r] = reinterpret_cast<const BlockQ6_K*>(w + static_cast<size_t>(r) * w_stride);
  for (int t = 0; t < NT; ++t)
    ab[t] = reinterpret_cast<const BlockQ8_K*>(act + static_cast<size_t>(t) * act_stride);
  const __m512i low4 = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
  // Elements 64c..64c+63 (c = 2h + k): low nibbles of ql (k = 0) or high ones (k = 1) of the
  // 64 bytes at ql + 64h, with two high bits from qh + 32h: bits 0-1 / 4-5 for the first 32
  // elements (k = 0 / 1), bits 2-3 / 6-7 for the next 32.
  const __m512i high_shl = _mm512_setr_epi64(4, 4, 4, 4, 2, 2, 2, 2);
  const __m512i high_shr = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2);
  const __m512i scale_of_chunk[4] = {scale_lanes(0, 8), scale_lanes(4, 8), scale_lanes(8, 8),
                                     scale_lanes(12, 8)};
  __m512 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n / kQKK; ++b) {
    prefetch_next_tile(w, NR * w_stride, b, n / kQKK);
    __m512i scales[NR];  // int16 lanes 0..15: the sub-block scales
    __m512i isum[NR][NT];
    for (int r = 0; r < NR; ++r) {
      const __m256i sc =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb[r][b].scales)));
      scales[r] = _mm512_zextsi256_si512(sc);
      for (int t = 0; t < NT; ++t) {
        const __m256i off = _mm256_madd_epi16(
            sc, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab[t][b].bsums)));
        isum[r][t] = _mm512_zextsi256_si512(
            _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5)));
      }
    }
    for (int c = 0; c < 4; ++c) {
      const int h = c / 2;
      __m512i wq[NR], ws[NR];
      for (int r = 0; r < NR; ++r) {
        const __m512i l = _mm512_loadu_si512(wb[r][b].ql + 64 * h);
        const __m512i hi = _mm512_broadcast_i64x4(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[r][b].qh + 32 * h)));
        wq[r] = (c % 2 == 0)
                    ? _mm512_or_si512(_mm512_and_si512(l, low4),
                                      _mm512_and_si512(_mm512_sllv_epi64(hi, high_shl), bits45))
                    : _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), low4),
                                      _mm512_and_si512(_mm512_srlv_epi64(hi, high_shr), bits45));
        ws[r] = _mm512_permutexvar_epi16(scale_of_chunk[c], scales[r]);
      }
      for (int t = 0; t < NT; ++t) {
        const __m512i y = _mm512_loadu_si512(ab[t][b].qs + 64 * c);
        for (int r = 0; r < NR; ++r)
          isum[r][t] = _mm512_dpwssd_epi32(isum[r][t], _mm512_maddubs_epi16(wq[r], y), ws[r]);
      }
    }
    for (int r = 0; r < NR; ++r) {
      const float dw = half::fp16_to_fp32(wb[r][b].d);
      for (int t = 0; t < NT; ++t)
        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r][t]), _mm512_set1_ps(dw * ab[t][b].d),
                                    acc[r][t]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) out[r * kMultiTokens + t] = _mm512_reduce_add_ps(acc[r][t]);
}

// One token, NR rows side by side: the AVX2 single-row kernel's arithmetic (dot_q4_k_q8_k; the
// integer sums are the same, and the float steps run in the same order per row, so the results
// are the same bits), with each activation block and its bsums loaded once for NR rows, the rows'
// chains independent, and vpdpwssd applying a sub-block's scale and accumulating in one
// instruction (AVX2 needs vpmaddwd and vpaddd). Walking rows side by side stalls the hardware
// prefetcher (without the prefetch below, 3x slower than one row from memory), so the walk asks
// for the next NR rows ahead, as the tiles do. In the model (one thread, batch 1) 2 rows measured
// 5-6% less CPU per step than the one-row kernel, 4 rows 13% more (docs/benchmarks.md).
template <int NR>
void q4_k_rows_one_token(const uint8_t* w, size_t w_stride, const uint8_t* act, int64_t n,
                         float* out) {
  const auto* ab = reinterpret_cast<const BlockQ8_K*>(act);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m256 acc[NR], acc_min[NR];
  for (int r = 0; r < NR; ++r) acc[r] = acc_min[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQKK; ++b) {
    prefetch_next_tile(w, NR * w_stride, b, n / kQKK);
    const BlockQ8_K& y = ab[b];
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums));
    const BlockQ4_K* x[NR];
    // A row's even and odd sub-blocks sum apart: two chains of vpdpwssd, each half as long.
    __m256i sc16[NR], min_prod[NR], isum[NR], isum_odd[NR];
    for (int r = 0; r < NR; ++r) {
      x[r] = reinterpret_cast<const BlockQ4_K*>(w + static_cast<size_t>(r) * w_stride) + b;
      const __m128i sm = blocks::q4k_scales_mins(x[r]->scales);  // [8 scales][8 mins]
      sc16[r] = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
      min_prod[r] = _mm256_madd_epi16(bsums, _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm)));
      isum[r] = isum_odd[r] = _mm256_setzero_si256();
    }
    for (int g = 0; g < 4; ++g) {
      const __m256i y0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs + 64 * g));
      const __m256i y1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs + 64 * g + 32));
      const __m256i pick0 = _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * (2 * g)));
      const __m256i pick1 = _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * (2 * g + 1)));
      for (int r = 0; r < NR; ++r) {
        const __m256i q4 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[r]->qs + 32 * g));
        const __m256i lo = _mm256_and_si256(q4, low4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), low4);
        isum[r] = _mm256_dpwssd_epi32(isum[r], _mm256_maddubs_epi16(lo, y0),
                                      _mm256_shuffle_epi8(sc16[r], pick0));
        isum_odd[r] = _mm256_dpwssd_epi32(isum_odd[r], _mm256_maddubs_epi16(hi, y1),
                                          _mm256_shuffle_epi8(sc16[r], pick1));
      }
    }
    const __m128 y_d = _mm_set1_ps(y.d);
    for (int r = 0; r < NR; ++r) {
      // d and dmin are adjacent: one conversion and one multiply for both.
      const __m128 d_dmin = _mm_mul_ps(_mm_cvtph_ps(_mm_loadu_si32(&x[r]->d)), y_d);
      const __m256i block_sum = _mm256_add_epi32(isum[r], isum_odd[r]);
      acc[r] =
          _mm256_fmadd_ps(_mm256_broadcastss_ps(d_dmin), _mm256_cvtepi32_ps(block_sum), acc[r]);
      acc_min[r] = _mm256_fmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(d_dmin)),
                                   _mm256_cvtepi32_ps(min_prod[r]), acc_min[r]);
    }
  }
  for (int r = 0; r < NR; ++r)
    out[r * kMultiTokens] = simd::hsum(_mm256_sub_ps(acc[r], acc_min[r]));
}

// The tile kernels as types, so one dispatcher serves them all.
template <typename Block, typename Codes>
struct Q8_0FamilyKernel {
  template <int NR, int NT>
  static void run(const uint8_t* w, size_t w_stride, const uint8_t* act, size_t act_stride,
                  int64_t n, float* out) {
    q8_0_family_tile<NR, NT, Block, Codes>(w, w_stride, act, act_stride, n, out);
  }
};
struct Q4_KKernel {
  template <int NR, int NT>
  static void run(const uint8_t* w, size_t w_stride, const uint8_t* act, size_t act_stride,
                  int64_t n, float* out) {
    q4_k_tile<NR, NT>(w, w_stride, act, act_stride, n, out);
  }
};
struct Q6_KKernel {
  template <int NR, int NT>
  static void run(const uint8_t* w, size_t w_stride, const uint8_t* act, size_t act_stride,
                  int64_t n, float* out) {
    q6_k_tile<NR, NT>(w, w_stride, act, act_stride, n, out);
  }
};
using Q8_0Kernel = Q8_0FamilyKernel<BlockQ8_0, CodesQ8_0>;
using Q4_0Kernel = Q8_0FamilyKernel<BlockQ4_0, CodesQ4_0>;

// Rows per register tile: 4 rows x up to 4 tokens keeps 16 integer accumulators, the rows'
// codes and scales (or sum offsets) in the 32 zmm registers.
constexpr int kRowsPerKernel = 4;
// Rows of Q4_K the one-token kernel walks side by side.
constexpr int kQ4_KOneTokenRows = 2;
static_assert(kTileRows % kRowsPerKernel == 0);

template <typename Kernel, int NT, RowDotFn Single>
void tile_rows(const uint8_t* w, size_t w_stride, int nr, const uint8_t* act, size_t act_stride,
               int64_t n, float* out) {
  if constexpr (NT == 1) {
    // One token: the AVX2 single-token kernels measured faster here than 4 x 1 tiles (Q8_0:
    // bench-model decode; Q4_K: BM_Matvec from DRAM, one thread, 16.8 GB/s per CPU-second
    // against 6.3-7.4, though on par with the weights in L2). Q4_K takes rows in pairs
    // (q4_k_rows_one_token), the rest of a tile one at a time.
    int r = 0;
    if constexpr (std::is_same_v<Kernel, Q4_KKernel>)
      for (; r + kQ4_KOneTokenRows <= nr; r += kQ4_KOneTokenRows)
        q4_k_rows_one_token<kQ4_KOneTokenRows>(w + static_cast<size_t>(r) * w_stride, w_stride, act,
                                               n, out + r * kMultiTokens);
    for (; r < nr; ++r)
      out[r * kMultiTokens] = Single(w + static_cast<size_t>(r) * w_stride, act, n);
  } else if (nr == kRowsPerKernel) {
    Kernel::template run<kRowsPerKernel, NT>(w, w_stride, act, act_stride, n, out);
  } else {
    for (int r = 0; r < nr; ++r)  // a partial tile (the end of a thread's rows): one row at a time
      Kernel::template run<1, NT>(w + static_cast<size_t>(r) * w_stride, w_stride, act, act_stride,
                                  n, out + r * kMultiTokens);
  }
}

template <typename Kernel, RowDotFn Single>
void tile(const uint8_t* w, size_t w_stride, int nr, const uint8_t* act, size_t act_stride, int nt,
          int64_t n, float* out) {
  switch (nt) {
    case 1:
      return tile_rows<Kernel, 1, Single>(w, w_stride, nr, act, act_stride, n, out);
    case 2:
      return tile_rows<Kernel, 2, Single>(w, w_stride, nr, act, act_stride, n, out);
    case 3:
      return tile_rows<Kernel, 3, Single>(w, w_stride, nr, act, act_stride, n, out);
    default:
      return tile_rows<Kernel, 4, Single>(w, w_stride, nr, act, act_stride, n, out);
  }
}

template <typename Kernel, RowDotFn Single>
void multi(const void* w, const uint8_t* act, size_t act_stride, int nt, int64_t n, float* out) {
  tile<Kernel, Single>(static_cast<const uint8_t*>(w), 0, 1, act, act_stride, nt, n, out);
}

}  // namespace

MultiDotFn multi_dot(GgmlType weight) {
  switch (weight) {
    case GgmlType::Q8_0:
      return multi<Q8_0Kernel, dot_q8_0_q8_0>;
    case GgmlType::Q4_0:
      return multi<Q4_0Kernel, dot_q4_0_q8_0>;
    case GgmlType::Q4_K:
      return multi<Q4_KKernel, dot_q4_k_q8_k>;
    case GgmlType::Q6_K:
      return multi<Q6_KKernel, dot_q6_k_q8_k>;
    default:
      return nullptr;
  }
}

TileDotFn tile_dot(GgmlType weight) {
  switch (weight) {
    case GgmlType::Q8_0:
      return tile<Q8_0Kernel, dot_q8_0_q8_0>;
    case GgmlType::Q4_0:
      return tile<Q4_0Kernel, dot_q4_0_q8_0>;
    case GgmlType::Q4_K:
      return tile<Q4_KKernel, dot_q4_k_q8_k>;
    case GgmlType::Q6_K:
      return tile<Q6_KKernel, dot_q6_k_q8_k>;
    default:
      return nullptr;
  }
}

}  // namespace tangram::vec::avx512

#include "kernels/avx512_target_end.h"
