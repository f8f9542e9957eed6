// Internal: the AVX-512 inner loops of KV attention over Q8_0 rows
// (attention_kernel_q8_avx512.cpp), compiled with per-function target options so the rest of
// the binary stays x86-64-v3. kv_q8::block_kernels hands them to the walk only where
// cpu::supports(KernelLevel::Avx512Vnni).
#pragma once

#include <cstdint>

#include "attention/attention_kernel.h"

namespace tangram::vec::avx512 {

// scores[lane * kAttentionBlock + j] = q[lane] . k[j] for lane < n_lanes <= 8, j < n: q holds
// the lanes' queries as kv_q8::quantise_query leaves them, the key rows are Q8_0, head_dim a
// multiple of 32. next_k_rows: null or n rows to prefetch (BlockKernels, attention_kernel.h).
void attention_scores_q8(int n_lanes, const uint8_t* q, int head_dim, const uint8_t* const* k_rows,
                         int n, float* scores, const uint8_t* const* next_k_rows);

// The same scores for keys stored as key tiles (key_tiles.h), k's spans in their slots of the
// block; next: null or the next block's tiles to prefetch.
void attention_tile_scores_q8(int n_lanes, const uint8_t* q, int head_dim, const KeyTiles& k,
                              float* scores, const KeyTiles* next);

// acc[lane] += sum_j p[lane * kAttentionBlock + j] * v[j] for lane < n_lanes <= 8, j < n; the
// value rows are Q8_0, head_dim_v a multiple of 32. next_v_rows: as next_k_rows above. Two
// builds of one loop, the same results: the rows' block scales read by gathers or by scalar
// loads, whichever cpu::tuning() says is faster on this core.
void attention_accumulate_q8_gathered_scales(int n_lanes, const float* p, int head_dim_v,
                                             const uint8_t* const* v_rows, int n, float* acc,
                                             const uint8_t* const* next_v_rows);
void attention_accumulate_q8_loaded_scales(int n_lanes, const float* p, int head_dim_v,
                                           const uint8_t* const* v_rows, int n, float* acc,
                                           const uint8_t* const* next_v_rows);

}  // namespace tangram::vec::avx512
