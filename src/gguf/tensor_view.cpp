// TensorView's reads in the row-major layout, whatever layout the bytes have.
#include "gguf/tensor_view.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "gguf/interleaved_layout.h"

namespace tangram {

void TensorView::copy_row(int64_t r, uint8_t* dst) const {
  const size_t rb = row_bytes();
  if (r >= interleaved_rows() ||
      (type != GgmlType::Q8_0 && type != GgmlType::Q4_K)) {  // never interleaved
    std::memcpy(dst, row(r), rb);
    return;
  }
  const uint8_t* group =
      data + static_cast<size_t>(r / kInterleavedGroupRows * kInterleavedGroupRows) * rb;
  const auto in_group = static_cast<int>(r % kInterleavedGroupRows);
  if (type == GgmlType::Q8_0)
    deinterleave_row(reinterpret_cast<const InterleavedQ8_0*>(group), cols(), in_group, dst);
  else
    deinterleave_row(reinterpret_cast<const InterleavedQ4_K*>(group), cols(), in_group, dst);
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
