// Public float <-> block conversions: fp16/bf16 scalars, the dispatch over GgmlType, and the
// plain-float and 32-element block types (F16, BF16, Q4_0, Q8_0). K-quants live in quant_k.cpp.
#include "kernels/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/half.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"

#if defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>
#endif

namespace tangram {

float fp16_to_fp32(uint16_t h) { return half::fp16_to_fp32(h); }
uint16_t fp32_to_fp16(float f) { return half::fp32_to_fp16(f); }
float bf16_to_fp32(uint16_t h) { return half::bf16_to_fp32(h); }
uint16_t fp32_to_bf16(float f) { return half::fp32_to_bf16(f); }

namespace quant {

using blocks::BlockQ4_0;
using blocks::BlockQ8_0;
using blocks::kQK0;

void quantize_row_q4_0(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<BlockQ4_0*>(dst);
  for (int64_t b = 0; b < n / kQK0; ++b) {
    const float* x = src + b * kQK0;  // [32]
    // The value of largest magnitude maps exactly onto q = 0 (i.e. -8 after the offset), which
    // uses the asymmetric range [-8, 7] fully on that side.
    float amax = 0.0f;
    float extreme = 0.0f;
    for (int j = 0; j < kQK0; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        extreme = x[j];
      }
    }
    const float d = extreme / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = half::fp32_to_fp16(d);
    for (int j = 0; j < kQK0 / 2; ++j) {
      const int lo = round_clamp(x[j] * id, -8, 7) + 8;
      const int hi = round_clamp(x[j + 16] * id, -8, 7) + 8;
      out[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void dequantize_row_q4_0_portable(const void* src, float* dst, int64_t n) {
  const auto* in = static_cast<const BlockQ4_0*>(src);
  for (int64_t b = 0; b < n / kQK0; ++b) {
    const float d = half::fp16_to_fp32(in[b].d);
    float* y = dst + b * kQK0;  // [32]
    for (int j = 0; j < kQK0 / 2; ++j) {
      y[j] = static_cast<float>((in[b].qs[j] & 0x0F) - 8) * d;
      y[j + 16] = static_cast<float>((in[b].qs[j] >> 4) - 8) * d;
    }
  }
}

void quantize_row_q8_0_portable(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<BlockQ8_0*>(dst);
  for (int64_t b = 0; b < n / kQK0; ++b) {
    const float* x = src + b * kQK0;  // [32]
    float amax = 0.0f;
    for (int j = 0; j < kQK0; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = half::fp32_to_fp16(d);
    for (int j = 0; j < kQK0; ++j)
      out[b].qs[j] = static_cast<int8_t>(round_clamp(x[j] * id, -127, 127));
  }
}

void dequantize_row_q8_0_portable(const void* src, float* dst, int64_t n) {
  const auto* in = static_cast<const BlockQ8_0*>(src);
  for (int64_t b = 0; b < n / kQK0; ++b) {
    const float d = half::fp16_to_fp32(in[b].d);
    float* y = dst + b * kQK0;  // [32]
    for (int j = 0; j < kQK0; ++j) y[j] = static_cast<float>(in[b].qs[j]) * d;
  }
}

namespace {

void fp16_row_to_fp32(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX2__) && defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
#endif
  for (; i < n; ++i) dst[i] = half::fp16_to_fp32(src[i]);
}

void fp32_row_to_fp16(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = half::fp32_to_fp16(src[i]);
}

void fp32_row_to_bf16(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = half::fp32_to_bf16(src[i]);
}

}  // namespace
}  // namespace quant

void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n) {
  switch (type) {
    case GgmlType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::F16:
      quant::fp16_row_to_fp32(static_cast<const uint16_t*>(src), dst, n);
      return;
    case GgmlType::BF16:
      quant::dequantize_row_bf16(static_cast<const uint16_t*>(src), dst, n);
      return;
    case GgmlType::Q4_0:
      quant::dequantize_row_q4_0(src, dst, n);
      return;
    case GgmlType::Q8_0:
      quant::dequantize_row_q8_0(src, dst, n);
      return;
    case GgmlType::Q4_K:
      quant::dequantize_row_q4_k(src, dst, n);
      return;
    case GgmlType::Q6_K:
      quant::dequantize_row_q6_k(src, dst, n);
      return;
    case GgmlType::Q8_K:
      quant::dequantize_row_q8_k(src, dst, n);
      return;
  }
}

void quantize_row(GgmlType type, const float* src, void* dst, int64_t n) {
  switch (type) {
    case GgmlType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::F16:
      quant::fp32_row_to_fp16(src, static_cast<uint16_t*>(dst), n);
      return;
    case GgmlType::BF16:
      quant::fp32_row_to_bf16(src, static_cast<uint16_t*>(dst), n);
      return;
    case GgmlType::Q4_0:
      quant::quantize_row_q4_0(src, dst, n);
      return;
    case GgmlType::Q8_0:
      quant::quantize_row_q8_0(src, dst, n);
      return;
    case GgmlType::Q4_K:
      quant::quantize_row_q4_k(src, dst, n);
      return;
    case GgmlType::Q6_K:
      quant::quantize_row_q6_k(src, dst, n);
      return;
    case GgmlType::Q8_K:
      quant::quantize_row_q8_k(src, dst, n);
      return;
  }
}

}  // namespace tangram
