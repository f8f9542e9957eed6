// Ahead-of-time balanced planning of (decode) attention over heads of unequal lengths.
//
// With per-head compression every (sequence, KV head) keeps its own number of entries, so the
// work of one attention call is known before it runs: an item's cost is about entries x query
// vectors ("lanes"). plan_attention_balanced() lays the tiles (sequence, head group or KV head,
// query rows) end to end in cost space and cuts that line at k x total / n_threads (a prefix-sum
// cut): thread t runs the items between cut t and cut t + 1 (a thread assignment; when the
// prediction holds and no thread is held up, exactly those: a thread that finishes early
// takes the unstarted end of another's share, work_ranges.h). A tile crossing a cut is split at an
// entry boundary (a multiple of the kernel block, pieces of at least min_chunk_entries); its parts
// leave partial softmax states that run_attention merges exactly (AttentionMerge). So at most
// n_threads - 1 tiles are split.
//
// Reusing a plan over decode steps. The last piece of every tile has an open end
// (entry_end = kOpenEntryEnd, clipped to each head's length when run), and pieces start at 0
// and abut, so the plan covers every entry of every head whatever the heads' lengths: it stays
// CORRECT for as long as the batch keeps its structure (same sequences in the same order, same
// query rows per sequence, same head groups). Growth only lands in the last pieces, so the
// BALANCE drifts slowly. A caller re-plans
//   - whenever the batch structure changes (a sequence joins, leaves or changes its row count,
//     or the head-group map changes): the old plan would miss or misaddress work;
//   - after compaction or truncation shrank heads (still correct, but the cuts are stale);
//   - when plan_imbalance(batch, plan, n_threads) exceeds its limit (e.g. 1.05), checked every
//     few dozen steps; one decode step adds one entry per head, a small fraction of a share.
// Planning reads every head's length once and binary-searches only the (at most n_threads - 1)
// tiles that a boundary crosses: O(lanes + n_threads x tile lanes x log(length)), meant for
// these moments, not for every kernel call.
#pragma once

#include <cstdint>
#include <limits>

#include "attention/paged_attention.h"
#include "common/result.h"

namespace tangram {

// entry_end of a piece that runs to the end of its heads, however long they grow.
inline constexpr int64_t kOpenEntryEnd = std::numeric_limits<int64_t>::max();

struct BalancedPlanOptions {
  bool whole_groups = true;  // one tile per head group (false: one per KV head)
  int max_lanes = 8;         // query rows x query heads per KV head in one tile
  // Never cut a tile into a piece shorter than this (rounded up to a kernel block). Small is
  // fine: only thread boundaries cut, so at most n_threads - 1 tiles are split, and the
  // granularity bounds how close a boundary can get to its ideal place.
  int64_t min_chunk_entries = 32;
  // Fixed cost of one item in cost units (entry x lane): query scaling, writing outputs or
  // partials, merging. Also what splitting a tile costs.
  int64_t item_overhead = 256;
  // A cut that falls within this fraction of a share of a tile edge moves to the edge (no
  // split, no merge).
  double edge_slack = 0.01;
};

// Fills plan with a balanced fixed assignment for n_threads threads (plan.thread_begin has
// n_threads + 1 entries; run_attention uses it when its pool has n_threads threads). The items
// cover every visible entry of every (sequence, KV head, query row) exactly once.
void plan_attention_balanced(const AttentionBatch& batch, int n_threads, AttentionPlan& plan,
                             const BalancedPlanOptions& options = {});

// The comparison point: plan_attention with one item per head group and no splitting (items
// ordered costliest first, taken by threads as they free up). Its items also get open ends,
// so it too can be reused while heads grow.
void plan_attention_naive(const AttentionBatch& batch, int n_threads, AttentionPlan& plan);

// Predicted cost of one item: sum over its lanes of the entries in [entry_begin, entry_end)
// the lane sees, plus item_overhead.
int64_t predicted_work_cost(const AttentionBatch& batch, const AttentionWork& work,
                            int64_t item_overhead = BalancedPlanOptions{}.item_overhead);

// The slowest thread's predicted cost over the mean (1 = perfect). With a fixed assignment for
// n_threads (thread_begin of size n_threads + 1) the threads' sums; otherwise the dynamic
// order simulated: each item, in order, goes to the thread that frees first. 1 when there is
// no work. Assumes a plan that validates against the batch.
double plan_imbalance(const AttentionBatch& batch, const AttentionPlan& plan, int n_threads,
                      int64_t item_overhead = BalancedPlanOptions{}.item_overhead);

// Checks that the plan's items partition, for every sequence, KV head and query row, the
// entries that row sees (each exactly once, no gaps) and that every partial of a merge is
// filled by one item. O(items x heads x rows). Errors name the first uncovered or twice-covered
// (sequence, head, row).
Status check_attention_coverage(const AttentionBatch& batch, const AttentionPlan& plan);

}  // namespace tangram
