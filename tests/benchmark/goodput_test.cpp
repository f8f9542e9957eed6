// Goodput from a rate sweep: the highest rate at which a run, and every lower rate of it, kept
// its TTFT p90 within the limit.
#include <gtest/gtest.h>

#include "benchmark/rate_sweep.h"

namespace tangram::bench {
namespace {

RateSweepPoint point(std::string policy, double ratio, double rate, double p90, double tok_s) {
  RateSweepPoint p;
  p.policy = std::move(policy);
  p.ratio = ratio;
  p.rate = rate;
  p.metrics.ttft_s.p90 = p90;
  p.metrics.output_tokens_per_s = tok_s;
  return p;
}

TEST(Goodput, HighestRateWithEveryLowerOneWithinTheLimit) {
  const std::vector<RateSweepPoint> points = {
      point("full", 1.0, 1, 0.5, 10), point("full", 1.0, 2, 1.9, 18),
      point("full", 1.0, 4, 3.0, 20),
      // Over the limit at the lowest rate: sustains none.
      point("uniform", 0.25, 1, 2.5, 9), point("uniform", 0.25, 2, 1.0, 19),
      // A rate that recovers after a miss does not count: the queue was already unstable.
      point("tangram", 0.25, 1, 0.4, 10), point("tangram", 0.25, 2, 2.1, 19),
      point("tangram", 0.25, 4, 1.5, 35),
      // The same policy at another ratio is another run.
      point("tangram", 0.5, 1, 0.3, 10), point("tangram", 0.5, 2, 0.6, 20),
      point("tangram", 0.5, 4, 2.0, 38)};
  const std::vector<Goodput> g = goodput_of(points, 2.0);
  ASSERT_EQ(g.size(), 4u);
  EXPECT_EQ(g[0].policy, "full");
  EXPECT_EQ(g[0].rate, 2);
  EXPECT_EQ(g[0].output_tokens_per_s, 18);
  EXPECT_DOUBLE_EQ(g[0].ttft_p90_s, 1.9);
  EXPECT_EQ(g[1].policy, "uniform");
  EXPECT_EQ(g[1].rate, 0);
  EXPECT_EQ(g[1].output_tokens_per_s, 0);
  EXPECT_EQ(g[2].ratio, 0.25);
  EXPECT_EQ(g[2].rate, 1);
  EXPECT_EQ(g[3].ratio, 0.5);
  EXPECT_EQ(g[3].rate, 4);  // the limit itself is within it
  EXPECT_EQ(g[3].output_tokens_per_s, 38);
}

TEST(Goodput, RunLabelsNameRatioAndGroupSize) {
  EXPECT_EQ(run_label("full", 1.0, 0), "full");
  EXPECT_EQ(run_label("dynamic", 0.15, 0), "dynamic 0.15");
  EXPECT_EQ(run_label("tangram", 0.25, 8), "tangram 0.25 G=8");
}

}  // namespace
}  // namespace tangram::bench
