// Attention over per-head KV storage, for one layer of one or many sequences at once: any
// KvCache (paged, or contiguous as one dense run per head) or dense arrays, read through the
// KvHeadViews the storage gives.
//
// Three steps, each replaceable on its own:
//  1. build_attention_batch(): resolves each sequence's (cache, query rows) into KvHeadViews,
//     with the KV heads listed head group after head group (heads sharing pages adjacent);
//  2. plan_attention(): THE place that splits the work into items (sequence, KV heads, query
//     rows, stored-entry range). An item covering only part of its heads' entries leaves
//     partial results (running max, sum, accumulator per query vector) that are merged exactly
//     with the other parts of the same rows. A later ahead-of-time planner may produce the
//     plan instead (optionally with a fixed thread assignment);
//  3. run_attention(): executes a plan on a thread pool.
// An item may cover all KV heads of one head group: the kernel then walks their entries block
// by block, all heads together, so each page is read in one sweep (whole pages stream from
// memory better than one head's slice of each page).
// Math per query head h (reading KV head h / (n_head / n_kv_head)): scores q.k / sqrt(head_dim)
// over the entries the query's position may see (causal), an online softmax (running max and
// sum, float accumulation), output = sum softmax * v. A query that sees no entry gets zeros.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "attention/attention_kernel.h"
#include "attention/work_ranges.h"
#include "common/result.h"
#include "common/thread_pool.h"
#include "kv/kv_cache.h"
#include "kv/kv_head_view.h"

namespace tangram {

// One sequence's part of a batched call.
struct AttentionItem {
  const KvCache* cache = nullptr;
  const float* q = nullptr;  // [n][n_head][head_dim]
  float* out = nullptr;      // [n][n_head][head_dim_v]
  int64_t n = 0;             // query rows, at positions pos0 .. pos0 + n - 1
  int64_t pos0 = 0;
};

// A batch resolved for the planner and the kernels. All sequences share one shape and type.
struct AttentionSequence {
  const float* q = nullptr;  // [n_rows][n_head][head_dim]
  float* out = nullptr;      // [n_rows][n_head][head_dim_v]
  int64_t n_rows = 0;
  int64_t pos0 = 0;
};
struct AttentionBatch {
  int n_head = 0;
  int n_kv_head = 0;
  int head_dim = 0;
  int head_dim_v = 0;
  KvType type = KvType::F32;
  std::vector<AttentionSequence> seqs;
  std::vector<KvHeadView> heads;     // [seqs][n_kv_head], by KV head index
  std::vector<int32_t> head_order;   // [seqs][n_kv_head]: KV heads, group after group
  std::vector<uint8_t> group_start;  // [seqs][n_kv_head]: 1 where head_order starts a group

  int q_per_kv() const { return n_head / n_kv_head; }
  size_t at(int32_t seq, int32_t i) const {
    return static_cast<size_t>(seq) * static_cast<size_t>(n_kv_head) + static_cast<size_t>(i);
  }
  const KvHeadView& head(int32_t seq, int32_t kv_head) const { return heads[at(seq, kv_head)]; }
};

// Fills batch from the caches' layer `layer`. Errors: no items, a null cache or buffer, caches
// of different shapes or types, layer out of range, negative n or pos0.
Status build_attention_batch(int layer, std::span<const AttentionItem> items,
                             AttentionBatch& batch);

// One unit of work: the KV heads head_order[head_begin .. head_end) of sequence seq (with the
// query heads reading them), query rows [row_begin, row_end), stored entries
// [entry_begin, entry_end) (each head clipped to its own length). Its query vectors ("lanes")
// are numbered head-major, then row, then query head within the KV head's group:
//   lane = ((head - head_begin) * rows + (row - row_begin)) * q_per_kv + q
struct AttentionWork {
  int32_t seq = 0;
  int32_t head_begin = 0;
  int32_t head_end = 0;
  int32_t row_begin = 0;
  int32_t row_end = 0;
  int64_t entry_begin = 0;
  int64_t entry_end = 0;
  int32_t merge = -1;   // -1: this item covers every visible entry and writes the output;
                        // else the index of its AttentionMerge in the plan
  int64_t partial = 0;  // merge >= 0: partial slot of the item's lane 0 (lanes consecutive)
};
// Lanes whose entries were split over n_parts work items (same seq, heads and rows); part k
// left its partials at slots first_partial + k * lanes.
struct AttentionMerge {
  int32_t seq = 0;
  int32_t head_begin = 0;
  int32_t head_end = 0;
  int32_t row_begin = 0;
  int32_t row_end = 0;
  int64_t first_partial = 0;
  int32_t n_parts = 0;
};
struct AttentionPlan {
  std::vector<AttentionWork> work;
  std::vector<AttentionMerge> merges;
  int64_t n_partial_slots = 0;
  // Optional thread assignment: thread t starts with work[thread_begin[t] .. thread_begin[t + 1])
  // and, once those are done, takes items another thread has not started (work_ranges.h).
  // Empty (or sized for another thread count): threads take items in order as they free up.
  std::vector<int32_t> thread_begin;
};

struct AttentionPlanOptions {
  bool whole_groups = true;         // one item per head group (false: one per KV head)
  int max_lanes = 8;                // query rows x query heads per KV head in one item
  int64_t min_chunk_entries = 256;  // never split entries into parts shorter than this
  int items_per_thread = 4;         // aim for about this many items per thread
};

// Calls fn(seq, head_begin, head_end, row_begin, row_end) for every tile of the batch: per
// sequence, each head group in head_order (whole_groups; else each KV head), cut into tiles of
// at most tile_rows query rows. The planners build their items from these tiles.
template <typename Fn>
void for_each_attention_tile(const AttentionBatch& batch, bool whole_groups, int32_t tile_rows,
                             Fn&& fn) {
  for (size_t si = 0; si < batch.seqs.size(); ++si) {
    const auto s = static_cast<int32_t>(si);
    const auto rows = static_cast<int32_t>(batch.seqs[si].n_rows);
    for (int32_t hb = 0; hb < batch.n_kv_head;) {
      int32_t he = hb + 1;
      while (whole_groups && he < batch.n_kv_head && !batch.group_start[batch.at(s, he)]) ++he;
      for (int32_t r0 = 0; r0 < rows; r0 += tile_rows)
        fn(s, hb, he, r0, std::min(rows, r0 + tile_rows));
      hb = he;
    }
  }
}

// The default split: per sequence, one item per head group (or KV head) and tile of query
// rows; the entries cut into equal parts (multiples of 32) where that is needed to give each
// thread about items_per_thread items of similar cost; items ordered costliest first.
void plan_attention(const AttentionBatch& batch, int n_threads, AttentionPlan& plan,
                    const AttentionPlanOptions& options = {});

// Reusable buffers of run_attention (per-thread scratch, partial results, merge counters), and
// a batch and plan for the one-call entry points.
class AttentionWorkspace {
 public:
  AttentionWorkspace();
  ~AttentionWorkspace();
  AttentionWorkspace(const AttentionWorkspace&) = delete;
  AttentionWorkspace& operator=(const AttentionWorkspace&) = delete;

  AttentionBatch batch;
  AttentionPlan plan;

  struct Thread {
    std::vector<float> q;          // [lanes][head_dim]: queries scaled by 1/sqrt(head_dim)
    std::vector<float> acc;        // [lanes][head_dim_v]
    std::vector<float> m, l;       // [lanes] running max and sum
    std::vector<int64_t> limit;    // [lanes] entries [.., limit) visible to the lane
    std::vector<float> scores;     // [lanes][kernel block]
    std::vector<HeadLanes> heads;  // [n_kv_head] the kernel's view of an item's heads
  };
  std::vector<Thread> threads;
  std::vector<float> part_acc;                         // [n_partial_slots][head_dim_v]
  std::vector<float> part_m;                           // [n_partial_slots]
  std::vector<float> part_l;                           // [n_partial_slots]
  std::unique_ptr<std::atomic<int32_t>[]> merge_left;  // [merges]: parts not yet finished
  WorkRanges ranges;  // [threads]: what is left of each thread's items (plans with an assignment)
  size_t merge_capacity = 0;
};

// Checks a plan's indices against a batch (run_attention does this first).
Status validate_attention_plan(const AttentionBatch& batch, const AttentionPlan& plan);
// Runs a plan. Errors (nothing computed): the plan does not fit the batch, or host memory ran
// out sizing the workspace.
Status run_attention(const AttentionBatch& batch, const AttentionPlan& plan, ThreadPool& pool,
                     AttentionWorkspace& ws);

// build_attention_batch + plan_attention + run_attention, in ws's buffers.
Status paged_attention(int layer, std::span<const AttentionItem> items, ThreadPool& pool,
                       AttentionWorkspace& ws);

// The same for one sequence: causal attention of n queries at positions pos0 .. pos0+n-1 over
// the layer's stored entries of `cache` (a query at position p sees the entries at positions
// <= p), after the cache's write() of those positions. Query head h reads KV head
// h / (n_head / n_kv_head); scores are scaled by 1/sqrt(head_dim).
//   q: [n][n_head][head_dim]   out: [n][n_head][head_dim_v]
Status attend_sequence(const KvCache& cache, int layer, const float* q, int64_t n, int64_t pos0,
                       float* out, ThreadPool& pool, AttentionWorkspace& ws);

}  // namespace tangram
