// Internal: the AVX-512 inner loops of KV attention over F16 rows (attention_kernel_avx512.cpp),
// and the softmax's exponentials every AVX-512 row type uses, compiled with per-function target
// options so the rest of the binary stays x86-64-v3. Called by attend_heads only where
// cpu::supports(KernelLevel::Avx512Vnni) (and, for the F16 loops, the head sizes are multiples
// of 16); the rest of the softmax stays the AVX2 one.
#pragma once

#include <cstdint>

#include "attention/attention_kernel.h"

namespace tangram::vec::avx512 {

// scores[lane * kAttentionBlock + j] = q[lane] . k[j] for lane < n_lanes <= 8, j < n; the key
// rows are F16, head_dim a multiple of 16. next_k_rows: null or n rows to prefetch (BlockKernels).
void attention_scores_f16(int n_lanes, const float* q, int head_dim, const uint8_t* const* k_rows,
                          int n, float* scores, const uint8_t* const* next_k_rows);

// acc[lane] += sum_j p[lane * kAttentionBlock + j] * v[j] for lane < n_lanes <= 8, j < n; the
// value rows are F16, head_dim_v a multiple of 16. next_v_rows: as next_k_rows above.
void attention_accumulate_f16(int n_lanes, const float* p, int head_dim_v,
                              const uint8_t* const* v_rows, int n, float* acc,
                              const uint8_t* const* next_v_rows);

// s[j] = exp(s[j] - m_new) for j < n_pad (a multiple of 8, at most kAttentionBlock), returning
// their sum: BlockKernels::exp_weights, 16 floats a vector. Within 2 ulp of expf where the AVX2
// loop is (simd.h's exp: inputs below -87.3 give 0, -inf padding included), and like it turns
// NaN into exp(-87.3), about 1e-38.
float attention_exp_weights(float* s, int n_pad, float m_new);

}  // namespace tangram::vec::avx512
