// Tensor element types as numbered by the GGUF format (ggml_type), with their block geometry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tangram {

// Values are the on-disk ggml_type ids. Only the types Tangram reads are listed; the reader
// refuses any other id by name/number.
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q8_0 = 8,
  Q4_K = 12,
  Q6_K = 14,
  Q8_K = 15,  // activation-side type for K-quant dot products; never stored in model files here
  BF16 = 30,
};

struct GgmlTypeInfo {
  GgmlType type;
  std::string_view name;
  int block_elems;     // elements per block (1 for plain float types)
  size_t block_bytes;  // bytes per block
};

// Returns nullopt for ids Tangram does not support.
std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id);
GgmlTypeInfo ggml_type_info(GgmlType t);
std::string_view ggml_type_name(GgmlType t);
// Parses "f32", "Q4_K", ... (case-insensitive).
std::optional<GgmlType> ggml_type_from_name(std::string_view name);

// Bytes needed for one row of n elements; n must be a multiple of the block size.
size_t ggml_row_bytes(GgmlType t, int64_t n);

}  // namespace tangram
