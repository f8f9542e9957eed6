// forward() refuses bad input with an Error, changes nothing then, and keeps working.
#include <gtest/gtest.h>

#include <limits>

#include "kv/contiguous_kv_cache.h"
#include "model_test_util.h"

namespace tangram::testing {
namespace {

class ForwardErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    SynthSpec s = *synth_preset("tiny-llama");
    s.ctx = 16;
    model_ = load_model(write_synth(s));
    ASSERT_NE(model_, nullptr);
  }
  std::unique_ptr<Model> model_;
  ThreadPool pool_{1};
  std::vector<float> logits_ = std::vector<float>(512 * 32);
};

TEST_F(ForwardErrors, TokenIdsOutOfRange) {
  auto cache = model_->new_cache(0);
  for (int32_t bad : {-1, 512, 1 << 30}) {
    const int32_t tokens[] = {1, 5, bad};
    const Status st = model_->forward(*cache, tokens, 3, 0, logits_.data(), pool_);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find(std::to_string(bad)), std::string::npos) << st.message();
    EXPECT_EQ(cache->n_positions(), 0);
  }
  const int32_t good[] = {1, 5, 511};
  EXPECT_TRUE(model_->forward(*cache, good, 3, 0, logits_.data(), pool_).ok());
  EXPECT_EQ(cache->n_positions(), 3);
}

TEST_F(ForwardErrors, ContextOverflow) {
  const auto tokens = random_tokens(17, 512, 1);
  auto cache = model_->new_cache(0);  // the model's context: 16
  EXPECT_EQ(cache->capacity(), 16);
  Status st = model_->forward(*cache, tokens.data(), 17, 0, logits_.data(), pool_);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("context overflow"), std::string::npos) << st.message();
  ASSERT_TRUE(model_->forward(*cache, tokens.data(), 16, 0, logits_.data(), pool_).ok());
  st = model_->forward(*cache, tokens.data(), 1, 16, logits_.data(), pool_);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(cache->n_positions(), 16);

  // A huge count is refused from the sizes alone, before any token is read.
  auto fresh = model_->new_cache(0);
  st = model_->forward(*fresh, tokens.data(), std::numeric_limits<int64_t>::max(), 0,
                       logits_.data(), pool_);
  EXPECT_FALSE(st.ok());

  // A smaller cache overflows first.
  auto small = model_->new_cache(4);
  st = model_->forward(*small, tokens.data(), 5, 0, logits_.data(), pool_);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("capacity"), std::string::npos) << st.message();
  // A cache bigger than the model's context still stops at the context.
  ContiguousKvCache big(model_->kv_shape(), 64, KvType::F32);
  st = model_->forward(big, tokens.data(), 17, 0, logits_.data(), pool_);
  EXPECT_FALSE(st.ok());
}

TEST_F(ForwardErrors, PositionsMustContinueTheCache) {
  const auto tokens = random_tokens(4, 512, 2);
  auto cache = model_->new_cache(0);
  EXPECT_FALSE(model_->forward(*cache, tokens.data(), 2, 1, logits_.data(), pool_).ok());
  ASSERT_TRUE(model_->forward(*cache, tokens.data(), 2, 0, logits_.data(), pool_).ok());
  EXPECT_FALSE(model_->forward(*cache, tokens.data(), 1, 0, logits_.data(), pool_).ok());
  EXPECT_FALSE(model_->forward(*cache, tokens.data(), 1, 3, logits_.data(), pool_).ok());
  EXPECT_FALSE(model_->forward(*cache, tokens.data(), 0, 2, logits_.data(), pool_).ok());
  EXPECT_FALSE(model_->forward(*cache, nullptr, 1, 2, logits_.data(), pool_).ok());
  // Rewinding with truncate() makes an earlier position valid again, with the same result.
  std::vector<float> first(512), again(512);
  ASSERT_TRUE(model_->forward(*cache, tokens.data() + 2, 1, 2, first.data(), pool_).ok());
  cache->truncate(2);
  ASSERT_TRUE(model_->forward(*cache, tokens.data() + 2, 1, 2, again.data(), pool_).ok());
  EXPECT_EQ(first, again);
}

TEST_F(ForwardErrors, CacheOfAnotherShape) {
  KvShape other = model_->kv_shape();
  other.n_kv_head = 4;
  ContiguousKvCache cache(other, 16, KvType::F32);
  const int32_t t = 1;
  EXPECT_FALSE(model_->forward(cache, &t, 1, 0, logits_.data(), pool_).ok());
}

TEST_F(ForwardErrors, NullLogitsSkipsTheOutput) {
  const auto tokens = random_tokens(6, 512, 3);
  auto a = model_->new_cache(0), b = model_->new_cache(0);
  std::vector<float> la(512), lb(512);
  ASSERT_TRUE(model_->forward(*a, tokens.data(), 5, 0, nullptr, pool_).ok());
  ASSERT_TRUE(model_->forward(*a, tokens.data() + 5, 1, 5, la.data(), pool_).ok());
  ASSERT_TRUE(model_->forward(*b, tokens.data(), 6, 0, lb.data(), pool_).ok());
  EXPECT_LE(max_abs_diff(la.data(), lb.data(), 512), 1e-4);
}

// Prompts longer than max_batch go through in chunks with the same result.
TEST(ForwardBatching, ChunkedPrefillMatchesOnePass) {
  const std::string path = write_synth(*synth_preset("tiny-qwen3"));
  ModelOptions opts;
  opts.max_batch = 16;
  auto chunked = Model::load(path, opts);
  ASSERT_TRUE(chunked.ok()) << chunked.message();
  auto whole = load_model(path);
  ASSERT_NE(whole, nullptr);
  const auto tokens = random_tokens(50, 512, 4);
  ThreadPool pool(1);
  std::vector<float> a(50 * 512), b(50 * 512);
  auto ca = (*chunked)->new_cache(64), cb = whole->new_cache(64);
  ASSERT_TRUE((*chunked)->forward(*ca, tokens.data(), 50, 0, a.data(), pool, true).ok());
  ASSERT_TRUE(whole->forward(*cb, tokens.data(), 50, 0, b.data(), pool, true).ok());
  EXPECT_LE(max_abs_diff(a.data(), b.data(), 50 * 512), 1e-4);
}

TEST(ModelLoad, MissingFileIsAnError) {
  auto m = Model::load((temp_dir() / "nope.gguf").string());
  EXPECT_FALSE(m.ok());
}

}  // namespace
}  // namespace tangram::testing
