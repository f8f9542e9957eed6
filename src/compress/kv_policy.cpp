#include "compress/kv_policy.h"

#include <cmath>

namespace tangram {

std::string_view kv_policy_name(KvPolicy p) {
  switch (p) {
    case KvPolicy::Full:
      return "full";
    case KvPolicy::Uniform:
      return "uniform";
    case KvPolicy::Dynamic:
      return "dynamic";
    case KvPolicy::Tangram:
      return "tangram";
  }
  return "full";
}

Result<KvPolicy> parse_kv_policy(std::string_view name) {
  for (KvPolicy p : {KvPolicy::Full, KvPolicy::Uniform, KvPolicy::Dynamic, KvPolicy::Tangram})
    if (kv_policy_name(p) == name) return p;
  return make_error("unknown KV policy '{}': choose full, uniform, dynamic or tangram", name);
}

std::string_view budget_level_name(BudgetLevel l) {
  switch (l) {
    case BudgetLevel::Uniform:
      return "uniform";
    case BudgetLevel::PerLayer:
      return "per-layer";
    case BudgetLevel::CrossLayer:
      return "cross-layer";
  }
  return "per-layer";
}

Result<BudgetLevel> parse_budget_level(std::string_view name) {
  for (BudgetLevel l : {BudgetLevel::Uniform, BudgetLevel::PerLayer, BudgetLevel::CrossLayer})
    if (budget_level_name(l) == name) return l;
  return make_error("unknown KV budget level '{}': choose uniform, per-layer or cross-layer", name);
}

std::string_view budget_scaling_name(BudgetScaling s) {
  return s == BudgetScaling::None ? "none" : "footprint";
}

Result<BudgetScaling> parse_budget_scaling(std::string_view name) {
  for (BudgetScaling s : {BudgetScaling::Footprint, BudgetScaling::None})
    if (budget_scaling_name(s) == name) return s;
  return make_error("unknown KV budget scaling '{}': choose footprint or none", name);
}

Status CompressionOptions::validate() const {
  if (!(ratio > 0.0 && ratio <= 1.0))
    return make_error("--kv-ratio must be in (0, 1], not {}", ratio);
  if (!(alpha >= 0.0) || !std::isfinite(alpha))
    return make_error("--kv-alpha must be >= 0, not {}", alpha);
  if (sink < 0) return make_error("--kv-sink must be >= 0, not {}", sink);
  if (window < 0) return make_error("--kv-window must be >= 0, not {}", window);
  if (chunk <= window)
    return make_error("--kv-chunk ({}) must exceed the recent window --kv-window ({})", chunk,
                      window);
  if (budget_context < 0)
    return make_error("--kv-budget-context must be >= 0, not {}", budget_context);
  if (reconstruction_tokens < 1)
    return make_error("the reconstruction pass needs at least one token");
  if (policy == KvPolicy::Tangram && ratio < 1.0 && profile.empty())
    return make_error(
        "the tangram policy needs a per-head profile: pass --kv-profile FILE (`tangram profile` "
        "makes one; tangram serve, chat and run make and cache one when it is left out)");
  return Status::Ok();
}

}  // namespace tangram
