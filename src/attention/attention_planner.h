// How the paged attention of a forward step is split across threads: the plans, when they are
// re-made, and how balanced they were predicted to be.
//
// One planner serves one model's steps (BatchedAttention owns it). With AttentionSplit::Runtime
// and ::Naive every layer of every step is planned afresh from the current lengths. With
// ::AheadOfTime each layer keeps a balanced plan (balanced_plan.h) that stays correct while the
// batch keeps its structure, so it is re-made only when the structure changes and every
// kReplanSteps steps (the heads grow by one entry per decode step, so the cuts drift slowly).
// Decode batches (one query row per sequence) are where balance matters: only their plans are
// scored into imbalance().
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "attention/paged_attention.h"
#include "common/result.h"

namespace tangram {

enum class AttentionSplit {
  Runtime,      // planned at every call from the current lengths (plan_attention)
  Naive,        // one item per head group, no splitting (plan_attention_naive)
  AheadOfTime,  // balanced thread assignment (plan_attention_balanced; a thread done early
                // takes another's unstarted items), computed when the batch changes and
                // reused across steps
};

class AttentionPlanner {
 public:
  // Steps an ahead-of-time plan is reused for at most, so its cuts follow the heads' growth.
  static constexpr int64_t kReplanSteps = 32;

  void set_split(AttentionSplit split) { split_ = split; }
  AttentionSplit split() const { return split_; }

  // Starts a step over n_layers layers whose sequences are `items` (their caches and query
  // rows; q and out are not read). Ahead-of-time plans are dropped when the caches or their
  // rows differ from the previous step's, and after kReplanSteps steps. Error: out of memory.
  Status begin_step(std::span<const AttentionItem> items, int n_layers);
  // The plan for one layer's batch of the step begin_step() started, made or reused as the
  // split says.
  const AttentionPlan& plan(int layer, const AttentionBatch& batch, int n_threads);

  // Ahead-of-time plans made since construction.
  int64_t plans_made() const { return plans_made_; }
  // Mean predicted load imbalance (slowest thread's work over the mean) of the decode plans
  // used since the last reset; 1 = perfectly balanced (also when none was used).
  double imbalance() const {
    return imbalance_n_ > 0 ? imbalance_sum_ / static_cast<double>(imbalance_n_) : 1.0;
  }
  void reset_stats() {
    imbalance_sum_ = 0;
    imbalance_n_ = 0;
  }

 private:
  void score(const AttentionBatch& batch, const AttentionPlan& plan, int n_threads);

  AttentionSplit split_ = AttentionSplit::Runtime;
  AttentionPlan call_plan_;                 // Runtime, Naive: made for the call at hand
  std::vector<AttentionPlan> layer_plans_;  // AheadOfTime: [n_layers], empty work = stale
  std::vector<std::pair<const void*, int64_t>> step_key_;  // [sequences] (cache, rows)
  int64_t plan_age_ = 0;                                   // steps since the plans were dropped
  int64_t plans_made_ = 0;
  double imbalance_sum_ = 0;
  int64_t imbalance_n_ = 0;
};

}  // namespace tangram
