// Internal: the AVX-512 VNNI kernels (vec_dot_avx512.cpp), compiled with per-function target
// options so the rest of the binary stays x86-64-v3. Call them only where
// cpu::supports(KernelLevel::Avx512Vnni); vec_dot.h's *_fn look-ups do that.
#pragma once

#include "gguf/ggml_type.h"
#include "kernels/vec_dot.h"

namespace tangram::vec::avx512 {

// nullptr where this level has no kernel of its own for the type (its AVX2 kernel runs).
// Single-token row dots (row_dot_fn) stay AVX2 at every level; in the tiles one token of Q8_0 /
// Q4_0 runs the AVX2 kernel too (bound by memory bandwidth; measured no faster), while Q4_K /
// Q6_K take 4 x 1 tiles (more work per byte).
MultiDotFn multi_dot(GgmlType weight);
TileDotFn tile_dot(GgmlType weight);

}  // namespace tangram::vec::avx512
