// How many entries each KV head keeps, and which.
//
// Lengths count a head's entries after compression for a context of `total` tokens. The sink
// (first `sink` positions) and the recent window (last `window` positions) are always kept;
// the rest, the evictable context, is where budgets apply.
//  - uniform: every head keeps ceil(ratio x total), at least sink + window (both count inside
//    the budget), so that --kv-ratio is the fraction of the context kept;
//  - dynamic (run time): the same total per layer (per-layer level) or per model (cross-layer)
//    as uniform, spread over heads by pooling every head's evictable scores and keeping the
//    highest: a head with many high scores keeps more;
//  - deterministic (tangram, see profile.h): sink + window + ceil(b_h x (total - sink)) with
//    b_h fixed per head by the offline profile, so lengths follow from `total` alone. Every
//    member of a head group keeps its group's largest budget; scale_budgets_to_ratio scales the
//    profile's budgets so that what the groups commit is `ratio` of full KV.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/result.h"
#include "compress/kv_policy.h"

namespace tangram {

int64_t uniform_length(double ratio, int64_t total, int sink, int window);

// Entries a grouping commits for a context of `total` tokens: every head keeps
// budget_length(max of its group's fractions, ...). fractions: [n_heads] flat (l·H + h);
// groups: the flat head indices of each group (ClusterMap::members(), per-layer or global).
int64_t committed_entries(std::span<const float> fractions,
                          std::span<const std::vector<int>> groups, int64_t total, int sink,
                          int window);

// Budgets scaled so that their committed footprint is `ratio` of full KV's.
struct ScaledBudgets {
  std::vector<float> fractions;  // [n_heads] clip(scale · score_h, 0, 1)
  double scale = 0;              // the factor found
  double committed_ratio = 0;    // committed_entries / (n_heads · total) at the reference context
};

// Finds, by bisection, the factor s for which the budgets clip(s · score_h, 0, 1) commit (group
// maxima, sink and window included) the nearest footprint to ratio · n_heads · total at the
// reference context `total`. One factor for every head keeps their ranks and the ratios between
// their budgets (alpha's margin), except where clipped at 1. When even empty budgets (sink and
// window alone) exceed the target, s is 0; when full budgets do not reach it, every head of a
// positive score keeps 1.
// score: [n_heads] non-negative (budget_scores); every head must be in exactly one group.
Result<ScaledBudgets> scale_budgets_to_ratio(std::span<const float> score,
                                             std::span<const std::vector<int>> groups, double ratio,
                                             int64_t total, int sink, int window);

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
