// Sentence embeddings from a decoder's hidden states: how the rows of one sequence are pooled
// into one vector, and an accumulator that pools them chunk by chunk as a prompt goes through
// the scheduler's steps (a long input is never held whole).
//
// The numbering is GGUF's `<arch>.pooling_type` (llama.cpp's): 0 none (a vector per token),
// 1 mean, 2 cls (the first token), 3 last, 4 rank (a reranker's score, not an embedding).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace tangram {

enum class Pooling { None = 0, Mean = 1, Cls = 2, Last = 3, Rank = 4 };

std::string_view pooling_name(Pooling p);
// "none", "mean", "cls", "last", "rank"; nullopt for anything else.
std::optional<Pooling> parse_pooling(std::string_view name);

// The pooling embeddings use: `asked` (a server flag) when given, else what the GGUF says
// (`gguf`), else Last (in a causal decoder the last token is the only one that has read the
// whole input). An error when the choice is none or rank: such a model gives no single vector.
Result<Pooling> embedding_pooling(std::optional<Pooling> gguf, std::optional<Pooling> asked);

// Pools hidden rows [dim] of positions 0, 1, ... of one sequence, fed in order in chunks.
// Mean sums in double so that a long input loses nothing to rounding.
class PoolAccumulator {
 public:
  // pooling must be Mean, Cls or Last.
  PoolAccumulator(Pooling pooling, int dim);

  // rows: [n][dim], the hidden states of positions pos0 .. pos0 + n - 1. Chunks come in
  // position order; a chunk starting at 0 starts over (a recomputed sequence).
  void add(const float* rows, int64_t n, int64_t pos0);
  int64_t rows() const { return rows_; }
  // The pooled vector scaled to unit L2 norm (all zeros when nothing was added or the norm is
  // zero).
  std::vector<float> normalized() const;

 private:
  Pooling pooling_;
  int dim_;
  int64_t rows_ = 0;
  std::vector<double> acc_;  // [dim]: the sum (mean), the first row (cls), the latest (last)
};

}  // namespace tangram
