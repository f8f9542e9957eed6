// K-quant block conversions (Q4_K, Q6_K, and the Q8_K activation type).
//
// Quantiser choice (documented because it is ours, not llama.cpp's iterative search):
//  * Every sub-block is fitted on its own, minimising the squared error. Starting from the
//    plain min/max (Q4_K) or max-magnitude (Q6_K) scale and a few slightly finer/coarser ones,
//    we assign the nearest codes, refit scale (and, for Q4_K, the min) by least squares for
//    those codes (twice for Q4_K, once for Q6_K), and keep the candidate with the smallest
//    error. More candidates measured no better (RMS error on N(0,1): Q4_K 0.0704 vs 0.0699
//    with twice the candidates, Q6_K 0.0172 either way) at 2-3x the time; as is, quantising
//    takes about 9 ns per weight for both types on one core.
//  * The sub-block scales (and Q4_K mins) are then quantised to 6 bits (Q4_K) or int8 (Q6_K)
//    against a per-super-block fp16 scale; of the nearest quantised value and its neighbours we
//    keep the one that decodes with the least error, and the codes are recomputed with the
//    scales as they will be decoded, so the stored values are the nearest representable ones.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/half.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"
#include "kernels/simd.h"

namespace tangram::quant {

using blocks::BlockQ4_K;
using blocks::BlockQ6_K;
using blocks::BlockQ8_K;
using blocks::kQKK;

namespace {

// x[n] ~ scale * q - min with q in [0, nmax] and min >= 0 (ggml's K-quant mins are offsets
// subtracted from non-negative codes, so a sub-block's range is widened to include zero).
struct AffineFit {
  float scale = 0.0f;
  float min = 0.0f;
};

// The error and least-squares sums below run over 8 elements at a time (n is a multiple of
// 8): AVX2 where available, else kLanes independent partial sums the compiler can vectorise.
// A single running float sum would serialise on the add latency; quantising a model took
// minutes that way.
#if !TANGRAM_AVX2
constexpr int kLanes = 8;

float lane_sum(const float* acc) {
  float s = 0.0f;
  for (int k = 0; k < kLanes; ++k) s += acc[k];
  return s;
}
#endif

#if TANGRAM_AVX2
// round_clamp_f on 8 lanes: max/min return the second operand for NaN, as the scalar form.
inline __m256 round_clamp8(__m256 v, __m256 lo, __m256 hi) {
  return _mm256_round_ps(_mm256_min_ps(_mm256_max_ps(v, lo), hi),
                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
#endif

float affine_error(const float* x, int n, int nmax, float scale, float min) {
  // scale <= 0 decodes every code to -min (inv = 0 gives code 0).
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
  const float top = static_cast<float>(nmax);
#if TANGRAM_AVX2
  const __m256 vinv = _mm256_set1_ps(inv), vmin = _mm256_set1_ps(min),
               vscale = _mm256_set1_ps(scale);
  const __m256 lo = _mm256_setzero_ps(), hi = _mm256_set1_ps(top);
  __m256 acc = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
    const __m256 q = round_clamp8(_mm256_mul_ps(_mm256_add_ps(xv, vmin), vinv), lo, hi);
    const __m256 e = _mm256_sub_ps(_mm256_fmsub_ps(vscale, q, vmin), xv);
    acc = _mm256_fmadd_ps(e, e, acc);
  }
  return simd::hsum(acc);
#else
  float acc[kLanes] = {};
  for (int i = 0; i < n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      const float q = round_clamp_f((x[i + k] + min) * inv, 0.0f, top);
      const float e = scale * q - min - x[i + k];
      acc[k] += e * e;
    }
  }
  return lane_sum(acc);
#endif
}

// Sums for a least-squares fit of the codes q that x gets at (inv, offset): q = code of
// (x + offset) * inv clamped to [lo, hi]. Returns {sum q, sum q^2, sum x, sum q x}.
struct FitSums {
  double q = 0, qq = 0, x = 0, qx = 0;
};

FitSums fit_sums(const float* x, int n, float inv, float offset, float lo, float hi) {
#if TANGRAM_AVX2
  const __m256 vinv = _mm256_set1_ps(inv), voff = _mm256_set1_ps(offset);
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  __m256 sq = _mm256_setzero_ps(), sqq = sq, sx = sq, sqx = sq;
  for (int i = 0; i < n; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
    const __m256 q = round_clamp8(_mm256_mul_ps(_mm256_add_ps(xv, voff), vinv), vlo, vhi);
    sq = _mm256_add_ps(sq, q);
    sqq = _mm256_fmadd_ps(q, q, sqq);
    sx = _mm256_add_ps(sx, xv);
    sqx = _mm256_fmadd_ps(q, xv, sqx);
  }
  return {static_cast<double>(simd::hsum(sq)), static_cast<double>(simd::hsum(sqq)),
          static_cast<double>(simd::hsum(sx)), static_cast<double>(simd::hsum(sqx))};
#else
  float sq[kLanes] = {}, sqq[kLanes] = {}, sx[kLanes] = {}, sqx[kLanes] = {};
  for (int i = 0; i < n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      const float q = round_clamp_f((x[i + k] + offset) * inv, lo, hi);
      sq[k] += q;
      sqq[k] += q * q;
      sx[k] += x[i + k];
      sqx[k] += q * x[i + k];
    }
  }
  return {lane_sum(sq), lane_sum(sqq), lane_sum(sx), lane_sum(sqx)};
#endif
}

// Least-squares refit of (scale, min) for the codes the current fit assigns.
AffineFit refit_affine(const float* x, int n, int nmax, AffineFit f) {
  if (f.scale <= 0.0f) return f;
  const FitSums S = fit_sums(x, n, 1.0f / f.scale, f.min, 0.0f, static_cast<float>(nmax));
  const double det = n * S.qq - S.q * S.q;
  if (det <= 0) return f;
  double s = (n * S.qx - S.q * S.x) / det;
  double m = (s * S.q - S.x) / n;
  if (m < 0) {
    m = 0;
    s = S.qq > 0 ? S.qx / S.qq : 0;
  }
  if (s <= 0) return f;
  return {static_cast<float>(s), static_cast<float>(m)};
}

AffineFit fit_affine(const float* x, int n, int nmax) {
  float lo = 0.0f;
  float hi = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  if (!(hi > lo)) return {0.0f, -lo};
  AffineFit best{(hi - lo) / static_cast<float>(nmax), -lo};
  float best_err = affine_error(x, n, nmax, best.scale, best.min);
  constexpr float kSteps[] = {-0.5f, 0.5f, 1.5f};
  for (const float step : kSteps) {
    AffineFit f{(hi - lo) / (static_cast<float>(nmax) + step), -lo};
    for (int it = 0; it < 2; ++it) f = refit_affine(x, n, nmax, f);
    const float err = affine_error(x, n, nmax, f.scale, f.min);
    if (err < best_err) {
      best_err = err;
      best = f;
    }
  }
  return best;
}

// x[n] ~ scale * q with q in [qmin, qmax] (scale may be negative, so the larger negative code
// range can sit on either side).
float symmetric_error(const float* x, int n, int qmin, int qmax, float scale) {
  const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
  const float lo = static_cast<float>(qmin), hi = static_cast<float>(qmax);
#if TANGRAM_AVX2
  const __m256 vinv = _mm256_set1_ps(inv), vscale = _mm256_set1_ps(scale);
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  __m256 acc = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
    const __m256 e = _mm256_fmsub_ps(vscale, round_clamp8(_mm256_mul_ps(xv, vinv), vlo, vhi), xv);
    acc = _mm256_fmadd_ps(e, e, acc);
  }
  return simd::hsum(acc);
#else
  float acc[kLanes] = {};
  for (int i = 0; i < n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      const float e = scale * round_clamp_f(x[i + k] * inv, lo, hi) - x[i + k];
      acc[k] += e * e;
    }
  }
  return lane_sum(acc);
#endif
}

// Least-squares scale for the codes that `scale` assigns (0 if they are all zero).
float refit_symmetric(const float* x, int n, int qmin, int qmax, float scale) {
  const FitSums S =
      fit_sums(x, n, 1.0f / scale, 0.0f, static_cast<float>(qmin), static_cast<float>(qmax));
  return S.qq > 0 ? static_cast<float>(S.qx / S.qq) : 0.0f;
}

float fit_symmetric(const float* x, int n, int qmin, int qmax) {
  float amax = 0.0f;
  float extreme = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      extreme = x[i];
    }
  }
  if (amax == 0.0f) return 0.0f;
  float best = extreme / static_cast<float>(qmin);
  float best_err = symmetric_error(x, n, qmin, qmax, best);
  constexpr float kSteps[] = {0.0f, 1.5f};
  for (const float step : kSteps) {
    // Extreme on the long (negative-code) side, and on the short side.
    for (const float denom : {static_cast<float>(qmin) - step, static_cast<float>(qmax) + step}) {
      const float s = refit_symmetric(x, n, qmin, qmax, extreme / denom);
      if (s == 0.0f) continue;
      const float err = symmetric_error(x, n, qmin, qmax, s);
      if (err < best_err) {
        best_err = err;
        best = s;
      }
    }
  }
  return best;
}

}  // namespace

void quantize_row_q4_k(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<BlockQ4_K*>(dst);
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const float* x = src + b * kQKK;  // [256]
    AffineFit fits[8];
    float max_scale = 0.0f;
    float max_min = 0.0f;
    for (int j = 0; j < 8; ++j) {
      fits[j] = fit_affine(x + 32 * j, 32, 15);
      max_scale = std::max(max_scale, fits[j].scale);
      max_min = std::max(max_min, fits[j].min);
    }
    BlockQ4_K& blk = out[b];
    blk.d = half::fp32_to_fp16(max_scale / 63.0f);
    blk.dmin = half::fp32_to_fp16(max_min / 63.0f);
    const float d = half::fp16_to_fp32(blk.d);
    const float dmin = half::fp16_to_fp32(blk.dmin);
    uint8_t sc[8];
    uint8_t mn[8];
    for (int j = 0; j < 8; ++j) {
      // The 6-bit scale and min nearest to the fit, or a neighbour of each if that decodes to a
      // smaller error (rounding the scale down can make the codes clamp).
      const int sc0 = d > 0.0f ? round_clamp(fits[j].scale / d, 0, 63) : 0;
      const int mn0 = dmin > 0.0f ? round_clamp(fits[j].min / dmin, 0, 63) : 0;
      int best_sc = sc0, best_mn = mn0;
      float best_err = std::numeric_limits<float>::infinity();
      for (int ds = -1; ds <= 1; ++ds) {
        for (int dm = -1; dm <= 1; ++dm) {
          const int cs = sc0 + ds, cm = mn0 + dm;
          if (cs < 0 || cs > 63 || cm < 0 || cm > 63) continue;
          const float err = affine_error(x + 32 * j, 32, 15, d * static_cast<float>(cs),
                                         dmin * static_cast<float>(cm));
          if (err < best_err) {
            best_err = err;
            best_sc = cs;
            best_mn = cm;
          }
        }
      }
      sc[j] = static_cast<uint8_t>(best_sc);
      mn[j] = static_cast<uint8_t>(best_mn);
    }
    std::memset(blk.scales, 0, sizeof(blk.scales));
    for (int j = 0; j < 4; ++j) {
      blk.scales[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
      blk.scales[j + 4] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
      blk.scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0F) | ((mn[j + 4] & 0x0F) << 4));
    }
    uint8_t q[kQKK];
    for (int j = 0; j < 8; ++j) {
      const float s = d * static_cast<float>(sc[j]);
      const float m = dmin * static_cast<float>(mn[j]);
      const float inv = s > 0.0f ? 1.0f / s : 0.0f;
      for (int i = 0; i < 32; ++i)
        q[32 * j + i] = static_cast<uint8_t>(round_clamp((x[32 * j + i] + m) * inv, 0, 15));
    }
    for (int g = 0; g < 4; ++g)
      for (int l = 0; l < 32; ++l)
        blk.qs[32 * g + l] = static_cast<uint8_t>(q[64 * g + l] | (q[64 * g + 32 + l] << 4));
  }
}

void dequantize_row_q4_k_portable(const void* src, float* dst, int64_t n) {
  const auto* in = static_cast<const BlockQ4_K*>(src);
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const BlockQ4_K& blk = in[b];
    const float d = half::fp16_to_fp32(blk.d);
    const float dmin = half::fp16_to_fp32(blk.dmin);
    float* y = dst + b * kQKK;  // [256]
    for (int g = 0; g < 4; ++g) {
      uint8_t sc0, m0, sc1, m1;
      blocks::q4k_scale_min(blk.scales, 2 * g, &sc0, &m0);
      blocks::q4k_scale_min(blk.scales, 2 * g + 1, &sc1, &m1);
      const float d0 = d * sc0, mm0 = dmin * m0, d1 = d * sc1, mm1 = dmin * m1;
      const uint8_t* qs = blk.qs + 32 * g;
      for (int l = 0; l < 32; ++l) {
        y[64 * g + l] = d0 * static_cast<float>(qs[l] & 0x0F) - mm0;
        y[64 * g + 32 + l] = d1 * static_cast<float>(qs[l] >> 4) - mm1;
      }
    }
  }
}

void quantize_row_q6_k(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<BlockQ6_K*>(dst);
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const float* x = src + b * kQKK;  // [256]
    float scales[16];
    float max_abs = 0.0f;
    for (int k = 0; k < 16; ++k) {
      scales[k] = fit_symmetric(x + 16 * k, 16, -32, 31);
      max_abs = std::max(max_abs, std::fabs(scales[k]));
    }
    BlockQ6_K& blk = out[b];
    blk.d = half::fp32_to_fp16(max_abs / 127.0f);
    const float d = half::fp16_to_fp32(blk.d);
    uint8_t q[kQKK];
    for (int k = 0; k < 16; ++k) {
      // The int8 scale nearest to the fit, or a neighbour if that decodes to a smaller error.
      const int sc0 = d > 0.0f ? round_clamp(scales[k] / d, -127, 127) : 0;
      int sc = sc0;
      float best_err = std::numeric_limits<float>::infinity();
      for (int cand = std::max(-127, sc0 - 1); cand <= std::min(127, sc0 + 1); ++cand) {
        const float err = symmetric_error(x + 16 * k, 16, -32, 31, d * static_cast<float>(cand));
        if (err < best_err) {
          best_err = err;
          sc = cand;
        }
      }
      blk.scales[k] = static_cast<int8_t>(sc);
      const float s = d * static_cast<float>(sc);
      const float inv = s != 0.0f ? 1.0f / s : 0.0f;
      for (int i = 0; i < 16; ++i)
        q[16 * k + i] = static_cast<uint8_t>(round_clamp(x[16 * k + i] * inv, -32, 31) + 32);
    }
    for (int h = 0; h < 2; ++h) {
      const uint8_t* qq = q + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int a = qq[l], bb = qq[l + 32], c = qq[l + 64], e = qq[l + 96];
        blk.ql[64 * h + l] = static_cast<uint8_t>((a & 0x0F) | ((c & 0x0F) << 4));
        blk.ql[64 * h + 32 + l] = static_cast<uint8_t>((bb & 0x0F) | ((e & 0x0F) << 4));
        blk.qh[32 * h + l] =
            static_cast<uint8_t>((a >> 4) | ((bb >> 4) << 2) | ((c >> 4) << 4) | ((e >> 4) << 6));
      }
    }
  }
}

void dequantize_row_q6_k_portable(const void* src, float* dst, int64_t n) {
  const auto* in = static_cast<const BlockQ6_K*>(src);
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const BlockQ6_K& blk = in[b];
    const float d = half::fp16_to_fp32(blk.d);
    float* y = dst + b * kQKK;  // [256]
    // Each half of 128 elements: ql[64h + l] low/high nibbles are elements l / l+64, ql[64h+32+l]
    // are l+32 / l+96; qh[32h + l] bit pairs 0,2,4,6 extend elements l, l+32, l+64, l+96.
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = blk.ql + 64 * h;
      const uint8_t* qh = blk.qh + 32 * h;
      float* yy = y + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int q0 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        yy[l] = d * static_cast<float>(blk.scales[(128 * h + l) / 16] * q0);
        yy[l + 32] = d * static_cast<float>(blk.scales[(128 * h + l + 32) / 16] * q1);
        yy[l + 64] = d * static_cast<float>(blk.scales[(128 * h + l + 64) / 16] * q2);
        yy[l + 96] = d * static_cast<float>(blk.scales[(128 * h + l + 96) / 16] * q3);
      }
    }
  }
}

void quantize_row_q8_k_portable(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<BlockQ8_K*>(dst);
  for (int64_t b = 0; b < n / kQKK; ++b) {
    const float* x = src + b * kQKK;  // [256]
    float amax = 0.0f;
    for (int i = 0; i < kQKK; ++i) amax = std::max(amax, std::fabs(x[i]));
    BlockQ8_K& blk = out[b];
    blk.d = amax / 127.0f;
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int i = 0; i < kQKK; ++i)
      blk.qs[i] = static_cast<int8_t>(round_clamp(x[i] * inv, -127, 127));
    for (int k = 0; k < 16; ++k) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += blk.qs[16 * k + i];
      blk.bsums[k] = static_cast<int16_t>(sum);
    }
  }
}

void dequantize_row_q8_k(const void* src, float* dst, int64_t n) {
  const auto* in = static_cast<const BlockQ8_K*>(src);
  for (int64_t b = 0; b < n / kQKK; ++b)
    for (int i = 0; i < kQKK; ++i) dst[b * kQKK + i] = in[b].d * static_cast<float>(in[b].qs[i]);
}

}  // namespace tangram::quant
