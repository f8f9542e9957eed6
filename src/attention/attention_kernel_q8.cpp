#include "attention/attention_kernel_q8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "attention/attention_kernel_avx512.h"
#include "attention/attention_kernel_q8_avx512.h"
#include "kernels/half.h"
#include "kernels/simd.h"
#include "kv/key_tiles.h"
#include "kv/kv_row.h"

#if defined(TANGRAM_AVX2) && defined(__F16C__)
#define TANGRAM_KV_Q8_SIMD 1
#else
#define TANGRAM_KV_Q8_SIMD 0
#endif

namespace tangram::kv_q8 {

namespace {

// Scale of the Q8_0 block holding element i of a row.
inline float block_scale(const uint8_t* row, int i) {
  uint16_t d;
  std::memcpy(&d, row + static_cast<size_t>(i / kKvQ8Block) * kKvQ8BlockBytes, sizeof(d));
  return half::fp16_to_fp32(d);
}

inline float q8_element(const uint8_t* row, int i) {
  const auto q = static_cast<int8_t>(row[static_cast<size_t>(i / kKvQ8Block) * kKvQ8BlockBytes + 2 +
                                         static_cast<size_t>(i % kKvQ8Block)]);
  return static_cast<float>(q) * block_scale(row, i);
}

// ---- portable rows ----

// The parts of a quantised query (quantise_query's layout): block b's scale is scale(b * 32).
struct QueryParts {
  const uint8_t* lane;
  int hd;
  float scale(int i) const {
    float d;
    std::memcpy(&d, lane + static_cast<size_t>(i), sizeof(d));  // i / 4 floats in
    return d;
  }
  int8_t value(int i) const { return static_cast<int8_t>(lane[static_cast<size_t>(hd + i)]); }
};

// scores[lane][j] = sum over blocks b of d_k * d_q * (k_int . q_int) for j < n.
void scores_portable(int n_lanes, const uint8_t* q, int hd, const uint8_t* const* k, int n,
                     float* scores,
                     const uint8_t* const* /*next_k: far from memory-bound, no prefetch*/) {
  for (int j = 0; j < n; ++j)
    for (int ln = 0; ln < n_lanes; ++ln) {
      const QueryParts query{q + static_cast<size_t>(ln) * query_bytes(hd), hd};
      float s = 0.0f;
      for (int c = 0; c < hd; c += kKvQ8Block) {
        const uint8_t* block = k[j] + static_cast<size_t>(c / kKvQ8Block) * kKvQ8BlockBytes;
        int32_t dot = 0;
        for (int i = 0; i < kKvQ8Block; ++i)
          dot += int32_t{static_cast<int8_t>(block[2 + i])} * int32_t{query.value(c + i)};
        s += block_scale(block, 0) * query.scale(c) * static_cast<float>(dot);
      }
      scores[ln * kAttentionBlock + j] = s;
    }
}

// The scores of key tiles (key_tiles.h): for each token, the same sum as scores_portable.
void tile_scores_portable(int n_lanes, const uint8_t* q, int hd, const KeyTiles& k, float* scores,
                          const KeyTiles* /*next: far from memory-bound, no prefetch*/) {
  const int64_t run = k.run_tokens;
  for (int i = 0; i < k.n; ++i) {
    const KeyTiles::Span& sp = k.span[i];
    for (int t = sp.token; t < sp.token + sp.count; ++t)
      for (int ln = 0; ln < n_lanes; ++ln) {
        const QueryParts query{q + static_cast<size_t>(ln) * query_bytes(hd), hd};
        float s = 0.0f;
        for (int b = 0; b < hd / kKvQ8Block; ++b) {
          uint16_t dk;
          std::memcpy(&dk, sp.tile + tile_scales(run, b) + static_cast<size_t>(t) * 2, sizeof(dk));
          int32_t dot = 0;
          for (int g = 0; g < kKvQ8Block / 4; ++g) {
            const uint8_t* kg = sp.tile + tile_group(run, b, g) + static_cast<size_t>(t) * 4;
            for (int e = 0; e < 4; ++e)
              dot += (int32_t{kg[e]} - 128) * int32_t{query.value(b * kKvQ8Block + 4 * g + e)};
          }
          s += half::fp16_to_fp32(dk) * query.scale(b * kKvQ8Block) * static_cast<float>(dot);
        }
        scores[ln * kAttentionBlock + sp.at + (t - sp.token)] = s;
      }
  }
}

// acc[lane] += sum_j p[lane][j] * v[j].
void accumulate_portable(int n_lanes, const float* p, int hdv, const uint8_t* const* v, int n,
                         float* acc, const uint8_t* const* /*next_v*/) {
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < hdv; ++i) {
      const float vi = q8_element(v[j], i);
      for (int ln = 0; ln < n_lanes; ++ln) acc[ln * hdv + i] += p[ln * kAttentionBlock + j] * vi;
    }
}

#if TANGRAM_KV_Q8_SIMD

// The scale of the Q8_0 block at `block`, in all 8 lanes.
inline __m256 block_scale8(const uint8_t* block) {
  uint16_t d;
  std::memcpy(&d, block, sizeof(d));
  return _mm256_set1_ps(_cvtsh_ss(d));
}

// Elements w*8 .. w*8+7 of a Q8_0 block as floats: int8 widened, times the block's scale d.
inline __m256 load8(const uint8_t* block, int w, __m256 d) {
  const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 2 + 8 * w));
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d);
}

// The 8 horizontal sums of a[0..7], in order.
inline __m256 reduce8(const __m256 (&a)[8]) {
  const __m256 t0 = _mm256_hadd_ps(a[0], a[1]);
  const __m256 t1 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 t2 = _mm256_hadd_ps(a[4], a[5]);
  const __m256 t3 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1);
  const __m256 u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// scores[lane][j] for NL lanes from their quantised queries; JB rows at a time so NL * JB <= 8
// dot products stay in registers. Per block, each row's |k| is formed once and serves every
// lane: maddubs multiplies it (unsigned) by the query with k's sign moved onto it (pairs sum to
// at most 2 * 128 * 127, no int16 saturation), madd sums pairs into 8 int32, and the block's
// d_k * d_q scales their float sum. Each group of rows first prefetches the same rows of the
// next block (next_k may be null; BlockKernels says why).
template <int NL>
void scores_simd(const uint8_t* q, int hd, const uint8_t* const* k, int n, float* scores,
                 const uint8_t* const* next_k) {
  constexpr int JB = NL >= 8 ? 1 : 8 / NL;
  const size_t lane_bytes = query_bytes(hd);
  const size_t row_bytes = static_cast<size_t>(hd / kKvQ8Block) * kKvQ8BlockBytes;
  const __m256i ones = _mm256_set1_epi16(1);
  for (int j = 0; j < n; j += JB) {
    const int jb = std::min(JB, n - j);
    if (next_k)
      for (int r = 0; r < jb; ++r) prefetch_to_l2(next_k[j + r], row_bytes);
    __m256 acc[8];
    for (auto& a : acc) a = _mm256_setzero_ps();
    for (int c = 0; c < hd; c += kKvQ8Block)
      for (int r = 0; r < jb; ++r) {
        const uint8_t* block = k[j + r] + static_cast<size_t>(c / kKvQ8Block) * kKvQ8BlockBytes;
        const __m256i kq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
        const __m256i k_abs = _mm256_sign_epi8(kq, kq);
        const __m256 dk = block_scale8(block);
        for (int ln = 0; ln < NL; ++ln) {
          const uint8_t* lane = q + static_cast<size_t>(ln) * lane_bytes;
          const __m256i qq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lane + hd + c));
          const __m256i dot =
              _mm256_madd_epi16(_mm256_maddubs_epi16(k_abs, _mm256_sign_epi8(qq, kq)), ones);
          const __m256 scale =
              _mm256_mul_ps(dk, _mm256_loadu_ps(reinterpret_cast<const float*>(lane) + c / 4));
          acc[ln * JB + r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc[ln * JB + r]);
        }
      }
    alignas(32) float sums[8];
    _mm256_store_ps(sums, reduce8(acc));
    for (int ln = 0; ln < NL; ++ln)
      for (int r = 0; r < jb; ++r) scores[ln * kAttentionBlock + j + r] = sums[ln * JB + r];
  }
}

// Key-tile scores of lanes [0, NL) (NL <= 4: 2 NL accumulators and the keys in 16 registers)
// for tokens [c, c + 8) of a span: per block and 4-element group, the 8 tokens' groups in one
// vector, |k| once for every lane, then maddubs against the lane's broadcast group with k's
// sign moved onto it and madd into the token's int32 sum (no horizontal sums: each vector lane
// is one token); the block's d_k * d_q scales them.
template <int NL>
void tile_chunk8(const uint8_t* q, size_t lane_bytes, int hd, const KeyTiles::Span& sp, int64_t run,
                 int c, float* scores, const KeyTiles* next) {
  const __m256i ones = _mm256_set1_epi16(1), bias = _mm256_set1_epi8(static_cast<char>(0x80));
  __m256 f[NL];
  for (auto& x : f) x = _mm256_setzero_ps();
  for (int b = 0; b < hd / kKvQ8Block; ++b) {
    prefetch_tile_block(next, b);
    __m256i s[NL];
    for (auto& x : s) x = _mm256_setzero_si256();
    for (int g = 0; g < kKvQ8Block / 4; ++g) {
      const __m256i ks =
          _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                               sp.tile + tile_group(run, b, g) + static_cast<size_t>(c) * 4)),
                           bias);
      const __m256i k_abs = _mm256_sign_epi8(ks, ks);
      for (int ln = 0; ln < NL; ++ln) {
        int32_t dword;
        std::memcpy(&dword, q + static_cast<size_t>(ln) * lane_bytes + hd + b * kKvQ8Block + 4 * g,
                    4);
        const __m256i qd = _mm256_set1_epi32(dword);
        s[ln] = _mm256_add_epi32(
            s[ln], _mm256_madd_epi16(_mm256_maddubs_epi16(k_abs, _mm256_sign_epi8(qd, ks)), ones));
      }
    }
    const __m256 dk = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(
        sp.tile + tile_scales(run, b) + static_cast<size_t>(c) * 2)));
    for (int ln = 0; ln < NL; ++ln) {
      float dq;
      std::memcpy(
          &dq,
          q + static_cast<size_t>(ln) * lane_bytes + static_cast<size_t>(b) * 8 * sizeof(float), 4);
      f[ln] =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[ln]), _mm256_mul_ps(dk, _mm256_set1_ps(dq)), f[ln]);
    }
  }
  const int at = whole_chunk_at(sp, c, 8);
  for (int ln = 0; ln < NL; ++ln) {
    if (at >= 0) {
      _mm256_storeu_ps(scores + ln * kAttentionBlock + at, f[ln]);
    } else {
      alignas(32) float sums[8];
      _mm256_store_ps(sums, f[ln]);
      store_chunk_part(sums, c, 8, sp, scores + ln * kAttentionBlock);
    }
  }
}

void tile_scores_simd(int n_lanes, const uint8_t* q, int hd, const KeyTiles& k, float* scores,
                      const KeyTiles* next) {
  const size_t lane_bytes = query_bytes(hd);
  for (int l0 = 0; l0 < n_lanes; l0 += 4) {
    const uint8_t* ql = q + static_cast<size_t>(l0) * lane_bytes;
    float* sl = scores + l0 * kAttentionBlock;
    const KeyTiles* pf = l0 == 0 ? next : nullptr;
    for (int i = 0; i < k.n; ++i) {
      const KeyTiles::Span& sp = k.span[i];
      for (int c = sp.token / 8 * 8; c < sp.token + sp.count; c += 8, pf = nullptr) {
        switch (std::min(4, n_lanes - l0)) {
          case 1:
            tile_chunk8<1>(ql, lane_bytes, hd, sp, k.run_tokens, c, sl, pf);
            break;
          case 2:
            tile_chunk8<2>(ql, lane_bytes, hd, sp, k.run_tokens, c, sl, pf);
            break;
          case 3:
            tile_chunk8<3>(ql, lane_bytes, hd, sp, k.run_tokens, c, sl, pf);
            break;
          default:
            tile_chunk8<4>(ql, lane_bytes, hd, sp, k.run_tokens, c, sl, pf);
            break;
        }
      }
    }
  }
}

// acc[lane] += sum_j p[lane][j] * v[j] for NL lanes, CW 8-wide column chunks per pass (a pass
// stays inside one Q8_0 block: 8 * CW divides 32, so a row's scale is read once per pass).
// The first pass (column 0) prefetches each row's successor in the next block (next_v may be null).
template <int NL, int CW>
int accumulate_pass(const float* p, int hdv, int c0, const uint8_t* const* v, int n, float* acc,
                    const uint8_t* const* next_v) {
  static_assert(kKvQ8Block % (8 * CW) == 0);
  const size_t row_bytes = static_cast<size_t>(hdv / kKvQ8Block) * kKvQ8BlockBytes;
  int c = c0;
  for (; c + 8 * CW <= hdv; c += 8 * CW) {
    __m256 a[NL][CW];
    for (int ln = 0; ln < NL; ++ln)
      for (int w = 0; w < CW; ++w) a[ln][w] = _mm256_loadu_ps(acc + ln * hdv + c + 8 * w);
    for (int j = 0; j < n; ++j) {
      if (next_v && c == 0) prefetch_to_l2(next_v[j], row_bytes);
      const uint8_t* block = v[j] + static_cast<size_t>(c / kKvQ8Block) * kKvQ8BlockBytes;
      const __m256 d = block_scale8(block);
      const int w0 = (c % kKvQ8Block) / 8;
      __m256 vc[CW];
      for (int w = 0; w < CW; ++w) vc[w] = load8(block, w0 + w, d);
      for (int ln = 0; ln < NL; ++ln) {
        const __m256 pj = _mm256_broadcast_ss(p + ln * kAttentionBlock + j);
        for (int w = 0; w < CW; ++w) a[ln][w] = _mm256_fmadd_ps(pj, vc[w], a[ln][w]);
      }
    }
    for (int ln = 0; ln < NL; ++ln)
      for (int w = 0; w < CW; ++w) _mm256_storeu_ps(acc + ln * hdv + c + 8 * w, a[ln][w]);
  }
  return c;
}

template <int NL>
void accumulate_simd(const float* p, int hdv, const uint8_t* const* v, int n, float* acc,
                     const uint8_t* const* next_v) {
  constexpr int CW = NL <= 2   ? 4
                     : NL <= 4 ? 2
                               : 1;  // NL * CW accumulators + CW chunks in registers
  const int c = accumulate_pass<NL, CW>(p, hdv, 0, v, n, acc, next_v);
  if constexpr (CW > 1) accumulate_pass<NL, 1>(p, hdv, c, v, n, acc, next_v);
}

// quantise_query with 8-wide vectors (the same arithmetic, so the same bytes): a block's 32
// values in four vectors, packed to int8 with saturation, the 4-element sums by maddubs
// against ones and madd against -128.
void quantise_query_simd(const float* q, int hd, uint8_t* out) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int c = 0; c < hd; c += kKvQ8Block) {
    __m256 x[4];
    __m256 vmax = _mm256_setzero_ps(), unordered = _mm256_setzero_ps();
    for (int w = 0; w < 4; ++w) {
      x[w] = _mm256_loadu_ps(q + c + 8 * w);
      vmax = _mm256_max_ps(vmax, _mm256_andnot_ps(sign, x[w]));
      unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(x[w], x[w], _CMP_UNORD_Q));
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, vmax);
    float amax = 0.0f;
    for (const float a : lanes) amax = std::max(amax, a);
    const float d = _mm256_movemask_ps(unordered) != 0 ? std::numeric_limits<float>::quiet_NaN()
                                                       : amax / 127.0f;
    const __m256 id = _mm256_set1_ps(d > 0.0f ? 1.0f / d : 0.0f);
    __m256i r[4];
    for (int w = 0; w < 4; ++w) {
      const __m256 y = _mm256_mul_ps(x[w], id);  // NaN (NaN or inf times 0) stores 0, as above
      r[w] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_and_ps(y, _mm256_cmp_ps(y, y, _CMP_ORD_Q)),
                                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    // The packs work per 128-bit half: the bytes come out as 4-element groups in the order
    // r0[0:4] r1[0:4] r2[0:4] r3[0:4] r0[4:8] r1[4:8] ...; the permute restores element order.
    const __m256i packed =
        _mm256_packs_epi16(_mm256_packs_epi32(r[0], r[1]), _mm256_packs_epi32(r[2], r[3]));
    const __m256i values =
        _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + hd + c), values);
    const __m256i pair_sums = _mm256_maddubs_epi16(_mm256_set1_epi8(1), values);
    const __m256i group_offsets = _mm256_madd_epi16(pair_sums, _mm256_set1_epi16(-128));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * static_cast<size_t>(hd) + c),
                        group_offsets);
    alignas(32) int32_t groups[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(groups), group_offsets);
    int32_t block_offset = 0;
    for (const int32_t g : groups) block_offset += g;
    std::memcpy(out + 3 * static_cast<size_t>(hd) + static_cast<size_t>(c / kKvQ8Block) * 4,
                &block_offset, sizeof(block_offset));
    _mm256_storeu_ps(reinterpret_cast<float*>(out + c), _mm256_set1_ps(d));
  }
}

// The scores and the value step for n_lanes <= 8 lanes.
void scores_step_simd(int n_lanes, const uint8_t* q, int hd, const uint8_t* const* k, int n,
                      float* scores, const uint8_t* const* next_k) {
  with_lane_count(n_lanes, [&]<int NL>() { scores_simd<NL>(q, hd, k, n, scores, next_k); });
}
void accumulate_step_simd(int n_lanes, const float* p, int hdv, const uint8_t* const* v, int n,
                          float* acc, const uint8_t* const* next_v) {
  with_lane_count(n_lanes, [&]<int NL>() { accumulate_simd<NL>(p, hdv, v, n, acc, next_v); });
}

#endif  // TANGRAM_KV_Q8_SIMD

}  // namespace

void quantise_query(const float* q, int hd, uint8_t* out) {
  for (int c = 0; c < hd; c += kKvQ8Block) {
    float amax = 0.0f;
    bool has_nan = false;
    for (int i = 0; i < kKvQ8Block; ++i) {
      amax = std::max(amax, std::abs(q[c + i]));
      has_nan = has_nan || std::isnan(q[c + i]);
    }
    // A NaN element makes the block's scale NaN, so the scores stay NaN as in float.
    const float d = has_nan ? std::numeric_limits<float>::quiet_NaN() : amax / 127.0f;
    const float id = d > 0.0f ? 1.0f / d : 0.0f;
    int32_t group_sum = 0, block_sum = 0;
    for (int i = 0; i < kKvQ8Block; ++i) {
      const float r = std::nearbyint(q[c + i] * id);  // NaN (a NaN query) stores 0, as does 0/0
      const auto v = static_cast<int8_t>(r >= 127.0f     ? 127
                                         : r <= -127.0f  ? -127
                                         : std::isnan(r) ? 0
                                                         : static_cast<int>(r));
      out[static_cast<size_t>(hd + c + i)] = static_cast<uint8_t>(v);
      group_sum += v;
      block_sum += v;
      if (i % 4 == 3) {
        const int32_t offset = -128 * group_sum;
        std::memcpy(out + static_cast<size_t>(2 * hd + c + i - 3), &offset, sizeof(offset));
        std::memcpy(out + static_cast<size_t>(c + i - 3), &d, sizeof(d));
        group_sum = 0;
      }
    }
    const int32_t block_offset = -128 * block_sum;
    std::memcpy(out + 3 * static_cast<size_t>(hd) + static_cast<size_t>(c / kKvQ8Block) * 4,
                &block_offset, sizeof(block_offset));
  }
}

BlockKernels block_kernels(cpu::KernelLevel level) {
  BlockKernels kernels = portable_kernels();
#if TANGRAM_KV_Q8_SIMD
  kernels.prepared.prepare = quantise_query_simd;
  if (level == cpu::KernelLevel::Avx512Vnni && cpu::supports(level)) {
    kernels.prepared.scores = vec::avx512::attention_scores_q8;
    kernels.prepared.tile_scores = vec::avx512::attention_tile_scores_q8;
    kernels.accumulate = cpu::tuning().q8_0_value_scales_gathered
                             ? vec::avx512::attention_accumulate_q8_gathered_scales
                             : vec::avx512::attention_accumulate_q8_loaded_scales;
    kernels.exp_weights = vec::avx512::attention_exp_weights;
    return kernels;
  }
  kernels.prepared.scores = scores_step_simd;
  kernels.prepared.tile_scores = tile_scores_simd;
  kernels.accumulate = accumulate_step_simd;
#endif
  (void)level;
  return kernels;
}

BlockKernels portable_kernels() {
  BlockKernels kernels{nullptr, accumulate_portable, {}};
  kernels.prepared = {query_bytes, quantise_query, scores_portable, tile_scores_portable};
  return kernels;
}

}  // namespace tangram::kv_q8
