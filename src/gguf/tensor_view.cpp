// TensorView's reads in the row-major layout, whatever layout the bytes have.
#include "gguf/tensor_view.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace tangram {

namespace {

// Q8_0 as ggml stores it: an fp16 scale, then 32 int8 codes (34 bytes); interleaved, a block of
// 16 rows is 16 scales then 512 codes in 8 steps of 4 codes per row (tensor_view.h).
constexpr size_t kQ8_0BlockBytes = 34, kQ8_0BlockElems = 32;
constexpr size_t kGroupScaleBytes = 2 * kInterleavedGroupRows;
constexpr size_t kGroupBlockBytes = kQ8_0BlockBytes * kInterleavedGroupRows;

void deinterleave_q8_0_row(const uint8_t* group, int64_t cols, int64_t i, uint8_t* dst) {
  const auto row = static_cast<size_t>(i);
  for (size_t b = 0; b < static_cast<size_t>(cols) / kQ8_0BlockElems; ++b) {
    const uint8_t* in = group + b * kGroupBlockBytes;
    uint8_t* out = dst + b * kQ8_0BlockBytes;
    std::memcpy(out, in + 2 * row, 2);
    for (size_t k = 0; k < kQ8_0BlockElems; ++k)
      out[2 + k] = static_cast<uint8_t>(in[kGroupScaleBytes + 64 * (k / 4) + 4 * row + k % 4] ^ 0x80);
  }
}

// Q4_K as ggml stores it (144 bytes per 256 columns): fp16 d, fp16 dmin, 12 bytes of 6-bit
// sub-block scales and mins, 128 bytes of codes (sub-block j in the low (j even) or high
// nibbles of bytes 32 (j / 2) ..); interleaved, a block of 16 rows is 16 d, 16 dmin (fp16),
// scales_low, mins_low, high_bits ([pair p][row], 64 bytes each) and 2048 bytes of codes, code
// e of sub-block j of row i in byte 256 + 256 j + 64 (e / 8) + 4 i + e % 4, low nibble for
// e % 8 < 4 (tensor_view.h).
constexpr size_t kQ4_KBlockBytes = 144, kQ4_KBlockElems = 256;
constexpr size_t kQ4_KGroupBlockBytes = kQ4_KBlockBytes * kInterleavedGroupRows;

void deinterleave_q4_k_row(const uint8_t* group, int64_t cols, int64_t i, uint8_t* dst) {
  constexpr size_t kRows = kInterleavedGroupRows;
  const auto row = static_cast<size_t>(i);
  for (size_t b = 0; b < static_cast<size_t>(cols) / kQ4_KBlockElems; ++b) {
    const uint8_t* in = group + b * kQ4_KGroupBlockBytes;
    uint8_t* out = dst + b * kQ4_KBlockBytes;
    std::memcpy(out, in + 2 * row, 2);                  // d
    std::memcpy(out + 2, in + 2 * kRows + 2 * row, 2);  // dmin
    const uint8_t* scales_low = in + 4 * kRows;
    const uint8_t* mins_low = scales_low + 4 * kRows;
    const uint8_t* high_bits = mins_low + 4 * kRows;
    uint8_t sc[8], mn[8];
    for (size_t j = 0; j < 8; ++j) {
      const size_t at = (j / 2) * kRows + row, nibble = 4 * (j % 2), top = 2 * (j % 2);
      sc[j] = static_cast<uint8_t>(((scales_low[at] >> nibble) & 0x0F) | ((high_bits[at] >> top) & 3) << 4);
      mn[j] = static_cast<uint8_t>(((mins_low[at] >> nibble) & 0x0F) | ((high_bits[at] >> (4 + top)) & 3) << 4);
    }
    uint8_t* scales = out + 4;  // ggml's 12-byte packing of the eight 6-bit scales and mins
    for (size_t j = 0; j < 4; ++j) {
      scales[j] = static_cast<uint8_t>(sc[j] | (sc[j + 4] >> 4) << 6);
      scales[j + 4] = static_cast<uint8_t>(mn[j] | (mn[j + 4] >> 4) << 6);
      scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0F) | (mn[j + 4] & 0x0F) << 4);
    }
    const uint8_t* codes = in + 16 * kRows;
    uint8_t* qs = out + 16;
    std::memset(qs, 0, 128);
    for (size_t j = 0; j < 8; ++j)
      for (size_t e = 0; e < 32; ++e) {
        const uint8_t stored = codes[256 * j + 64 * (e / 8) + 4 * row + e % 4];
        const auto code = static_cast<uint8_t>(e % 8 < 4 ? stored & 0x0F : stored >> 4);
        qs[32 * (j / 2) + e] = static_cast<uint8_t>(qs[32 * (j / 2) + e] | code << (4 * (j % 2)));
      }
  }
}

}  // namespace

void TensorView::copy_row(int64_t r, uint8_t* dst) const {
  const size_t rb = row_bytes();
  if (r >= interleaved_rows() || (type != GgmlType::Q8_0 && type != GgmlType::Q4_K)) {  // never interleaved
    std::memcpy(dst, row(r), rb);
    return;
  }
  const uint8_t* group = data + static_cast<size_t>(r / kInterleavedGroupRows * kInterleavedGroupRows) * rb;
  if (type == GgmlType::Q8_0)
    deinterleave_q8_0_row(group, cols(), r % kInterleavedGroupRows, dst);
  else
    deinterleave_q4_k_row(group, cols(), r % kInterleavedGroupRows, dst);
}

void TensorView::copy_bytes(size_t offset, size_t n, uint8_t* dst) const {
  const size_t rb = row_bytes();
  const size_t interleaved_end = static_cast<size_t>(interleaved_rows()) * rb;
  if (offset >= interleaved_end || rb == 0) {
    std::memcpy(dst, data + offset, n);
    return;
  }
  std::vector<uint8_t> row_bytes_buf(rb);  // [rb] one row, row-major
  while (n > 0) {
    if (offset >= interleaved_end) {
      std::memcpy(dst, data + offset, n);
      return;
    }
    const auto r = static_cast<int64_t>(offset / rb);
    copy_row(r, row_bytes_buf.data());
    const size_t in_row = offset % rb, take = std::min(n, rb - in_row);
    std::memcpy(dst, row_bytes_buf.data() + in_row, take);
    dst += take;
    offset += take;
    n -= take;
  }
}

}  // namespace tangram
