#include "runtime/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tangram {
namespace {

float finite_or_min(float x) { return std::isnan(x) ? -std::numeric_limits<float>::infinity() : x; }

}  // namespace

TokenLogprob token_logprob(std::span<const float> logits, int32_t chosen, int top_n) {
  TokenLogprob out;
  out.token = chosen;
  if (logits.empty()) return out;
  float max = -std::numeric_limits<float>::infinity();
  for (float x : logits) max = std::max(max, finite_or_min(x));
  double sum = 0.0;  // of exp(x - max), in double: 150k terms
  if (std::isfinite(max))
    for (float x : logits)
      sum += std::exp(static_cast<double>(finite_or_min(x)) - static_cast<double>(max));
  const double log_z = std::isfinite(max) ? static_cast<double>(max) + std::log(sum) : 0.0;
  auto logprob = [&](int32_t id) {
    return static_cast<float>(static_cast<double>(finite_or_min(logits[static_cast<size_t>(id)])) -
                              log_z);
  };
  if (chosen >= 0 && static_cast<size_t>(chosen) < logits.size()) out.logprob = logprob(chosen);
  const size_t k =
      std::min<size_t>(static_cast<size_t>(std::clamp(top_n, 0, kMaxTopLogprobs)), logits.size());
  if (k == 0) return out;
  // A sorted window of the k best (higher logit first, lower id on ties): most logits lose one
  // comparison against its last entry.
  auto better = [&](int32_t a, int32_t b) {
    const float la = finite_or_min(logits[static_cast<size_t>(a)]),
                lb = finite_or_min(logits[static_cast<size_t>(b)]);
    return la > lb || (la == lb && a < b);
  };
  std::vector<int32_t> best;
  best.reserve(k + 1);
  for (size_t i = 0; i < logits.size(); ++i) {
    const auto id = static_cast<int32_t>(i);
    if (best.size() == k && !better(id, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), id, better), id);
    if (best.size() > k) best.pop_back();
  }
  for (int32_t id : best) out.top.emplace_back(id, logprob(id));
  return out;
}

}  // namespace tangram
