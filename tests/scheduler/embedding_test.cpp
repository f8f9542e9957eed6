// Embedding requests: the final-normed hidden states the model hands out are what its output
// projection reads, and the scheduler's pooled vectors (prompts read in chunks, beside
// generating requests, under a compressing policy) equal the plain reference: one forward
// pass over a contiguous F32 cache, pooled and normalised by a loop written out here.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "kernels/matmul.h"
#include "model/pooling.h"
#include "scheduler_test_util.h"

namespace tangram::testing {
namespace {

// Hidden rows [n][n_embd] of a prompt, by one plain pass over a contiguous cache.
std::vector<float> plain_hidden(Model& model, const std::vector<int32_t>& prompt,
                                ThreadPool& pool) {
  auto cache = model.new_cache(0, KvType::F32);
  const auto n = static_cast<int64_t>(prompt.size());
  std::vector<float> hidden(static_cast<size_t>(n * model.config().n_embd));
  SequenceStep step{cache.get(), prompt.data(), n, 0};
  step.hidden = hidden.data();
  const Status st = model.forward_step(std::span<const SequenceStep>(&step, 1), pool);
  EXPECT_TRUE(st.ok()) << st.message();
  return hidden;
}

// The reference pooling, written as plainly as possible.
std::vector<float> reference_pool(const std::vector<float>& hidden, int dim, Pooling p) {
  const size_t n = hidden.size() / static_cast<size_t>(dim);
  std::vector<double> v(static_cast<size_t>(dim), 0.0);
  for (size_t i = 0; i < static_cast<size_t>(dim); ++i) {
    if (p == Pooling::Mean) {
      for (size_t t = 0; t < n; ++t)
        v[i] += static_cast<double>(hidden[t * dim + i]) / static_cast<double>(n);
    } else {
      v[i] = hidden[(p == Pooling::Cls ? 0 : n - 1) * dim + i];
    }
  }
  double norm = 0;
  for (double x : v) norm += x * x;
  std::vector<float> out;
  for (double x : v) out.push_back(static_cast<float>(x / std::sqrt(norm)));
  return out;
}

TEST(ModelHidden, IsWhatTheOutputProjectionReads) {
  TestModel tm = synth_model("tiny-qwen3");
  ASSERT_TRUE(tm.model);
  ThreadPool pool(2);
  const ModelConfig& c = tm.model->config();
  const auto prompt = prompt_of(19, 7, c.vocab);
  const auto n = static_cast<int64_t>(prompt.size());
  auto cache = tm.model->new_cache(0, KvType::F32);
  std::vector<float> logits(static_cast<size_t>(n * c.vocab));
  std::vector<float> hidden(static_cast<size_t>(n * c.n_embd));
  SequenceStep step{cache.get(), prompt.data(), n, 0, logits.data(), true};
  step.hidden = hidden.data();
  ASSERT_TRUE(tm.model->forward_step(std::span<const SequenceStep>(&step, 1), pool).ok());
  std::vector<float> projected(logits.size());
  matmul(tm.model->weights().output, hidden.data(), n, projected.data(), pool);
  for (size_t i = 0; i < logits.size(); ++i)
    ASSERT_NEAR(projected[i], logits[i], 1e-4f * (1 + std::fabs(logits[i]))) << "at " << i;
  // Rows are causal: the hidden states of a prefix do not depend on what follows it.
  const auto head = std::vector<int32_t>(prompt.begin(), prompt.begin() + 8);
  const auto head_hidden = plain_hidden(*tm.model, head, pool);
  for (size_t i = 0; i < head_hidden.size(); ++i) ASSERT_NEAR(head_hidden[i], hidden[i], 1e-5f);
}

TEST(PoolAccumulator, ChunkedEqualsWholeAndStartsOverAtPositionZero) {
  const int dim = 5;
  std::vector<float> rows;
  for (int i = 0; i < 7 * dim; ++i) rows.push_back(std::sin(0.7f * static_cast<float>(i)));
  for (Pooling p : {Pooling::Mean, Pooling::Cls, Pooling::Last}) {
    PoolAccumulator whole(p, dim), chunked(p, dim);
    whole.add(rows.data(), 7, 0);
    chunked.add(rows.data(), 3, 0);
    chunked.add(rows.data() + 3 * dim, 2, 3);
    // A preempted sequence recomputes from position 0: what came before is forgotten.
    chunked.add(rows.data(), 4, 0);
    chunked.add(rows.data() + 4 * dim, 3, 4);
    const auto ref = reference_pool(rows, dim, p);
    const auto a = whole.normalized(), b = chunked.normalized();
    for (int i = 0; i < dim; ++i) {
      EXPECT_NEAR(a[static_cast<size_t>(i)], ref[static_cast<size_t>(i)], 1e-6f) << pooling_name(p);
      EXPECT_NEAR(b[static_cast<size_t>(i)], ref[static_cast<size_t>(i)], 1e-6f) << pooling_name(p);
    }
    EXPECT_EQ(chunked.rows(), 7);
  }
  PoolAccumulator empty(Pooling::Mean, dim);
  for (float x : empty.normalized()) EXPECT_EQ(x, 0.0f);
}

TEST(SchedulerEmbedding, EqualsThePlainPassBesideGeneration) {
  TestModel tm = synth_model("tiny-qwen3");
  ASSERT_TRUE(tm.model && tm.tokenizer);
  ThreadPool pool(2);
  const ModelConfig& c = tm.model->config();
  SchedulerOptions o;
  o.kv_memory = 16u << 20;
  o.kv_type = KvType::F32;
  o.prefault = false;
  o.page_tokens = 8;
  o.prefill_chunk = 7;  // prompts go through in several chunks
  o.step_tokens = 24;
  // A compressing policy: a generation request's prompt is compressed every 16 positions; an
  // embedding's never is (every row counts).
  o.compression.policy = KvPolicy::Uniform;
  o.compression.ratio = 0.5;
  o.compression.sink = 2;
  o.compression.window = 4;
  o.compression.chunk = 16;
  auto s = Scheduler::create(*tm.model, *tm.tokenizer, pool, o);
  ASSERT_TRUE(s.ok()) << s.message();
  const int64_t free_before = (*s)->stats().pool.free_pages;

  std::map<RequestId, RequestResult> results;
  std::vector<std::pair<RequestId, std::pair<std::vector<int32_t>, Pooling>>> embeds;
  const Pooling kinds[] = {Pooling::Mean, Pooling::Last, Pooling::Cls, Pooling::Mean};
  for (int i = 0; i < 4; ++i) {
    Request g = greedy_request(prompt_of(30 + i, 50 + i, c.vocab), 6);
    g.on_finish = [&](const RequestResult& r) { results[r.id] = r; };
    ASSERT_TRUE((*s)->submit(std::move(g)).ok());
    Request e;
    e.prompt = prompt_of(5 + 17 * i, 90 + i, c.vocab);
    e.embed = kinds[i];
    e.on_finish = [&](const RequestResult& r) { results[r.id] = r; };
    auto prompt = e.prompt;
    auto id = (*s)->submit(std::move(e));
    ASSERT_TRUE(id.ok()) << id.message();
    embeds.push_back({*id, {prompt, kinds[i]}});
  }
  (*s)->run_until_idle();
  for (const auto& [id, what] : embeds) {
    const RequestResult& r = results[id];
    ASSERT_EQ(r.finish, FinishReason::Stop) << r.error;
    EXPECT_TRUE(r.tokens.empty());
    EXPECT_TRUE(r.session_id.empty());
    EXPECT_EQ(r.usage.prompt_tokens, static_cast<int64_t>(what.first.size()));
    const auto ref =
        reference_pool(plain_hidden(*tm.model, what.first, pool), c.n_embd, what.second);
    ASSERT_EQ(r.embedding.size(), ref.size());
    double norm = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      EXPECT_NEAR(r.embedding[i], ref[i], 1e-5f) << pooling_name(what.second) << " at " << i;
      norm += static_cast<double>(r.embedding[i]) * static_cast<double>(r.embedding[i]);
    }
    EXPECT_NEAR(norm, 1.0, 1e-5);
  }
  // Nothing of the embeddings stays: once the generations' sessions are gone, every page is free.
  (*s)->sessions().evict_idle();
  EXPECT_EQ((*s)->stats().pool.free_pages, free_before);
}

TEST(SchedulerEmbedding, RefusesWhatAnEmbeddingCannotHave) {
  TestModel tm = synth_model("tiny-qwen3");
  ASSERT_TRUE(tm.model && tm.tokenizer);
  ThreadPool pool(1);
  SchedulerOptions o;
  o.kv_memory = 8u << 20;
  o.prefault = false;
  auto s = Scheduler::create(*tm.model, *tm.tokenizer, pool, o);
  ASSERT_TRUE(s.ok()) << s.message();
  auto base = [&] {
    Request r;
    r.prompt = prompt_of(6, 3, tm.model->config().vocab);
    r.embed = Pooling::Mean;
    return r;
  };
  Request with_session = base();
  with_session.session_id = "chat";
  EXPECT_FALSE((*s)->submit(std::move(with_session)).ok());
  Request two = base();
  two.n = 2;
  EXPECT_FALSE((*s)->submit(std::move(two)).ok());
  Request rank = base();
  rank.embed = Pooling::Rank;
  EXPECT_FALSE((*s)->submit(std::move(rank)).ok());
  EXPECT_TRUE((*s)->submit(base()).ok());
}

}  // namespace
}  // namespace tangram::testing

namespace tangram::testing {
namespace {

TEST(EmbeddingPooling, FlagThenGgufThenLastTokenAndNoneOrRankRefused) {
  EXPECT_EQ(*embedding_pooling(std::nullopt, std::nullopt), Pooling::Last);
  EXPECT_EQ(*embedding_pooling(Pooling::Mean, std::nullopt), Pooling::Mean);
  EXPECT_EQ(*embedding_pooling(Pooling::Mean, Pooling::Cls), Pooling::Cls);
  EXPECT_EQ(*embedding_pooling(Pooling::None, Pooling::Last), Pooling::Last);
  const auto none = embedding_pooling(Pooling::None, std::nullopt);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.message().find("--pooling"), std::string::npos) << none.message();
  EXPECT_FALSE(embedding_pooling(Pooling::Rank, std::nullopt).ok());
  EXPECT_FALSE(embedding_pooling(std::nullopt, Pooling::None).ok());
  EXPECT_EQ(parse_pooling("mean"), Pooling::Mean);
  EXPECT_EQ(parse_pooling("avg"), std::nullopt);
}

}  // namespace
}  // namespace tangram::testing
