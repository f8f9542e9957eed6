// Products of a weight matrix (any supported GgmlType, read in place) with activations.
// These are the engine's hot kernels: decode (n = 1) is bound by memory bandwidth and runs on
// quantised blocks with SIMD; prefill (large n) is bound by compute and uses BLAS for float
// weights, dequantising tiles of quantised weights.
#pragma once

#include <cstdint>
#include <span>

#include "common/thread_pool.h"
#include "gguf/tensor_view.h"

namespace tangram {

// Y[n][W.rows()] = X[n][W.cols()] · Wᵀ, with X and Y row-major float. Threads split the work
// over rows of W (and over tokens where that balances better).
void matmul(const TensorView& W, const float* X, int64_t n, float* Y, ThreadPool& pool);

// One product of a group: Y[n][W->rows()] = X · Wᵀ.
struct MatmulOutput {
  const TensorView* W;
  float* Y;
};

// Several products of the same activations X[n][cols] (q/k/v) in one parallel region instead
// of one per matrix: the activations are quantised once per activation type, and each thread
// computes its slice of every matrix's rows with the kernels matmul would use, so every output
// is bit-identical to a separate matmul call on the same pool.
void matmul_group(std::span<const MatmulOutput> outputs, const float* X, int64_t n,
                  ThreadPool& pool);

// gate_y = swiglu(X · gateᵀ, X · upᵀ) per token (up_y receives X · upᵀ), in one parallel
// region: each thread applies swiglu to the rows of gate and up it computed. Bit-identical to
// matmul(gate), matmul(up), then swiglu over each token's row.
void matmul_swiglu(const TensorView& gate, const TensorView& up, const float* X, int64_t n,
                   float* gate_y, float* up_y, ThreadPool& pool);

// One row of W (row index r) dotted with x[W.cols()], in double-free float arithmetic; used by
// embedding look-ups and tests. The weights are dequantised exactly (x is not quantised).
// Returns 0 for r outside [0, W.rows()).
float row_dot(const TensorView& W, int64_t r, const float* x);

// Writes row r of W, dequantised, to out[W.cols()] (embedding look-up). r outside
// [0, W.rows()) writes zeros.
void get_row(const TensorView& W, int64_t r, float* out);

// Rewrites W's bytes (`bytes`: W.data, writable) in place into the layout matmul runs fastest
// from, once, where W may be rewritten (a huge-page copy of the file): Q8_0 and Q4_K weights of
// at least 16 rows into TensorLayout::kInterleaved16 where the kernel level has interleaved
// kernels.
// Returns the layout the bytes now have (W.layout where it left them alone). Only for tensors
// read solely by these functions: matmul runs the interleaved kernels on them with no per-call
// repack; row_dot and get_row de-interleave a row (slow, correct).
TensorLayout interleave_for_matmul(const TensorView& W, uint8_t* bytes);

// All three treat a malformed view (no data, cols not a multiple of the block size, nbytes
// short of rows * row_bytes) as all-zero weights rather than reading out of bounds.
// matmul's BLAS calls run single-threaded on each pool thread (it parallelises with `pool`);
// OpenBLAS' global thread setting and the caller's OpenMP settings are left as they were.

}  // namespace tangram
