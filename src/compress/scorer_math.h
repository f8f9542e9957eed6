// Math shared by the KV compression scorers (internal to src/compress): input validation,
// softmax over entries, and a streaming "attention row" loop that visits the softmax of every
// (query row, query head) of a GQA group over the entries that row may see.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "compress/scorer.h"

namespace tangram::scorer_math {

// Which HeadScoreInput buffers a scorer reads; validate_input checks exactly those.
struct Needs {
  bool keys = false;
  bool values = false;
  bool positions = false;  // also checks they ascend (causal masking relies on it)
  bool queries = false;    // n_queries >= 1, queries and query_positions non-null
};

// Checks sizes and buffers; the message names the scorer. scores: [in.n] (may be null if n == 0).
Status validate_input(const HeadScoreInput& in, const float* scores, std::string_view scorer,
                      Needs needs);

// x[n] = softmax(x[n]); max-subtracted, float exponentials summed in double. n == 0 is a no-op.
void softmax_inplace(float* x, int64_t n);

// Entries visible to a query at query_position: the prefix with positions[j] <= query_position.
//   positions: [n] ascending
int64_t visible_entries(const int32_t* positions, int64_t n, int32_t query_position);

// Softmax rows for a tile of query vectors (one per (row, head)) against one KV head.
//   q[t]: [head_dim] for t < tile;  n_visible[t] <= n;  keys: [n][head_dim]
//   probs: [tile][stride]; row t gets softmax_j(q[t]·k_j / sqrt(head_dim)) for j < n_visible[t]
//   (nothing written past n_visible[t]).
// Each key row is loaded once per tile, so memory traffic is n * head_dim per `tile` vectors.
void tile_softmax_rows(const float* const* q, const int64_t* n_visible, int tile, const float* keys,
                       int head_dim, float* probs, int64_t stride);

// Query vectors per tile of for_each_attention_row: bounds the scratch to kTile * n floats.
inline constexpr int kTile = 8;

// Calls visit(row, head, probs, n_visible) for every row in [row_begin, row_end) and every head of
// the GQA group, in row-major then head order, where probs[0 .. n_visible) is the softmax over the
// entries the row may see (causal by position) of q·k_j / sqrt(head_dim). A row that sees no entry
// is visited with n_visible == 0. Input must have passed validate_input with keys, positions and
// queries.
template <typename Visit>
void for_each_attention_row(const HeadScoreInput& in, int64_t row_begin, int64_t row_end,
                            Visit&& visit) {
  const int group = in.q_per_kv;
  const int64_t n_vectors = (row_end - row_begin) * group;
  std::vector<float> probs(static_cast<size_t>(kTile) * static_cast<size_t>(in.n));  // [kTile][n]
  const float* q[kTile];
  int64_t n_visible[kTile];
  for (int64_t v0 = 0; v0 < n_vectors; v0 += kTile) {
    const int tile = static_cast<int>(std::min<int64_t>(kTile, n_vectors - v0));
    for (int t = 0; t < tile; ++t) {
      const int64_t row = row_begin + (v0 + t) / group;
      const int64_t head = (v0 + t) % group;
      q[t] = in.queries + (row * group + head) * in.head_dim;
      n_visible[t] = visible_entries(in.positions, in.n, in.query_positions[row]);
    }
    tile_softmax_rows(q, n_visible, tile, in.keys, in.head_dim, probs.data(), in.n);
    for (int t = 0; t < tile; ++t) {
      const int64_t row = row_begin + (v0 + t) / group;
      const int head = static_cast<int>((v0 + t) % group);
      visit(row, head, static_cast<const float*>(probs.data() + t * in.n), n_visible[t]);
    }
  }
}

}  // namespace tangram::scorer_math
