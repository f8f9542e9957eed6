#include "kernels/interleaved_rows.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/half.h"
#include "kernels/quant_blocks.h"
#include "kernels/vec_dot_avx512.h"

namespace tangram::vec {

using blocks::BlockQ4_K;
using blocks::BlockQ8_0;
using blocks::BlockQ8_K;
using blocks::kQK0;
using blocks::kQKK;

namespace {

// Dwords 0..7 of rows[0..7] into out[s] = dword s of every row: the 8 x 8 transpose of 32-bit
// lanes (pairs of rows, then quads, then the 128-bit halves).
inline void transpose_8x8_epi32(const __m256i* rows, __m256i* out) {
  __m256i pairs[8], quads[8];
  for (int k = 0; k < 4; ++k) {  // [r0d0 r1d0 r0d1 r1d1 | r0d4 ..], [r0d2 r1d2 r0d3 r1d3 | r0d6 ..]
    pairs[2 * k] = _mm256_unpacklo_epi32(rows[2 * k], rows[2 * k + 1]);
    pairs[2 * k + 1] = _mm256_unpackhi_epi32(rows[2 * k], rows[2 * k + 1]);
  }
  for (int k = 0; k < 2; ++k)  // rows 4k .. 4k + 3: dwords (0|4), (1|5), (2|6), (3|7)
    for (int j = 0; j < 2; ++j) {
      quads[4 * k + 2 * j] = _mm256_unpacklo_epi64(pairs[4 * k + j], pairs[4 * k + j + 2]);
      quads[4 * k + 2 * j + 1] = _mm256_unpackhi_epi64(pairs[4 * k + j], pairs[4 * k + j + 2]);
    }
  for (int s = 0; s < 4; ++s) {
    out[s] = _mm256_permute2x128_si256(quads[s], quads[4 + s], 0x20);
    out[s + 4] = _mm256_permute2x128_si256(quads[s], quads[4 + s], 0x31);
  }
}

// One row's 256 codes of block x in the interleaved order, as 4 vectors of 8 dwords: vector g
// holds the 4 steps of sub-block 2g, then those of sub-block 2g + 1. A qword of a sub-block's
// codes holds the elements of one step, 8s .. 8s + 7; its upper dword, moved a nibble up onto
// the lower one, is that step's dword (codes are at most 15, so no bit crosses a byte).
inline void row_steps(const BlockQ4_K& x, __m256i* steps) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i lower_dwords = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
  for (int g = 0; g < 4; ++g) {  // 32 bytes of qs: sub-blocks 2g (low nibbles), 2g + 1 (high)
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + 32 * g));
    const __m256i codes[2] = {_mm256_and_si256(v, low4),
                              _mm256_and_si256(_mm256_srli_epi16(v, 4), low4)};
    __m256i packed[2];
    for (int k = 0; k < 2; ++k) {
      const __m256i c = codes[k];
      const __m256i merged = _mm256_or_si256(c, _mm256_slli_epi64(_mm256_srli_epi64(c, 32), 4));
      packed[k] = _mm256_permutevar8x32_epi32(merged, lower_dwords);  // steps 0-3, twice
    }
    steps[g] = _mm256_blend_epi32(packed[0], packed[1], 0xF0);
  }
}

// While block b of 16 rows is repacked, block b's share of the next 16 rows' bytes (the next
// group, or the next panel's first, when rows lie back to back as a weight matrix's do) is
// prefetched into L2: the repack waits on the weights' first read from memory, and 16 row
// streams at once are more than the hardware prefetchers follow. Measured in a step of 16
// sequences of q8-2l.gguf (Q8_0): the step outside attention 16.1 -> 13.0 ms CPU (one thread).
// Addresses as integers: the last group's "next rows" lie past the matrix, and a prefetch of
// them is only a hint that cannot fault.
inline void prefetch_next_rows(const uint8_t* w, size_t w_stride, int64_t b, size_t block_bytes) {
  const size_t share = kInterleavedRows * block_bytes;
  const uintptr_t ahead =
      reinterpret_cast<uintptr_t>(w) + kInterleavedRows * w_stride + static_cast<size_t>(b) * share;
  for (size_t off = 0; off < share; off += 64)
    _mm_prefetch(reinterpret_cast<const char*>(ahead + off), _MM_HINT_T1);
}

}  // namespace

// Per block: every row's codes in step order (row_steps), then for each pair of sub-blocks two
// 8 x 8 transposes of 4-byte steps put the 16 rows side by side (the repack runs once per panel
// per call; row by row with 4-byte stores it cost nearly as much as a 16-token product).
// Rows past nr are all zero.
void interleave_rows(const uint8_t* w, size_t w_stride, int nr, int64_t cols,
                     InterleavedQ4_K* dst) {
  static_assert(kInterleavedRows == 16 && sizeof(InterleavedQ4_K::qs[0][0]) == 64);
  const int64_t nblocks = cols / kQKK;
  for (int64_t b = 0; b < nblocks; ++b) {
    prefetch_next_rows(w, w_stride, b, sizeof(BlockQ4_K));
    InterleavedQ4_K& out = dst[b];
    uint16_t d[kInterleavedRows] = {}, dmin[kInterleavedRows] = {};  // fp16
    alignas(16) uint8_t scales_mins[kInterleavedRows][16] = {};      // [row][sc0..7, m0..7]
    __m256i steps[4][kInterleavedRows];                              // [pair of sub-blocks][row]
    for (int r = 0; r < kInterleavedRows; ++r) {
      __m256i row[4];
      if (r < nr) {
        const BlockQ4_K& x =
            reinterpret_cast<const BlockQ4_K*>(w + static_cast<size_t>(r) * w_stride)[b];
        d[r] = x.d;
        dmin[r] = x.dmin;
        _mm_store_si128(reinterpret_cast<__m128i*>(scales_mins[r]),
                        blocks::q4k_scales_mins(x.scales));
        row_steps(x, row);
      } else {
        for (auto& v : row) v = _mm256_setzero_si256();
      }
      for (int g = 0; g < 4; ++g) steps[g][r] = row[g];
    }
    for (int g = 0; g < 4; ++g)
      for (int h = 0; h < 2; ++h) {
        __m256i t[8];  // t[k]: step k % 4 of sub-block 2g + k / 4, rows 8h .. 8h + 7
        transpose_8x8_epi32(steps[g] + 8 * h, t);
        for (int k = 0; k < 8; ++k)
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.qs[2 * g + k / 4][k % 4] + 32 * h),
                              t[k]);
      }
    for (int r = 0; r < kInterleavedRows; ++r)
      for (int p = 0; p < 4; ++p) {
        const uint8_t* sc = scales_mins[r] + 2 * p;  // scales 2p, 2p + 1
        const uint8_t* mn = scales_mins[r] + 8 + 2 * p;
        out.scales_low[p][r] = static_cast<uint8_t>((sc[0] & 0x0F) | (sc[1] & 0x0F) << 4);
        out.mins_low[p][r] = static_cast<uint8_t>((mn[0] & 0x0F) | (mn[1] & 0x0F) << 4);
        out.high_bits[p][r] = static_cast<uint8_t>(sc[0] >> 4 | (sc[1] >> 4) << 2 |
                                                   (mn[0] >> 4) << 4 | (mn[1] >> 4) << 6);
      }
    std::memcpy(out.d, d, sizeof(d));
    std::memcpy(out.dmin, dmin, sizeof(dmin));
  }
}

void activation_sums(const uint8_t* act, int64_t cols, const InterleavedQ4_K*, int32_t* dst) {
  const auto* a = reinterpret_cast<const BlockQ8_K*>(act);
  for (int64_t b = 0; b < cols / kQKK; ++b)
    for (int p = 0; p < 4; ++p) {
      const int16_t* s = a[b].bsums + 4 * p;
      // Each sub-block sum is at most 32 * 128 in magnitude: it fits int16.
      const auto even = static_cast<uint16_t>(s[0] + s[1]),
                 odd = static_cast<uint16_t>(s[2] + s[3]);
      dst[4 * b + p] =
          static_cast<int32_t>(static_cast<uint32_t>(even) | (static_cast<uint32_t>(odd) << 16));
    }
}

void gemm_interleaved_portable(const InterleavedQ4_K* w, int64_t nblocks, const uint8_t* act,
                               size_t act_stride, const int32_t* pair_sums, size_t pair_stride,
                               int nt, float* out, size_t out_stride) {
  for (int t = 0; t < nt; ++t) {
    const auto* a = reinterpret_cast<const BlockQ8_K*>(act + static_cast<size_t>(t) * act_stride);
    const int32_t* sums = pair_sums + static_cast<size_t>(t) * pair_stride;
    for (int r = 0; r < kInterleavedRows; ++r) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nblocks; ++b) {
        const InterleavedQ4_K& x = w[b];
        int32_t scaled = 0, mins = 0;
        for (int j = 0; j < 8; ++j) {
          int32_t isum = 0;
          for (int s = 0; s < 4; ++s)
            for (int i = 0; i < 4; ++i) {
              const uint8_t q = x.qs[j][s][4 * r + i];
              isum += (q & 0x0F) * a[b].qs[32 * j + 8 * s + i] +
                      (q >> 4) * a[b].qs[32 * j + 8 * s + 4 + i];
            }
          scaled += isum * interleaved_q4_k_scale(x, j, r);
          const int32_t pair = sums[4 * b + j / 2];
          const auto half_sum =
              static_cast<int16_t>(j % 2 == 0 ? pair & 0xFFFF : (pair >> 16) & 0xFFFF);
          mins += interleaved_q4_k_min(x, j, r) * half_sum;
        }
        acc += a[b].d * (half::fp16_to_fp32(x.d[r]) * static_cast<float>(scaled) -
                         half::fp16_to_fp32(x.dmin[r]) * static_cast<float>(mins));
      }
      out[static_cast<size_t>(t) * out_stride + static_cast<size_t>(r)] = acc;
    }
  }
}

// Each block of 16 rows is two 8 x 8 transposes of 4-byte steps (the repack runs once per
// panel per call, and as a byte-by-byte copy it cost more than the 16-token product itself).
// Rows past nr read as codes of -128 (0x80), stored as 0 with a scale of 0: an all-zero row.
void interleave_rows(const uint8_t* w, size_t w_stride, int nr, int64_t cols,
                     InterleavedQ8_0* dst) {
  static_assert(kInterleavedRows == 16 && sizeof(InterleavedQ8_0::qs[0]) == 64);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const int64_t nblocks = cols / kQK0;
  for (int64_t b = 0; b < nblocks; ++b) {
    prefetch_next_rows(w, w_stride, b, sizeof(BlockQ8_0));
    InterleavedQ8_0& out = dst[b];
    uint16_t scales[kInterleavedRows] = {};  // fp16; rows past nr: 0
    for (int h = 0; h < 2; ++h) {
      __m256i rows[8], steps[8];
      for (int k = 0; k < 8; ++k) {
        const int r = 8 * h + k;
        if (r >= nr) {
          rows[k] = flip;
          continue;
        }
        const BlockQ8_0& x =
            reinterpret_cast<const BlockQ8_0*>(w + static_cast<size_t>(r) * w_stride)[b];
        scales[r] = x.d;
        rows[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs));
      }
      transpose_8x8_epi32(rows, steps);
      for (int s = 0; s < 8; ++s)  // int8 -> uint8 + 128
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.qs[s] + 32 * h),
                            _mm256_xor_si256(steps[s], flip));
    }
    std::memcpy(out.d, scales, sizeof(scales));
  }
}

void activation_sums(const uint8_t* act, int64_t cols, const InterleavedQ8_0*, int32_t* dst) {
  const auto* a = reinterpret_cast<const BlockQ8_0*>(act);
  for (int64_t b = 0; b < cols / kQK0; ++b) {
    int32_t sum = 0;
    for (const int8_t q : a[b].qs) sum += q;
    dst[InterleavedKernel<InterleavedQ8_0>::kSumsPerBlock * b] = -128 * sum;
    dst[InterleavedKernel<InterleavedQ8_0>::kSumsPerBlock * b + 1] =
        std::bit_cast<int32_t>(half::fp16_to_fp32(a[b].d));
  }
}

void gemm_interleaved_portable(const InterleavedQ8_0* w, int64_t nblocks, const uint8_t* act,
                               size_t act_stride, const int32_t* sums, size_t sums_stride, int nt,
                               float* out, size_t out_stride) {
  for (int t = 0; t < nt; ++t) {
    const auto* a = reinterpret_cast<const BlockQ8_0*>(act + static_cast<size_t>(t) * act_stride);
    const int32_t* offsets = sums + static_cast<size_t>(t) * sums_stride;
    for (int r = 0; r < kInterleavedRows; ++r) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nblocks; ++b) {
        int32_t isum = offsets[InterleavedKernel<InterleavedQ8_0>::kSumsPerBlock * b];
        for (int s = 0; s < 8; ++s)
          for (int i = 0; i < 4; ++i) isum += w[b].qs[s][4 * r + i] * a[b].qs[4 * s + i];
        acc +=
            half::fp16_to_fp32(w[b].d[r]) * half::fp16_to_fp32(a[b].d) * static_cast<float>(isum);
      }
      out[static_cast<size_t>(t) * out_stride + static_cast<size_t>(r)] = acc;
    }
  }
}

namespace {

// Four activation bytes at p, in every 32-bit lane.
inline __m256i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

// UnpackedQ4_KScales of one block, two sub-block pairs per 256-bit vector (shifts are 16-bit,
// the masks keep each byte's own bits).
inline void unpack_scales_mins(const InterleavedQ4_K& x, UnpackedQ4_KScales& u) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), top2 = _mm256_set1_epi8(0x30);
  for (int i = 0; i < 2; ++i) {  // sub-block pairs 2i, 2i + 1
    const auto load = [&](const uint8_t(*field)[kInterleavedRows]) {
      return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(field[2 * i]));
    };
    const __m256i sl = load(x.scales_low), ml = load(x.mins_low), hb = load(x.high_bits);
    const __m256i even_sc = _mm256_or_si256(_mm256_and_si256(sl, low4),
                                            _mm256_and_si256(_mm256_slli_epi16(hb, 4), top2));
    const __m256i odd_sc = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(sl, 4), low4),
                                           _mm256_and_si256(_mm256_slli_epi16(hb, 2), top2));
    const __m256i even_mn = _mm256_or_si256(_mm256_and_si256(ml, low4), _mm256_and_si256(hb, top2));
    const __m256i odd_mn = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ml, 4), low4),
                                           _mm256_and_si256(_mm256_srli_epi16(hb, 2), top2));
    _mm256_store_si256(reinterpret_cast<__m256i*>(u.scales[0][2 * i]), even_sc);
    _mm256_store_si256(reinterpret_cast<__m256i*>(u.scales[1][2 * i]), odd_sc);
    _mm256_store_si256(reinterpret_cast<__m256i*>(u.mins[0][2 * i]),
                       _mm256_unpacklo_epi8(even_mn, odd_mn));
    _mm256_store_si256(reinterpret_cast<__m256i*>(u.mins[1][2 * i]),
                       _mm256_unpackhi_epi8(even_mn, odd_mn));
  }
}

// AVX2 on interleaved Q4_K: rows 8h .. 8h + 7 (the h-th 32 bytes of each 64-byte vector) x NT
// tokens. vpmaddubsw's 16-bit pair sums of a whole sub-block fit int16 (8 x 2 x 15 x 128), so
// they add up in 16 bits and one vpmaddwd per sub-block applies the scale, stored twice per
// 32-bit lane, and widens.
template <int NT>
void q4_k_half_avx2(const InterleavedQ4_K* w, int64_t nblocks, const BlockQ8_K* const* a,
                    const int32_t* const* sums, int h, float* out, size_t out_stride) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  UnpackedQ4_KScales u;
  for (int64_t b = 0; b < nblocks; ++b) {
    if (h == 0) prefetch_ahead(w, b);  // as in q8_0_half_avx2; Q4_K 4 tokens 74.0 -> 51.1 ms a step
    const InterleavedQ4_K& x = w[b];
    unpack_scales_mins(x, u);
    __m256i blk[NT];
    for (int t = 0; t < NT; ++t) blk[t] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      const __m256i sc32 = _mm256_cvtepu8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(u.scales[j % 2][j / 2] + 8 * h)));
      const __m256i sc = _mm256_or_si256(sc32, _mm256_slli_epi32(sc32, 16));
      __m256i sub[NT];
      for (int t = 0; t < NT; ++t) sub[t] = _mm256_setzero_si256();
      for (int s = 0; s < 4; ++s) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs[j][s] + 32 * h));
        const __m256i lo = _mm256_and_si256(v, low4),
                      hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
        for (int t = 0; t < NT; ++t) {
          const int8_t* q = a[t][b].qs + 32 * j + 8 * s;
          sub[t] = _mm256_add_epi16(sub[t], _mm256_maddubs_epi16(lo, broadcast4(q)));
          sub[t] = _mm256_add_epi16(sub[t], _mm256_maddubs_epi16(hi, broadcast4(q + 4)));
        }
      }
      for (int t = 0; t < NT; ++t) blk[t] = _mm256_add_epi32(blk[t], _mm256_madd_epi16(sub[t], sc));
    }
    const __m256 d =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.d + 8 * h)));
    const __m256 dmin =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.dmin + 8 * h)));
    for (int t = 0; t < NT; ++t) {
      __m256i m = _mm256_setzero_si256();
      for (int p = 0; p < 4; ++p) {
        const __m256i mins =
            _mm256_cvtepu8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(u.mins[h][p])));
        m = _mm256_add_epi32(m, _mm256_madd_epi16(mins, _mm256_set1_epi32(sums[t][4 * b + p])));
      }
      const __m256 dt = _mm256_set1_ps(a[t][b].d);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(blk[t]), _mm256_mul_ps(d, dt), acc[t]);
      acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(dmin, dt), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t)
    _mm256_storeu_ps(out + static_cast<size_t>(t) * out_stride + 8 * h, acc[t]);
}

// All 16 rows x one token in one pass over the blocks (both halves of each 64-byte vector at
// once): two passes of q4_k_half_avx2 read each block twice, which at one token (decode of
// weights interleaved at load, bound by the weights' read) cost more than the row-major
// kernels (qwen3-8l-q4_k.gguf, bench-model -t 1, step CPU ms: row-major 27.7-30.7, two passes
// 29.1-30.9, one pass with prefetch_ahead 18.0-20.2). (Two tokens' sums and accumulators in
// one pass would not fit the 16 ymm registers.)
void q4_k_one_token_avx2(const InterleavedQ4_K* w, int64_t nblocks, const BlockQ8_K* a,
                         const int32_t* sums, float* out) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  UnpackedQ4_KScales u;
  for (int64_t b = 0; b < nblocks; ++b) {
    prefetch_ahead(w, b);
    const InterleavedQ4_K& x = w[b];
    unpack_scales_mins(x, u);
    __m256i blk[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int j = 0; j < 8; ++j) {
      __m256i sub[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
      for (int s = 0; s < 4; ++s) {
        const int8_t* q = a[b].qs + 32 * j + 8 * s;
        const __m256i act_lo = broadcast4(q), act_hi = broadcast4(q + 4);
        for (int h = 0; h < 2; ++h) {
          const __m256i v =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs[j][s] + 32 * h));
          const __m256i lo = _mm256_and_si256(v, low4),
                        hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
          sub[h] = _mm256_add_epi16(sub[h], _mm256_maddubs_epi16(lo, act_lo));
          sub[h] = _mm256_add_epi16(sub[h], _mm256_maddubs_epi16(hi, act_hi));
        }
      }
      for (int h = 0; h < 2; ++h) {
        const __m256i sc32 = _mm256_cvtepu8_epi32(
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(u.scales[j % 2][j / 2] + 8 * h)));
        blk[h] = _mm256_add_epi32(
            blk[h], _mm256_madd_epi16(sub[h], _mm256_or_si256(sc32, _mm256_slli_epi32(sc32, 16))));
      }
    }
    const __m256 dt = _mm256_set1_ps(a[b].d);
    for (int h = 0; h < 2; ++h) {
      __m256i m = _mm256_setzero_si256();
      for (int p = 0; p < 4; ++p) {
        const __m256i mins =
            _mm256_cvtepu8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(u.mins[h][p])));
        m = _mm256_add_epi32(m, _mm256_madd_epi16(mins, _mm256_set1_epi32(sums[4 * b + p])));
      }
      const __m256 d =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.d + 8 * h)));
      const __m256 dmin =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.dmin + 8 * h)));
      acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(blk[h]), _mm256_mul_ps(d, dt), acc[h]);
      acc[h] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(dmin, dt), acc[h]);
    }
  }
  for (int h = 0; h < 2; ++h) _mm256_storeu_ps(out + 8 * h, acc[h]);
}

template <int NT>
void q4_k_tokens_avx2(const InterleavedQ4_K* w, int64_t nblocks, const uint8_t* act,
                      size_t act_stride, const int32_t* pair_sums, size_t pair_stride, float* out,
                      size_t out_stride) {
  const BlockQ8_K* a[NT];
  const int32_t* sums[NT];
  for (int t = 0; t < NT; ++t) {
    a[t] = reinterpret_cast<const BlockQ8_K*>(act + static_cast<size_t>(t) * act_stride);
    sums[t] = pair_sums + static_cast<size_t>(t) * pair_stride;
  }
  if constexpr (NT == 1) {
    q4_k_one_token_avx2(w, nblocks, a[0], sums[0], out);
  } else {
    for (int h = 0; h < 2; ++h) q4_k_half_avx2<NT>(w, nblocks, a, sums, h, out, out_stride);
  }
}

// Up to the type's kTileTokens tokens, 4 at a time (16 ymm registers hold 4 tokens' sums).
void gemm_interleaved_q4_k_avx2(const InterleavedQ4_K* w, int64_t nblocks, const uint8_t* act,
                                size_t act_stride, const int32_t* sums, size_t sums_stride, int nt,
                                float* out, size_t out_stride) {
  for (int t0 = 0; t0 < nt; t0 += 4) {
    const uint8_t* a = act + static_cast<size_t>(t0) * act_stride;
    const int32_t* s = sums + static_cast<size_t>(t0) * sums_stride;
    float* o = out + static_cast<size_t>(t0) * out_stride;
    switch (std::min(4, nt - t0)) {
      case 1:
        q4_k_tokens_avx2<1>(w, nblocks, a, act_stride, s, sums_stride, o, out_stride);
        break;
      case 2:
        q4_k_tokens_avx2<2>(w, nblocks, a, act_stride, s, sums_stride, o, out_stride);
        break;
      case 3:
        q4_k_tokens_avx2<3>(w, nblocks, a, act_stride, s, sums_stride, o, out_stride);
        break;
      default:
        q4_k_tokens_avx2<4>(w, nblocks, a, act_stride, s, sums_stride, o, out_stride);
        break;
    }
  }
}

// AVX2 on interleaved Q8_0: rows 8h .. 8h + 7 x NT tokens. The stored codes (+128, for
// vpdpbusd) would saturate vpmaddubsw's pair sums (2 x 255 x 127), so they are flipped back to
// signed and multiplied as |w| (unsigned, at most 128) by the activation carrying w's sign
// (vpsignb; activations are at most 127 in magnitude): pair sums at most 2 x 128 x 127 fit
// int16, and vpmaddwd by ones widens them. The offset sums are not needed.
template <int NT>
void q8_0_half_avx2(const InterleavedQ8_0* w, int64_t nblocks, const BlockQ8_0* const* a, int h,
                    float* out, size_t out_stride) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nblocks; ++b) {
    // Pass h = 0 asks for the blocks ahead; pass h = 1 finds them in L2. (NT >= 3 only: one or
    // two tokens run q8_0_one_pass_avx2.) 8 tokens of 12 x 4096 x 2560 weights: 1.0x -> 0.78-
    // 0.82x the CPU time of the row-major matrix's repack + product; 3 tokens 0.95x -> 0.63-0.67x.
    if (h == 0) prefetch_ahead(w, b);
    const InterleavedQ8_0& x = w[b];
    __m256i isum[NT];
    for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
    for (int s = 0; s < 8; ++s) {
      const __m256i v = _mm256_xor_si256(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs[s] + 32 * h)), flip);
      const __m256i magnitude = _mm256_abs_epi8(v);
      for (int t = 0; t < NT; ++t) {
        const __m256i signed_act = _mm256_sign_epi8(broadcast4(a[t][b].qs + 4 * s), v);
        isum[t] = _mm256_add_epi32(
            isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, signed_act), ones));
      }
    }
    const __m256 d =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.d + 8 * h)));
    for (int t = 0; t < NT; ++t) {
      const __m256 dt = _mm256_set1_ps(half::fp16_to_fp32(a[t][b].d));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(d, dt), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t)
    _mm256_storeu_ps(out + static_cast<size_t>(t) * out_stride + 8 * h, acc[t]);
}

// All 16 rows x NT <= 2 tokens in one pass over the blocks (both halves of each 64-byte vector
// at once). Two passes of q8_0_half_avx2 read each block twice, which at one or two tokens
// (decode of weights interleaved at load, bound by the weights' read) cost 1.28x / 1.17x the
// row-major kernels' CPU time; one pass reads it once. Whether it also asks for the blocks
// ahead is the CPU's tuning: on Zen 5 that cut a step at one token by 11%, at two by 20%
// (medians of 10 rounds).
template <int NT>
void q8_0_one_pass_avx2(const InterleavedQ8_0* w, int64_t nblocks, const BlockQ8_0* const* a,
                        float* out, size_t out_stride) {
  static_assert(NT <= 2, "2 x NT sums and 2 x NT accumulators must stay in the 16 ymm registers");
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[NT][2];
  for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  const bool prefetch = NT >= cpu::tuning().q8_0_avx2_prefetch_min_tokens;
  for (int64_t b = 0; b < nblocks; ++b) {
    if (prefetch) prefetch_ahead(w, b);
    const InterleavedQ8_0& x = w[b];
    __m256i isum[NT][2];
    for (int t = 0; t < NT; ++t) isum[t][0] = isum[t][1] = _mm256_setzero_si256();
    for (int s = 0; s < 8; ++s) {
      __m256i act[NT];
      for (int t = 0; t < NT; ++t) act[t] = broadcast4(a[t][b].qs + 4 * s);
      for (int h = 0; h < 2; ++h) {
        const __m256i v = _mm256_xor_si256(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs[s] + 32 * h)), flip);
        const __m256i magnitude = _mm256_abs_epi8(v);
        for (int t = 0; t < NT; ++t) {
          const __m256i pairs = _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(act[t], v));
          isum[t][h] = _mm256_add_epi32(isum[t][h], _mm256_madd_epi16(pairs, ones));
        }
      }
    }
    const __m256 d[2] = {
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.d))),
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.d + 8)))};
    for (int t = 0; t < NT; ++t) {
      const __m256 dt = _mm256_set1_ps(half::fp16_to_fp32(a[t][b].d));
      for (int h = 0; h < 2; ++h)
        acc[t][h] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t][h]), _mm256_mul_ps(d[h], dt), acc[t][h]);
    }
  }
  for (int t = 0; t < NT; ++t)
    for (int h = 0; h < 2; ++h)
      _mm256_storeu_ps(out + static_cast<size_t>(t) * out_stride + 8 * h, acc[t][h]);
}

template <int NT>
void q8_0_tokens_avx2(const InterleavedQ8_0* w, int64_t nblocks, const uint8_t* act,
                      size_t act_stride, float* out, size_t out_stride) {
  const BlockQ8_0* a[NT];
  for (int t = 0; t < NT; ++t)
    a[t] = reinterpret_cast<const BlockQ8_0*>(act + static_cast<size_t>(t) * act_stride);
  if constexpr (NT <= 2) {
    q8_0_one_pass_avx2<NT>(w, nblocks, a, out, out_stride);
  } else {
    for (int h = 0; h < 2; ++h) q8_0_half_avx2<NT>(w, nblocks, a, h, out, out_stride);
  }
}

// Up to the type's kTileTokens tokens, 4 at a time (16 ymm registers hold 4 tokens' sums).
void gemm_interleaved_q8_0_avx2(const InterleavedQ8_0* w, int64_t nblocks, const uint8_t* act,
                                size_t act_stride,
                                const int32_t* /*offset sums: unused, see q8_0_half_avx2*/, size_t,
                                int nt, float* out, size_t out_stride) {
  for (int t0 = 0; t0 < nt; t0 += 4) {
    const uint8_t* a = act + static_cast<size_t>(t0) * act_stride;
    float* o = out + static_cast<size_t>(t0) * out_stride;
    switch (std::min(4, nt - t0)) {
      case 1:
        q8_0_tokens_avx2<1>(w, nblocks, a, act_stride, o, out_stride);
        break;
      case 2:
        q8_0_tokens_avx2<2>(w, nblocks, a, act_stride, o, out_stride);
        break;
      case 3:
        q8_0_tokens_avx2<3>(w, nblocks, a, act_stride, o, out_stride);
        break;
      default:
        q8_0_tokens_avx2<4>(w, nblocks, a, act_stride, o, out_stride);
        break;
    }
  }
}

}  // namespace

InterleavedGemmFn<InterleavedQ4_K> gemm_interleaved_q4_k_fn(cpu::KernelLevel level) {
  switch (level) {
    case cpu::KernelLevel::Avx512Vnni:
      return avx512::gemm_interleaved_q4_k;
    case cpu::KernelLevel::Avx2:
      return gemm_interleaved_q4_k_avx2;
  }
  return nullptr;
}

InterleavedGemmFn<InterleavedQ8_0> gemm_interleaved_q8_0_fn(cpu::KernelLevel level) {
  switch (level) {
    case cpu::KernelLevel::Avx512Vnni:
      return avx512::gemm_interleaved_q8_0;
    case cpu::KernelLevel::Avx2:
      return gemm_interleaved_q8_0_avx2;
  }
  return nullptr;
}

}  // namespace tangram::vec
