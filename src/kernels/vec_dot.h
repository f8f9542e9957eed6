// Internal: dot products of one weight row with one activation row, on the blocks as stored.
// Each weight type has a companion activation type (the activation is quantised once per
// token): F32 for F32/F16/BF16 (and Q8_K) weights, Q8_0 for Q4_0/Q8_0, Q8_K for Q4_K/Q6_K.
// The *_portable variants are always compiled so tests can check the SIMD ones against them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/ggml_type.h"
#include "kernels/cpu_features.h"

namespace tangram::vec {

// w: one weight row, a: one activation row in the companion type; n elements (a multiple of
// the weight block size).
using RowDotFn = float (*)(const void* w, const void* a, int64_t n);

GgmlType activation_type(GgmlType weight);
// The kernel for this weight type at a kernel level (never null; a type without a kernel of
// that level gets the next lower one), or at the level this process runs (cpu::active_level()).
// The level must be one the CPU supports (cpu::supported_levels()).
RowDotFn row_dot_fn(GgmlType weight, cpu::KernelLevel level);
inline RowDotFn row_dot_fn(GgmlType weight) { return row_dot_fn(weight, cpu::active_level()); }
// Activations x[n] as the companion type of `weight`, into dst (ggml_row_bytes bytes).
void quantize_activation(GgmlType weight, const float* x, void* dst, int64_t n);

// Several tokens at once: out[t] = dot(w, act + t * act_stride) for t < nt, with
// 1 <= nt <= kMultiTokens. Decodes each weight block once for all nt activations (in
// vec_dot_multi.cpp); the portable build loops over the single-token kernel.
constexpr int kMultiTokens = 4;
using MultiDotFn = void (*)(const void* w, const uint8_t* act, size_t act_stride, int nt, int64_t n,
                            float* out);
MultiDotFn multi_dot_fn(GgmlType weight, cpu::KernelLevel level);
inline MultiDotFn multi_dot_fn(GgmlType weight) {
  return multi_dot_fn(weight, cpu::active_level());
}

// Register tiles of several weight rows x several tokens (batched decode): each unpacked weight
// block and each activation block is loaded once per tile.
// out[r * kMultiTokens + t] = dot(w + r * w_stride, act + t * act_stride) for r < nr, t < nt,
// with 1 <= nr <= kTileRows and 1 <= nt <= kMultiTokens. nullptr where the type has no tile
// kernel at that level (the caller runs multi_dot_fn per row).
constexpr int kTileRows = 4;
using TileDotFn = void (*)(const uint8_t* w, size_t w_stride, int nr, const uint8_t* act,
                           size_t act_stride, int nt, int64_t n, float* out);
TileDotFn tile_dot_fn(GgmlType weight, cpu::KernelLevel level);
inline TileDotFn tile_dot_fn(GgmlType weight) { return tile_dot_fn(weight, cpu::active_level()); }

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
