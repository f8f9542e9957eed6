#include "compress/budgets.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "compress/profile.h"

namespace tangram {

namespace {

bool is_protected(int32_t pos, int64_t total, int sink, int window) {
  return pos < sink || pos >= total - window;
}

}  // namespace

int64_t uniform_length(double ratio, int64_t total, int sink, int window) {
  if (total <= 0) return 0;
  const auto kept = static_cast<int64_t>(std::ceil(ratio * static_cast<double>(total)));
  return std::min(total, std::max(kept, static_cast<int64_t>(sink) + window));
}

int64_t committed_entries(std::span<const float> fractions,
                          std::span<const std::vector<int>> groups, int64_t total, int sink,
                          int window) {
  int64_t entries = 0;
  for (const std::vector<int>& group : groups) {
    float most = 0.0f;
    for (int i : group) most = std::max(most, fractions[static_cast<size_t>(i)]);
    entries += static_cast<int64_t>(group.size()) * budget_length(most, total, sink, window);
  }
  return entries;
}

Result<ScaledBudgets> scale_budgets_to_ratio(std::span<const float> score,
                                             std::span<const std::vector<int>> groups, double ratio,
                                             int64_t total, int sink, int window) {
  if (!(ratio > 0.0 && ratio <= 1.0))
    return make_error("budget scaling: the ratio must be in (0, 1], not {}", ratio);
  if (total < 1)
    return make_error("budget scaling: the reference context must be positive, not {}", total);
  std::vector<int> seen(score.size(), 0);
  for (const std::vector<int>& group : groups)
    for (int i : group) {
      if (i < 0 || static_cast<size_t>(i) >= score.size())
        return make_error("budget scaling: group member {} outside the {} heads", i, score.size());
      ++seen[static_cast<size_t>(i)];
    }
  float smallest = 0.0f;  // smallest positive score: at 1/smallest every budget is clipped to 1
  for (size_t i = 0; i < score.size(); ++i) {
    if (seen[i] != 1)
      return make_error("budget scaling: head {} is in {} groups, not one", i, seen[i]);
    if (!(score[i] >= 0.0f) || !std::isfinite(score[i]))
      return make_error("budget scaling: score {} of head {} is not a finite non-negative value",
                        score[i], i);
    if (score[i] > 0.0f && (smallest == 0.0f || score[i] < smallest)) smallest = score[i];
  }
  ScaledBudgets out;
  out.fractions.resize(score.size());
  const double full = static_cast<double>(score.size()) * static_cast<double>(total);
  const double target = ratio * full;
  auto scaled = [&](double s) {
    for (size_t i = 0; i < score.size(); ++i)
      out.fractions[i] = static_cast<float>(std::min(s * static_cast<double>(score[i]), 1.0));
    return static_cast<double>(committed_entries(out.fractions, groups, total, sink, window));
  };
  // The footprint never falls as s grows: bisect for the last s at or under the target.
  double lo = 0.0, hi = smallest > 0.0f ? 1.0 / static_cast<double>(smallest) : 0.0;
  const double at_lo = scaled(lo);
  if (at_lo < target && hi > 0.0 && scaled(hi) > target) {
    for (int it = 0; it < 100 && hi - lo > 1e-12 * hi; ++it) {
      const double mid = 0.5 * (lo + hi);
      (scaled(mid) > target ? hi : lo) = mid;
    }
    // The nearer of the two sides of the step.
    const double under = scaled(lo), over = scaled(hi);
    out.scale = target - under <= over - target ? lo : hi;
  } else {
    out.scale = at_lo >= target ? lo : hi;
  }
  out.committed_ratio = scaled(out.scale) / full;
  return out;
}

void select_keep(std::span<const float> scores, std::span<const int32_t> positions, int64_t total,
                 int sink, int window, int64_t length, std::vector<int64_t>& keep) {
  const auto n = static_cast<int64_t>(std::min(scores.size(), positions.size()));
  keep.clear();
  if (length >= n) {
    keep.resize(static_cast<size_t>(n));
    std::iota(keep.begin(), keep.end(), int64_t{0});
    return;
  }
  // Evictable entries compete for the room the protected ones leave; the winners are marked and
  // read back in entry order (ascending without a sort: this runs for every head at every
  // compression point).
  std::vector<uint8_t> kept(static_cast<size_t>(n), 0);  // [n] 1: the entry stays
  std::vector<int64_t> others;
  others.reserve(static_cast<size_t>(n));
  int64_t protected_entries = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (is_protected(positions[static_cast<size_t>(i)], total, sink, window)) {
      kept[static_cast<size_t>(i)] = 1;
      ++protected_entries;
    } else {
      others.push_back(i);
    }
  }
  const int64_t room = std::max<int64_t>(0, length - protected_entries);
  if (room < static_cast<int64_t>(others.size())) {
    auto better = [&](int64_t a, int64_t b) {
      const float sa = scores[static_cast<size_t>(a)], sb = scores[static_cast<size_t>(b)];
      return sa > sb || (sa == sb && a < b);
    };
    std::nth_element(others.begin(), others.begin() + room, others.end(), better);
    others.resize(static_cast<size_t>(room));
  }
  for (const int64_t i : others) kept[static_cast<size_t>(i)] = 1;
  keep.reserve(static_cast<size_t>(protected_entries) + others.size());
  for (int64_t i = 0; i < n; ++i)
    if (kept[static_cast<size_t>(i)] != 0) keep.push_back(i);
}

std::vector<int64_t> dynamic_lengths(std::span<const HeadScores> heads, int n_layers, int n_kv_head,
                                     int64_t total, double ratio, int sink, int window,
                                     BudgetLevel level) {
  const size_t n_heads = static_cast<size_t>(n_layers) * static_cast<size_t>(n_kv_head);
  std::vector<int64_t> lengths(n_heads, 0);
  const int64_t uni = uniform_length(ratio, total, sink, window);
  std::vector<int64_t> prot(n_heads, 0);  // protected entries per head
  for (size_t i = 0; i < n_heads && i < heads.size(); ++i) {
    for (int32_t p : heads[i].positions) prot[i] += is_protected(p, total, sink, window) ? 1 : 0;
    lengths[i] = std::min<int64_t>(uni, static_cast<int64_t>(heads[i].scores.size()));
  }
  if (level == BudgetLevel::Uniform) return lengths;

  // Pools of heads sharing one budget: one per layer, or one for the model.
  const int pools = level == BudgetLevel::PerLayer ? n_layers : 1;
  const size_t per_pool = level == BudgetLevel::PerLayer ? static_cast<size_t>(n_kv_head) : n_heads;
  struct Cell {
    float score;
    int32_t head;
  };
  std::vector<Cell> cells;
  for (int pool = 0; pool < pools; ++pool) {
    const size_t h0 = static_cast<size_t>(pool) * per_pool;
    int64_t budget = 0;  // evictable slots the uniform lengths would keep in this pool
    cells.clear();
    for (size_t i = h0; i < h0 + per_pool && i < heads.size(); ++i) {
      budget += std::max<int64_t>(0, lengths[i] - prot[i]);
      const HeadScores& hs = heads[i];
      for (size_t j = 0; j < hs.scores.size() && j < hs.positions.size(); ++j)
        if (!is_protected(hs.positions[j], total, sink, window))
          cells.push_back(Cell{hs.scores[j], static_cast<int32_t>(i)});
    }
    for (size_t i = h0; i < h0 + per_pool && i < heads.size(); ++i) lengths[i] = prot[i];
    budget = std::min<int64_t>(budget, static_cast<int64_t>(cells.size()));
    auto better = [](const Cell& a, const Cell& b) {
      return a.score > b.score || (a.score == b.score && a.head < b.head);
    };
    std::nth_element(cells.begin(), cells.begin() + budget, cells.end(), better);
    for (int64_t c = 0; c < budget; ++c)
      ++lengths[static_cast<size_t>(cells[static_cast<size_t>(c)].head)];
  }
  return lengths;
}

}  // namespace tangram
