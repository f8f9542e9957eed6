// The interleaved layouts of Q8_0 and Q4_K weight rows (TensorLayout::kInterleaved16): 16 rows
// to a group, one block of the group per block of columns, each block exactly the size of the
// 16 row-major blocks it holds, so a matrix can be rewritten in place once at load. This header
// is the layouts' one statement: the matmul kernels (kernels/interleaved_rows.h) write and read
// these structs, and TensorView's row readers turn a group's row back into ggml's row-major
// bytes with deinterleave_row below.
//
// Why the layouts look as they do: in the row-major layouts every (row, token) pair needs its
// own per-block scale work (Q4_K: sub-block scales, mins and a float multiply-add per 256
// elements; Q8_0: a convert, multiply and add per 32). With 16 rows interleaved, one 512-bit
// vector holds 4 codes of each of 16 rows: an integer lane is a row, a broadcast of 4 activation
// bytes feeds all 16, and the scale work runs once per 16 rows.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tangram {

constexpr int kInterleavedGroupRows = 16;

// One 256-column Q4_K block of 16 rows. Rows past the end of the matrix are all zero.
// The super-scales stay fp16 and the 6-bit sub-block scales and mins stay 6 bits, so a block
// is exactly the 16 rows' Q4_K blocks in size (16 x 144 bytes). The 6-bit values are split so
// that one 512-bit load of each field, and a few shifts and masks, give all 16 rows' scales and
// mins of a block (even and odd sub-blocks apart; the kernels' unpack_scales_mins): for
// sub-block pair p and row r,
//   scales_low[p][r] = low 4 bits of scale 2p | (low 4 bits of scale 2p + 1) << 4, and
//   mins_low the same for the mins;
//   high_bits[p][r] = the top 2 bits of scale 2p (bits 0-1), scale 2p + 1 (2-3), min 2p (4-5),
//   min 2p + 1 (6-7).
struct InterleavedQ4_K {
  static constexpr int kBlockElems = 256;
  uint16_t d[kInterleavedGroupRows];     // fp16 row super-scales of the sub-block scales
  uint16_t dmin[kInterleavedGroupRows];  // fp16 row super-scales of the sub-block mins
  uint8_t scales_low[4][kInterleavedGroupRows];
  uint8_t mins_low[4][kInterleavedGroupRows];
  uint8_t high_bits[4][kInterleavedGroupRows];
  // [sub-block][step s][4 * row + i]: low nibble = code of element 8s + i of the sub-block,
  // high nibble = element 8s + 4 + i.
  uint8_t qs[8][4][4 * kInterleavedGroupRows];
};
static_assert(sizeof(InterleavedQ4_K) == kInterleavedGroupRows * 144);

// Row r's 6-bit scale (or min) of sub-block j: the plain reading of the packing above.
inline int interleaved_q4_k_scale(const InterleavedQ4_K& x, int j, int r) {
  const int low = (x.scales_low[j / 2][r] >> (4 * (j % 2))) & 0x0F;
  return low | (((x.high_bits[j / 2][r] >> (2 * (j % 2))) & 3) << 4);
}
inline int interleaved_q4_k_min(const InterleavedQ4_K& x, int j, int r) {
  const int low = (x.mins_low[j / 2][r] >> (4 * (j % 2))) & 0x0F;
  return low | (((x.high_bits[j / 2][r] >> (4 + 2 * (j % 2))) & 3) << 4);
}
// Element e (< 32) of sub-block j of row r, a 4-bit code.
inline int interleaved_q4_k_code(const InterleavedQ4_K& x, int j, int e, int r) {
  const uint8_t stored = x.qs[j][e / 8][4 * r + e % 4];
  return e % 8 < 4 ? stored & 0x0F : stored >> 4;
}

// One 32-column Q8_0 block of 16 rows. The codes are stored offset by 128 (unsigned) for
// vpdpbusd; the 128 * (activation sum) this adds is taken off with the activation sums. The
// scales stay fp16 (the kernels widen 16 with one vcvtph2ps), so a block is exactly the 16 rows'
// Q8_0 blocks in size.
struct InterleavedQ8_0 {
  static constexpr int kBlockElems = 32;
  uint16_t d[kInterleavedGroupRows];  // fp16 row scales
  uint8_t qs[8]
            [4 * kInterleavedGroupRows];  // [step s][4 * row + i]: code of element 4s + i, plus 128
};
static_assert(sizeof(InterleavedQ8_0) == kInterleavedGroupRows * 34);

// Row r (< 16) of a group of `cols` columns (a multiple of the block's columns) back in ggml's
// row-major bytes, into dst[ggml_row_bytes(type, cols)]: the inverse of the kernels'
// interleave_rows. Plain and slow, for rare reads (TensorView::copy_row).
void deinterleave_row(const InterleavedQ8_0* group, int64_t cols, int r, uint8_t* dst);
void deinterleave_row(const InterleavedQ4_K* group, int64_t cols, int r, uint8_t* dst);

}  // namespace tangram
