// Internal: the two strategies behind matmul, exposed so tests can check each one at every
// token count and benchmarks can find the crossover.
#pragma once

#include <cstdint>

#include "common/thread_pool.h"
#include "gguf/tensor_view.h"
#include "kernels/cpu_features.h"

namespace tangram::matmul_paths {

// Both require a well-formed W (see matmul.h) and n >= 1. Y[n][W.rows()] = X[n][W.cols()] · Wᵀ.
// Quantised-activation dot products, each weight row read once for all n tokens.
void decode(const TensorView& W, const float* X, int64_t n, float* Y, ThreadPool& pool);
// Per-thread single-threaded sgemm on F32 weights or dequantised tiles of W.
void prefill(const TensorView& W, const float* X, int64_t n, float* Y, ThreadPool& pool);
// Largest n for which matmul picks decode() for this weight type, with the kernels of that
// level (the integer tiles of the AVX-512 level move the crossover), or of the active level.
int64_t decode_max_tokens(GgmlType type, cpu::KernelLevel level);
inline int64_t decode_max_tokens(GgmlType type) {
  return decode_max_tokens(type, cpu::active_level());
}

}  // namespace tangram::matmul_paths
