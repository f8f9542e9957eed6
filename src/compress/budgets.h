// How many entries each KV head keeps, and which.
//
// Lengths count a head's entries after compression for a context of `total` tokens. The sink
// (first `sink` positions) and the recent window (last `window` positions) are always kept;
// the rest, the evictable context, is where budgets apply.
//  - uniform: every head keeps sink + ceil(ratio x (total - sink)) (at least sink + window), the
//    reference implementation's uniform level (the window counts inside the budget);
//  - dynamic (run time): the same total per layer (per-layer level) or per model (cross-layer)
//    as uniform, spread over heads by pooling every head's evictable scores and keeping the
//    highest: a head with many high scores keeps more;
//  - deterministic (tangram, see profile.h): sink + window + ceil(b_h x (total - sink)) with
//    b_h fixed per head by the offline profile, so lengths follow from `total` alone.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "compress/kv_policy.h"

namespace tangram {

int64_t uniform_length(double ratio, int64_t total, int sink, int window);

// Entries of one head to keep, ascending: every entry at a position < sink or >= total - window,
// then the highest-scoring others (ties: the earlier entry) until `length` entries in all (or all
// n when length >= n). scores, positions: [n].
void select_keep(std::span<const float> scores, std::span<const int32_t> positions, int64_t total,
                 int sink, int window, int64_t length, std::vector<int64_t>& keep);

// One head's scores for the run-time (dynamic) spread.
struct HeadScores {
  std::span<const float> scores;       // [n]
  std::span<const int32_t> positions;  // [n]
};

// Run-time lengths, [n_layers][n_kv_head] flat, from every head's scores: the per-layer (or
// cross-layer) total of the uniform lengths is spread by keeping the highest evictable scores
// pooled over the layer's (model's) heads. Level Uniform gives the uniform lengths.
std::vector<int64_t> dynamic_lengths(std::span<const HeadScores> heads /*[L][H]*/, int n_layers,
                                     int n_kv_head, int64_t total, double ratio, int sink,
                                     int window, BudgetLevel level);

}  // namespace tangram
