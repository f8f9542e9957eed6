// How a KV cache is compressed: the policy (which of the four designs compared here), the
// retention ratio and budget level, the always-kept sink and recent window, the scorer, and
// for the tangram policy the offline profile and head-group map.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"
#include "compress/scorer.h"

namespace tangram {

enum class KvPolicy {
  Full,     // no compression, unified pages (the vLLM-style baseline)
  Uniform,  // every head keeps the same share, unified pages
  Dynamic,  // non-uniform shares chosen per request at run time from the scores, unified pages,
            // scattered pages reclaimed at run time, attention split planned every step
  Tangram,  // non-uniform deterministic budgets from a profile, head-group pages, attention
            // split planned ahead of time
};
std::string_view kv_policy_name(KvPolicy p);
Result<KvPolicy> parse_kv_policy(std::string_view name);

// How the dynamic policy spreads its run-time budget (--kv-level).
enum class BudgetLevel {
  Uniform,     // every head ratio x its evictable context
  PerLayer,    // each layer keeps its share, spread over its heads by score
  CrossLayer,  // one budget for all heads of all layers, spread by score
};
std::string_view budget_level_name(BudgetLevel l);
Result<BudgetLevel> parse_budget_level(std::string_view name);

// How the tangram policy's profile budgets meet --kv-ratio (--kv-budget-scaling).
enum class BudgetScaling {
  Footprint,  // mu + alpha·sigma scaled by one factor so that the footprint the head groups
              // commit (group maxima, sink and window included) is `ratio` of full KV's
  None,       // the profile's form: clip((mu + alpha·sigma) · ratio / base_ratio, 0, 1)
};
std::string_view budget_scaling_name(BudgetScaling s);
Result<BudgetScaling> parse_budget_scaling(std::string_view name);

struct CompressionOptions {
  KvPolicy policy = KvPolicy::Full;
  double ratio = 1.0;  // kept fraction of the context beyond the sink
  BudgetLevel level = BudgetLevel::PerLayer;
  double alpha = 2.0;  // safety coefficient of deterministic budgets
  BudgetScaling budget_scaling = BudgetScaling::Footprint;
  int64_t budget_context = 0;    // reference context of the footprint scaling (0: chunk)
  int sink = 4;                  // first tokens always kept
  int window = 32;               // most recent tokens always kept
  int64_t chunk = 2048;          // long prompts are compressed every `chunk` tokens
  bool first_turn_only = false;  // compress only a conversation's first prefill
  ScorerOptions scorer;
  std::string profile;            // tangram: per-head retention profile (JSON)
  std::string cluster_map;        // tangram: head groups (JSON); default: cluster the profile
  bool per_layer_groups = false;  // tangram: cluster each layer's heads apart (--kv-group-scope
                                  // per-layer) instead of all heads together (global)
  int64_t reconstruction_tokens = 2048;  // kvzip: most context tokens repeated for scoring

  bool compresses() const { return policy != KvPolicy::Full && ratio < 1.0; }
  // The context at which tangram's budgets are scaled to the ratio.
  int64_t budget_reference() const { return budget_context > 0 ? budget_context : chunk; }
  // Checks ranges (ratio in (0, 1], alpha >= 0, sink/window >= 0, chunk > window).
  Status validate() const;
};

}  // namespace tangram
