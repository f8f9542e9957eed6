// Footprint scaling of deterministic budgets (budgets.h, scale_budgets_to_ratio): what the head
// groups commit, group maxima, sink and window included, equals the ratio of full KV's, for
// several ratios, contexts and per-layer, global and contiguous groupings of a real profile; one
// factor for every head, so ranks and the ratios between budgets stay.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "compress/budgets.h"
#include "compress/cluster.h"
#include "compress/profile.h"
#include "compress/shipped_profiles.h"

namespace tangram {
namespace {

// The committed footprint, written out plainly: each group at its largest member's length.
int64_t committed_plain(const std::vector<float>& fractions,
                        const std::vector<std::vector<int>>& groups, int64_t total, int sink,
                        int window) {
  int64_t sum = 0;
  for (const auto& g : groups) {
    int64_t longest = 0;
    for (int i : g)
      longest =
          std::max(longest, budget_length(fractions[static_cast<size_t>(i)], total, sink, window));
    sum += longest * static_cast<int64_t>(g.size());
  }
  return sum;
}

TEST(BudgetScaling, CommittedEntriesOnAKnownExample) {
  // Two groups of two heads; total 104, sink 4, window 10: evictable 100.
  const std::vector<float> f = {0.25f, 0.125f, 0.0f, 0.5f};
  const std::vector<std::vector<int>> groups = {{0, 2}, {1, 3}};
  // Group {0, 2} at 0.25: 4 + 10 + 25 = 39 each; group {1, 3} at 0.5: 4 + 10 + 50 = 64 each.
  EXPECT_EQ(committed_entries(f, groups, 104, 4, 10), 2 * 39 + 2 * 64);
  EXPECT_EQ(committed_entries(f, groups, 104, 4, 10), committed_plain(f, groups, 104, 4, 10));
}

TEST(BudgetScaling, RealProfileCommitsTheRatioUnderEveryGrouping) {
  auto p = load_profile(testing::profile_path("keydiff", "qwen3-4b-instruct-2507", true));
  ASSERT_TRUE(p.ok()) << p.message();
  const int L = p->n_layers, H = p->n_kv_head;
  const auto n = static_cast<double>(L * H);
  const std::vector<float> score = budget_scores(*p, 2.0);
  struct Grouping {
    const char* name;
    Result<ClusterMap> map;
  };
  Grouping groupings[] = {{"per-layer G=4", cluster_heads(p->median, L, H, 4, false)},
                          {"global G=4", cluster_heads(p->median, L, H, 4, true)},
                          {"global G=16", cluster_heads(p->median, L, H, 16, true)},
                          {"contiguous G=8", contiguous_map(L, H, 8)},
                          {"each head alone", contiguous_map(L, H, 1)}};
  const int sink = 4, window = 32;
  for (auto& [name, map] : groupings) {
    ASSERT_TRUE(map.ok()) << map.message();
    const std::vector<std::vector<int>> groups = map->members();
    for (double ratio : {0.1, 0.25, 0.5, 0.8})
      for (int64_t total : {512, 2048, 20000}) {
        SCOPED_TRACE(fmt::format("{} ratio {} context {}", name, ratio, total));
        auto scaled = scale_budgets_to_ratio(score, groups, ratio, total, sink, window);
        ASSERT_TRUE(scaled.ok()) << scaled.message();
        // Within one token per head of ratio · full (each step of the footprint is one group
        // gaining a token per member), counted by the plain loop.
        const double full = n * static_cast<double>(total);
        const double kept =
            static_cast<double>(committed_plain(scaled->fractions, groups, total, sink, window));
        EXPECT_LE(std::abs(kept - ratio * full), n);
        EXPECT_NEAR(scaled->committed_ratio, kept / full, 1e-12);
        // One factor for all: fractions are clip(scale · score); ranks and ratios between
        // unclipped budgets stay.
        for (size_t i = 0; i < score.size(); ++i) {
          const double want = std::min(scaled->scale * static_cast<double>(score[i]), 1.0);
          ASSERT_NEAR(scaled->fractions[i], want, 1e-6) << i;
          for (size_t j = 0; j < score.size(); j += 7)
            if (score[i] < score[j]) {
              ASSERT_LE(scaled->fractions[i], scaled->fractions[j]) << i << " " << j;
            }
        }
      }
  }
  // A coarser grouping keeps more per head for its largest members, so at the same footprint
  // its factor is smaller.
  const auto alone = contiguous_map(L, H, 1), unified = contiguous_map(L, H, L * H);
  const auto a = scale_budgets_to_ratio(score, alone->members(), 0.25, 2048, sink, window);
  const auto u = scale_budgets_to_ratio(score, unified->members(), 0.25, 2048, sink, window);
  ASSERT_TRUE(a.ok() && u.ok());
  EXPECT_LT(u->scale, a->scale);
}

TEST(BudgetScaling, UnreachableTargetsAndBadInputs) {
  const std::vector<float> score = {0.2f, 0.4f, 0.0f, 0.8f};
  const std::vector<std::vector<int>> groups = {{0, 1}, {2, 3}};
  // Sink and window alone (36 of 100 tokens) exceed 10%: empty budgets.
  auto low = scale_budgets_to_ratio(score, groups, 0.1, 100, 4, 32);
  ASSERT_TRUE(low.ok()) << low.message();
  EXPECT_EQ(low->scale, 0.0);
  EXPECT_EQ(low->fractions, std::vector<float>(4, 0.0f));
  EXPECT_NEAR(low->committed_ratio, 0.36, 1e-12);
  // Ratio 1: every head of a positive score keeps everything; the head of score 0 keeps nothing
  // of its own but its group's largest, everything.
  auto all = scale_budgets_to_ratio(score, groups, 1.0, 100, 4, 32);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->fractions, (std::vector<float>{1.0f, 1.0f, 0.0f, 1.0f}));
  EXPECT_NEAR(all->committed_ratio, 1.0, 1e-12);
  // All-zero scores cannot be scaled: sink and window only.
  auto zeros = scale_budgets_to_ratio(std::vector<float>(4, 0.0f), groups, 0.5, 1000, 4, 32);
  ASSERT_TRUE(zeros.ok());
  EXPECT_NEAR(zeros->committed_ratio, 0.036, 1e-12);
  // A head in no group, in two, outside the range; a bad ratio, context or score.
  EXPECT_FALSE(
      scale_budgets_to_ratio(score, std::vector<std::vector<int>>{{0, 1}, {2}}, 0.5, 100, 4, 8)
          .ok());
  EXPECT_FALSE(scale_budgets_to_ratio(score, std::vector<std::vector<int>>{{0, 1}, {1, 2, 3}}, 0.5,
                                      100, 4, 8)
                   .ok());
  EXPECT_FALSE(
      scale_budgets_to_ratio(score, std::vector<std::vector<int>>{{0, 1}, {2, 7}}, 0.5, 100, 4, 8)
          .ok());
  EXPECT_FALSE(scale_budgets_to_ratio(score, groups, 0.0, 100, 4, 8).ok());
  EXPECT_FALSE(scale_budgets_to_ratio(score, groups, 1.5, 100, 4, 8).ok());
  EXPECT_FALSE(scale_budgets_to_ratio(score, groups, 0.5, 0, 4, 8).ok());
  EXPECT_FALSE(
      scale_budgets_to_ratio(std::vector<float>{0.1f, -1.0f, 0.2f, 0.3f}, groups, 0.5, 100, 4, 8)
          .ok());
  EXPECT_FALSE(
      scale_budgets_to_ratio(std::vector<float>{0.1f, NAN, 0.2f, 0.3f}, groups, 0.5, 100, 4, 8)
          .ok());
}

}  // namespace
}  // namespace tangram
