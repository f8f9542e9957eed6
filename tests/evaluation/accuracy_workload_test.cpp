// The bench's accuracy workload: the text cut to fit the model's context and the accuracy budget,
// the greedy probe inside that window, and the Pareto view's data (series per policy, sorted by
// effective retention).
#include <gtest/gtest.h>

#include <fstream>
#include <numeric>
#include <sstream>
#include <vector>

#include "evaluation/accuracy_workload.h"
#include "model/model.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"

namespace tangram {
namespace {

std::vector<int32_t> ids(int n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 1);
  return v;
}

void expect_consistent(const AccuracyWorkload& w, int64_t context) {
  const auto window = static_cast<int64_t>(w.text.size());
  EXPECT_LE(window, context);
  EXPECT_GE(window, kMinAccuracyWindow);
  // The probe's context and continuation are the window, in order.
  std::vector<int32_t> joined = w.context;
  joined.insert(joined.end(), w.continuation.begin(), w.continuation.end());
  EXPECT_EQ(joined, w.text);
  EXPECT_FALSE(w.continuation.empty());
  EXPECT_LE(w.n_generate, static_cast<int>(w.continuation.size()));
  EXPECT_GT(w.n_generate, 0);
  EXPECT_LE(static_cast<int64_t>(w.context.size()) + w.n_generate, context);
  // At least three compressions before the last turn.
  EXPECT_GE(window / w.chunk, 4);
}

TEST(AccuracyWorkload, WindowIsTheSmallestOfTextContextAndBudget) {
  const std::vector<int32_t> text = ids(1000);
  struct Case {
    int64_t context, max_tokens, window;
  } cases[] = {
      {2048, 512, 512}, {512, 4096, 512}, {200, 512, 200}, {4096, 300, 300}, {4096, 4096, 1000}};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "context " << c.context << " max " << c.max_tokens);
    auto w = choose_accuracy_workload(text, c.context, c.max_tokens);
    ASSERT_TRUE(w.ok()) << w.message();
    EXPECT_EQ(static_cast<int64_t>(w->text.size()), c.window);
    EXPECT_EQ(w->text_tokens, 1000);
    EXPECT_EQ(w->text.front(), 1);  // from the start: BOS stays first
    expect_consistent(*w, c.context);
  }
  auto small = choose_accuracy_workload(text, 64, 64);
  ASSERT_TRUE(small.ok()) << small.message();
  EXPECT_EQ(small->continuation.size(), 16u);
  EXPECT_EQ(small->n_generate, 16);
}

TEST(AccuracyWorkload, TooShortAContextOrTextIsAnError) {
  EXPECT_FALSE(choose_accuracy_workload(ids(1000), kMinAccuracyWindow - 1, 512).ok());
  EXPECT_FALSE(choose_accuracy_workload(ids(1000), 512, kMinAccuracyWindow - 1).ok());
  EXPECT_FALSE(
      choose_accuracy_workload(ids(static_cast<int>(kMinAccuracyWindow) - 1), 512, 512).ok());
  EXPECT_FALSE(choose_accuracy_workload({}, 512, 512).ok());
}

// The built-in text is docs/accuracy-text.txt, and on stories260K (GGUF context 2048, trained at
// 512) the default budget keeps it inside the training context.
TEST(AccuracyWorkload, BuiltInTextFitsStories260K) {
  std::ifstream in(std::string(TANGRAM_SOURCE_DIR) + "/docs/accuracy-text.txt", std::ios::binary);
  std::ostringstream file;
  file << in.rdbuf();
  EXPECT_EQ(default_accuracy_text(), file.str());

  auto m = Model::load(testing::data_file("models/stories260K/stories260K.gguf").string());
  ASSERT_TRUE(m.ok()) << m.message();
  auto tok = Tokenizer::from_gguf((*m)->gguf());
  ASSERT_TRUE(tok.ok()) << tok.message();
  const std::vector<int32_t> tokens =
      (*tok)->encode(std::string(default_accuracy_text()), true, false);
  ASSERT_GT(tokens.size(), 512u);
  auto w = choose_accuracy_workload(tokens, (*m)->config().context_length, 512);
  ASSERT_TRUE(w.ok()) << w.message();
  EXPECT_EQ(w->text.size(), 512u);
  EXPECT_EQ(w->text.front(), (*tok)->bos());
  expect_consistent(*w, 512);
  // A model with a short context gets a window that fits it.
  auto short_ctx = choose_accuracy_workload(tokens, 128, 512);
  ASSERT_TRUE(short_ctx.ok()) << short_ctx.message();
  expect_consistent(*short_ctx, 128);
  EXPECT_EQ(short_ctx->text.size(), 128u);
}

TEST(AccuracyWorkload, EffectiveRetentionPrefersTheServingRunsBytes) {
  EXPECT_DOUBLE_EQ(effective_retention(300.0, 1200.0, 0.9), 0.25);
  EXPECT_DOUBLE_EQ(effective_retention(0.0, 1200.0, 0.4), 0.4);  // the policy's bytes unmeasured
  EXPECT_DOUBLE_EQ(effective_retention(300.0, 0.0, 0.4), 0.4);   // no full run
}

TEST(AccuracyWorkload, RetentionSeriesOnePerPolicySortedByRetention) {
  const std::vector<AccuracyPoint> points = {{"full", 1.0, 0.0},         {"uniform", 0.5, 0.02},
                                             {"uniform", 0.25, 0.09},    {"tangram G=2", 0.6, 0.01},
                                             {"tangram G=4", 0.3, 0.03}, {"uniform", 0.75, 0.005},
                                             {"tangram G=2", 0.35, 0.04}};
  const std::vector<PlotSeries> s = retention_series(points);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].name, "full");
  EXPECT_EQ(s[1].name, "uniform");
  EXPECT_EQ(s[1].x, (std::vector<double>{0.25, 0.5, 0.75}));
  EXPECT_EQ(s[1].y, (std::vector<double>{0.09, 0.02, 0.005}));  // each KL stays with its retention
  EXPECT_EQ(s[2].name, "tangram G=2");
  EXPECT_EQ(s[2].x, (std::vector<double>{0.35, 0.6}));
  EXPECT_EQ(s[2].y, (std::vector<double>{0.04, 0.01}));
  EXPECT_EQ(s[3].x, (std::vector<double>{0.3}));
  EXPECT_TRUE(retention_series({}).empty());
}

}  // namespace
}  // namespace tangram
