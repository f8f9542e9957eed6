// Internal: per-type row converters behind quantize_row / dequantize_row, shared by quant.cpp
// (dispatch, plain and 32-element types), quant_k.cpp (256-element K-quant types) and
// quant_simd.cpp (vectorised dequantisers and activation quantisers).
#pragma once

#include <cstdint>

namespace tangram::quant {

// Nearest integer to v (ties to even), clamped to [lo, hi]; NaN gives lo. Pure float
// arithmetic (adding and subtracting 1.5 * 2^23 rounds any |v| < 2^22 to an integer), so it
// inlines and vectorises where std::lround would be a library call per element.
inline float round_clamp_f(float v, float lo, float hi) {
  float c = v > lo ? v : lo;  // NaN -> lo; these two forms compile to maxss/minss
  c = c < hi ? c : hi;
  return (c + 12582912.0f) - 12582912.0f;
}
inline int round_clamp(float v, int lo, int hi) {
  return static_cast<int>(round_clamp_f(v, static_cast<float>(lo), static_cast<float>(hi)));
}

// n is a multiple of the type's block size; dst/src hold n/block blocks.
void quantize_row_q4_0(const float* src, void* dst, int64_t n);
void quantize_row_q4_k(const float* src, void* dst, int64_t n);
void quantize_row_q6_k(const float* src, void* dst, int64_t n);
// The activation types: SIMD where compiled in (quant_simd.cpp), producing the same bytes as
// the portable versions.
void quantize_row_q8_0(const float* src, void* dst, int64_t n);
void quantize_row_q8_k(const float* src, void* dst, int64_t n);
void quantize_row_q8_0_portable(const float* src, void* dst, int64_t n);
void quantize_row_q8_k_portable(const float* src, void* dst, int64_t n);

// Dequantisers: SIMD where compiled in (quant_simd.cpp), else the portable ones, which are
// always compiled so tests can compare the two.
void dequantize_row_q4_0(const void* src, float* dst, int64_t n);
void dequantize_row_q8_0(const void* src, float* dst, int64_t n);
void dequantize_row_q4_k(const void* src, float* dst, int64_t n);
void dequantize_row_q6_k(const void* src, float* dst, int64_t n);
void dequantize_row_q8_k(const void* src, float* dst, int64_t n);
void dequantize_row_bf16(const uint16_t* src, float* dst, int64_t n);

void dequantize_row_q4_0_portable(const void* src, float* dst, int64_t n);
void dequantize_row_q8_0_portable(const void* src, float* dst, int64_t n);
void dequantize_row_q4_k_portable(const void* src, float* dst, int64_t n);
void dequantize_row_q6_k_portable(const void* src, float* dst, int64_t n);

}  // namespace tangram::quant
