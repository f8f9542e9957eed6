// How a page run of Q8_0 pages stores its key rows: "key tiles", the keys of a run's tokens
// interleaved so that one VNNI instruction serves 16 tokens (the score loop then builds 16
// tokens' dot products in place, with no horizontal sums: bench/bench_key_layout measured it
// 2.6-3.2x faster than the loop over rows). Every other row (values, F16 and F32 keys, Q8_0 keys
// of a page whose run is not a multiple of 16 tokens, a dense cache) stays a plain row.
//
// A tile holds the keys of one run of R tokens (R a multiple of kKeyTileTokens) of one head,
// head_dim / 32 Q8_0 blocks each, block after block:
//   block b: values [8 groups][R tokens][4 bytes] (elements 4g .. 4g+3 of token t, k + 128)
//            scales [R] fp16                     (token t's d, as its Q8_0 block holds it)
// R * 34 bytes per block, the bytes R plain rows take; the values first, so that each 64-byte
// load of 16 tokens' group is one aligned cache line. The values are stored as unsigned k + 128,
// the form vpdpbusd multiplies; the loops that need signed values flip the top bit back.
// Only this file and the attention loops know the layout: caches, codec and scorers move keys
// through store_tiled_keys / load_tiled_keys (plain Q8_0 rows, kv_row.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kv/kv_cache.h"
#include "kv/kv_row.h"

namespace tangram {

// How a run's key rows are laid out.
enum class KeyLayout : uint8_t {
  Rows,     // one plain row per token, contiguous (kv_row.h)
  Q8Tiles,  // Q8_0 key tiles (above)
};

// Tokens one vector of a tile's group holds (64 bytes of 4-byte groups): runs must be a
// multiple of it to be tiled.
inline constexpr int kKeyTileTokens = 16;

// The layout a page run of run_tokens tokens stores its keys in: tiles for Q8_0 when
// run_tokens is a multiple of kKeyTileTokens, rows otherwise.
KeyLayout page_key_layout(KvType type, int64_t run_tokens);

// Offsets inside a tile of run_tokens tokens: block b's group g of 4 values, and its scales.
inline size_t tile_block_bytes(int64_t run_tokens) {
  return static_cast<size_t>(run_tokens) * kKvQ8BlockBytes;
}
inline size_t tile_group(int64_t run_tokens, int block, int group) {
  return static_cast<size_t>(block) * tile_block_bytes(run_tokens) +
         static_cast<size_t>(run_tokens) * 4 * static_cast<size_t>(group);
}
inline size_t tile_scales(int64_t run_tokens, int block) {
  return tile_group(run_tokens, block, 8);
}

// Writes `count` plain Q8_0 rows (head_dim / 32 blocks each, contiguous at `rows`) as tokens
// [first_slot, first_slot + count) of the tile.
void store_tiled_keys(const uint8_t* rows, int64_t count, uint8_t* tile, int64_t run_tokens,
                      int64_t first_slot, int head_dim);
// Reads tokens [first_slot, first_slot + count) of the tile back as `count` plain Q8_0 rows, the
// bytes store_tiled_keys was given.
void load_tiled_keys(const uint8_t* tile, int64_t run_tokens, int64_t first_slot, int64_t count,
                     uint8_t* rows, int head_dim);
// Copies token src_slot of one tile to token dst_slot of another (or the same) tile.
void move_tiled_key(const uint8_t* src_tile, int64_t src_slot, uint8_t* dst_tile, int64_t dst_slot,
                    int64_t run_tokens, int head_dim);

}  // namespace tangram
