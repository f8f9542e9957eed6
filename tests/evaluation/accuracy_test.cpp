// Accuracy of KV policies against the full cache (evaluation/accuracy.h): the KL and
// log-softmax code against the plain double formula on hand-made distributions; then, on the
// real stories260K model, the full policy agrees perfectly with itself, compressing policies
// (uniform, dynamic with SnapKV, KVzip-style, tangram with a saved profile) cost a finite,
// positive KL, that cost grows as the retention ratio falls, and bad input is an error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "compress/profile.h"
#include "evaluation/accuracy.h"
#include "model/model.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"

namespace tangram {
namespace {

// --- Numerics ---

// KL(p || q) the textbook way: p_i = exp(x_i) / sum_j exp(x_j), sum_i p_i log(p_i / q_i).
// Only for logits small enough not to overflow exp().
double plain_kl(const std::vector<float>& x, const std::vector<float>& y) {
  double sx = 0, sy = 0;
  for (float v : x) sx += std::exp(static_cast<double>(v));
  for (float v : y) sy += std::exp(static_cast<double>(v));
  double kl = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double p = std::exp(static_cast<double>(x[i])) / sx;
    const double q = std::exp(static_cast<double>(y[i])) / sy;
    kl += p * std::log(p / q);
  }
  return kl;
}

TEST(AccuracyNumerics, KlMatchesPlainFormulaOnHandMadeDistributions) {
  const std::vector<std::pair<std::vector<float>, std::vector<float>>> cases = {
      {{0.0f, 0.0f}, {0.0f, 0.0f}},
      {{1.0f, 2.0f, 3.0f}, {3.0f, 2.0f, 1.0f}},
      {{0.5f, -1.0f, 2.0f, 0.0f}, {0.4f, -0.7f, 2.5f, 0.1f}},
      {{5.0f, -5.0f, 0.0f, 1.0f, -2.0f}, {-3.0f, 4.0f, 0.5f, 0.5f, 0.0f}},
      {{10.0f, 0.0f}, {0.0f, 10.0f}},
  };
  for (const auto& [x, y] : cases) {
    const double want = plain_kl(x, y);
    EXPECT_NEAR(kl_divergence(x, y), want, 1e-12 * std::max(1.0, want));
    // Shift invariance with logits so large that exp() of them overflows a double. Adding
    // 1000 rounds the float logits; shifting back is exact, so the reference uses those.
    std::vector<float> xs = x, ys = y, xb(x.size()), yb(y.size());
    for (auto& v : xs) v += 1000.0f;
    for (auto& v : ys) v -= 800.0f;
    for (size_t i = 0; i < x.size(); ++i) {
      xb[i] = xs[i] - 1000.0f;
      yb[i] = ys[i] + 800.0f;
    }
    const double shifted = kl_divergence(xs, ys);
    EXPECT_TRUE(std::isfinite(shifted));
    EXPECT_NEAR(shifted, plain_kl(xb, yb), 1e-12 * std::max(1.0, want));
  }
  // Hand values: p = (1/2, 1/2), q = (1/4, 3/4): KL = 1/2 ln 2 + 1/2 ln(2/3).
  const std::vector<float> p = {0.0f, 0.0f};
  const std::vector<float> q = {0.0f, static_cast<float>(std::log(3.0))};
  EXPECT_NEAR(kl_divergence(p, q), 0.5 * std::log(2.0) + 0.5 * std::log(2.0 / 3.0), 1e-7);
  // Identical distributions: exactly zero, never negative.
  EXPECT_EQ(kl_divergence(q, q), 0.0);
}

TEST(AccuracyNumerics, KlGuardsZeroProbabilities) {
  const float inf = std::numeric_limits<float>::infinity();
  // p_0 = 0: its term is 0 even where q_0 = 0 too.
  EXPECT_NEAR(
      kl_divergence(std::vector<float>{-inf, 0.0f, 0.0f}, std::vector<float>{-inf, 0.0f, 1.0f}),
      plain_kl({0.0f, 0.0f}, {0.0f, 1.0f}), 1e-12);
  // p_0 > 0 where q_0 = 0: infinite.
  EXPECT_TRUE(
      std::isinf(kl_divergence(std::vector<float>{0.0f, 0.0f}, std::vector<float>{-inf, 0.0f})));
  // Underflowing probabilities (exp(-200) in float logits) are handled like tiny ones.
  EXPECT_TRUE(std::isfinite(
      kl_divergence(std::vector<float>{0.0f, -200.0f}, std::vector<float>{-200.0f, 0.0f})));
  // Mismatched or empty spans.
  EXPECT_TRUE(std::isnan(kl_divergence(std::vector<float>{0.0f}, std::vector<float>{0.0f, 1.0f})));
  EXPECT_TRUE(std::isnan(kl_divergence(std::vector<float>{}, std::vector<float>{})));
}

TEST(AccuracyNumerics, LogSoftmaxArgmaxAndFiniteness) {
  const std::vector<float> x = {1.0f, 3.0f, -2.0f, 3.0f};
  std::vector<double> out(x.size());
  log_softmax(x, out);
  double s = 0;
  for (float v : x) s += std::exp(static_cast<double>(v));
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(out[i], static_cast<double>(x[i]) - std::log(s), 1e-12);
  EXPECT_EQ(argmax(x), 1);  // first of the tied maxima
  EXPECT_EQ(argmax(std::vector<float>{}), 0);
  EXPECT_TRUE(all_finite(x));
  EXPECT_FALSE(all_finite(std::vector<float>{0.0f, std::numeric_limits<float>::quiet_NaN()}));
  EXPECT_FALSE(all_finite(std::vector<float>{std::numeric_limits<float>::infinity()}));
}

// --- On the real stories260K model ---

struct Stories {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

Stories& stories() {
  static Stories s = [] {
    Stories r;
    auto m = Model::load(testing::data_file("models/stories260K/stories260K.gguf").string());
    EXPECT_TRUE(m.ok()) << m.message();
    if (!m.ok()) return r;
    r.model = std::move(m).value();
    auto t = Tokenizer::from_gguf(r.model->gguf());
    EXPECT_TRUE(t.ok()) << t.message();
    if (t.ok()) r.tokenizer = std::move(t).value();
    return r;
  }();
  return s;
}

// Two stories in the model's own domain (TinyStories), written for this test.
const char* const kStoryTexts[] = {
    "Once upon a time, there was a little boy named Tim. Tim had a red ball that he loved very "
    "much. "
    "Every day he went to the park with his mom and played with the ball on the green grass. One "
    "day, "
    "a big dog came to the park. The dog saw the red ball and ran after it. Tim was scared, but "
    "his mom "
    "said, \"Do not be afraid, Tim. The dog wants to play with you.\" Tim threw the ball and the "
    "dog ran "
    "fast to get it. The dog brought the ball back and wagged its tail. Tim laughed and threw the "
    "ball "
    "again. They played all day long. When the sun went down, Tim said goodbye to the dog. He went "
    "home "
    "with his mom and ate a big dinner. Then he went to bed and dreamed about the dog and the red "
    "ball. "
    "The next day, Tim went back to the park. He looked for the dog, but he could not find it. Tim "
    "was "
    "sad. Then he heard a happy bark. The dog was there!",
    "Lily was a little girl who liked to help her dad in the garden. They planted flowers and "
    "carrots "
    "and a small tree. Every morning Lily gave water to the plants with her little blue can. One "
    "day, "
    "Lily saw that a flower was sad and did not stand up. She said to her dad, \"Dad, the flower "
    "is sick. "
    "What can we do?\" Her dad smiled and said, \"The flower needs more sun, Lily. Let us move "
    "it.\" They "
    "moved the flower to a sunny spot near the fence. The next day, the flower was happy and tall. "
    "Lily "
    "was very proud. She told her friend Sue about the flower. Sue wanted to see it, so Lily "
    "showed her "
    "the garden. Sue liked the carrots the most. They picked one carrot and shared it. It was "
    "sweet and "
    "good. Lily and Sue played in the garden until it was time to go home. Lily said, \"I love our "
    "garden.\" Her dad gave her a big hug.",
};

constexpr int64_t kContextTokens = 200;
constexpr int64_t kContinuationTokens = 40;
constexpr int kGenerate = 24;

struct Sample {
  std::vector<int32_t> context, continuation;
};

std::vector<Sample> samples() {
  std::vector<Sample> out;
  for (const char* text : kStoryTexts) {
    const std::vector<int32_t> ids = stories().tokenizer->encode(text, true, false);
    EXPECT_GE(static_cast<int64_t>(ids.size()), kContextTokens + kContinuationTokens);
    if (static_cast<int64_t>(ids.size()) < kContextTokens + kContinuationTokens) continue;
    Sample s;
    s.context.assign(ids.begin(), ids.begin() + kContextTokens);
    s.continuation.assign(ids.begin() + kContextTokens,
                          ids.begin() + kContextTokens + kContinuationTokens);
    out.push_back(std::move(s));
  }
  return out;
}

CompressionOptions compressing(KvPolicy policy, double ratio, const char* scorer) {
  CompressionOptions o;
  o.policy = policy;
  o.ratio = ratio;
  o.sink = 4;
  o.window = 16;
  o.level = policy == KvPolicy::Uniform ? BudgetLevel::Uniform : BudgetLevel::PerLayer;
  o.scorer.name = scorer;
  o.scorer.snap_window = 16;
  return o;
}

Result<AgreementResult> agree(const CompressionOptions& o, const Sample& s, int group_size = 0) {
  ThreadPool threads(1);
  return policy_agreement(*stories().model, o, group_size, 16, s.context, s.continuation, kGenerate,
                          threads);
}

void expect_consistent(const AgreementResult& r) {
  EXPECT_GE(r.token_match_rate, 0.0);
  EXPECT_LE(r.token_match_rate, 1.0);
  if (r.first_divergence >= 0) {
    EXPECT_DOUBLE_EQ(r.token_match_rate, static_cast<double>(r.first_divergence) / kGenerate);
  } else {
    EXPECT_EQ(r.token_match_rate, 1.0);
  }
  EXPECT_LE(r.mean_kl, r.max_kl);
  EXPECT_LE(r.kept_entries, r.total_entries);
  // 5 layers x 4 KV heads x the context.
  EXPECT_EQ(r.total_entries, 5 * 4 * kContextTokens);
}

TEST(AccuracyAgreement, FullCacheAgreesPerfectlyWithItself) {
  ASSERT_NE(stories().model, nullptr);
  for (const Sample& s : samples()) {
    for (const KvPolicy p : {KvPolicy::Full, KvPolicy::Uniform}) {
      CompressionOptions o = compressing(p, 1.0, "keydiff");
      auto r = agree(o, s);
      ASSERT_TRUE(r.ok()) << r.message();
      expect_consistent(*r);
      EXPECT_EQ(r->token_match_rate, 1.0);
      EXPECT_EQ(r->first_divergence, -1);
      EXPECT_LT(r->mean_kl, 1e-6);
      EXPECT_LT(r->max_kl, 1e-6);
      EXPECT_EQ(r->kept_entries, r->total_entries);
    }
  }
}

// Uniform KeyDiff keeps, per head, the top-scoring entries of the same scores, so the 0.3
// cache holds a strict subset of the 0.7 cache's entries: it drops more of the attention mass
// the full cache sees. Averaged over two contexts and 40 continuation positions each, that
// shows as a clearly larger KL (measured ~x3 here; the test asks for x1.5 so rounding or a
// kernel change cannot flip it, but a KL that ignores the compression would fail).
TEST(AccuracyAgreement, KlIsPositiveAndGrowsAsTheRatioFalls) {
  ASSERT_NE(stories().model, nullptr);
  double kl_high = 0, kl_low = 0;
  for (const Sample& s : samples()) {
    auto high = agree(compressing(KvPolicy::Uniform, 0.7, "keydiff"), s);
    auto low = agree(compressing(KvPolicy::Uniform, 0.3, "keydiff"), s);
    ASSERT_TRUE(high.ok()) << high.message();
    ASSERT_TRUE(low.ok()) << low.message();
    for (const AgreementResult* r : {&*high, &*low}) {
      expect_consistent(*r);
      EXPECT_TRUE(std::isfinite(r->mean_kl));
      EXPECT_TRUE(std::isfinite(r->max_kl));
      EXPECT_GT(r->mean_kl, 0.0);
      EXPECT_LT(r->kept_entries, r->total_entries);
    }
    EXPECT_LT(low->kept_entries, high->kept_entries);
    kl_high += high->mean_kl;
    kl_low += low->mean_kl;
  }
  std::printf("mean KL over samples: ratio 0.7 %.6g, ratio 0.3 %.6g\n", kl_high / 2, kl_low / 2);
  EXPECT_GT(kl_low, 1.5 * kl_high);
}

// The greedy phase runs first and is then cut off the caches (truncate back to the context);
// the teacher-forced figures must be exactly those of a run that generated nothing, which shows
// the cut restores the compressed cache as it was.
TEST(AccuracyAgreement, GreedyPhaseLeavesTheCompressedCacheAsItWas) {
  ASSERT_NE(stories().model, nullptr);
  ThreadPool threads(1);
  const Sample s = samples().back();
  const CompressionOptions o = compressing(KvPolicy::Uniform, 0.3, "keydiff");
  auto with =
      policy_agreement(*stories().model, o, 0, 16, s.context, s.continuation, kGenerate, threads);
  auto without =
      policy_agreement(*stories().model, o, 0, 16, s.context, s.continuation, 0, threads);
  ASSERT_TRUE(with.ok()) << with.message();
  ASSERT_TRUE(without.ok()) << without.message();
  EXPECT_EQ(with->mean_kl, without->mean_kl);
  EXPECT_EQ(with->max_kl, without->max_kl);
  EXPECT_EQ(with->kept_entries, without->kept_entries);
}

// Query-aware scorers: SnapKV reads the observation window captured during the prefill, the
// KVzip-style scorer the queries of a reconstruction pass.
TEST(AccuracyAgreement, QueryAwareScorersWork) {
  ASSERT_NE(stories().model, nullptr);
  const Sample s = samples().front();
  for (const char* scorer : {"snapkv", "tova", "kvzip"}) {
    auto r = agree(compressing(KvPolicy::Dynamic, 0.3, scorer), s);
    ASSERT_TRUE(r.ok()) << scorer << ": " << r.message();
    expect_consistent(*r);
    EXPECT_TRUE(std::isfinite(r->mean_kl)) << scorer;
    EXPECT_GT(r->mean_kl, 0.0) << scorer;
    EXPECT_LT(r->kept_entries, r->total_entries) << scorer;
  }
}

// The tangram policy with a profile written by save_profile (zero spread, one fraction per head).
std::string write_profile(int L, int H) {
  RetentionProfile p;
  p.scorer = "keydiff";
  p.model = "stories260K";
  p.level = "per-layer";
  p.n_layers = L;
  p.n_kv_head = H;
  p.n_samples = 2;
  p.n_physical_layers = L;
  for (int l = 0; l < L; ++l) p.layer_ids.push_back(l);
  p.base_ratio = 0.3;
  p.sink = 4;
  p.window = 16;
  std::vector<float> f(static_cast<size_t>(L * H));
  for (size_t i = 0; i < f.size(); ++i) f[i] = 0.05f + 0.1f * static_cast<float>(i % 4);
  p.median = p.mean = p.p90 = f;
  p.std_dev.assign(f.size(), 0.0f);
  for (int s = 0; s < 2; ++s)
    for (float x : f) p.raw_ratio.push_back(x);
  p.sample_meta = {196, 4, 200, 16, 196, 4, 200, 16};
  const std::string path = (testing::temp_dir() / "stories-profile.json").string();
  const Status st = save_profile(p, path);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

TEST(AccuracyAgreement, TangramPolicyWithSavedProfile) {
  ASSERT_NE(stories().model, nullptr);
  CompressionOptions o = compressing(KvPolicy::Tangram, 0.3, "keydiff");
  o.profile = write_profile(5, 4);
  for (const int group_size : {1, 2}) {
    auto r = agree(o, samples().front(), group_size);
    ASSERT_TRUE(r.ok()) << r.message();
    expect_consistent(*r);
    EXPECT_TRUE(std::isfinite(r->mean_kl));
    EXPECT_GT(r->mean_kl, 0.0);
    EXPECT_LT(r->kept_entries, r->total_entries);
  }
  // A profile that does not exist is an error, not an abort.
  o.profile = (testing::temp_dir() / "missing.json").string();
  EXPECT_FALSE(agree(o, samples().front(), 2).ok());
}

TEST(AccuracyAgreement, BadInputIsAnError) {
  ASSERT_NE(stories().model, nullptr);
  Model& m = *stories().model;
  ThreadPool threads(1);
  const Sample s = samples().front();
  const CompressionOptions o = compressing(KvPolicy::Uniform, 0.5, "keydiff");
  const std::vector<int32_t> none;
  EXPECT_FALSE(policy_agreement(m, o, 0, 16, none, s.continuation, 4, threads).ok());
  EXPECT_FALSE(policy_agreement(m, o, 0, 16, s.context, none, 4, threads).ok());
  EXPECT_FALSE(policy_agreement(m, o, 0, 16, s.context, s.continuation, -1, threads).ok());
  EXPECT_FALSE(policy_agreement(m, o, 0, 0, s.context, s.continuation, 4, threads).ok());
  std::vector<int32_t> bad = s.context;
  bad[10] = 100000;  // outside the 512-token vocabulary
  EXPECT_FALSE(policy_agreement(m, o, 0, 16, bad, s.continuation, 4, threads).ok());
  const std::vector<int32_t> too_long(static_cast<size_t>(m.config().context_length), 5);
  EXPECT_FALSE(policy_agreement(m, o, 0, 16, too_long, s.continuation, 4, threads).ok());
  CompressionOptions invalid = o;
  invalid.ratio = 0.0;
  EXPECT_FALSE(policy_agreement(m, invalid, 0, 16, s.context, s.continuation, 4, threads).ok());
  // n_generate = 0: nothing generated counts as full agreement.
  auto r = policy_agreement(m, o, 0, 16, s.context, s.continuation, 0, threads);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->token_match_rate, 1.0);
  EXPECT_EQ(r->first_divergence, -1);
}

}  // namespace
}  // namespace tangram
