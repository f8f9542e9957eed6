// Budgets and selection: which entries a head keeps, and how the run-time (dynamic) spread
// distributes a layer's share.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "compress/budgets.h"

namespace tangram {
namespace {

std::vector<int32_t> iota_positions(int64_t n) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  return p;
}

TEST(Budgets, UniformLengthKeepsTheRatioOfTheContextAndAtLeastSinkAndWindow) {
  EXPECT_EQ(uniform_length(0.5, 1000, 4, 32), 500);   // sink and window inside the budget
  EXPECT_EQ(uniform_length(0.25, 1001, 4, 32), 251);  // rounded up
  EXPECT_EQ(uniform_length(1.0, 1000, 4, 32), 1000);
  EXPECT_EQ(uniform_length(0.01, 1000, 4, 32), 36);  // sink + window floor
  EXPECT_EQ(uniform_length(0.3, 20, 4, 32), 20);     // never more than the context
  EXPECT_EQ(uniform_length(0.3, 0, 4, 32), 0);
}

TEST(Budgets, SelectKeepsSinkWindowAndTheBestScores) {
  const int64_t n = 100, total = 100;
  std::vector<float> scores(static_cast<size_t>(n), 0.0f);
  scores[50] = 5.0f;
  scores[10] = 4.0f;
  scores[70] = 3.0f;
  scores[1] = -9.0f;   // in the sink: kept anyway
  scores[95] = -9.0f;  // in the window: kept anyway
  const auto pos = iota_positions(n);
  std::vector<int64_t> keep;
  select_keep(scores, pos, total, /*sink=*/4, /*window=*/8, /*length=*/14, keep);
  std::vector<int64_t> want = {0, 1, 2, 3, 10, 50, 92, 93, 94, 95, 96, 97, 98, 99};
  EXPECT_EQ(keep, want);
  // Budget below sink + window: the protected entries stay, nothing else.
  select_keep(scores, pos, total, 4, 8, 5, keep);
  EXPECT_EQ(keep.size(), 12u);
  // Budget at or above n keeps all.
  select_keep(scores, pos, total, 4, 8, 100, keep);
  EXPECT_EQ(keep.size(), 100u);
  // Ties go to the earlier entry.
  std::vector<float> flat(static_cast<size_t>(n), 1.0f);
  select_keep(flat, pos, total, 0, 0, 3, keep);
  EXPECT_EQ(keep, (std::vector<int64_t>{0, 1, 2}));
}

// The plain definition select_keep must match: protected entries, then the best `room` others
// by (score descending, index ascending), all sorted by index.
std::vector<int64_t> select_keep_reference(const std::vector<float>& scores,
                                           const std::vector<int32_t>& pos, int64_t total, int sink,
                                           int window, int64_t length) {
  const auto n = static_cast<int64_t>(scores.size());
  std::vector<int64_t> keep, others;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t p = pos[static_cast<size_t>(i)];
    (p < sink || p >= total - window ? keep : others).push_back(i);
  }
  if (length >= n) {
    keep.insert(keep.end(), others.begin(), others.end());
  } else {
    std::sort(others.begin(), others.end(), [&](int64_t a, int64_t b) {
      const float sa = scores[static_cast<size_t>(a)], sb = scores[static_cast<size_t>(b)];
      return sa > sb || (sa == sb && a < b);
    });
    const int64_t room = std::max<int64_t>(0, length - static_cast<int64_t>(keep.size()));
    others.resize(
        static_cast<size_t>(std::min<int64_t>(room, static_cast<int64_t>(others.size()))));
    keep.insert(keep.end(), others.begin(), others.end());
  }
  std::sort(keep.begin(), keep.end());
  return keep;
}

TEST(Budgets, SelectKeepMatchesThePlainSortOnRandomHeads) {
  std::mt19937 rng(11);
  std::vector<int64_t> keep;
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t total = 1 + static_cast<int64_t>(rng() % 300);
    // Ascending positions with gaps (a head compacted before), scores with many ties.
    std::vector<int32_t> pos;
    for (int32_t p = 0; p < total; ++p)
      if (rng() % 3 != 0) pos.push_back(p);
    std::vector<float> scores(pos.size());
    for (float& s : scores) s = static_cast<float>(rng() % 7) * 0.5f;
    const int sink = static_cast<int>(rng() % 6), window = static_cast<int>(rng() % 20);
    const auto length = static_cast<int64_t>(rng() % (pos.size() + 3));
    select_keep(scores, pos, total, sink, window, length, keep);
    ASSERT_EQ(keep, select_keep_reference(scores, pos, total, sink, window, length))
        << "trial " << trial << " total " << total << " length " << length;
  }
}

TEST(Budgets, SelectUsesPositionsNotIndicesAfterEarlierCompaction) {
  // A head that kept positions 0, 5, 9, 40..49 of a 50-token context.
  std::vector<int32_t> pos = {0, 5, 9};
  for (int p = 40; p < 50; ++p) pos.push_back(p);
  std::vector<float> scores(pos.size(), 0.0f);
  scores[2] = 1.0f;  // position 9
  std::vector<int64_t> keep;
  select_keep(scores, pos, 50, /*sink=*/1, /*window=*/4, /*length=*/6, keep);
  // sink (position 0), window (46..49 = entries 9..12), best other (entry 2).
  EXPECT_EQ(keep, (std::vector<int64_t>{0, 2, 9, 10, 11, 12}));
}

TEST(Budgets, DynamicSpreadKeepsTheLayerShareAndFollowsScores) {
  const int L = 2, H = 4;
  const int64_t total = 200;
  const int sink = 4, window = 8;
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<std::vector<float>> scores(L * H);
  const auto pos = iota_positions(total);
  for (int i = 0; i < L * H; ++i) {
    scores[static_cast<size_t>(i)].resize(total);
    // Head 1 of each layer has much higher scores than the others.
    for (auto& s : scores[static_cast<size_t>(i)]) s = d(rng) + ((i % H) == 1 ? 3.0f : 0.0f);
  }
  std::vector<HeadScores> heads;
  for (auto& s : scores) heads.push_back(HeadScores{s, pos});
  const int64_t uni = uniform_length(0.3, total, sink, window);
  for (BudgetLevel level : {BudgetLevel::PerLayer, BudgetLevel::CrossLayer}) {
    const auto len = dynamic_lengths(heads, L, H, total, 0.3, sink, window, level);
    int64_t sum = 0;
    for (int i = 0; i < L * H; ++i) {
      sum += len[static_cast<size_t>(i)];
      EXPECT_GE(len[static_cast<size_t>(i)], sink + window);
      EXPECT_LE(len[static_cast<size_t>(i)], total);
    }
    EXPECT_EQ(sum, uni * L * H) << budget_level_name(level);
    if (level == BudgetLevel::PerLayer) {
      for (int l = 0; l < L; ++l) {
        int64_t layer_sum = 0;
        for (int h = 0; h < H; ++h) layer_sum += len[static_cast<size_t>(l * H + h)];
        EXPECT_EQ(layer_sum, uni * H);
      }
    }
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h)
        if (h != 1) {
          EXPECT_GT(len[static_cast<size_t>(l * H + 1)], len[static_cast<size_t>(l * H + h)]);
        }
  }
  const auto flat = dynamic_lengths(heads, L, H, total, 0.3, sink, window, BudgetLevel::Uniform);
  for (int64_t v : flat) EXPECT_EQ(v, uni);
}

TEST(Budgets, PolicyAndLevelNamesRoundTrip) {
  for (auto p : {KvPolicy::Full, KvPolicy::Uniform, KvPolicy::Dynamic, KvPolicy::Tangram})
    EXPECT_EQ(*parse_kv_policy(kv_policy_name(p)), p);
  EXPECT_FALSE(parse_kv_policy("vllm").ok());
  for (auto l : {BudgetLevel::Uniform, BudgetLevel::PerLayer, BudgetLevel::CrossLayer})
    EXPECT_EQ(*parse_budget_level(budget_level_name(l)), l);
  CompressionOptions o;
  o.ratio = 0.0;
  EXPECT_FALSE(o.validate().ok());
  o.ratio = 0.5;
  o.policy = KvPolicy::Tangram;
  const Status st = o.validate();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--kv-profile"), std::string::npos);
}

}  // namespace
}  // namespace tangram
