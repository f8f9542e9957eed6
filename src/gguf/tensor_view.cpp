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

}  // namespace

void TensorView::copy_row(int64_t r, uint8_t* dst) const {
  const size_t rb = row_bytes();
  if (r >= interleaved_rows() || type != GgmlType::Q8_0) {  // only Q8_0 is ever interleaved
    std::memcpy(dst, row(r), rb);
    return;
  }
  const int64_t group = r / kInterleavedGroupRows;
  deinterleave_q8_0_row(data + static_cast<size_t>(group * kInterleavedGroupRows) * rb, cols(),
                        r % kInterleavedGroupRows, dst);
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
