#include "kv/key_tiles.h"

#include <cstring>

#include "kv/kv_row.h"

namespace tangram {

namespace {

constexpr int kGroups = kKvQ8Block / 4;  // 4-byte groups per Q8_0 block

size_t sz(int64_t n) { return static_cast<size_t>(n); }

}  // namespace

KeyLayout page_key_layout(KvType type, int64_t run_tokens) {
  return type == KvType::Q8_0 && run_tokens % kKeyTileTokens == 0 ? KeyLayout::Q8Tiles : KeyLayout::Rows;
}

void store_tiled_key(const uint8_t* row, uint8_t* tile, int64_t run_tokens, int64_t slot, int head_dim) {
  for (int b = 0; b < head_dim / kKvQ8Block; ++b) {
    const uint8_t* block = row + sz(b) * kKvQ8BlockBytes;
    std::memcpy(tile + tile_scales(run_tokens, b) + sz(slot) * 2, block, 2);
    for (int g = 0; g < kGroups; ++g) {
      uint8_t* dst = tile + tile_group(run_tokens, b, g) + sz(slot) * 4;
      for (int i = 0; i < 4; ++i) dst[i] = static_cast<uint8_t>(block[2 + 4 * g + i] ^ 0x80);
    }
  }
}

void load_tiled_key(const uint8_t* tile, int64_t run_tokens, int64_t slot, uint8_t* row, int head_dim) {
  for (int b = 0; b < head_dim / kKvQ8Block; ++b) {
    uint8_t* block = row + sz(b) * kKvQ8BlockBytes;
    std::memcpy(block, tile + tile_scales(run_tokens, b) + sz(slot) * 2, 2);
    for (int g = 0; g < kGroups; ++g) {
      const uint8_t* src = tile + tile_group(run_tokens, b, g) + sz(slot) * 4;
      for (int i = 0; i < 4; ++i) block[2 + 4 * g + i] = static_cast<uint8_t>(src[i] ^ 0x80);
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
