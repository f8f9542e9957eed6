// Internal: the AVX-512 VNNI kernels (vec_dot_avx512.cpp), compiled with per-function target
// options so the rest of the binary stays x86-64-v3. Call them only where
// cpu::supports(KernelLevel::Avx512Vnni); vec_dot.h's *_fn look-ups do that.
#pragma once

#include "gguf/ggml_type.h"
#include "kernels/interleaved_rows.h"
#include "kernels/vec_dot.h"

namespace tangram::vec::avx512 {

// nullptr where this level has no kernel of its own for the type (its AVX2 kernel runs).
// Single-row dots stay AVX2 at every level (measured no faster); the tiles take Q4_K at one
// token two rows at a time.
MultiDotFn multi_dot(GgmlType weight);
TileDotFn tile_dot(GgmlType weight);
// The interleaved-row kernels (interleaved_rows_avx512.cpp; contract in interleaved_rows.h).
void gemm_interleaved_q4_k(const InterleavedQ4_K* w, int64_t nblocks, const uint8_t* act,
                           size_t act_stride, const int32_t* sums, size_t sums_stride, int nt,
                           float* out, size_t out_stride);
void gemm_interleaved_q8_0(const InterleavedQ8_0* w, int64_t nblocks, const uint8_t* act,
                           size_t act_stride, const int32_t* sums, size_t sums_stride, int nt,
                           float* out, size_t out_stride);

}  // namespace tangram::vec::avx512
