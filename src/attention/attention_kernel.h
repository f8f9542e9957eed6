// Internal: the inner loop of KV attention. The query vectors reading one KV head ("lanes":
// query rows x the query heads sharing that KV head) stream over its stored entries together,
// so each key and value row is loaded (and widened from F16) once for all of them; the KV heads
// of one call advance block by block side by side.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/cpu_features.h"
#include "kv/kv_cache.h"
#include "kv/kv_head_view.h"

namespace tangram {

// Entries per online-softmax step: scores of a block are computed, then one max/rescale.
inline constexpr int kAttentionBlock = 32;
// A page run is one block, so a block reads one run's keys and values (block_pool.h).
static_assert(kPageRunTokens == kAttentionBlock);

// The key tiles one block's entries lie in (a block of kAttentionBlock entries spans at most
// this many runs of kKeyTileTokens or more tokens, however it is aligned): span i holds tokens
// [token, token + count) of the tile at `tile`, entries [at, at + count) of the block.
struct KeyTiles {
  struct Span {
    const uint8_t* tile;
    int token, count, at;
  };
  static constexpr int kMaxSpans = kAttentionBlock / kKeyTileTokens + 1;
  Span span[kMaxSpans];
  int n = 0;
  int64_t run_tokens = 0;  // tokens per tile
};

// The query vectors reading one KV head in a kernel call, and their running state:
//   q:      [n_lanes][head_dim]     queries, already multiplied by the score scale
//   limit:  [n_lanes]               lane i sees entries below limit[i]
//   m, l:   [n_lanes]               running max and running sum of exp(score - m)
//   acc:    [n_lanes][head_dim_v]   running sum of exp(score - m) * value
//   scores: [n_lanes][kAttentionBlock] scratch
// Start with m = -inf, l = 0, acc = 0; the result is acc / l.
struct HeadLanes {
  const KvHeadView* view = nullptr;
  int n_lanes = 0;
  const float* q = nullptr;
  const int64_t* limit = nullptr;
  int64_t end = 0;  // max of limit: entries [begin, end) of this head are read
  float* m = nullptr;
  float* l = nullptr;
  float* acc = nullptr;
  float* scores = nullptr;
};

// Online-softmax attention of every head's lanes over its entries [begin, end). The heads are
// walked together, block by block (page by page when a page holds several blocks), so heads
// sharing pages read each page in one sweep. Runs
// the inner loops of the process's kernel level (cpu::active_level()).
void attend_heads(std::span<const HeadLanes> heads, KvType type, int head_dim, int head_dim_v,
                  int64_t begin);
// The same at a given level (tests check every level the CPU supports; a level it cannot run,
// or head sizes that level has no loop for, fall back to the next lower loop).
void attend_heads(std::span<const HeadLanes> heads, KvType type, int head_dim, int head_dim_v,
                  int64_t begin, cpu::KernelLevel level);

// Pulls the cache lines holding [row, row + bytes) into L2 (prefetcht1 on x86) without waiting.
// On x86 the instruction is written as volatile asm: GCC 12 counts __builtin_prefetch as free of
// side effects, and deleted a loop holding nothing else (the key tiles' prefetch of the next
// block, found missing from the binary: the Q8_0 decode step ran 40% slower without it).
inline void prefetch_to_l2(const uint8_t* row, size_t bytes) {
  const auto start = reinterpret_cast<uintptr_t>(row);
  for (uintptr_t line = start & ~uintptr_t{63}; line < start + bytes; line += 64) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("prefetcht1 %0" : : "m"(*reinterpret_cast<const char*>(line)));
#else
    __builtin_prefetch(reinterpret_cast<const void*>(line), 0, 2);
#endif
  }
}

// The walk's own softmax exponentials (BlockKernels::exp_weights when a level brings none):
// s[j] = exp(s[j] - m_new) for j < n_pad, 8 floats a vector in an AVX2 build, std::exp in any
// other; returns their sum.
float attention_exp_weights(float* s, int n_pad, float m_new);

// The two inner loops one lane group (n_lanes <= 8) runs per block, for one row type at one
// instruction level: scores (q . k for the block's n key rows) into the scratch (a loop may
// also write any slot from n on: the softmax overwrites those it reads), then the
// softmax weights times the n value rows into the accumulators. The online softmax between
// them is shared by every row type; only its exponentials may come with the level (exp_weights).
//
// next_k_rows / next_v_rows: null, or n rows of the same head's next block (the last one
// repeated when that block is shorter), which the loops prefetch into L2 a few rows at a time
// while they compute (prefetch_to_l2). Pages hold 4 KiB runs of a head's rows, and the
// hardware prefetchers stop at every 4 KiB boundary: without this each run starts with a
// wait on memory, and on the 2-vCPU Zen 4 the cold 16 x 8K decode batch took the loops' time
// plus the time to read it, with no overlap (docs/benchmarks.md, "F16 attention read
// bandwidth"). Into L2, a row group at a time: prefetches into L1 compete with the current
// block's loads (they recovered a third of the wait, these all of it), and a whole block of
// large rows issued at once overflows the queue (slower than none). Blocks of small rows
// (keys and values of a block within 2 KiB, head sizes 8 and 16) are the exception: the walk
// prefetches the next one whole, run by run, and passes null here, since a prefetch per row
// would cost more than the row's dot product.
struct BlockKernels {
  void (*scores)(int n_lanes, const float* q, int hd, const uint8_t* const* k_rows, int n,
                 float* scores, const uint8_t* const* next_k_rows);
  void (*accumulate)(int n_lanes, const float* p, int hdv, const uint8_t* const* v_rows, int n,
                     float* acc, const uint8_t* const* next_v_rows);
  // Row types whose score loop reads the queries in another form (Q8_0 keys: each query
  // quantised per 32-element block, for integer dot products). When set, the walk converts
  // every lane's query once per call into bytes(hd) bytes (lane after lane) and runs these
  // scores on them instead of the ones above.
  struct PreparedQueries {
    size_t (*bytes)(int hd) = nullptr;
    void (*prepare)(const float* q, int hd, uint8_t* out) = nullptr;
    void (*scores)(int n_lanes, const uint8_t* q, int hd, const uint8_t* const* k_rows, int n,
                   float* scores, const uint8_t* const* next_k_rows) = nullptr;
    // The same scores for keys stored as key tiles (key_tiles.h): every row type whose pages
    // may hold tiles (Q8_0) sets it. next: null, or the next block's tiles to prefetch.
    void (*tile_scores)(int n_lanes, const uint8_t* q, int hd, const KeyTiles& k, float* scores,
                        const KeyTiles* next) = nullptr;
  } prepared;
  // The softmax's exponentials for one lane of a block: s[j] = exp(s[j] - m_new) for j < n_pad
  // (a multiple of 8, at most kAttentionBlock; padding is -inf and becomes 0), returning their
  // sum. By default the walk's own (attention_exp_weights); the AVX-512 loops bring a
  // 16-wide one, since at 4 lanes these exps are a fifth of a Q8_0 block's instructions.
  float (*exp_weights)(float* s, int n_pad, float m_new) = attention_exp_weights;
};

// attend_heads with the given inner loops (tests run each implementation through it).
void attend_heads_with(std::span<const HeadLanes> heads, const BlockKernels& kernels, int head_dim,
                       int head_dim_v, int64_t begin);

// Calls f.template operator()<NL>() with NL = n_lanes for 1-7 and 8 for anything larger: the
// portable-level attention loops take their lane count as a template argument, so each count
// keeps its accumulators in registers. (The AVX-512 loops keep their own switch: a lambda body
// would fall outside their target region.)
template <typename F>
void with_lane_count(int n_lanes, F&& f) {
  switch (n_lanes) {
    case 1:
      return f.template operator()<1>();
    case 2:
      return f.template operator()<2>();
    case 3:
      return f.template operator()<3>();
    case 4:
      return f.template operator()<4>();
    case 5:
      return f.template operator()<5>();
    case 6:
      return f.template operator()<6>();
    case 7:
      return f.template operator()<7>();
    default:
      return f.template operator()<8>();
  }
}

}  // namespace tangram
