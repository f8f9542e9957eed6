#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <vector>

namespace tangram {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Parameters with every filter and penalty off; tests switch on what they check.
SamplingParams plain_params(float temperature = 1.0f) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 1234;
  p.seed_set = true;
  return p;
}

// Survivors of Sampler::distribution as id -> probability.
std::map<int32_t, double> distribution_of(const SamplingParams& params, std::vector<float> logits,
                                          std::span<const int32_t> history = {}) {
  Sampler sampler(params);
  std::map<int32_t, double> out;
  for (const TokenProb& t :
       sampler.distribution(logits.data(), static_cast<int>(logits.size()), history)) {
    out[t.id] = static_cast<double>(t.prob);
  }
  return out;
}

// Plain reference for steps 4-5 of the sampler (no penalties): full sort, then each filter
// exactly as defined, in order top-k -> top-p -> min-p, then softmax(logit / T), all in double.
std::map<int32_t, double> reference_distribution(const std::vector<float>& logits,
                                                 const SamplingParams& p) {
  std::vector<std::pair<double, int32_t>> c;  // (logit, id)
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > -kInf) c.emplace_back(static_cast<double>(logits[i]), static_cast<int32_t>(i));
  }
  std::sort(c.begin(), c.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < c.size())
    c.resize(static_cast<size_t>(p.top_k));
  const auto softmax = [&](double temperature) {
    std::vector<double> probs;
    double sum = 0.0;
    for (const auto& [l, id] : c) {
      probs.push_back(std::exp((l - c[0].first) / temperature));
      sum += probs.back();
    }
    for (double& q : probs) q /= sum;
    return probs;
  };
  if (p.top_p < 1.0f) {
    const std::vector<double> probs = softmax(1.0);
    double cumulative = 0.0;
    for (size_t i = 0; i < c.size(); ++i) {
      cumulative += probs[i];
      if (cumulative >= static_cast<double>(p.top_p)) {
        c.resize(i + 1);
        break;
      }
    }
  }
  if (p.min_p > 0.0f) {
    const double l_max = c[0].first;  // p_i / p_max = exp(l_i - l_max), whatever the normaliser
    std::erase_if(
        c, [&](const auto& e) { return std::exp(e.first - l_max) < static_cast<double>(p.min_p); });
  }
  const std::vector<double> probs = softmax(static_cast<double>(p.temperature));
  std::map<int32_t, double> out;
  for (size_t i = 0; i < c.size(); ++i) out[c[i].second] = probs[i];
  return out;
}

std::vector<float> random_logits(size_t n, uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> logits(n);
  for (float& l : logits) l = normal(rng);
  return logits;
}

// A 6-token vocabulary whose logits are ln(p), so softmax gives exactly these p (they sum to 1).
// Ids are shuffled so that "most likely" is not "lowest id".
//   id:  0     1     2     3     4     5
//   p:   0.10  0.40  0.04  0.25  0.06  0.15
// Descending: 1 (0.40), 3 (0.25), 5 (0.15), 0 (0.10), 4 (0.06), 2 (0.04).
std::vector<float> six_token_logits() {
  const double p[] = {0.10, 0.40, 0.04, 0.25, 0.06, 0.15};
  std::vector<float> logits;
  for (double q : p) logits.push_back(static_cast<float>(std::log(q)));
  return logits;
}

std::vector<int32_t> ids_of(const std::map<int32_t, double>& dist) {
  std::vector<int32_t> ids;
  for (const auto& [id, prob] : dist) ids.push_back(id);
  return ids;
}

// ---------------------------------------------------------------- greedy

TEST(SamplerGreedy, ReturnsArgmaxWithTiesToLowestId) {
  Sampler sampler(plain_params(0.0f));
  std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f};
  EXPECT_EQ(sampler.sample(logits.data(), 5, {}), 1);
  std::vector<float> all_equal(7, 0.5f);
  EXPECT_EQ(sampler.sample(all_equal.data(), 7, {}), 0);
}

TEST(SamplerGreedy, MatchesPlainArgmaxOnLargeVocab) {
  Sampler sampler(plain_params(0.0f));
  for (uint64_t trial = 0; trial < 5; ++trial) {
    std::vector<float> logits = random_logits(150000, trial, 4.0f);
    const auto expected = std::max_element(logits.begin(), logits.end()) - logits.begin();
    EXPECT_EQ(sampler.sample(logits.data(), static_cast<int>(logits.size()), {}), expected);
  }
}

TEST(SamplerGreedy, IgnoresNanAndFallsBackToLowestIdWhenNothingIsPossible) {
  Sampler sampler(plain_params(0.0f));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> with_nan = {nan, 1.0f, nan, 2.0f};
  EXPECT_EQ(sampler.sample(with_nan.data(), 4, {}), 3);
  std::vector<float> impossible = {-kInf, nan, -kInf};
  EXPECT_EQ(sampler.sample(impossible.data(), 3, {}), 0);
}

// ---------------------------------------------------------------- seeds

std::vector<int32_t> draw_sequence(Sampler& sampler, const std::vector<float>& logits, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    std::vector<float> copy = logits;
    out.push_back(sampler.sample(copy.data(), static_cast<int>(copy.size()), {}));
  }
  return out;
}

TEST(SamplerSeed, SameSeedReproducesDifferentSeedDiffers) {
  const std::vector<float> logits = random_logits(1000, 7, 1.0f);
  SamplingParams p = plain_params(1.0f);
  p.seed = 42;
  Sampler a(p), b(p);
  const std::vector<int32_t> seq_a = draw_sequence(a, logits, 500);
  EXPECT_EQ(seq_a, draw_sequence(b, logits, 500));
  p.seed = 43;
  Sampler c(p);
  // 500 draws over ~1000 plausible tokens: identical sequences would be a broken seed.
  EXPECT_NE(seq_a, draw_sequence(c, logits, 500));
}

TEST(SamplerSeed, UnsetSeedIsReportedAndReplays) {
  const std::vector<float> logits = random_logits(1000, 8, 1.0f);
  SamplingParams p = plain_params(1.0f);
  p.seed_set = false;
  Sampler first(p);
  Sampler second(p);
  // Two random 64-bit seeds colliding is a broken entropy source.
  EXPECT_NE(first.seed(), second.seed());
  const std::vector<int32_t> seq = draw_sequence(first, logits, 200);
  p.seed_set = true;
  p.seed = first.seed();
  Sampler replay(p);
  EXPECT_EQ(replay.seed(), first.seed());
  EXPECT_EQ(draw_sequence(replay, logits, 200), seq);
}

// ---------------------------------------------------------------- empirical distribution

// Draws n_draws tokens and checks the frequencies against the filtered softmax: tokens outside
// the survivors must never appear, and Pearson's chi-square over the survivors must stay below
// the critical value for p = 1e-6 (Wilson-Hilferty approximation, z = 4.753), so a correct
// sampler fails this only with probability 1e-6 per seed. In addition each frequency must lie
// within 5 standard deviations sqrt(p(1-p)/N) of its probability.
void check_empirical(const SamplingParams& params, const std::vector<float>& logits, int n_draws) {
  const std::map<int32_t, double> expected = reference_distribution(logits, params);
  ASSERT_GE(expected.size(), 2u);
  Sampler sampler(params);
  std::map<int32_t, int> counts;
  for (int i = 0; i < n_draws; ++i) {
    std::vector<float> copy = logits;
    ++counts[sampler.sample(copy.data(), static_cast<int>(copy.size()), {})];
  }
  for (const auto& [id, count] : counts) {
    EXPECT_TRUE(expected.count(id)) << "token " << id << " was filtered out but drawn " << count;
  }
  const double n = n_draws;
  double chi_square = 0.0;
  for (const auto& [id, prob] : expected) {
    const double observed = counts.count(id) ? counts[id] : 0;
    const double mean = n * prob;
    chi_square += (observed - mean) * (observed - mean) / mean;
    const double sigma = std::sqrt(prob * (1.0 - prob) / n);
    EXPECT_NEAR(observed / n, prob, 5.0 * sigma) << "token " << id;
  }
  const double df = static_cast<double>(expected.size() - 1);
  const double z = 4.753;
  const double critical =
      df * std::pow(1.0 - 2.0 / (9.0 * df) + z * std::sqrt(2.0 / (9.0 * df)), 3);
  EXPECT_LT(chi_square, critical) << "df " << df;
}

TEST(SamplerDistribution, DrawsMatchFilteredSoftmax) {
  SamplingParams p = plain_params(0.7f);
  p.top_k = 8;
  p.top_p = 0.9f;
  p.min_p = 0.02f;
  check_empirical(p, random_logits(64, 11, 1.5f), 200000);
}

TEST(SamplerDistribution, DrawsMatchFullSoftmaxWithFiltersOff) {
  check_empirical(plain_params(1.3f), random_logits(20, 12, 1.0f), 200000);
}

TEST(SamplerDistribution, DrawsMatchWithOnlyMinPAndHighTemperature) {
  SamplingParams p = plain_params(2.5f);
  p.min_p = 0.1f;
  check_empirical(p, random_logits(40, 13, 1.0f), 200000);
}

// ---------------------------------------------------------------- filters, hand-computed

TEST(SamplerFilters, TopKKeepsTheKMostLikely) {
  SamplingParams p = plain_params();
  p.top_k = 3;
  const auto dist = distribution_of(p, six_token_logits());
  EXPECT_EQ(ids_of(dist), (std::vector<int32_t>{1, 3, 5}));
  // Renormalised over 0.40 + 0.25 + 0.15 = 0.80.
  EXPECT_NEAR(dist.at(1), 0.5, 1e-6);
  EXPECT_NEAR(dist.at(3), 0.3125, 1e-6);
  EXPECT_NEAR(dist.at(5), 0.1875, 1e-6);
}

TEST(SamplerFilters, TopKBreaksTiesByLowestId) {
  SamplingParams p = plain_params();
  p.top_k = 2;
  EXPECT_EQ(ids_of(distribution_of(p, {1.0f, 2.0f, 2.0f, 2.0f, 0.0f})),
            (std::vector<int32_t>{1, 2}));
}

TEST(SamplerFilters, TopPKeepsShortestPrefixReachingP) {
  SamplingParams p = plain_params();
  p.top_p = 0.5f;  // 0.40 < 0.5 <= 0.65
  EXPECT_EQ(ids_of(distribution_of(p, six_token_logits())), (std::vector<int32_t>{1, 3}));
  p.top_p = 0.75f;  // 0.65 < 0.75 <= 0.80
  EXPECT_EQ(ids_of(distribution_of(p, six_token_logits())), (std::vector<int32_t>{1, 3, 5}));
  p.top_p = 0.3f;  // the first token alone
  EXPECT_EQ(ids_of(distribution_of(p, six_token_logits())), (std::vector<int32_t>{1}));
}

TEST(SamplerFilters, TopPMeasuresMassAfterTopK) {
  SamplingParams p = plain_params();
  p.top_p = 0.7f;  // over all six: 0.40, 0.65, 0.80 -> three tokens
  EXPECT_EQ(ids_of(distribution_of(p, six_token_logits())), (std::vector<int32_t>{1, 3, 5}));
  p.top_k = 3;  // renormalised: 0.5, 0.8125 -> two tokens
  EXPECT_EQ(ids_of(distribution_of(p, six_token_logits())), (std::vector<int32_t>{1, 3}));
}

TEST(SamplerFilters, MinPKeepsTokensAboveFractionOfMax) {
  SamplingParams p = plain_params();
  p.min_p = 0.3f;  // p >= 0.12
  EXPECT_EQ(ids_of(distribution_of(p, six_token_logits())), (std::vector<int32_t>{1, 3, 5}));
  p.min_p = 0.5f;  // p >= 0.20
  const auto dist = distribution_of(p, six_token_logits());
  EXPECT_EQ(ids_of(dist), (std::vector<int32_t>{1, 3}));
  EXPECT_NEAR(dist.at(1), 0.40 / 0.65, 1e-6);
  p.min_p = 0.2f;  // p >= 0.08
  EXPECT_EQ(ids_of(distribution_of(p, six_token_logits())), (std::vector<int32_t>{0, 1, 3, 5}));
}

TEST(SamplerFilters, MinPAppliesAfterTopP) {
  // top-p 0.75 on the full distribution keeps 1, 3, 5; min-p 0.3 (p >= 0.12) keeps them all.
  // Applying min-p first would renormalise to 0.5, 0.3125, 0.1875 and top-p would keep two.
  SamplingParams p = plain_params();
  p.top_p = 0.75f;
  p.min_p = 0.3f;
  EXPECT_EQ(ids_of(distribution_of(p, six_token_logits())), (std::vector<int32_t>{1, 3, 5}));
  p.top_k = 6;  // same, through the sorted path
  EXPECT_EQ(ids_of(distribution_of(p, six_token_logits())), (std::vector<int32_t>{1, 3, 5}));
  p.top_k = 0;
  p.top_p = 0.5f;  // top-p keeps 1, 3; min-p 0.3 keeps both
  EXPECT_EQ(ids_of(distribution_of(p, six_token_logits())), (std::vector<int32_t>{1, 3}));
  p.top_p = 0.85f;  // top-p keeps 1, 3, 5, 0; min-p 0.3 removes 0 (0.10 < 0.12)
  EXPECT_EQ(ids_of(distribution_of(p, six_token_logits())), (std::vector<int32_t>{1, 3, 5}));
}

TEST(SamplerFilters, TemperatureAppliesAfterFilters) {
  // At T = 2 the odds become sqrt(p): token 5 would pass min-p 0.5 (sqrt(0.15/0.40) = 0.61), but
  // the filter judges the model's own probabilities, so only 1 and 3 survive.
  SamplingParams p = plain_params(2.0f);
  p.min_p = 0.5f;
  const auto dist = distribution_of(p, six_token_logits());
  EXPECT_EQ(ids_of(dist), (std::vector<int32_t>{1, 3}));
  const double a = std::sqrt(0.40), b = std::sqrt(0.25);
  EXPECT_NEAR(dist.at(1), a / (a + b), 1e-6);
  EXPECT_NEAR(dist.at(3), b / (a + b), 1e-6);
}

TEST(SamplerFilters, FiltersOffKeepEveryFiniteToken) {
  const auto dist = distribution_of(plain_params(), {0.0f, -kInf, 1.0f, -kInf});
  EXPECT_EQ(ids_of(dist), (std::vector<int32_t>{0, 2}));
  EXPECT_NEAR(dist.at(2), std::exp(1.0) / (1.0 + std::exp(1.0)), 1e-6);
}

// ---------------------------------------------------------------- optimised vs reference

TEST(SamplerFilters, LargeVocabMatchesPlainReference) {
  struct Config {
    int top_k;
    float top_p, min_p, temperature;
  };
  const Config configs[] = {
      {0, 0.9f, 0.0f, 0.8f},     // top-p alone: chunked selection
      {0, 0.999f, 0.0f, 1.0f},   // top-p needing many chunks
      {0, 0.9f, 0.01f, 0.8f},    // min-p threshold, then top-p over its survivors
      {0, 1.0f, 0.05f, 1.2f},    // min-p alone, unsorted
      {40, 0.95f, 0.05f, 0.8f},  // the defaults
      {1000, 0.5f, 0.0f, 0.7f},  // streaming top-k, then top-p
      {5000, 0.9f, 0.0f, 0.7f},  // nth_element top-k (above the streaming limit)
      {0, 1.0f, 0.0f, 1.0f},     // nothing: full softmax
  };
  for (uint64_t seed = 0; seed < 3; ++seed) {
    // Scale 3 gives a long tail: top-p 0.9 needs thousands of tokens out of 150k. The third
    // vocabulary is rounded to steps of 0.25, so ties are everywhere and ids must break them.
    std::vector<float> logits = random_logits(150000, 100 + seed, 3.0f);
    if (seed == 2) {
      for (float& l : logits) l = std::round(l * 4.0f) / 4.0f;
    }
    for (const Config& c : configs) {
      SamplingParams p = plain_params(c.temperature);
      p.top_k = c.top_k;
      p.top_p = c.top_p;
      p.min_p = c.min_p;
      const auto expected = reference_distribution(logits, p);
      const auto got = distribution_of(p, logits);
      ASSERT_EQ(ids_of(got), ids_of(expected))
          << "top_k " << c.top_k << " top_p " << c.top_p << " min_p " << c.min_p;
      // Probabilities pass through float storage: relative 1e-5 plus 1e-9 absolute.
      for (const auto& [id, prob] : expected) {
        EXPECT_NEAR(got.at(id), prob, 1e-5 * prob + 1e-9) << "id " << id;
      }
    }
  }
}

// ---------------------------------------------------------------- penalties, hand-computed

TEST(SamplerPenalties, RepetitionPresenceFrequencyFollowTheFormulas) {
  SamplingParams p = plain_params(0.0f);
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  p.penalty_last_n = -1;
  Sampler sampler(p);
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, 0.0f};
  // Out-of-range ids (7, -2) are ignored. Counts: id0 x1, id1 x2, id3 x3, id4 x1.
  const std::vector<int32_t> history = {0, 1, 1, 7, 3, -2, 3, 3, 4};
  sampler.sample(logits.data(), 5, history);
  EXPECT_FLOAT_EQ(logits[0], 2.0f / 2.0f - 1 * 0.25f - 0.5f);   // 0.25
  EXPECT_FLOAT_EQ(logits[1], -1.0f * 2.0f - 2 * 0.25f - 0.5f);  // -3.0
  EXPECT_FLOAT_EQ(logits[2], 0.5f);                             // not in history
  EXPECT_FLOAT_EQ(logits[3], 3.0f / 2.0f - 3 * 0.25f - 0.5f);   // 0.25
  EXPECT_FLOAT_EQ(logits[4], 0.0f * 2.0f - 1 * 0.25f - 0.5f);   // -0.75
}

TEST(SamplerPenalties, OnlyTheLastNTokensCount) {
  SamplingParams p = plain_params(0.0f);
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.5f;
  p.penalty_last_n = 2;
  const std::vector<int32_t> history = {0, 1, 1, 3, 3};
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f};
  Sampler(p).sample(logits.data(), 4, history);
  EXPECT_EQ(logits, (std::vector<float>{2.0f, -1.0f, 0.5f, 3.0f / 2.0f - 2 * 0.5f - 0.5f}));

  p.penalty_last_n = 0;  // off
  std::vector<float> untouched = {2.0f, -1.0f, 0.5f, 3.0f};
  Sampler(p).sample(untouched.data(), 4, history);
  EXPECT_EQ(untouched, (std::vector<float>{2.0f, -1.0f, 0.5f, 3.0f}));
}

TEST(SamplerPenalties, NegativePenaltiesEncourageAndGreedySeesPenalties) {
  SamplingParams p = plain_params(0.0f);
  p.presence_penalty = -1.0f;
  const std::vector<int32_t> history = {1};
  std::vector<float> logits = {1.0f, 0.5f};
  EXPECT_EQ(Sampler(p).sample(logits.data(), 2, history), 1);  // 0.5 + 1.0 beats 1.0
  EXPECT_FLOAT_EQ(logits[1], 1.5f);

  p.presence_penalty = 0.0f;
  p.repetition_penalty = 1.5f;  // 1.0 / 1.5 = 0.667 < 0.9
  std::vector<float> repeat = {1.0f, 0.9f};
  const std::vector<int32_t> history0 = {0};
  EXPECT_EQ(Sampler(p).sample(repeat.data(), 2, history0), 1);
}

TEST(SamplerPenalties, LongHistoryMatchesPlainReference) {
  SamplingParams p = plain_params(0.0f);
  p.repetition_penalty = 1.3f;
  p.presence_penalty = 0.4f;
  p.frequency_penalty = 0.1f;
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> token(-10, 2100);  // some ids out of range
  std::vector<int32_t> history(5000);
  for (int32_t& t : history) t = token(rng);
  for (const int last_n : {-1, 64, 3000, 0}) {
    p.penalty_last_n = last_n;
    Sampler fresh(p);
    const std::vector<float> original = random_logits(2000, 9, 2.0f);
    std::vector<float> got = original;
    fresh.sample(got.data(), 2000, history);
    std::map<int32_t, int> counts;
    const size_t n = last_n < 0 ? history.size() : static_cast<size_t>(last_n);
    for (size_t i = history.size() - n; i < history.size(); ++i) ++counts[history[i]];
    std::vector<float> expected = original;
    for (const auto& [t, c] : counts) {
      if (t < 0 || t >= 2000) continue;
      float& l = expected[static_cast<size_t>(t)];
      l = l > 0.0f ? l / p.repetition_penalty : l * p.repetition_penalty;
      l -= static_cast<float>(c) * p.frequency_penalty + p.presence_penalty;
    }
    EXPECT_EQ(got, expected) << "penalty_last_n " << last_n;
  }
  p.penalty_last_n = -1;
  Sampler sampler(p);  // reused: the counters must be clean between calls
  for (int call = 0; call < 3; ++call) {
    std::vector<float> a = random_logits(2000, 9, 2.0f);
    sampler.sample(a.data(), 2000, history);
    std::vector<float> b = random_logits(2000, 9, 2.0f);
    Sampler(p).sample(b.data(), 2000, history);
    EXPECT_EQ(a, b);
  }
}

// ---------------------------------------------------------------- EOS, limits, misuse

TEST(SamplerMisc, IgnoreEosBansEosTokens) {
  SamplingParams p = plain_params(0.0f);
  std::vector<float> logits = {0.0f, 1.0f, 5.0f};
  Sampler keeps_eos(p);
  keeps_eos.set_eos_tokens({2});
  EXPECT_EQ(keeps_eos.sample(logits.data(), 3, {}), 2);
  p.ignore_eos = true;
  Sampler bans_eos(p);
  bans_eos.set_eos_tokens({2, 99});  // 99 is outside the vocabulary and ignored
  EXPECT_EQ(bans_eos.sample(logits.data(), 3, {}), 1);
  EXPECT_EQ(logits[2], -kInf);
}

TEST(SamplerMisc, AcceptCountsTowardsMaxTokens) {
  SamplingParams p = plain_params();
  p.max_tokens = 3;
  Sampler sampler(p);
  for (int i = 0; i < 2; ++i) sampler.accept(i);
  EXPECT_FALSE(sampler.max_tokens_reached());
  sampler.accept(5);
  EXPECT_TRUE(sampler.max_tokens_reached());
  EXPECT_EQ(sampler.n_accepted(), 3);
  p.max_tokens = 0;  // no limit
  Sampler unlimited(p);
  for (int i = 0; i < 1000; ++i) unlimited.accept(0);
  EXPECT_FALSE(unlimited.max_tokens_reached());
}

TEST(SamplerMisc, DegenerateInputsNeverReadOutOfBounds) {
  Sampler sampler(plain_params());
  EXPECT_EQ(sampler.sample(nullptr, 10, {}), -1);
  std::vector<float> one = {0.0f};
  EXPECT_EQ(sampler.sample(one.data(), 0, {}), -1);
  EXPECT_EQ(sampler.sample(one.data(), -3, {}), -1);
  std::vector<float> impossible = {-kInf, -kInf};
  EXPECT_EQ(sampler.sample(impossible.data(), 2, {}), 0);
  std::vector<float> infinite = {1.0f, kInf, 2.0f};
  const auto dist = distribution_of(plain_params(), infinite);
  EXPECT_EQ(ids_of(dist), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(dist.at(1), 1.0);
  EXPECT_EQ(sampler.sample(infinite.data(), 3, {}), 1);
}

TEST(SamplerMisc, CreateRejectsInvalidParamsAndConstructorSanitises) {
  SamplingParams bad = plain_params();
  bad.top_k = -3;
  bad.temperature = std::numeric_limits<float>::quiet_NaN();
  bad.penalty_last_n = -7;
  const Result<Sampler> created = Sampler::create(bad);
  ASSERT_FALSE(created.ok());
  EXPECT_NE(created.message().find("temperature"), std::string::npos);
  Sampler sanitised(bad);
  EXPECT_EQ(sanitised.params().top_k, SamplingParams{}.top_k);
  EXPECT_EQ(sanitised.params().temperature, SamplingParams{}.temperature);
  EXPECT_EQ(sanitised.params().penalty_last_n, SamplingParams{}.penalty_last_n);
  std::vector<float> logits = random_logits(100, 1, 1.0f);
  const int32_t token = sanitised.sample(logits.data(), 100, std::vector<int32_t>{1, 2, 3});
  EXPECT_GE(token, 0);
  EXPECT_LT(token, 100);
  EXPECT_TRUE(Sampler::create(plain_params()).ok());
}

TEST(SamplerMisc, ExtremeTemperatures) {
  SamplingParams cold = plain_params(1e-6f);
  const auto sharp = distribution_of(cold, {0.0f, 1.0f, 0.999f});
  EXPECT_NEAR(sharp.at(1), 1.0, 1e-9);
  SamplingParams hot = plain_params(100.0f);
  const auto flat = distribution_of(hot, {0.0f, 1.0f, 0.5f});
  for (const auto& [id, prob] : flat) EXPECT_NEAR(prob, 1.0 / 3.0, 0.01) << id;
}

}  // namespace
}  // namespace tangram
