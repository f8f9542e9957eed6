// Element-wise and normalisation kernels of the transformer block. Each works on float buffers
// in place or out of place; sizes are in elements.
#pragma once

#include <cstdint>

namespace tangram {

// out[n] = x[n] / sqrt(mean(x²) + eps) * weight[n]. out may alias x.
void rmsnorm(const float* x, const float* weight, float* out, int64_t n, float eps);
// x[n] = softmax(x[n]), max-subtracted for stability.
void softmax(float* x, int64_t n);
// gate[n] = silu(gate[n]) * up[n]  (SwiGLU).
void swiglu(float* gate, const float* up, int64_t n);
// y[n] += x[n].
void add(float* y, const float* x, int64_t n);
// Dot product of two float vectors.
float dot_f32(const float* a, const float* b, int64_t n);
// y[n] += a * x[n].
void axpy(float* y, float a, const float* x, int64_t n);

}  // namespace tangram
