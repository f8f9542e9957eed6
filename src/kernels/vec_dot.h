// Internal: dot products of one weight row with one activation row, on the blocks as stored.
// Each weight type has a companion activation type (the activation is quantised once per
// token): F32 for F32/F16/BF16 (and Q8_K) weights, Q8_0 for Q4_0/Q8_0, Q8_K for Q4_K/Q6_K.
// The *_portable variants are always compiled so tests can check the SIMD ones against them.
#pragma once

#include <cstdint>

#include "gguf/ggml_type.h"

namespace tangram::vec {

// w: one weight row, a: one activation row in the companion type; n elements (a multiple of
// the weight block size).
using RowDotFn = float (*)(const void* w, const void* a, int64_t n);

GgmlType activation_type(GgmlType weight);
// The best kernel compiled in for this weight type (never null).
RowDotFn row_dot_fn(GgmlType weight);
// Activations x[n] as the companion type of `weight`, into dst (ggml_row_bytes bytes).
void quantize_activation(GgmlType weight, const float* x, void* dst, int64_t n);

// Several tokens at once: out[t] = dot(w, act + t * act_stride) for t < nt, with
// 1 <= nt <= kMultiTokens. Decodes each weight block once for all nt activations (in
// vec_dot_multi.cpp); the portable build loops over the single-token kernel.
constexpr int kMultiTokens = 4;
using MultiDotFn = void (*)(const void* w, const uint8_t* act, size_t act_stride, int nt, int64_t n,
                            float* out);
MultiDotFn multi_dot_fn(GgmlType weight);

float dot_f32_f32(const void* w, const void* a, int64_t n);
float dot_f16_f32(const void* w, const void* a, int64_t n);
float dot_bf16_f32(const void* w, const void* a, int64_t n);
float dot_q8_k_f32(const void* w, const void* a, int64_t n);
float dot_q4_0_q8_0(const void* w, const void* a, int64_t n);
float dot_q8_0_q8_0(const void* w, const void* a, int64_t n);
float dot_q4_k_q8_k(const void* w, const void* a, int64_t n);
float dot_q6_k_q8_k(const void* w, const void* a, int64_t n);

float dot_f16_f32_portable(const void* w, const void* a, int64_t n);
float dot_bf16_f32_portable(const void* w, const void* a, int64_t n);
float dot_q4_0_q8_0_portable(const void* w, const void* a, int64_t n);
float dot_q8_0_q8_0_portable(const void* w, const void* a, int64_t n);
float dot_q4_k_q8_k_portable(const void* w, const void* a, int64_t n);
float dot_q6_k_q8_k_portable(const void* w, const void* a, int64_t n);

}  // namespace tangram::vec
