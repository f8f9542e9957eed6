// Log-probabilities against a plain reference: softmax in long double over the same logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "evaluation/seeded_rng.h"
#include "runtime/logprobs.h"

namespace tangram {
namespace {

std::vector<long double> reference_logprobs(const std::vector<float>& logits) {
  long double max = -INFINITY;
  for (float x : logits) max = std::max<long double>(max, x);
  long double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<long double>(x) - max);
  std::vector<long double> out;
  for (float x : logits) out.push_back(static_cast<long double>(x) - max - std::log(sum));
  return out;
}

TEST(Logprobs, MatchTheReferenceOnARealisticVocabulary) {
  SeededRng rng(7, 0);
  std::vector<float> logits(151936);
  for (float& x : logits) x = static_cast<float>(rng.uniform01() * 20.0 - 10.0);
  logits[4242] = 25.0f;  // a confident favourite
  const std::vector<long double> ref = reference_logprobs(logits);
  const TokenLogprob lp = token_logprob(logits, 77, 5);
  EXPECT_EQ(lp.token, 77);
  EXPECT_NEAR(lp.logprob, static_cast<double>(ref[77]), 1e-4);
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + 5, order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  ASSERT_EQ(lp.top.size(), 5u);
  EXPECT_EQ(lp.top[0].first, 4242);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(lp.top[i].first, order[i]);
    EXPECT_NEAR(lp.top[i].second, static_cast<double>(ref[static_cast<size_t>(order[i])]), 1e-4);
  }
}

TEST(Logprobs, TiesNanAndEdges) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, nan, -INFINITY};
  const TokenLogprob lp = token_logprob(logits, 2, 3);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].first, 1);  // a tie goes to the lower id
  EXPECT_EQ(lp.top[1].first, 2);
  EXPECT_EQ(lp.top[2].first, 0);
  const double z = std::log(std::exp(1.0) + 2 * std::exp(3.0));
  EXPECT_NEAR(lp.logprob, 3.0 - z, 1e-6);
  EXPECT_TRUE(std::isinf(token_logprob(logits, 3, 0).logprob));  // NaN is -inf: probability 0
  EXPECT_TRUE(token_logprob(logits, 1, 0).top.empty());
  EXPECT_EQ(token_logprob(logits, 1, 99).top.size(), logits.size());  // clamped to the vocabulary
  EXPECT_EQ(token_logprob({}, 0, 5).top.size(), 0u);
}

}  // namespace
}  // namespace tangram
