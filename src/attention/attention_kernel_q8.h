// Internal: the attention inner loops over Q8_0 KV rows (kv_row.h), which attend_heads runs
// for KvType::Q8_0 inside its shared online-softmax walk. Scores are integer dot products, as
// llama.cpp computes Q8_0 x Q8_0: the walk quantises each query once per call per 32-element
// block (quantise_query), and a block's contribution is d_k * d_q * sum(k_int * q_int), so
// q . k carries the query's rounding (at most half a step d_q / 2 per element) on top of the
// rows' own. Values: at the AVX-512 level in integers, the weights p * d rounded to int16 per
// lane, block of rows and column block (attention_kernel_q8_avx512.cpp: a step of
// max p * max |d| / 32767, the bound the tests derive); the AVX2 and portable loops accumulate
// p * (q * d) in float (an int16 AVX2 version was slower than it: the weights' preparation
// costs more than the FMAs it saves with 8-wide vectors). Rows are read in registers, never
// written out, so a step reads 34 bytes per 32 elements. Keys kept as key tiles (key_tiles.h,
// Q8_0 pages with runs of 16 tokens or more) have their own score loops, BlockKernels'
// tile_scores: 16 tokens' sums at once per vpdpbusd at the AVX-512 level, 8 per maddubs at
// the AVX2 one, with the same integer sums as the row loops. head_dim and head_dim_v are
// multiples of 32.
#pragma once

#include <cstddef>
#include <cstdint>

#include "attention/attention_kernel.h"
#include "kernels/cpu_features.h"

namespace tangram::kv_q8 {

// One query quantised for the score loops, query_bytes(hd) bytes, lane-major in the walk:
//   scales:  [hd / 4] float   each block's d_q = amax / 127, repeated 8 times (one vector lane
//                             per 4-element group, the layout the vector loops multiply by)
//   values:  [hd] int8        round(x / d_q), in [-127, 127]
//   offsets: [hd / 4] int32   -128 * the sum of each 4 consecutive values (the VNNI loop reads
//                             keys as unsigned k + 128 and starts each sum from this)
//   block offsets: [hd / 32] int32  -128 * the sum of each block's 32 values (the same, for the
//                             key-tile loops, which sum a token's whole block in one lane)
inline size_t query_bytes(int hd) {
  return 3 * static_cast<size_t>(hd) + static_cast<size_t>(hd) / 8;
}
void quantise_query(const float* q, int hd, uint8_t* out);

// A key-tile loop that computes the scores of tile tokens [c, c + w) at once stores them
// straight into a lane's scores at this slot when they start inside span sp and end within
// the block's slots (writing slots past the span is allowed: later spans and the softmax
// overwrite them); at -1 it stores the tokens inside the span one by one (store_chunk_part).
inline int whole_chunk_at(const KeyTiles::Span& sp, int c, int w) {
  const int dst = sp.at + c - sp.token;
  return c >= sp.token && dst + w <= kAttentionBlock ? dst : -1;
}
// Prefetches into L2 the part of each next tile (next may be null) that block b of a tile loop
// reads: spread over the blocks so that a whole tile is not requested at once.
inline void prefetch_tile_block(const KeyTiles* next, int b) {
  if (next == nullptr) return;
  for (int i = 0; i < next->n; ++i)
    prefetch_to_l2(next->span[i].tile + tile_group(next->run_tokens, b, 0),
                   tile_block_bytes(next->run_tokens));
}
inline void store_chunk_part(const float* sums, int c, int w, const KeyTiles::Span& sp,
                             float* lane_scores) {
  const int t0 = c > sp.token ? c : sp.token;
  const int t1 = c + w < sp.token + sp.count ? c + w : sp.token + sp.count;
  for (int t = t0; t < t1; ++t) lane_scores[sp.at + t - sp.token] = sums[t - c];
}

// The loops attend_heads runs at `level`: AVX-512 VNNI scores and accumulation where the CPU
// runs that level, AVX2 (maddubs) in an AVX2+F16C build otherwise, the portable ones in any
// other build.
BlockKernels block_kernels(cpu::KernelLevel level);
// The portable loops (any build): tests compare them with the vector ones.
BlockKernels portable_kernels();

}  // namespace tangram::kv_q8
