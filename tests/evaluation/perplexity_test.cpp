// evaluate_perplexity() on the real stories260K model: full KV equals a plain reference loop
// (one forward over each window, log-softmax in double); compressing policies lose accuracy as
// the ratio falls; bad input gives errors.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "evaluation/accuracy.h"
#include "evaluation/perplexity.h"
#include "model/model.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"

namespace tangram {
namespace {

struct Stories {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::vector<int32_t> tokens;  // kStory, with BOS
};

// A story in the model's own domain (TinyStories), written for these tests.
constexpr const char* kStory =
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
    "sad. Then he heard a happy bark. The dog was there!";

Stories& stories() {
  static Stories s = [] {
    Stories r;
    auto m = Model::load(testing::data_file("models/stories260K/stories260K.gguf").string());
    EXPECT_TRUE(m.ok()) << m.message();
    if (!m.ok()) return r;
    r.model = std::move(m).value();
    auto t = Tokenizer::from_gguf(r.model->gguf());
    EXPECT_TRUE(t.ok()) << t.message();
    if (!t.ok()) return r;
    r.tokenizer = std::move(t).value();
    r.tokens = r.tokenizer->encode(kStory, true, false);
    return r;
  }();
  return s;
}

// The reference: consecutive windows of `window` tokens (BOS first), each one forward pass over
// a contiguous F32 cache; mean NLL over every position's next token, in double.
double reference_mean_nll(Model& model, const std::vector<int32_t>& tokens, int64_t window,
                          int32_t bos, ThreadPool& pool) {
  const int64_t vocab = model.config().vocab;
  const auto n = static_cast<int64_t>(tokens.size());
  double sum = 0;
  int64_t count = 0;
  for (int64_t w = 0; w + window <= n; w += window) {
    std::vector<int32_t> win(tokens.begin() + w, tokens.begin() + w + window);
    if (w > 0) win[0] = bos;
    std::unique_ptr<KvCache> cache = model.new_cache(window, KvType::F32);
    std::vector<float> logits(static_cast<size_t>(window * vocab));  // [window][vocab]
    EXPECT_TRUE(model.forward(*cache, win.data(), window, 0, logits.data(), pool, true).ok());
    std::vector<double> lp(static_cast<size_t>(vocab));
    for (int64_t i = 0; i + 1 < window; ++i) {
      log_softmax(std::span<const float>(logits.data() + i * vocab, static_cast<size_t>(vocab)),
                  lp);
      sum -= lp[static_cast<size_t>(win[static_cast<size_t>(i + 1)])];
      ++count;
    }
  }
  return sum / static_cast<double>(count);
}

PerplexityOptions options_for(KvPolicy policy, double ratio, const char* scorer, int64_t chunk) {
  PerplexityOptions o;
  o.policy.policy = policy;
  o.policy.ratio = ratio;
  o.policy.sink = 4;
  o.policy.window = 16;
  o.policy.level = policy == KvPolicy::Uniform ? BudgetLevel::Uniform : BudgetLevel::PerLayer;
  o.policy.scorer.name = scorer;
  o.policy.scorer.snap_window = 16;
  o.kv_type = KvType::F32;
  o.chunk = chunk;
  o.bos = stories().tokenizer ? stories().tokenizer->bos() : 1;
  return o;
}

TEST(Perplexity, FullKvEqualsAPlainReferenceLoop) {
  ASSERT_NE(stories().model, nullptr);
  Model& m = *stories().model;
  const auto& toks = stories().tokens;
  ASSERT_GE(toks.size(), 200u);
  ThreadPool pool(1);
  // One window of the whole text, then two windows of 100 (BOS restarts the second).
  for (const int64_t window : {int64_t{0}, int64_t{100}}) {
    PerplexityOptions o = options_for(KvPolicy::Full, 1.0, "keydiff", 48);
    o.window = window;
    auto r = evaluate_perplexity(m, toks, o, pool);
    ASSERT_TRUE(r.ok()) << r.message();
    const int64_t w = window > 0 ? window : static_cast<int64_t>(toks.size());
    const double ref = reference_mean_nll(m, toks, w, o.bos, pool);
    EXPECT_EQ(r->window, w);
    EXPECT_EQ(r->n_windows, static_cast<int64_t>(toks.size()) / w);
    EXPECT_EQ(r->scored, r->n_windows * (w - 1));
    EXPECT_NEAR(r->mean_nll, ref, 1e-5) << "window " << window;
    EXPECT_NEAR(r->ppl, std::exp(ref), 1e-5 * std::exp(ref));
    EXPECT_GT(r->nll_stderr, 0.0);
    EXPECT_NEAR(r->ppl_stderr, r->ppl * r->nll_stderr, 1e-12);
    EXPECT_FALSE(r->compared);
    EXPECT_EQ(r->compressions, 0);
  }
}

// Pages of another type than the reference's are compared with full KV on the reference's type
// even without compression: F16 pages against F32 on stories260K cost almost nothing and hold
// half the bytes. Q8_0 pages are refused on this model: its heads (8 wide) are not whole 32-element
// blocks.
TEST(Perplexity, AnotherKvTypeIsComparedWithTheReferenceType) {
  ASSERT_NE(stories().model, nullptr);
  Model& m = *stories().model;
  ThreadPool pool(1);
  PerplexityOptions o = options_for(KvPolicy::Full, 1.0, "keydiff", 32);
  o.kv_type = KvType::F16;
  o.reference_kv_type = KvType::F32;
  auto r = evaluate_perplexity(m, stories().tokens, o, pool);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(r->compared);
  EXPECT_GE(r->mean_kl, 0.0);
  EXPECT_LT(r->mean_kl, 1e-3);
  EXPECT_GE(r->top1_agreement, 0.95);
  EXPECT_LE(r->top1_agreement, 1.0);
  EXPECT_NEAR(r->retention_bytes, 0.5, 1e-9);
  o.reference_kv_type.reset();  // the same type: nothing to compare
  r = evaluate_perplexity(m, stories().tokens, o, pool);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_FALSE(r->compared);
  o.kv_type = KvType::Q8_0;
  r = evaluate_perplexity(m, stories().tokens, o, pool);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("not multiples of 32"), std::string::npos) << r.message();
}

// Measured on this story (uniform, turns of 32, F32 KV): keydiff PPL full 3.097, 0.7 3.093,
// 0.5 3.083, 0.3 3.114 (KL 0.005, 0.011, 0.024); snapkv 3.090, 3.097, 3.125 (KL 0.004, 0.013,
// 0.028). This small model's perplexity barely moves, and a compressed cache can predict a few
// tokens better, so PPL is checked within a stated margin of 1% of full's; KL, the sensitive
// measure, must grow as the ratio falls, and the retained bytes must shrink.
TEST(Perplexity, CompressionCostsMoreAsTheRatioFalls) {
  ASSERT_NE(stories().model, nullptr);
  Model& m = *stories().model;
  ThreadPool pool(1);
  for (const char* scorer : {"keydiff", "snapkv"}) {
    auto full = evaluate_perplexity(m, stories().tokens,
                                    options_for(KvPolicy::Full, 1.0, scorer, 32), pool);
    ASSERT_TRUE(full.ok()) << full.message();
    const double margin = 0.01 * full->ppl;  // noise allowed between neighbouring ratios
    double prev_ppl = full->ppl, prev_kl = 0.0, prev_retention = 1.0;
    for (const double ratio : {0.7, 0.5, 0.3}) {
      auto r = evaluate_perplexity(m, stories().tokens,
                                   options_for(KvPolicy::Uniform, ratio, scorer, 32), pool);
      ASSERT_TRUE(r.ok()) << r.message();
      SCOPED_TRACE(::testing::Message() << scorer << " ratio " << ratio);
      EXPECT_TRUE(r->compared);
      EXPECT_GT(r->compressions, 0);
      EXPECT_GE(r->ppl, full->ppl - margin);
      EXPECT_GE(r->ppl, prev_ppl - margin);
      EXPECT_GT(r->mean_kl, 0.0);
      EXPECT_GE(r->mean_kl, prev_kl - 1e-3);
      EXPECT_LT(r->retention_bytes, prev_retention);
      EXPECT_LE(r->retention_entries, r->retention_bytes + 1e-9);  // partial pages only add bytes
      prev_ppl = r->ppl;
      prev_kl = r->mean_kl;
      prev_retention = r->retention_bytes;
    }
  }
}

TEST(Perplexity, BadInputGivesErrors) {
  ASSERT_NE(stories().model, nullptr);
  Model& m = *stories().model;
  ThreadPool pool(1);
  const std::vector<int32_t> one{1}, out_of_vocab{1, 600, 3};
  const PerplexityOptions ok = options_for(KvPolicy::Full, 1.0, "keydiff", 32);
  EXPECT_FALSE(evaluate_perplexity(m, one, ok, pool).ok());
  EXPECT_FALSE(evaluate_perplexity(m, std::vector<int32_t>{}, ok, pool).ok());
  EXPECT_FALSE(evaluate_perplexity(m, out_of_vocab, ok, pool).ok());
  PerplexityOptions o = ok;
  o.chunk = 0;
  EXPECT_FALSE(evaluate_perplexity(m, stories().tokens, o, pool).ok());
  o = ok;
  o.window = 1;
  EXPECT_FALSE(evaluate_perplexity(m, stories().tokens, o, pool).ok());
  o.window = m.config().context_length + 1;
  EXPECT_FALSE(evaluate_perplexity(m, stories().tokens, o, pool).ok());
  o = options_for(KvPolicy::Uniform, 1.5, "keydiff", 32);
  EXPECT_FALSE(evaluate_perplexity(m, stories().tokens, o, pool).ok());
  o = options_for(KvPolicy::Uniform, 0.5, "no-such-scorer", 32);
  EXPECT_FALSE(evaluate_perplexity(m, stories().tokens, o, pool).ok());
  o = options_for(KvPolicy::Tangram, 0.5, "keydiff", 32);  // no profile
  EXPECT_FALSE(evaluate_perplexity(m, stories().tokens, o, pool).ok());
  o = options_for(KvPolicy::Uniform, 0.5, "kvzip", 32);  // no repeat instruction
  EXPECT_FALSE(evaluate_perplexity(m, stories().tokens, o, pool).ok());
}

}  // namespace
}  // namespace tangram
