// Products of a weight matrix (any supported GgmlType, read in place) with activations.
// These are the engine's hot kernels: decode (n = 1) is bound by memory bandwidth and runs on
// quantised blocks with SIMD; prefill (large n) is bound by compute and uses BLAS for float
// weights, dequantising tiles of quantised weights.
#pragma once

#include <cstdint>

#include "common/thread_pool.h"
#include "gguf/tensor_view.h"

namespace tangram {

// Y[n][W.rows()] = X[n][W.cols()] · Wᵀ, with X and Y row-major float. Threads split the work
// over rows of W (and over tokens where that balances better).
void matmul(const TensorView& W, const float* X, int64_t n, float* Y, ThreadPool& pool);

// One row of W (row index r) dotted with x[W.cols()], in double-free float arithmetic; used by
// embedding look-ups and tests.
float row_dot(const TensorView& W, int64_t r, const float* x);

// Writes row r of W, dequantised, to out[W.cols()] (embedding look-up).
void get_row(const TensorView& W, int64_t r, float* out);

}  // namespace tangram
