// Equal-retention pairing: interpolation between the bracketing runs, the nearest run outside
// them (flagged as not at equal memory), and runs of the pairing's own policy left out.
#include "evaluation/equal_retention.h"

#include <vector>

#include <gtest/gtest.h>

namespace tangram {
namespace {

std::vector<RetentionPoint> runs() {
  return {{"full", 1.0, 1.0, 2.0},     {"dynamic", 0.5, 0.60, 10.0}, {"dynamic", 0.25, 0.30, 16.0},
          {"dynamic", 0.1, 0.15, 20.0}, {"tangram", 0.25, 0.26, 18.0}, {"tangram", 0.5, 0.52, 12.0}};
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
