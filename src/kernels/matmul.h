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
// embedding look-ups and tests. The weights are dequantised exactly (x is not quantised).
// Returns 0 for r outside [0, W.rows()).
float row_dot(const TensorView& W, int64_t r, const float* x);

// Writes row r of W, dequantised, to out[W.cols()] (embedding look-up). r outside
// [0, W.rows()) writes zeros.
void get_row(const TensorView& W, int64_t r, float* out);

// All three treat a malformed view (no data, cols not a multiple of the block size, nbytes
// short of rows * row_bytes) as all-zero weights rather than reading out of bounds.
// matmul's BLAS calls run single-threaded on each pool thread (it parallelises with `pool`);
// OpenBLAS' global thread setting and the caller's OpenMP settings are left as they were.

}  // namespace tangram
