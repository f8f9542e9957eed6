// Internal: Q4_K and Q8_0 weight rows interleaved 16 to a group, for matmuls over many tokens.
// In the row-major layouts every (row, token) pair needs its own per-block scale work (Q4_K:
// sub-block scales, mins and a float multiply-add per 256 elements, as much work as its
// integer dot products; Q8_0: a convert, multiply and add per 32). With 16 rows interleaved,
// one 512-bit vector holds 4 codes of each of 16 rows: an integer lane is a row, a broadcast of
// 4 activation bytes feeds all 16, and the scale work runs once per 16 rows.
// Both blocks are exactly the size of the 16 rows' blocks they hold, so the model loader
// interleaves Q8_0 and Q4_K matmul weights once, in place, in a huge-page copy of the file
// (matmul.h interleave_for_matmul), and matmul reads them there at every token count. For
// memory-mapped files the layout is made per L2 panel of rows inside the matmul from 8 tokens
// (Q4_K: measured ~6% of a 512-token product), so no second copy of the weights stays
// resident, and decode of fewer tokens keeps the row-major layout and its kernels.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "gguf/tensor_view.h"
#include "kernels/cpu_features.h"

namespace tangram::vec {

constexpr int kInterleavedRows = 16;
// The most tokens one call of an interleaved kernel takes, of any type (each type's
// kTileTokens; this bounds callers' [token][row] buffers).
constexpr int kInterleavedTokens = 16;

// One 256-column Q4_K block of 16 rows. Rows past the end of the matrix are all zero.
// The super-scales stay fp16 and the 6-bit sub-block scales and mins stay 6 bits, so a block
// is exactly the 16 rows' Q4_K blocks in size (16 x 144 bytes): the prerequisite for
// interleaving a matrix in place. The 6-bit values are split so that one 512-bit load of each
// field, and a few shifts and masks, give all 16 rows' scales and mins of a block (even and odd
// sub-blocks apart; the kernels' unpack_scales_mins): for sub-block pair p and row r,
//   scales_low[p][r] = low 4 bits of scale 2p | (low 4 bits of scale 2p + 1) << 4, and
//   mins_low the same for the mins;
//   high_bits[p][r] = the top 2 bits of scale 2p (bits 0-1), scale 2p + 1 (2-3), min 2p (4-5),
//   min 2p + 1 (6-7).
struct InterleavedQ4_K {
  static constexpr int kBlockElems = 256;
  static constexpr int kSumsPerBlock = 4;     // activation sums per block (see q8_k_pair_sums)
  static constexpr int kTileTokens = 8;       // tokens per kernel call
  uint16_t d[kInterleavedRows];               // fp16 row super-scales of the sub-block scales
  uint16_t dmin[kInterleavedRows];            // fp16 row super-scales of the sub-block mins
  uint8_t scales_low[4][kInterleavedRows];
  uint8_t mins_low[4][kInterleavedRows];
  uint8_t high_bits[4][kInterleavedRows];
  // [sub-block][step s][4 * row + i]: low nibble = code of element 8s + i of the sub-block,
  // high nibble = element 8s + 4 + i.
  uint8_t qs[8][4][4 * kInterleavedRows];
};
static_assert(sizeof(InterleavedQ4_K) == 16 * 144);

// Row r's 6-bit scale (or min) of sub-block j: the plain reading of the packing above.
inline int interleaved_q4_k_scale(const InterleavedQ4_K& x, int j, int r) {
  const int low = (x.scales_low[j / 2][r] >> (4 * (j % 2))) & 0x0F;
  return low | (((x.high_bits[j / 2][r] >> (2 * (j % 2))) & 3) << 4);
}
inline int interleaved_q4_k_min(const InterleavedQ4_K& x, int j, int r) {
  const int low = (x.mins_low[j / 2][r] >> (4 * (j % 2))) & 0x0F;
  return low | (((x.high_bits[j / 2][r] >> (4 + 2 * (j % 2))) & 3) << 4);
}

// A block's scales and mins unpacked by a kernel (once per block, for all 16 rows):
// scales[j % 2][j / 2][r] = scale of sub-block j of row r; mins[h][p][2 * i + k] = min of
// sub-block 2p + k of row 8h + i (as int16 pairs they meet the activations' pair sums).
struct UnpackedQ4_KScales {
  alignas(64) uint8_t scales[2][4][kInterleavedRows];
  alignas(64) uint8_t mins[2][4][kInterleavedRows];
};

// One 32-column Q8_0 block of 16 rows. The codes are stored offset by 128 (unsigned) for
// vpdpbusd; the 128 * (activation sum) this adds is taken off with the activation_sums. The
// AVX2 kernel flips them back to signed (vpmaddubsw would saturate on them) and needs no sums.
// A call takes up to 16 tokens: the AVX-512 kernel holds a block's 8 code vectors in registers
// and runs every token over them, so 16 tokens (a KV-bound step of 16 sequences) read each
// block from memory once instead of once per 8 tokens.
// The scales stay fp16 (the kernels widen 16 with one vcvtph2ps), so a block is exactly the
// 16 rows' Q8_0 blocks in size: a weight matrix can be interleaved in place, once at load
// (TensorLayout::kInterleaved16, which states this layout byte by byte), as well as per panel.
struct InterleavedQ8_0 {
  static constexpr int kBlockElems = 32;
  static constexpr int kSumsPerBlock = 2;  // the offset correction and the scale (activation_sums)
  static constexpr int kTileTokens = 16;
  uint16_t d[kInterleavedRows];         // fp16 row scales
  uint8_t qs[8][4 * kInterleavedRows];  // [step s][4 * row + i]: code of element 4s + i, plus 128
};
static_assert(sizeof(InterleavedQ8_0) == 16 * 34 && kInterleavedRows == kInterleavedGroupRows);

// Asks for block b + kPrefetchBlocks of a group in L2 while block b is computed: a group
// interleaved at load is read by the kernels straight from memory as one stream (a panel
// repacked per call was read with prefetches first), and from a few tokens on (kernel levels'
// own thresholds) they waited on it. 16 blocks ahead (8.5 KiB) measured best of 4-32 (see the
// AVX-512 kernel). An address as an integer: the last blocks' look-ahead lies past the group,
// and a prefetch of it is only a hint that cannot fault.
// Q4_K's blocks (2304 bytes) are asked for the same distance ahead in bytes, 4 blocks (9 KiB).
template <typename Interleaved>
constexpr int64_t kPrefetchBlocks = (16 * sizeof(InterleavedQ8_0) + sizeof(Interleaved) - 1) / sizeof(Interleaved);
template <typename Interleaved>
inline void prefetch_ahead(const Interleaved* w, int64_t b) {
  const uintptr_t ahead =
      reinterpret_cast<uintptr_t>(w) + static_cast<uintptr_t>(b + kPrefetchBlocks<Interleaved>) * sizeof(Interleaved);
  for (size_t off = 0; off < sizeof(Interleaved); off += 64)
    __builtin_prefetch(reinterpret_cast<const void*>(ahead + off), 0, 2);  // locality 2: into L2
}

// Rows w, w + w_stride, ... (nr of them, 1 <= nr <= 16) of a matrix with `cols` columns
// into dst[cols / kBlockElems]. dst must not overlap the rows.
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
  return std::bit_cast<float>(sums[InterleavedQ8_0::kSumsPerBlock * b + 1]);
}

// out[t * out_stride + r] = dot(row r of the group, token t) for r < 16, t < nt
// (1 <= nt <= Interleaved::kTileTokens). act: the companion-type rows (Q8_K for Q4_K, Q8_0 for
// Q8_0), act_stride bytes apart; sums: their activation_sums, sums_stride int32 apart.
template <typename Interleaved>
using InterleavedGemmFn = void (*)(const Interleaved* w, int64_t nblocks, const uint8_t* act, size_t act_stride,
                                   const int32_t* sums, size_t sums_stride, int nt, float* out, size_t out_stride);
void gemm_interleaved_portable(const InterleavedQ4_K* w, int64_t nblocks, const uint8_t* act, size_t act_stride,
                               const int32_t* sums, size_t sums_stride, int nt, float* out, size_t out_stride);
void gemm_interleaved_portable(const InterleavedQ8_0* w, int64_t nblocks, const uint8_t* act, size_t act_stride,
                               const int32_t* sums, size_t sums_stride, int nt, float* out, size_t out_stride);
// The kernel of a level, or nullptr where that level has none (matmul then keeps the row-major
// kernels; the portable one is the tests' reference).
InterleavedGemmFn<InterleavedQ4_K> gemm_interleaved_q4_k_fn(cpu::KernelLevel level);
InterleavedGemmFn<InterleavedQ8_0> gemm_interleaved_q8_0_fn(cpu::KernelLevel level);

}  // namespace tangram::vec
