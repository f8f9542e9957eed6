// A typed, non-owning view of a tensor's bytes (usually inside a memory-mapped GGUF file).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gguf/ggml_type.h"

namespace tangram {

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

  bool empty() const { return data == nullptr; }
  int64_t cols() const { return ne[0]; }
  int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  int64_t elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  size_t row_bytes() const { return ggml_row_bytes(type, ne[0]); }
  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes(); }
};

}  // namespace tangram
