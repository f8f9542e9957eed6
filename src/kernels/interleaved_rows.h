// Internal: the matmul kernels over Q4_K and Q8_0 weight rows interleaved 16 to a group
// (gguf/interleaved_layout.h states the layouts and why), for products over many tokens.
// The model loader interleaves Q8_0 and Q4_K matmul weights once, in place, in a huge-page copy
// of the file (matmul.h interleave_for_matmul), and matmul reads them there at every token
// count. For memory-mapped files the layout is made per L2 panel of rows inside the matmul from
// 8 tokens (Q4_K: measured ~6% of a 512-token product), so no second copy of the weights stays
// resident, and decode of fewer tokens keeps the row-major layout and its kernels.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "gguf/interleaved_layout.h"
#include "kernels/cpu_features.h"

namespace tangram::vec {

using tangram::interleaved_q4_k_min;
using tangram::interleaved_q4_k_scale;
using tangram::InterleavedQ4_K;
using tangram::InterleavedQ8_0;

constexpr int kInterleavedRows = kInterleavedGroupRows;

// What the kernels of each layout take per call, beside the layout itself:
//  * kSumsPerBlock: int32 activation terms per block and token (activation_sums below);
//  * kTileTokens: the most tokens one call takes. The AVX-512 Q8_0 kernel holds a block's 8 code
//    vectors in registers and runs every token over them, so 16 tokens (a KV-bound step of 16
//    sequences) read each block from memory once instead of once per 8 tokens.
template <typename Interleaved>
struct InterleavedKernel;
template <>
struct InterleavedKernel<InterleavedQ4_K> {
  static constexpr int kSumsPerBlock = 4;  // the sub-block pair sums (q8_k_pair_sums)
  static constexpr int kTileTokens = 8;
};
template <>
struct InterleavedKernel<InterleavedQ8_0> {
  static constexpr int kSumsPerBlock = 2;  // the offset correction and the scale
  static constexpr int kTileTokens = 16;
};

// A block's scales and mins unpacked by a kernel (once per block, for all 16 rows):
// scales[j % 2][j / 2][r] = scale of sub-block j of row r; mins[h][p][2 * i + k] = min of
// sub-block 2p + k of row 8h + i (as int16 pairs they meet the activations' pair sums).
struct UnpackedQ4_KScales {
  alignas(64) uint8_t scales[2][4][kInterleavedRows];
  alignas(64) uint8_t mins[2][4][kInterleavedRows];
};

// Asks for block b + kPrefetchBlocks of a group in L2 while block b is computed: a group
// interleaved at load is read by the kernels straight from memory as one stream (a panel
// repacked per call was read with prefetches first), and from a few tokens on (kernel levels'
// own thresholds) they waited on it. 16 blocks ahead (8.5 KiB) measured best of 4-32 (see the
// AVX-512 kernel). An address as an integer: the last blocks' look-ahead lies past the group,
// and a prefetch of it is only a hint that cannot fault.
// Q4_K's blocks (2304 bytes) are asked for the same distance ahead in bytes, 4 blocks (9 KiB).
template <typename Interleaved>
constexpr int64_t kPrefetchBlocks = (16 * sizeof(InterleavedQ8_0) + sizeof(Interleaved) - 1) /
                                    sizeof(Interleaved);
template <typename Interleaved>
inline void prefetch_ahead(const Interleaved* w, int64_t b) {
  const uintptr_t ahead =
      reinterpret_cast<uintptr_t>(w) +
      static_cast<uintptr_t>(b + kPrefetchBlocks<Interleaved>) * sizeof(Interleaved);
  for (size_t off = 0; off < sizeof(Interleaved); off += 64)
    __builtin_prefetch(reinterpret_cast<const void*>(ahead + off), 0, 2);  // locality 2: into L2
}

// Rows w, w + w_stride, ... (nr of them, 1 <= nr <= 16) of a matrix with `cols` columns
// into dst[cols / kBlockElems]. dst must not overlap the rows. (gguf's deinterleave_row is the
// inverse.)
void interleave_rows(const uint8_t* w, size_t w_stride, int nr, int64_t cols, InterleavedQ4_K* dst);
void interleave_rows(const uint8_t* w, size_t w_stride, int nr, int64_t cols, InterleavedQ8_0* dst);

// Per-token activation sums the kernels need, for one activation row of `cols` columns into
// dst[cols / kBlockElems][kSumsPerBlock]:
//  * Q8_K rows (for Q4_K): per block, per sub-block pair p, the sums of the pair's two
//    32-element sub-blocks as int16 (low half: sub-block 2p) in one int32;
//  * Q8_0 rows (for Q8_0): per block, -128 * the sum of its codes, then the block's fp16 scale
//    widened to float, as its bit pattern (q8_0_scale reads it): the kernels would otherwise
//    widen it once per (token, block, call).
void activation_sums(const uint8_t* act, int64_t cols, const InterleavedQ4_K*, int32_t* dst);
void activation_sums(const uint8_t* act, int64_t cols, const InterleavedQ8_0*, int32_t* dst);
// Block b's activation scale from one token's Q8_0 activation_sums.
inline float q8_0_scale(const int32_t* sums, int64_t b) {
  return std::bit_cast<float>(sums[InterleavedKernel<InterleavedQ8_0>::kSumsPerBlock * b + 1]);
}

// out[t * out_stride + r] = dot(row r of the group, token t) for r < 16, t < nt. Any nt >= 0;
// callers pass InterleavedKernel<Interleaved>::kTileTokens at most (more are run a tile at a
// time, each tile reading the weights again). act: the companion-type rows (Q8_K for Q4_K, Q8_0 for
// Q8_0), act_stride bytes apart; sums: their activation_sums, sums_stride int32 apart.
template <typename Interleaved>
using InterleavedGemmFn = void (*)(const Interleaved* w, int64_t nblocks, const uint8_t* act,
                                   size_t act_stride, const int32_t* sums, size_t sums_stride,
                                   int nt, float* out, size_t out_stride);
void gemm_interleaved_portable(const InterleavedQ4_K* w, int64_t nblocks, const uint8_t* act,
                               size_t act_stride, const int32_t* sums, size_t sums_stride, int nt,
                               float* out, size_t out_stride);
void gemm_interleaved_portable(const InterleavedQ8_0* w, int64_t nblocks, const uint8_t* act,
                               size_t act_stride, const int32_t* sums, size_t sums_stride, int nt,
                               float* out, size_t out_stride);
// The kernel of a level, or nullptr where that level has none (matmul then keeps the row-major
// kernels; the portable one is the tests' reference).
InterleavedGemmFn<InterleavedQ4_K> gemm_interleaved_q4_k_fn(cpu::KernelLevel level);
InterleavedGemmFn<InterleavedQ8_0> gemm_interleaved_q8_0_fn(cpu::KernelLevel level);

}  // namespace tangram::vec
