#include "evaluation/equal_retention.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tangram {

bool EqualRetentionPair::equal_memory(double tolerance) const {
  return interpolated || std::abs(other_retention - retention) <= tolerance;
}

std::optional<EqualRetentionPair> pair_at_equal_retention(const RetentionPoint& run,
                                                          std::span<const RetentionPoint> runs,
                                                          const std::string& other_policy) {
  std::vector<RetentionPoint> other;  // the other policy's usable runs, by retention
  for (const RetentionPoint& p : runs)
    if (p.policy == other_policy && p.policy != run.policy && std::isfinite(p.retention) &&
        p.retention > 0 && std::isfinite(p.tokens_per_s))
      other.push_back(p);
  if (other.empty()) return std::nullopt;
  std::sort(other.begin(), other.end(), [](const RetentionPoint& a, const RetentionPoint& b) {
    return a.retention < b.retention;
  });

  EqualRetentionPair pair;
  pair.other_policy = other_policy;
  pair.retention = run.retention;
  // The first run at or above the retention; with the one below it, they bracket it.
  const auto above = std::find_if(other.begin(), other.end(), [&](const RetentionPoint& p) {
    return p.retention >= run.retention;
  });
  if (above != other.end() && above != other.begin() &&
      above->retention > std::prev(above)->retention) {
    const RetentionPoint& lo = *std::prev(above);
    const RetentionPoint& hi = *above;
    const double w = (run.retention - lo.retention) / (hi.retention - lo.retention);
    pair.other_tokens_per_s = lo.tokens_per_s + w * (hi.tokens_per_s - lo.tokens_per_s);
    pair.other_retention = run.retention;
    pair.interpolated = true;
    pair.below = lo;
    pair.above = hi;
  } else {
    const auto nearest = std::min_element(
        other.begin(), other.end(), [&](const RetentionPoint& a, const RetentionPoint& b) {
          return std::abs(a.retention - run.retention) < std::abs(b.retention - run.retention);
        });
    pair.other_tokens_per_s = nearest->tokens_per_s;
    pair.other_retention = nearest->retention;
    pair.below = pair.above = *nearest;
  }
  pair.speedup = pair.other_tokens_per_s > 0 ? run.tokens_per_s / pair.other_tokens_per_s : 0.0;
  return pair;
}

}  // namespace tangram
