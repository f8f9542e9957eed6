// Equal-retention pairing: interpolation between the bracketing runs, the nearest run outside
// them (flagged as not at equal memory), and runs of the pairing's own policy left out.
#include "evaluation/equal_retention.h"

#include <vector>

#include <gtest/gtest.h>

namespace tangram {
namespace {

std::vector<RetentionPoint> runs() {
  return {{"full", 1.0, 1.0, 2.0},       {"dynamic", 0.5, 0.60, 10.0},
          {"dynamic", 0.25, 0.30, 16.0}, {"dynamic", 0.1, 0.15, 20.0},
          {"tangram", 0.25, 0.26, 18.0}, {"tangram", 0.5, 0.52, 12.0}};
}

TEST(EqualRetention, InterpolatesBetweenTheBracketingRuns) {
  const auto all = runs();
  // tangram 0.25 kept 0.26: between dynamic's 0.15 (20 tok/s) and 0.30 (16 tok/s).
  const auto p = pair_at_equal_retention(all[4], all, "dynamic");
  ASSERT_TRUE(p.has_value());
  EXPECT_TRUE(p->interpolated);
  EXPECT_TRUE(p->equal_memory());
  EXPECT_DOUBLE_EQ(p->retention, 0.26);
  EXPECT_DOUBLE_EQ(p->other_retention, 0.26);
  const double expected = 20.0 + (0.26 - 0.15) / (0.30 - 0.15) * (16.0 - 20.0);
  EXPECT_NEAR(p->other_tokens_per_s, expected, 1e-12);
  EXPECT_NEAR(p->speedup, 18.0 / expected, 1e-12);
  // Against the nominal-ratio pair (dynamic 0.25, 16 tok/s: 1.125x) equal memory gives less.
  EXPECT_LT(p->speedup, 18.0 / 16.0);
}

// The default job's runs: every policy at 0.25, dynamic also at 0.15 (--dynamic-bracket 0.6).
// Dynamic keeps more than the ratio asks, so its 0.25 run alone is above the others' retention
// (the nearest-run fallback, not equal memory); with its 0.15 run below it, uniform and tangram
// are both interpolated, each between the same two runs.
TEST(EqualRetention, DefaultRatiosBracketTheOthersWithDynamicsSecondRun) {
  const std::vector<RetentionPoint> one_ratio = {{"full", 1.0, 1.0, 5.0},
                                                 {"uniform", 0.25, 0.305, 8.3},
                                                 {"dynamic", 0.25, 0.372, 7.9},
                                                 {"tangram", 0.25, 0.300, 8.2}};
  const auto alone = pair_at_equal_retention(one_ratio[3], one_ratio, "dynamic");
  ASSERT_TRUE(alone.has_value());
  EXPECT_FALSE(alone->interpolated);
  EXPECT_FALSE(alone->equal_memory());
  EXPECT_DOUBLE_EQ(alone->other_retention, 0.372);

  std::vector<RetentionPoint> two = one_ratio;
  two.push_back({"dynamic", 0.15, 0.240, 8.9});
  for (const RetentionPoint& run : {two[1], two[3]}) {
    SCOPED_TRACE(run.policy);
    const auto p = pair_at_equal_retention(run, two, "dynamic");
    ASSERT_TRUE(p.has_value());
    EXPECT_TRUE(p->interpolated);
    EXPECT_TRUE(p->equal_memory());
    EXPECT_DOUBLE_EQ(p->below.ratio, 0.15);
    EXPECT_DOUBLE_EQ(p->below.retention, 0.240);
    EXPECT_DOUBLE_EQ(p->above.ratio, 0.25);
    EXPECT_DOUBLE_EQ(p->above.retention, 0.372);
    const double expected = 8.9 + (run.retention - 0.240) / (0.372 - 0.240) * (7.9 - 8.9);
    EXPECT_NEAR(p->other_tokens_per_s, expected, 1e-12);
    EXPECT_NEAR(p->speedup, run.tokens_per_s / expected, 1e-12);
  }
  // Against dynamic at equal retention tangram is compared with a faster dynamic (it kept less
  // there) than at the same nominal ratio.
  EXPECT_LT(pair_at_equal_retention(two[3], two, "dynamic")->speedup, 8.2 / 7.9);
}

TEST(EqualRetention, NearestRunOutsideTheRangeIsNotEqualMemory) {
  const auto all = runs();
  const RetentionPoint keeps_little{"tangram", 0.05, 0.08, 25.0};
  const auto p = pair_at_equal_retention(keeps_little, all, "dynamic");
  ASSERT_TRUE(p.has_value());
  EXPECT_FALSE(p->interpolated);
  EXPECT_DOUBLE_EQ(p->other_retention, 0.15);
  EXPECT_DOUBLE_EQ(p->other_tokens_per_s, 20.0);
  EXPECT_FALSE(p->equal_memory());
  EXPECT_DOUBLE_EQ(p->speedup, 25.0 / 20.0);
  EXPECT_DOUBLE_EQ(p->below.retention, 0.15);  // both ends name the nearest run
  EXPECT_DOUBLE_EQ(p->above.retention, 0.15);
  // Full KV has one run, at retention 1: every pair against it is that run.
  const auto f = pair_at_equal_retention(all[4], all, "full");
  ASSERT_TRUE(f.has_value());
  EXPECT_FALSE(f->interpolated);
  EXPECT_DOUBLE_EQ(f->other_retention, 1.0);
  EXPECT_DOUBLE_EQ(f->speedup, 9.0);
}

TEST(EqualRetention, ExactMatchAndMissingOrOwnPolicy) {
  const auto all = runs();
  const RetentionPoint at_run{"tangram", 0.3, 0.30, 17.0};
  const auto p = pair_at_equal_retention(at_run, all, "dynamic");
  ASSERT_TRUE(p.has_value());
  EXPECT_DOUBLE_EQ(p->other_tokens_per_s, 16.0);
  EXPECT_TRUE(p->equal_memory());
  EXPECT_FALSE(pair_at_equal_retention(all[4], all, "uniform").has_value());
  EXPECT_FALSE(pair_at_equal_retention(all[4], all, "tangram").has_value());
  // A run with no usable retention (0: no full run to divide by) is left out.
  std::vector<RetentionPoint> broken = {{"dynamic", 0.25, 0.0, 16.0}};
  EXPECT_FALSE(pair_at_equal_retention(all[4], broken, "dynamic").has_value());
}

}  // namespace
}  // namespace tangram
