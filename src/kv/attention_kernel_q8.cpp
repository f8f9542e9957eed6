#include "kv/attention_kernel_q8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/half.h"
#include "kernels/simd.h"
#include "kv/kv_row.h"

#if defined(TANGRAM_AVX2) && defined(__F16C__)
#define TANGRAM_KV_Q8_SIMD 1
#else
#define TANGRAM_KV_Q8_SIMD 0
#endif

namespace tangram {

namespace {

constexpr int kLaneGroup = 8;  // lanes sharing one pass over a block's rows
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Key and value row of each entry of one block.
struct BlockRows {
  const uint8_t* k[kAttentionBlock];
  const uint8_t* v[kAttentionBlock];
};

// Scale of the Q8_0 block holding element i of a row.
inline float block_scale(const uint8_t* row, int i) {
  uint16_t d;
  std::memcpy(&d, row + static_cast<size_t>(i / kKvQ8Block) * kKvQ8BlockBytes, sizeof(d));
  return half::fp16_to_fp32(d);
}

inline float q8_element(const uint8_t* row, int i) {
  const auto q = static_cast<int8_t>(
      row[static_cast<size_t>(i / kKvQ8Block) * kKvQ8BlockBytes + 2 + static_cast<size_t>(i % kKvQ8Block)]);
  return static_cast<float>(q) * block_scale(row, i);
}

// ---- portable rows ----

// scores[lane][j] = q[lane] . k[j] for j < n.
void scores_portable(int n_lanes, const float* q, int hd, const BlockRows& rows, int n, float* scores) {
  for (int j = 0; j < n; ++j)
    for (int ln = 0; ln < n_lanes; ++ln) {
      float s = 0.0f;
      for (int i = 0; i < hd; ++i) s += q[ln * hd + i] * q8_element(rows.k[j], i);
      scores[ln * kAttentionBlock + j] = s;
    }
}

// acc[lane] += sum_j p[lane][j] * v[j].
void accumulate_portable(int n_lanes, const float* p, int hdv, const BlockRows& rows, int n, float* acc) {
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < hdv; ++i) {
      const float v = q8_element(rows.v[j], i);
      for (int ln = 0; ln < n_lanes; ++ln) acc[ln * hdv + i] += p[ln * kAttentionBlock + j] * v;
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

// scores[lane][j] = q[lane] . k[j] for NL lanes; JB rows at a time so NL * JB <= 8 dot
// products stay in registers. Block by block: each row's scale is read once per block, and
// each widened key chunk serves every lane.
template <int NL>
void scores_simd(const float* q, int hd, const BlockRows& rows, int n, float* scores) {
  constexpr int JB = NL >= 8 ? 1 : 8 / NL;
  for (int j = 0; j < n; j += JB) {
    const int jb = std::min(JB, n - j);
    __m256 acc[8];
    for (auto& a : acc) a = _mm256_setzero_ps();
    for (int c = 0; c < hd; c += kKvQ8Block)
      for (int r = 0; r < jb; ++r) {
        const uint8_t* block = rows.k[j + r] + static_cast<size_t>(c / kKvQ8Block) * kKvQ8BlockBytes;
        const __m256 d = block_scale8(block);
        for (int w = 0; w < kKvQ8Block / 8; ++w) {
          const __m256 kc = load8(block, w, d);
          for (int ln = 0; ln < NL; ++ln)
            acc[ln * JB + r] = _mm256_fmadd_ps(_mm256_loadu_ps(q + ln * hd + c + 8 * w), kc, acc[ln * JB + r]);
        }
      }
    alignas(32) float sums[8];
    _mm256_store_ps(sums, reduce8(acc));
    for (int ln = 0; ln < NL; ++ln)
      for (int r = 0; r < jb; ++r) scores[ln * kAttentionBlock + j + r] = sums[ln * JB + r];
  }
}

// acc[lane] += sum_j p[lane][j] * v[j] for NL lanes, CW 8-wide column chunks per pass (a pass
// stays inside one Q8_0 block: 8 * CW divides 32, so a row's scale is read once per pass).
template <int NL, int CW>
int accumulate_pass(const float* p, int hdv, int c0, const BlockRows& rows, int n, float* acc) {
  static_assert(kKvQ8Block % (8 * CW) == 0);
  int c = c0;
  for (; c + 8 * CW <= hdv; c += 8 * CW) {
    __m256 a[NL][CW];
    for (int ln = 0; ln < NL; ++ln)
      for (int w = 0; w < CW; ++w) a[ln][w] = _mm256_loadu_ps(acc + ln * hdv + c + 8 * w);
    for (int j = 0; j < n; ++j) {
      const uint8_t* block = rows.v[j] + static_cast<size_t>(c / kKvQ8Block) * kKvQ8BlockBytes;
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
void block_simd(const float* q, int hd, int hdv, const BlockRows& rows, int n, float* scores,
                float* acc, bool accumulate) {
  if (!accumulate) return scores_simd<NL>(q, hd, rows, n, scores);
  constexpr int CW = NL <= 2 ? 4 : NL <= 4 ? 2 : 1;  // NL * CW accumulators + CW chunks in registers
  const int c = accumulate_pass<NL, CW>(scores, hdv, 0, rows, n, acc);
  if constexpr (CW > 1) accumulate_pass<NL, 1>(scores, hdv, c, rows, n, acc);
}

// Runs the scores (accumulate = false) or value (true) step for n_lanes <= 8 lanes.
void block_step_simd(int n_lanes, const float* q, int hd, int hdv, const BlockRows& rows, int n,
                     float* scores, float* acc, bool accumulate) {
  switch (n_lanes) {
    case 1: return block_simd<1>(q, hd, hdv, rows, n, scores, acc, accumulate);
    case 2: return block_simd<2>(q, hd, hdv, rows, n, scores, acc, accumulate);
    case 3: return block_simd<3>(q, hd, hdv, rows, n, scores, acc, accumulate);
    case 4: return block_simd<4>(q, hd, hdv, rows, n, scores, acc, accumulate);
    case 5: return block_simd<5>(q, hd, hdv, rows, n, scores, acc, accumulate);
    case 6: return block_simd<6>(q, hd, hdv, rows, n, scores, acc, accumulate);
    case 7: return block_simd<7>(q, hd, hdv, rows, n, scores, acc, accumulate);
    default: return block_simd<8>(q, hd, hdv, rows, n, scores, acc, accumulate);
  }
}

#endif  // TANGRAM_KV_Q8_SIMD

// Folds one block's scores s[0 .. n_visible) into a lane's running (m, l, acc) and turns them
// into the weights exp(s - m_new); s[n_visible .. n) become weight 0.
void softmax_step(float* s, int n_visible, int n, float& m, float& l, float* acc, int hdv) {
  if (n_visible == 0) {
    std::fill_n(s, n, 0.0f);
    return;
  }
  float block_max = kNegInf;
  for (int j = 0; j < n_visible; ++j) block_max = std::max(block_max, s[j]);
  const float m_new = std::max(m, block_max);
  // m == -inf only before the first visible entry, when l and acc are still 0.
  const float corr = m == m_new ? 1.0f : std::exp(m - m_new);
  float sum = 0.0f;
  int j = 0;
#if TANGRAM_KV_Q8_SIMD
  const __m256 vmax = _mm256_set1_ps(m_new);
  __m256 vsum = _mm256_setzero_ps();
  for (; j + 8 <= n_visible; j += 8) {
    const __m256 e = simd::exp(_mm256_sub_ps(_mm256_loadu_ps(s + j), vmax));
    _mm256_storeu_ps(s + j, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  sum = simd::hsum(vsum);
#endif
  for (; j < n_visible; ++j) {
    s[j] = std::exp(s[j] - m_new);
    sum += s[j];
  }
  std::fill(s + n_visible, s + n, 0.0f);
  if (corr != 1.0f)
    for (int i = 0; i < hdv; ++i) acc[i] *= corr;
  l = l * corr + sum;
  m = m_new;
}

// One block of one head: entries [blk, blk + nb) against the head's lanes.
void head_block(const HeadLanes& h, int hd, int hdv, int64_t blk, int nb, Q8AttentionPath path) {
  BlockRows rows;
  const KvHeadView& view = *h.view;
  view.for_each_run(blk, blk + nb, [&](int64_t first, const uint8_t* k, const uint8_t* v, int64_t count) {
    const auto i0 = static_cast<size_t>(first - blk);
    for (size_t i = 0; i < static_cast<size_t>(count); ++i) {
      rows.k[i0 + i] = k + i * view.k_row_bytes;
      rows.v[i0 + i] = v + i * view.v_row_bytes;
    }
  });
  const bool simd = TANGRAM_KV_Q8_SIMD && path == Q8AttentionPath::Avx2;
  for (int g0 = 0; g0 < h.n_lanes; g0 += kLaneGroup) {
    const int ng = std::min(kLaneGroup, h.n_lanes - g0);
    int visible[kLaneGroup];
    int n_rows = 0;  // entries of the block any lane of the group sees
    for (int ln = 0; ln < ng; ++ln) {
      visible[ln] = static_cast<int>(std::clamp<int64_t>(h.limit[g0 + ln] - blk, 0, nb));
      n_rows = std::max(n_rows, visible[ln]);
    }
    if (n_rows == 0) continue;
    const float* qg = h.q + static_cast<size_t>(g0) * static_cast<size_t>(hd);
    float* sg = h.scores + static_cast<size_t>(g0) * kAttentionBlock;
    float* ag = h.acc + static_cast<size_t>(g0) * static_cast<size_t>(hdv);
#if TANGRAM_KV_Q8_SIMD
    if (simd) block_step_simd(ng, qg, hd, hdv, rows, n_rows, sg, ag, false);
#endif
    if (!simd) scores_portable(ng, qg, hd, rows, n_rows, sg);
    for (int ln = 0; ln < ng; ++ln)
      softmax_step(sg + ln * kAttentionBlock, visible[ln], n_rows, h.m[g0 + ln], h.l[g0 + ln],
                   ag + static_cast<size_t>(ln) * static_cast<size_t>(hdv), hdv);
#if TANGRAM_KV_Q8_SIMD
    if (simd) block_step_simd(ng, qg, hd, hdv, rows, n_rows, sg, ag, true);
#endif
    if (!simd) accumulate_portable(ng, sg, hdv, rows, n_rows, ag);
  }
}

#if TANGRAM_KV_Q8_SIMD
constexpr Q8AttentionPath kPaths[] = {Q8AttentionPath::Portable, Q8AttentionPath::Avx2};
#else
constexpr Q8AttentionPath kPaths[] = {Q8AttentionPath::Portable};
#endif

}  // namespace

Q8AttentionPath default_q8_attention_path() {
  return TANGRAM_KV_Q8_SIMD ? Q8AttentionPath::Avx2 : Q8AttentionPath::Portable;
}

std::span<const Q8AttentionPath> available_q8_attention_paths() { return kPaths; }

void attend_heads_q8(std::span<const HeadLanes> heads, int head_dim, int head_dim_v, int64_t begin,
                     Q8AttentionPath path) {
  int64_t end = begin;
  for (const HeadLanes& h : heads) end = std::max(end, h.end);
  for (int64_t blk = begin; blk < end; blk += kAttentionBlock)
    for (const HeadLanes& h : heads)
      if (blk < h.end)
        head_block(h, head_dim, head_dim_v, blk,
                   static_cast<int>(std::min<int64_t>(kAttentionBlock, h.end - blk)), path);
}

}  // namespace tangram
