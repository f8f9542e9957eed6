// A typed, non-owning view of a tensor's bytes (usually inside a memory-mapped GGUF file).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gguf/ggml_type.h"
#include "gguf/interleaved_layout.h"

namespace tangram {

// How a tensor's rows lie in memory.
enum class TensorLayout : uint8_t {
  // As in the file: row after row, each ggml_row_bytes(type, cols) bytes of blocks.
  kRowMajor,
  // Q8_0 and Q4_K matmul weights rewritten once at load (Model::load, huge-page copies only):
  // the rows in groups of kInterleavedGroupRows, each group in the bytes its 16 rows held, one
  // gguf/interleaved_layout.h block (InterleavedQ8_0, InterleavedQ4_K: the layouts' home) per
  // block of columns. Rows past the last whole group stay row-major where they were.
  kInterleaved16,
};

// Dimensions follow ggml: ne[0] is the contiguous (fastest) dimension. A weight matrix used as
// y = W x has ne[0] = input features (columns) and ne[1] = output features (rows); each row is
// ggml_row_bytes(type, ne[0]) bytes of blocks.
struct TensorView {
  std::string_view name;
  GgmlType type = GgmlType::F32;
  std::array<int64_t, 4> ne{1, 1, 1, 1};
  int n_dims = 0;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  TensorLayout layout = TensorLayout::kRowMajor;

  bool empty() const { return data == nullptr; }
  int64_t cols() const { return ne[0]; }
  int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  int64_t elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  size_t row_bytes() const { return ggml_row_bytes(type, ne[0]); }
  // Row r in place: row-major tensors, and the row-major tail of an interleaved one
  // (r >= interleaved_rows()). copy_row reads any row of any layout.
  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes(); }
  // Rows [0, interleaved_rows()) lie in interleaved groups; 0 for row-major tensors.
  int64_t interleaved_rows() const {
    return layout == TensorLayout::kRowMajor
               ? 0
               : rows() / kInterleavedGroupRows * kInterleavedGroupRows;
  }
  // Row r's bytes as the row-major layout has them, into dst[row_bytes()] (0 <= r < rows()).
  // De-interleaves where needed: correct but slow, for rare reads.
  void copy_row(int64_t r, uint8_t* dst) const;
  // Bytes [offset, offset + n) of the tensor as the row-major layout (the file) has them
  // (offset + n <= nbytes).
  void copy_bytes(size_t offset, size_t n, uint8_t* dst) const;
};

}  // namespace tangram
