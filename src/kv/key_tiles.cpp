#include "kv/key_tiles.h"

#include <cstring>

#include "kv/kv_row.h"

namespace tangram {

namespace {

constexpr int kGroups = kKvQ8Block / 4;      // 4-byte groups per Q8_0 block
constexpr uint32_t kSignBits = 0x80808080u;  // k <-> k + 128 in each of 4 bytes

size_t sz(int64_t n) { return static_cast<size_t>(n); }

}  // namespace

KeyLayout page_key_layout(KvType type, int64_t run_tokens) {
  return type == KvType::Q8_0 && run_tokens % kKeyTileTokens == 0 ? KeyLayout::Q8Tiles
                                                                  : KeyLayout::Rows;
}

// The loops run block by block and group by group over the tokens, so each pass writes (or
// reads) one contiguous stretch of the tile: a session's restore stores whole runs this way, at
// the cost of a copy, where token by token it scattered 4-byte pieces over the whole tile.
void store_tiled_keys(const uint8_t* rows, int64_t count, uint8_t* tile, int64_t run_tokens,
                      int64_t first_slot, int head_dim) {
  const size_t row_bytes = kv_row_bytes(KvType::Q8_0, head_dim);
  for (int b = 0; b < head_dim / kKvQ8Block; ++b) {
    const uint8_t* block = rows + sz(b) * kKvQ8BlockBytes;
    uint8_t* scales = tile + tile_scales(run_tokens, b) + sz(first_slot) * 2;
    for (int64_t t = 0; t < count; ++t)
      std::memcpy(scales + sz(t) * 2, block + sz(t) * row_bytes, 2);
    for (int g = 0; g < kGroups; ++g) {
      uint8_t* dst = tile + tile_group(run_tokens, b, g) + sz(first_slot) * 4;
      const uint8_t* src = block + 2 + 4 * g;
      for (int64_t t = 0; t < count; ++t) {
        uint32_t four;
        std::memcpy(&four, src + sz(t) * row_bytes, 4);
        four ^= kSignBits;
        std::memcpy(dst + sz(t) * 4, &four, 4);
      }
    }
  }
}

void load_tiled_keys(const uint8_t* tile, int64_t run_tokens, int64_t first_slot, int64_t count,
                     uint8_t* rows, int head_dim) {
  const size_t row_bytes = kv_row_bytes(KvType::Q8_0, head_dim);
  for (int b = 0; b < head_dim / kKvQ8Block; ++b) {
    uint8_t* block = rows + sz(b) * kKvQ8BlockBytes;
    const uint8_t* scales = tile + tile_scales(run_tokens, b) + sz(first_slot) * 2;
    for (int64_t t = 0; t < count; ++t)
      std::memcpy(block + sz(t) * row_bytes, scales + sz(t) * 2, 2);
    for (int g = 0; g < kGroups; ++g) {
      const uint8_t* src = tile + tile_group(run_tokens, b, g) + sz(first_slot) * 4;
      uint8_t* dst = block + 2 + 4 * g;
      for (int64_t t = 0; t < count; ++t) {
        uint32_t four;
        std::memcpy(&four, src + sz(t) * 4, 4);
        four ^= kSignBits;
        std::memcpy(dst + sz(t) * row_bytes, &four, 4);
      }
    }
  }
}

void move_tiled_key(const uint8_t* src_tile, int64_t src_slot, uint8_t* dst_tile, int64_t dst_slot,
                    int64_t run_tokens, int head_dim) {
  for (int b = 0; b < head_dim / kKvQ8Block; ++b) {
    const size_t scales = tile_scales(run_tokens, b);
    std::memmove(dst_tile + scales + sz(dst_slot) * 2, src_tile + scales + sz(src_slot) * 2, 2);
    for (int g = 0; g < kGroups; ++g) {
      const size_t group = tile_group(run_tokens, b, g);
      std::memmove(dst_tile + group + sz(dst_slot) * 4, src_tile + group + sz(src_slot) * 4, 4);
    }
  }
}

}  // namespace tangram
