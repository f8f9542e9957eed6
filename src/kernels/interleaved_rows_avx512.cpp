// AVX-512 VNNI kernels on 16 interleaved rows (interleaved_rows.h) x up to kTileTokens tokens. Each
// 512-bit vector of codes holds 4 elements of each of the 16 rows; one vpdpbusd with a
// broadcast of the token's 4 activation bytes adds those products into the 16 rows' lanes.
// The scale work then runs once per 16 rows instead of once per (row, token): Q4_K's sub-block
// scales (vpmulld), mins (vpdpwssd on the activations' pair sums) and float update; Q8_0's
// offset correction (the sum's starting value) and float update.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "kernels/cpu_features.h"
#include "kernels/half.h"
#include "kernels/interleaved_rows.h"
#include "kernels/quant_blocks.h"
#include "kernels/vec_dot_avx512.h"

// Everything below is AVX-512 code, after every header (avx512_target_begin.h says why).
#include "kernels/avx512_target_begin.h"

namespace tangram::vec::avx512 {
namespace {

using blocks::BlockQ8_0;
using blocks::BlockQ8_K;

// Four activation bytes at p, in every 32-bit lane.
inline __m512i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm512_set1_epi32(v);
}

// prefetch_ahead (interleaved_rows.h) from cpu::tuning()'s token counts. Measured on Zen 4 (one
// thread, 12 matrices of 4096 x 2560 in huge pages, CPU time against the row-major matrix's
// repack + product or row-major kernels): 8 tokens 1.09x without, 0.92x with 4 blocks ahead
// into L1, 0.57x with 16 ahead into L2 (8 and 32 ahead: 0.61x, 0.56x); 16 tokens 1.09x, 0.97x,
// 0.71x; 4-5 tokens 0.79x / 0.51x without, 0.55x / 0.27x with. At 1-2 tokens the read is the
// bound and the prefetches only competed with it there (1 token: 0.89-0.94x without, 1.06-1.28x
// with), so they started at 4 (3: the same either way). Q4_K (4 blocks ahead, the same 9 KiB),
// bench-model -t 1 on qwen3-8l-q4_k.gguf (step CPU ms, weights interleaved at load): from 2
// tokens it paid (2 tokens 24.4 -> 19.3, 3: 35.6 -> 22.3, 4: 47.4 -> 25.6, 8: 75.8 -> 47.2);
// at one token it competed with the read (17.2 -> 22.1). A Zen 5 core wants Q4_K's at one token
// and Q8_0's from two (cpu::KernelTuning); its Q8_0 at one token still ran faster without.

// UnpackedQ4_KScales of one block: one 512-bit vector per packed field (shifts are 16-bit, the
// masks keep each byte's own bits).
inline void unpack_scales_mins(const InterleavedQ4_K& x, UnpackedQ4_KScales& u) {
  const __m512i low4 = _mm512_set1_epi8(0x0F), top2 = _mm512_set1_epi8(0x30);
  const __m512i sl = _mm512_loadu_si512(x.scales_low), ml = _mm512_loadu_si512(x.mins_low);
  const __m512i hb = _mm512_loadu_si512(x.high_bits);
  const __m512i even_sc =
      _mm512_or_si512(_mm512_and_si512(sl, low4), _mm512_and_si512(_mm512_slli_epi16(hb, 4), top2));
  const __m512i odd_sc = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(sl, 4), low4),
                                         _mm512_and_si512(_mm512_slli_epi16(hb, 2), top2));
  const __m512i even_mn = _mm512_or_si512(_mm512_and_si512(ml, low4), _mm512_and_si512(hb, top2));
  const __m512i odd_mn = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ml, 4), low4),
                                         _mm512_and_si512(_mm512_srli_epi16(hb, 2), top2));
  _mm512_store_si512(u.scales[0], even_sc);
  _mm512_store_si512(u.scales[1], odd_sc);
  _mm512_store_si512(u.mins[0], _mm512_unpacklo_epi8(even_mn, odd_mn));
  _mm512_store_si512(u.mins[1], _mm512_unpackhi_epi8(even_mn, odd_mn));
}

// Integer products of one block, 16 rows x NT tokens, each sub-block's sum times its scale:
// blk[t] lane r = sum over sub-blocks j of scale[j][r] * dot(codes of row r, token t).
template <int NT>
inline void scaled_block_sums(const InterleavedQ4_K& x, const UnpackedQ4_KScales& u,
                              const BlockQ8_K* const* a, int64_t b, __m512i* blk) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  for (int t = 0; t < NT; ++t) blk[t] = _mm512_setzero_si512();
  for (int j = 0; j < 8; ++j) {
    __m512i sub[NT];
    for (int t = 0; t < NT; ++t) sub[t] = _mm512_setzero_si512();
    for (int s = 0; s < 4; ++s) {
      const __m512i v = _mm512_loadu_si512(x.qs[j][s]);
      const __m512i lo = _mm512_and_si512(v, low4),
                    hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
      for (int t = 0; t < NT; ++t) {
        const int8_t* q = a[t][b].qs + 32 * j + 8 * s;
        sub[t] = _mm512_dpbusd_epi32(sub[t], lo, broadcast4(q));
        sub[t] = _mm512_dpbusd_epi32(sub[t], hi, broadcast4(q + 4));
      }
    }
    const __m512i sc = _mm512_cvtepu8_epi32(
        _mm_load_si128(reinterpret_cast<const __m128i*>(u.scales[j % 2][j / 2])));
    for (int t = 0; t < NT; ++t) blk[t] = _mm512_add_epi32(blk[t], _mm512_mullo_epi32(sub[t], sc));
  }
}

template <int NT>
void gemm_tokens(const InterleavedQ4_K* w, int64_t nblocks, const uint8_t* act, size_t act_stride,
                 const int32_t* pair_sums, size_t pair_stride, float* out, size_t out_stride) {
  const BlockQ8_K* a[NT];
  const int32_t* sums[NT];
  for (int t = 0; t < NT; ++t) {
    a[t] = reinterpret_cast<const BlockQ8_K*>(act + static_cast<size_t>(t) * act_stride);
    sums[t] = pair_sums + static_cast<size_t>(t) * pair_stride;
  }
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  UnpackedQ4_KScales u;
  const bool prefetch = NT >= cpu::tuning().q4_k_avx512_prefetch_min_tokens;
  for (int64_t b = 0; b < nblocks; ++b) {
    if (prefetch) prefetch_ahead(w, b);
    const InterleavedQ4_K& x = w[b];
    unpack_scales_mins(x, u);
    __m512i blk[NT];
    scaled_block_sums<NT>(x, u, a, b, blk);
    __m512i mins[4];  // int16 lanes 2r, 2r + 1: row r's mins of sub-blocks 2p, 2p + 1
    for (int p = 0; p < 4; ++p)
      mins[p] =
          _mm512_cvtepu8_epi16(_mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(u.mins[1][p]),
                                                   reinterpret_cast<const __m128i*>(u.mins[0][p])));
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.d)));
    const __m512 dmin =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.dmin)));
    for (int t = 0; t < NT; ++t) {
      __m512i m = _mm512_setzero_si512();
      for (int p = 0; p < 4; ++p)
        m = _mm512_dpwssd_epi32(m, mins[p], _mm512_set1_epi32(sums[t][4 * b + p]));
      const __m512 dt = _mm512_set1_ps(a[t][b].d);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(blk[t]), _mm512_mul_ps(d, dt), acc[t]);
      acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(m), _mm512_mul_ps(dmin, dt), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) _mm512_storeu_ps(out + static_cast<size_t>(t) * out_stride, acc[t]);
}

// GN tokens (a[g], terms[g], acc[g] for g < GN) over one block whose codes are v and row
// scales d: GN independent vpdpbusd chains, then each sum's float update.
template <int GN>
inline void q8_0_token_group(const __m512i* v, __m512 d, const int8_t* const* a,
                             const int32_t* const* terms, int64_t b, __m512* acc) {
  constexpr int64_t kTerms = InterleavedKernel<InterleavedQ8_0>::kSumsPerBlock;
  const size_t block_offset = static_cast<size_t>(b) * sizeof(BlockQ8_0);
  __m512i isum[GN];
#pragma GCC unroll 8
  for (int g = 0; g < GN; ++g) isum[g] = _mm512_set1_epi32(terms[g][kTerms * b]);
#pragma GCC unroll 8
  for (int s = 0; s < 8; ++s)
#pragma GCC unroll 8
    for (int g = 0; g < GN; ++g)
      isum[g] = _mm512_dpbusd_epi32(isum[g], v[s], broadcast4(a[g] + block_offset + 4 * s));
#pragma GCC unroll 8
  for (int g = 0; g < GN; ++g) {
    const __m512 scale = _mm512_mul_ps(d, _mm512_set1_ps(q8_0_scale(terms[g], b)));
    acc[g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[g]), scale, acc[g]);
  }
}

// Q8_0: codes stored + 128, so each block's sum starts at -128 * (the token's code sum). A
// block's 8 code vectors are loaded into registers once and every token runs over them, G
// tokens at a time (G independent vpdpbusd chains): 16 accumulators + 8 codes + 4 sums fit the
// 32 zmm registers, so up to 16 tokens take one pass over the weights. Two passes of 8 tokens
// (as before) streamed each block from memory in the first and found it in L2 in the second:
// one pass overlaps all of the 16 tokens' arithmetic with the stream. The activation scales
// come as floats from activation_sums. In L2 (one 2560-column group, Zen 4) a block of 16
// tokens takes ~168 cycles against 175 as two calls of 8: near the ~160 that its 128 vpdpbusd
// and 16 vmulps + 16 vfmadd need on the two pipes that run all three (embedded broadcasts of
// the activations measured the same).
template <int NT>
void gemm_tokens(const InterleavedQ8_0* w, int64_t nblocks, const uint8_t* act, size_t act_stride,
                 const int32_t* terms, size_t terms_stride, float* out, size_t out_stride) {
  constexpr int G = NT <= 8 ? NT : 4;  // tokens whose sums are in flight together
  const int8_t* a[NT];                 // token t's first activation block's codes
  const int32_t* t_terms[NT];
  for (int t = 0; t < NT; ++t) {
    a[t] = reinterpret_cast<const BlockQ8_0*>(act + static_cast<size_t>(t) * act_stride)->qs;
    t_terms[t] = terms + static_cast<size_t>(t) * terms_stride;
  }
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  const bool prefetch = NT >= cpu::tuning().q8_0_avx512_prefetch_min_tokens;
  for (int64_t b = 0; b < nblocks; ++b) {
    if (prefetch) prefetch_ahead(w, b);
    const InterleavedQ8_0& x = w[b];
    __m512i v[8];
    for (int s = 0; s < 8; ++s) v[s] = _mm512_loadu_si512(x.qs[s]);
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.d)));
#pragma GCC unroll 4
    for (int t0 = 0; t0 < NT / G * G; t0 += G)
      q8_0_token_group<G>(v, d, a + t0, t_terms + t0, b, acc + t0);
    if constexpr (NT % G != 0)
      q8_0_token_group<NT % G>(v, d, a + NT / G * G, t_terms + NT / G * G, b, acc + NT / G * G);
  }
  for (int t = 0; t < NT; ++t) _mm512_storeu_ps(out + static_cast<size_t>(t) * out_stride, acc[t]);
}

// Q8_0, one token (decode of weights interleaved at load): the block's 8 vpdpbusd split over
// two sums, so each block's dependency chain is 4 deep instead of 8. (Reading a group's blocks
// as 2 or 4 streams, or prefetching 4-16 blocks ahead, measured slower or no faster.)
void gemv_q8_0(const InterleavedQ8_0* w, int64_t nblocks, const uint8_t* act, const int32_t* terms,
               float* out) {
  const auto* a = reinterpret_cast<const BlockQ8_0*>(act);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < nblocks; ++b) {
    const InterleavedQ8_0& x = w[b];
    __m512i even = _mm512_set1_epi32(terms[InterleavedKernel<InterleavedQ8_0>::kSumsPerBlock * b]),
            odd = _mm512_setzero_si512();
    for (int s = 0; s < 8; s += 2) {
      even = _mm512_dpbusd_epi32(even, _mm512_loadu_si512(x.qs[s]), broadcast4(a[b].qs + 4 * s));
      odd = _mm512_dpbusd_epi32(odd, _mm512_loadu_si512(x.qs[s + 1]),
                                broadcast4(a[b].qs + 4 * s + 4));
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.d)));
    const __m512 dt = _mm512_set1_ps(q8_0_scale(terms, b));
    acc =
        _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(even, odd)), _mm512_mul_ps(d, dt), acc);
  }
  _mm512_storeu_ps(out, acc);
}

template <typename Interleaved>
using TokensFn = void (*)(const Interleaved*, int64_t, const uint8_t*, size_t, const int32_t*,
                          size_t, float*, size_t);

// gemm_tokens<1> .. gemm_tokens<kTileTokens>, indexed by nt - 1.
template <typename Interleaved, int... K>
constexpr std::array<TokensFn<Interleaved>, sizeof...(K)> token_kernels(
    std::integer_sequence<int, K...>) {
  return {static_cast<TokensFn<Interleaved>>(gemm_tokens<K + 1>)...};
}

template <typename Interleaved>
void by_tokens(const Interleaved* w, int64_t nblocks, const uint8_t* act, size_t act_stride,
               const int32_t* sums, size_t sums_stride, int nt, float* out, size_t out_stride) {
  constexpr int kTile = InterleavedKernel<Interleaved>::kTileTokens;
  static constexpr auto kKernels =
      token_kernels<Interleaved>(std::make_integer_sequence<int, kTile>{});
  for (int t0 = 0; t0 < nt; t0 += kTile)  // one call per tile, as the other levels do
    kKernels[static_cast<size_t>(std::min(kTile, nt - t0) - 1)](
        w, nblocks, act + static_cast<size_t>(t0) * act_stride, act_stride,
        sums + static_cast<size_t>(t0) * sums_stride, sums_stride,
        out + static_cast<size_t>(t0) * out_stride, out_stride);
}

}  // namespace

void gemm_interleaved_q4_k(const InterleavedQ4_K* w, int64_t nblocks, const uint8_t* act,
                           size_t act_stride, const int32_t* sums, size_t sums_stride, int nt,
                           float* out, size_t out_stride) {
  by_tokens(w, nblocks, act, act_stride, sums, sums_stride, nt, out, out_stride);
}

void gemm_interleaved_q8_0(const InterleavedQ8_0* w, int64_t nblocks, const uint8_t* act,
                           size_t act_stride, const int32_t* sums, size_t sums_stride, int nt,
                           float* out, size_t out_stride) {
  if (nt == 1) return gemv_q8_0(w, nblocks, act, sums, out);
  by_tokens(w, nblocks, act, act_stride, sums, sums_stride, nt, out, out_stride);
}

}  // namespace tangram::vec::avx512

#include "kernels/avx512_target_end.h"
