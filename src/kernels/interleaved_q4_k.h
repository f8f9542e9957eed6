// Internal: Q4_K weight rows interleaved 16 to a group, for matmuls over many tokens.
// In the row-major Q4_K layout every (row, token) pair needs its own sub-block scales, mins and
// float multiply-add per 256-element block, as much work as its integer dot products. With 16
// rows interleaved, one 512-bit vector holds 4 codes of each of 16 rows: an integer lane is a
// row, a broadcast of 4 activation bytes feeds all 16, and scales, mins and the float update
// are applied to 16 rows per instruction. The layout is made per L2 panel of rows inside the
// matmul (repack cost ~1/100 of a 512-token product), so no second copy of the weights stays
// resident and single-token decode keeps the original layout.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu_features.h"

namespace tangram::vec {

constexpr int kInterleavedRows = 16;
// Tokens per call of an interleaved kernel.
constexpr int kInterleavedTokens = 8;

// One 256-column block of 16 rows. Rows past the end of the matrix are all zero.
struct InterleavedQ4_K {
  float d[kInterleavedRows];              // row super-scales of the sub-block scales
  float dmin[kInterleavedRows];           // row super-scales of the sub-block mins
  uint8_t scales[8][kInterleavedRows];    // [sub-block][row]: 6-bit scale
  uint8_t mins[4][2 * kInterleavedRows];  // [sub-block pair p][2 * row + k]: min of sub-block 2p + k
  // [sub-block][step s][4 * row + i]: low nibble = code of element 8s + i of the sub-block,
  // high nibble = element 8s + 4 + i.
  uint8_t qs[8][4][4 * kInterleavedRows];
};
static_assert(sizeof(InterleavedQ4_K) == 2432);

// Rows w, w + w_stride, ... (nr of them, 1 <= nr <= 16) of a Q4_K matrix with `cols` columns
// into dst[cols / 256].
void interleave_q4_k(const uint8_t* w, size_t w_stride, int nr, int64_t cols, InterleavedQ4_K* dst);

// For one Q8_K activation row of `cols` columns: per block, per sub-block pair p, the sums of
// the pair's two 32-element sub-blocks as int16 (low half: sub-block 2p) in one int32.
// dst[cols / 256][4].
void q8_k_pair_sums(const uint8_t* act, int64_t cols, int32_t* dst);

// out[t * out_stride + r] = dot(row r of the group, token t) for r < 16, t < nt
// (1 <= nt <= kInterleavedTokens). act: Q8_K rows, act_stride bytes apart; pair_sums: their
// q8_k_pair_sums, pair_stride int32 apart.
using InterleavedGemmFn = void (*)(const InterleavedQ4_K* w, int64_t nblocks, const uint8_t* act, size_t act_stride,
                                   const int32_t* pair_sums, size_t pair_stride, int nt, float* out,
                                   size_t out_stride);
void gemm_interleaved_q4_k_portable(const InterleavedQ4_K* w, int64_t nblocks, const uint8_t* act, size_t act_stride,
                                    const int32_t* pair_sums, size_t pair_stride, int nt, float* out,
                                    size_t out_stride);
// The kernel of a level, or nullptr where that level has none (matmul then keeps the row-major
// tiles, which measured faster than the portable kernel).
InterleavedGemmFn gemm_interleaved_q4_k_fn(cpu::KernelLevel level);

}  // namespace tangram::vec
