// AVX-512 versions of the two Q8_0 inner loops of KV attention (attention_kernel_q8.cpp has the
// AVX2 and portable ones). Scores: VNNI's vpdpbusd multiplies unsigned by signed bytes, so the
// keys are read as k + 128 (one xor per row, shared by every lane) and each 4-element sum starts
// from the query's precomputed -128 * sum(q) (kv_q8::quantise_query), which leaves the exact
// signed sum; one instruction does 64 multiply-adds, two Q8_0 blocks, against the AVX2 loop's
// sign, maddubs and madd per 32. Values: integer too, the softmax weights times the rows' scales
// rounded to int16 and two rows' values in one vpdpwssd (the section below).
#include "attention/attention_kernel_q8_avx512.h"

#include <immintrin.h>

#include <cstring>
#include <limits>

#include "attention/attention_kernel.h"
#include "attention/attention_kernel_q8.h"
#include "kv/key_tiles.h"
#include "kv/kv_row.h"

// Everything below is AVX-512 code, after every header (avx512_target_begin.h says why) but
// the loops shared with the other row type's file, which must be compiled inside the region.
#include "kernels/avx512_target_begin.h"

#include "attention/attention_kernel_avx512_shared.h"

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
  static void dot_rows(const uint8_t* q, int hd, const uint8_t* const* k,
                       __m512 (&acc)[kv_loops::kAccumulators]) {
    int c = 0;
    for (; c + 2 * kKvQ8Block <= hd; c += 2 * kKvQ8Block)
      score_chunk<NL, JB, true>(q, hd, k, c, acc);
    if (c < hd) score_chunk<NL, JB, false>(q, hd, k, c, acc);
  }
};

// ---- scores on key tiles ----
//
// A tile (key_tiles.h) holds, per block and 4-element group, the groups of 16 tokens in one
// 64-byte vector as k + 128: vpdpbusd against the lane's group broadcast adds its 4 products to
// each of the 16 tokens' sums at once, starting from the query's -128 * sum of the block. Per
// 64 multiply-adds that is one instruction, against about ten for the rows above (their
// horizontal sums, scales and reductions); bench/bench_key_layout measures the two.

// Scores of NL lanes for NC chunks of 16 tokens from token c of a span (NC = 2 when the lanes
// leave registers for both: twice the independent sums, each key load and broadcast serving
// both chunks).
template <int NL, int NC>
inline void tile_chunks(const uint8_t* q, int hd, const KeyTiles::Span& sp, int64_t run, int c,
                        float* scores, const KeyTiles* next) {
  const size_t lane_bytes = kv_q8::query_bytes(hd);
  __m512 f[NL][NC];
  for (auto& lane : f)
    for (auto& x : lane) x = _mm512_setzero_ps();
  for (int b = 0; b < hd / kKvQ8Block; ++b) {
    kv_q8::prefetch_tile_block(next, b);
    __m512i s[NL][NC];
    for (int ln = 0; ln < NL; ++ln) {
      int32_t offset;
      std::memcpy(&offset,
                  q + static_cast<size_t>(ln) * lane_bytes + 3 * static_cast<size_t>(hd) +
                      static_cast<size_t>(b) * 4,
                  4);
      for (auto& x : s[ln]) x = _mm512_set1_epi32(offset);
    }
    for (int g = 0; g < kKvQ8Block / 4; ++g) {
      const uint8_t* group = sp.tile + tile_group(run, b, g) + static_cast<size_t>(c) * 4;
      __m512i k[NC];
      for (int ch = 0; ch < NC; ++ch) k[ch] = _mm512_loadu_si512(group + 64 * ch);
      for (int ln = 0; ln < NL; ++ln) {
        int32_t dword;
        std::memcpy(&dword, q + static_cast<size_t>(ln) * lane_bytes + hd + b * kKvQ8Block + 4 * g,
                    4);
        const __m512i qd = _mm512_set1_epi32(dword);
        for (int ch = 0; ch < NC; ++ch) s[ln][ch] = _mm512_dpbusd_epi32(s[ln][ch], k[ch], qd);
      }
    }
    const uint8_t* scales = sp.tile + tile_scales(run, b) + static_cast<size_t>(c) * 2;
    __m512 dk[NC];
    for (int ch = 0; ch < NC; ++ch)
      dk[ch] =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + 32 * ch)));
    for (int ln = 0; ln < NL; ++ln) {
      float dq;
      std::memcpy(
          &dq,
          q + static_cast<size_t>(ln) * lane_bytes + static_cast<size_t>(b) * 8 * sizeof(float), 4);
      const __m512 d = _mm512_set1_ps(dq);
      for (int ch = 0; ch < NC; ++ch)
        f[ln][ch] =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[ln][ch]), _mm512_mul_ps(dk[ch], d), f[ln][ch]);
    }
  }
  for (int ch = 0; ch < NC; ++ch) {
    const int cc = c + 16 * ch;
    const int at = kv_q8::whole_chunk_at(sp, cc, 16);
    for (int ln = 0; ln < NL; ++ln) {
      if (at >= 0) {
        _mm512_storeu_ps(scores + ln * kAttentionBlock + at, f[ln][ch]);
      } else {
        alignas(64) float sums[16];
        _mm512_store_ps(sums, f[ln][ch]);
        kv_q8::store_chunk_part(sums, cc, 16, sp, scores + ln * kAttentionBlock);
      }
    }
  }
}

template <int NL>
void tile_scores_lanes(const uint8_t* q, int hd, const KeyTiles& k, float* scores,
                       const KeyTiles* next) {
  for (int i = 0; i < k.n; ++i) {
    const KeyTiles::Span& sp = k.span[i];
    const int end = sp.token + sp.count;
    for (int c = sp.token / 16 * 16; c < end; next = nullptr) {
      if (NL <= 4 && c + 16 < end) {
        tile_chunks<NL, 2>(q, hd, sp, k.run_tokens, c, scores, next);
        c += 32;
      } else {
        tile_chunks<NL, 1>(q, hd, sp, k.run_tokens, c, scores, next);
        c += 16;
      }
    }
  }
}

// ---- values: integer accumulation ----
//
// acc[lane] += sum_j p_j * d_j * v_j over the block's rows, with the weights w_j = p_j * d_j
// (softmax weight times the row's block scale) rounded to int16 per lane and column block:
// w_j ~ s * round(w_j / s), s = max_j p_j * max_j |d_j| / 32767, so each weight is off by at
// most s / 2 (the bound the tests derive). Two rows' int8 values, widened to int16 and
// interleaved (one column of both rows per 32-bit lane), meet a broadcast pair of weights in
// one vpdpwssd; the int32 sums of all the block's rows (at most 32 * 32767 * 128 < 2^31) are
// converted and scaled once per call. Per 2 rows x 16 columns that is one instruction per
// lane where the float loop took a widen, convert and scale per row plus one FMA per row and
// lane.

constexpr float kWeightSteps = 32767.0f;
constexpr float kNegligibleWeight = 1e-30f;  // weights are exp(s - running max) <= 1

// The largest of p[0 .. n) (softmax weights, >= 0), NaN if one is NaN; p[n ..] is not read.
inline float weight_max(const float* p, int n, __m512 (&pw)[2]) {
  const auto m0 = static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1);
  const auto m1 = static_cast<__mmask16>(n >= 32 ? 0xFFFF : n > 16 ? (1u << (n - 16)) - 1 : 0);
  pw[0] = _mm512_maskz_loadu_ps(m0, p);
  pw[1] = _mm512_maskz_loadu_ps(m1, p + 16);
  if ((_mm512_cmp_ps_mask(pw[0], pw[0], _CMP_UNORD_Q) |
       _mm512_cmp_ps_mask(pw[1], pw[1], _CMP_UNORD_Q)) != 0)
    return std::numeric_limits<float>::quiet_NaN();
  return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(pw[0]), _mm512_abs_ps(pw[1])));
}

// How the value loop reads its rows' block scales, 2 bytes at the head of each block of each
// row: which is faster depends on the core (cpu::KernelTuning::q8_0_value_scales_gathered).
// Gathers take 8 rows an instruction (the row pointers as 64-bit indices from address 0); on
// Zen 4 scalar loads into a buffer cost 3 times as much, with a store-forwarding stall on
// reading it, while on Ice Lake-SP, where a gather costs more, the loads made the value loop
// 15-19% faster (docs/benchmarks.md, "Kernel tuning by CPU family").
enum class ScaleReads { Gathered, Loaded };

// Block b's scales of rows v[0 .. n) as floats in d (0 past n), by gathers.
inline void gathered_row_scales(const uint8_t* const* v, int n, int b, __m512 (&d)[2]) {
  const __m512i offset =
      _mm512_set1_epi64(static_cast<long long>(b) * static_cast<long long>(kKvQ8BlockBytes));
  __m256i dwords[4];  // rows 8g .. 8g+7, the scale in each dword's low half
  for (int g = 0; g < 4; ++g) {
    const int left = n - 8 * g;
    const auto rows = static_cast<__mmask8>(left >= 8 ? 0xFF : left > 0 ? (1u << left) - 1 : 0);
    const __m512i at = _mm512_add_epi64(_mm512_maskz_loadu_epi64(rows, v + 8 * g), offset);
    dwords[g] = _mm512_mask_i64gather_epi32(_mm256_setzero_si256(), rows, at, nullptr, 1);
  }
  for (int h = 0; h < 2; ++h)
    d[h] = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(
        _mm512_inserti64x4(_mm512_castsi256_si512(dwords[2 * h]), dwords[2 * h + 1], 1)));
}

// Blocks [b, b + CB)'s scales of rows v[0 .. n) as floats in d[cb] (0 past n), by scalar loads
// into a buffer, every block of the pass at once so that one store-forwarding stall covers them.
template <int CB>
inline void loaded_row_scales(const uint8_t* const* v, int n, int b, __m512 (&d)[CB][2]) {
  alignas(64) uint16_t bits[CB][kAttentionBlock] = {};
  for (int j = 0; j < n; ++j) {
    const uint8_t* row = v[j] + static_cast<size_t>(b) * kKvQ8BlockBytes;
    for (int cb = 0; cb < CB; ++cb)
      bits[cb][j] = block_scale_bits(row + static_cast<size_t>(cb) * kKvQ8BlockBytes);
  }
  for (int cb = 0; cb < CB; ++cb)
    for (int h = 0; h < 2; ++h)
      d[cb][h] =
          _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(bits[cb] + 16 * h)));
}

// d divided by the largest magnitude among its lanes, which is returned (NaN if one is not
// finite: the lanes' outputs then turn NaN, as float accumulation would).
inline float normalise_scales(__m512 (&d)[2]) {
  const __m512 zero = _mm512_setzero_ps();
  const __m512 z0 = _mm512_mul_ps(d[0], zero),
               z1 = _mm512_mul_ps(d[1], zero);  // NaN where inf or NaN
  if ((_mm512_cmp_ps_mask(z0, z0, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(z1, z1, _CMP_UNORD_Q)) != 0)
    return std::numeric_limits<float>::quiet_NaN();
  const float dmax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(d[0]), _mm512_abs_ps(d[1])));
  const __m512 inv = _mm512_set1_ps(dmax > 0.0f ? 1.0f / dmax : 0.0f);
  d[0] = _mm512_mul_ps(d[0], inv);
  d[1] = _mm512_mul_ps(d[1], inv);
  return dmax;
}

// round(pw_j * d_j) for the 32 rows as int16, rows 2k and 2k+1 in int32 k (low, high half).
inline void round_weights(const __m512 (&pw)[2], const __m512 (&d)[2], int32_t* out) {
  const __m256i lo = _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(pw[0], d[0])));
  const __m256i hi = _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(pw[1], d[1])));
  _mm256_store_si256(reinterpret_cast<__m256i*>(out), lo);
  _mm256_store_si256(reinterpret_cast<__m256i*>(out + 8), hi);
}

// Each lane's weights scaled to [0, 32767] and the float step they are counted in.
template <int NL>
struct LaneWeights {
  __m512 pw[NL][2];
  float step[NL];  // max_j p_j / 32767 (times a block's max |d| gives s)

  LaneWeights(const float* p, int n) {
    for (int ln = 0; ln < NL; ++ln) {
      float pmax = weight_max(p + ln * kAttentionBlock, n, pw[ln]);
      // Weights are relative to the running maximum (at most 1); a block whose largest is
      // below 1e-30 adds less than 32e-30 of it, and kWeightSteps / pmax would overflow to
      // inf (pmax < ~1e-34), which the conversion turns into -32768 for every weight, zeros
      // included: such a block adds nothing.
      if (pmax < kNegligibleWeight) pmax = 0.0f;  // not NaN: `<` is false for it, NaN passes on
      const __m512 inv = _mm512_set1_ps(pmax > 0.0f ? kWeightSteps / pmax : 0.0f);
      pw[ln][0] = _mm512_mul_ps(pw[ln][0], inv);
      pw[ln][1] = _mm512_mul_ps(pw[ln][1], inv);
      step[ln] = pmax / kWeightSteps;
    }
  }
};

// sum += the pairwise int16 products of a and b (vpdpwssd) in place. GCC 12's intrinsic copies
// every accumulator to a new register and back on each use in the row loop (48 moves per row
// pair at 4 lanes, a fifth slower); the asm names the accumulator as its own destination.
// Written for both assembler dialects (AT&T | Intel), so -masm=intel builds too.
inline void add_products(__m512i& sum, __m512i a, __m512i b) {
  __asm__("vpdpwssd {%2, %1, %0|%0, %1, %2}" : "+v"(sum) : "v"(a), "v"(b));
}

// Rows ra and rb (weights w[.][.][pair], low and high half) into the accumulators of column
// blocks [b, b + CB): both rows widened to int16 and interleaved, one vpdpwssd per lane and half.
template <int NL, int CB>
inline void add_row_pair(const uint8_t* ra, const uint8_t* rb, int b,
                         const int32_t (&w)[NL][CB][kAttentionBlock / 2], int pair,
                         __m512i (&sum)[NL][CB][2]) {
  for (int cb = 0; cb < CB; ++cb) {
    const size_t at = static_cast<size_t>(b + cb) * kKvQ8BlockBytes + 2;
    const __m512i za =
        _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ra + at)));
    const __m512i zb =
        _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rb + at)));
    const __m512i lo = _mm512_unpacklo_epi16(za, zb), hi = _mm512_unpackhi_epi16(za, zb);
    for (int ln = 0; ln < NL; ++ln) {
      const __m512i wj = _mm512_set1_epi32(w[ln][cb][pair]);
      add_products(sum[ln][cb][0], lo, wj);
      add_products(sum[ln][cb][1], hi, wj);
    }
  }
}

// Column blocks [b, b + CB) of NL lanes over the n rows: the rounded weights, then rows two at
// a time into NL x CB x 2 int32 accumulators, then acc += s * sum. unpacklo/hi_epi16 interleave
// per 128-bit lane, so accumulator 0 of a block holds columns 8L + 0..3 of lane L and
// accumulator 1 columns 8L + 4..7; two permutes restore column order at the end. The first
// pass prefetches the rows of the next block (next_v may be null).
template <ScaleReads Reads, int NL, int CB>
int accumulate_pass(const LaneWeights<NL>& lw, int hdv, int b, const uint8_t* const* v, int n,
                    float* acc, const uint8_t* const* next_v) {
  const int n_blocks = hdv / kKvQ8Block;
  const size_t row_bytes = static_cast<size_t>(n_blocks) * kKvQ8BlockBytes;
  const __m512i first_half =
      _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i second_half =
      _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  for (; b + CB <= n_blocks; b += CB) {
    alignas(64) int32_t w[NL][CB][kAttentionBlock / 2];  // [lane][block][row pair]
    float s[NL][CB];
    __m512 ds[CB][2];
    if constexpr (Reads == ScaleReads::Gathered)
      for (int cb = 0; cb < CB; ++cb) gathered_row_scales(v, n, b + cb, ds[cb]);
    else
      loaded_row_scales<CB>(v, n, b, ds);
    for (int cb = 0; cb < CB; ++cb) {
      const float dmax = normalise_scales(ds[cb]);
      for (int ln = 0; ln < NL; ++ln) {
        round_weights(lw.pw[ln], ds[cb], w[ln][cb]);
        s[ln][cb] = lw.step[ln] * dmax;
      }
    }
    __m512i sum[NL][CB][2];
    for (auto& lane : sum)
      for (auto& block : lane) block[0] = block[1] = _mm512_setzero_si512();
    // Whole pairs, then a last row alone (its partner's weight is 0); the loops apart so that
    // the accumulators stay in their registers.
    const bool prefetch = next_v && b == 0;
    int j = 0;
    if (prefetch)
      for (; j + 1 < n; j += 2) {
        prefetch_to_l2(next_v[j], row_bytes);
        prefetch_to_l2(next_v[j + 1], row_bytes);
        add_row_pair<NL, CB>(v[j], v[j + 1], b, w, j / 2, sum);
      }
    else
      for (; j + 1 < n; j += 2) add_row_pair<NL, CB>(v[j], v[j + 1], b, w, j / 2, sum);
    if (j < n) {
      if (prefetch) prefetch_to_l2(next_v[j], row_bytes);
      add_row_pair<NL, CB>(v[j], v[j], b, w, j / 2, sum);
    }
    for (int ln = 0; ln < NL; ++ln)
      for (int cb = 0; cb < CB; ++cb) {
        const __m512 lo = _mm512_cvtepi32_ps(sum[ln][cb][0]),
                     hi = _mm512_cvtepi32_ps(sum[ln][cb][1]);
        const __m512 scale = _mm512_set1_ps(s[ln][cb]);
        float* out = acc + ln * hdv + (b + cb) * kKvQ8Block;
        _mm512_storeu_ps(out, _mm512_fmadd_ps(scale, _mm512_permutex2var_ps(lo, first_half, hi),
                                              _mm512_loadu_ps(out)));
        _mm512_storeu_ps(out + 16,
                         _mm512_fmadd_ps(scale, _mm512_permutex2var_ps(lo, second_half, hi),
                                         _mm512_loadu_ps(out + 16)));
      }
  }
  return b;
}

// The widest pass that fits (up to 4 blocks, NL x CB x 2 accumulators of 32 registers, the
// rest for the rows), then narrower ones for the blocks left.
template <ScaleReads Reads, int NL, int CB>
void accumulate_from(const LaneWeights<NL>& lw, int hdv, int b, const uint8_t* const* v, int n,
                     float* acc, const uint8_t* const* next_v) {
  b = accumulate_pass<Reads, NL, CB>(lw, hdv, b, v, n, acc, next_v);
  if constexpr (CB > 1) accumulate_from<Reads, NL, CB / 2>(lw, hdv, b, v, n, acc, next_v);
}

template <ScaleReads Reads, int NL>
void accumulate_lanes(const float* p, int hdv, const uint8_t* const* v, int n, float* acc,
                      const uint8_t* const* next_v) {
  constexpr int fit = kv_loops::kAccumulators / (2 * NL);
  constexpr int CB = fit >= 4 ? 4 : fit >= 2 ? 2 : 1;
  const LaneWeights<NL> lw(p, n);
  accumulate_from<Reads, NL, CB>(lw, hdv, 0, v, n, acc, next_v);
}

template <ScaleReads Reads>
void accumulate(int n_lanes, const float* p, int hdv, const uint8_t* const* v, int n, float* acc,
                const uint8_t* const* next_v) {
  switch (n_lanes) {
    case 1:
      return accumulate_lanes<Reads, 1>(p, hdv, v, n, acc, next_v);
    case 2:
      return accumulate_lanes<Reads, 2>(p, hdv, v, n, acc, next_v);
    case 3:
      return accumulate_lanes<Reads, 3>(p, hdv, v, n, acc, next_v);
    case 4:
      return accumulate_lanes<Reads, 4>(p, hdv, v, n, acc, next_v);
    case 5:
      return accumulate_lanes<Reads, 5>(p, hdv, v, n, acc, next_v);
    case 6:
      return accumulate_lanes<Reads, 6>(p, hdv, v, n, acc, next_v);
    case 7:
      return accumulate_lanes<Reads, 7>(p, hdv, v, n, acc, next_v);
    default:
      return accumulate_lanes<Reads, 8>(p, hdv, v, n, acc, next_v);
  }
}

}  // namespace

void attention_scores_q8(int n_lanes, const uint8_t* q, int hd, const uint8_t* const* k, int n,
                         float* scores, const uint8_t* const* next_k) {
  kv_loops::scores<Q8Rows>(n_lanes, q, hd, k, n, scores, next_k);
}

void attention_tile_scores_q8(int n_lanes, const uint8_t* q, int hd, const KeyTiles& k,
                              float* scores, const KeyTiles* next) {
  switch (n_lanes) {
    case 1:
      return tile_scores_lanes<1>(q, hd, k, scores, next);
    case 2:
      return tile_scores_lanes<2>(q, hd, k, scores, next);
    case 3:
      return tile_scores_lanes<3>(q, hd, k, scores, next);
    case 4:
      return tile_scores_lanes<4>(q, hd, k, scores, next);
    case 5:
      return tile_scores_lanes<5>(q, hd, k, scores, next);
    case 6:
      return tile_scores_lanes<6>(q, hd, k, scores, next);
    case 7:
      return tile_scores_lanes<7>(q, hd, k, scores, next);
    default:
      return tile_scores_lanes<8>(q, hd, k, scores, next);
  }
}

void attention_accumulate_q8_gathered_scales(int n_lanes, const float* p, int hdv,
                                             const uint8_t* const* v, int n, float* acc,
                                             const uint8_t* const* next_v) {
  accumulate<ScaleReads::Gathered>(n_lanes, p, hdv, v, n, acc, next_v);
}

void attention_accumulate_q8_loaded_scales(int n_lanes, const float* p, int hdv,
                                           const uint8_t* const* v, int n, float* acc,
                                           const uint8_t* const* next_v) {
  accumulate<ScaleReads::Loaded>(n_lanes, p, hdv, v, n, acc, next_v);
}

}  // namespace tangram::vec::avx512

#include "kernels/avx512_target_end.h"
