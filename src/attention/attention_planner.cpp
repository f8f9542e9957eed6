#include "attention/attention_planner.h"

#include <algorithm>
#include <new>

#include "attention/balanced_plan.h"

namespace tangram {

Status AttentionPlanner::begin_step(std::span<const AttentionItem> items, int n_layers) {
  try {
    layer_plans_.resize(static_cast<size_t>(n_layers));
    std::vector<std::pair<const void*, int64_t>> key;
    key.reserve(items.size());
    for (const AttentionItem& item : items) key.emplace_back(item.cache, item.n);
    if (key != step_key_ || ++plan_age_ >= kReplanSteps) {
      step_key_ = std::move(key);
      plan_age_ = 0;
      for (AttentionPlan& p : layer_plans_) p.work.clear();
    }
  } catch (const std::bad_alloc&) {
    return make_error("attention: out of host memory for the step's plans");
  }
  return Status::Ok();
}

const AttentionPlan& AttentionPlanner::plan(int layer, const AttentionBatch& batch, int n_threads) {
  switch (split_) {
    case AttentionSplit::Runtime:
      plan_attention(batch, n_threads, call_plan_);
      score(batch, call_plan_, n_threads);
      return call_plan_;
    case AttentionSplit::Naive:
      plan_attention_naive(batch, n_threads, call_plan_);
      score(batch, call_plan_, n_threads);
      return call_plan_;
    case AttentionSplit::AheadOfTime:
      break;
  }
  AttentionPlan& kept = layer_plans_[static_cast<size_t>(layer)];
  if (kept.work.empty()) {
    plan_attention_balanced(batch, n_threads, kept);
    ++plans_made_;
  }
  score(batch, kept, n_threads);
  return kept;
}

void AttentionPlanner::score(const AttentionBatch& batch, const AttentionPlan& plan,
                             int n_threads) {
  const bool decode = std::all_of(batch.seqs.begin(), batch.seqs.end(),
                                  [](const AttentionSequence& s) { return s.n_rows == 1; });
  if (!decode) return;
  imbalance_sum_ += plan_imbalance(batch, plan, n_threads);
  ++imbalance_n_;
}

}  // namespace tangram
