// How one head's key or value row is stored in the KV element type: its size in bytes and the
// conversion from and to float. Every reader and writer of KV rows (caches, attention
// references, scorers, the session codec, synthetic fills) goes through these, so a type is
// added in one place.
//   F32:  dim floats.
//   F16:  dim IEEE halves.
//   Q8_0: dim / 32 GGUF Q8_0 blocks (fp16 scale d + 32 int8 q, x = q * d; 34 bytes per 32
//         elements). Rows are quantised when written and never re-quantised afterwards:
//         compaction, tiers and the codec move their bytes as they are. (Pages may keep Q8_0
//         keys interleaved by token as key tiles, key_tiles.h: the same bytes rearranged,
//         written and read back as these rows.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "common/result.h"
#include "gguf/ggml_type.h"
#include "kernels/quant_blocks.h"
#include "kv/kv_cache.h"

namespace tangram {

// The GGUF Q8_0 block the weights use too (kernels/quant_blocks.h).
inline constexpr int kKvQ8Block = blocks::kQK0;                       // elements per block
inline constexpr size_t kKvQ8BlockBytes = sizeof(blocks::BlockQ8_0);  // fp16 scale + 32 int8

// The GGUF element type a KV type stores its rows as: rows are converted by the same
// quantize_row / dequantize_row the weights use.
GgmlType kv_ggml_type(KvType type);
// Bytes of one stored row of dim elements (dim must suit the type: see check_kv_row_dims).
size_t kv_row_bytes(KvType type, int64_t dim);
// Errors when a head size cannot be stored as the type (Q8_0: not a multiple of 32).
Status check_kv_row_dims(KvType type, int head_dim, int head_dim_v);
// dst: kv_row_bytes(type, dim) bytes.
void store_kv_row(KvType type, const float* src, uint8_t* dst, int64_t dim);
// dst: [dim] floats.
void load_kv_row(KvType type, const uint8_t* src, float* dst, int64_t dim);

// "f32", "f16", "q8_0" -> the type; nullopt for any other name.
std::optional<KvType> parse_kv_type(std::string_view name);

}  // namespace tangram
