// n > 1 choices of one request: the prompt is prefilled once, the choices fork its KV pages and
// decode in the same batches, each with its own sampler (seed + choice), result and stream.
#include <gtest/gtest.h>

#include <map>
#include <utility>

#include "scheduler_test_util.h"

namespace tangram::testing {
namespace {

SchedulerOptions choice_options() {
  SchedulerOptions o;
  o.kv_memory = 16u << 20;
  o.kv_type = KvType::F32;  // the reference cache is F32 too
  o.prefault = false;
  o.keep_sessions = false;  // every page must come back
  o.page_tokens = 8;
  return o;
}

struct Choices {
  std::map<int, RequestResult> results;          // by choice
  std::map<int, std::vector<int32_t>> streamed;  // by choice
  int finishes = 0;
};

Choices run_choices(Scheduler& s, Request r) {
  Choices out;
  r.on_finish = [&out](const RequestResult& res) {
    out.results[res.choice] = res;
    ++out.finishes;
  };
  r.on_token = [&out](const TokenEvent& e) { out.streamed[e.choice].push_back(e.token); };
  auto id = s.submit(std::move(r));
  EXPECT_TRUE(id.ok()) << id.message();
  s.run_until_idle();
  return out;
}

TEST(Choices, GreedyChoicesShareOnePrefillAndEqualTheReference) {
  TestModel tm = synth_model("tiny-qwen3");
  ASSERT_TRUE(tm.model && tm.tokenizer);
  ThreadPool pool(2);
  auto s = Scheduler::create(*tm.model, *tm.tokenizer, pool, choice_options());
  ASSERT_TRUE(s.ok()) << s.message();
  const auto prompt = prompt_of(29, 7, tm.model->config().vocab);  // a partly filled last page
  const Reference ref = reference_greedy(*tm.model, *tm.tokenizer, prompt, 10, pool);
  Request r = greedy_request(prompt, 10);
  r.n = 3;
  Choices c = run_choices(**s, std::move(r));
  ASSERT_EQ(c.finishes, 3);
  ASSERT_EQ(c.results.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const RequestResult& res = c.results[i];
    EXPECT_EQ(res.finish, FinishReason::Length) << res.error;
    EXPECT_EQ(res.usage.prompt_tokens, 29);
    EXPECT_EQ(res.usage.completion_tokens, 10);
    EXPECT_EQ(c.streamed[i], res.tokens);
    expect_same_greedy(res.tokens, ref, "choice " + std::to_string(i));
  }
  const SchedulerStats st = (*s)->stats();
  EXPECT_EQ(st.prefill_tokens, 29);    // the prompt ran once
  EXPECT_EQ(st.decode_tokens, 3 * 9);  // each choice's first token came from the prefill
  EXPECT_EQ(st.pool.used_pages, 0);
  EXPECT_EQ(st.pool.used_slots, 0);
  EXPECT_TRUE((*s)->pool().check_consistency().ok());
}

TEST(Choices, EachChoiceSamplesWithItsOwnSeed) {
  TestModel tm = synth_model("tiny-qwen3");
  ASSERT_TRUE(tm.model && tm.tokenizer);
  ThreadPool pool(2);
  auto s = Scheduler::create(*tm.model, *tm.tokenizer, pool, choice_options());
  ASSERT_TRUE(s.ok()) << s.message();
  const auto prompt = prompt_of(21, 9, tm.model->config().vocab);
  auto sampled = [&](int n, uint64_t seed) {
    Request r;
    r.prompt = prompt;
    r.params.temperature = 1.5f;
    r.params.max_tokens = 12;
    r.params.ignore_eos = true;
    r.params.seed = seed;
    r.params.seed_set = true;
    r.n = n;
    return r;
  };
  Choices four = run_choices(**s, sampled(4, 100));
  ASSERT_EQ(four.results.size(), 4u);
  int differ = 0;
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(four.results[i].seed, 100u + static_cast<uint64_t>(i));
    EXPECT_EQ(four.streamed[i], four.results[i].tokens);
    for (int j = 0; j < i; ++j) differ += four.results[i].tokens != four.results[j].tokens ? 1 : 0;
  }
  EXPECT_GE(differ, 5);  // of 6 pairs: a temperature this high almost never repeats 12 tokens
  // The same request again gives the same choices; choice 2 alone is the request of seed 102.
  Choices again = run_choices(**s, sampled(4, 100));
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(again.results[i].tokens, four.results[i].tokens) << "choice " << i;
  Choices alone = run_choices(**s, sampled(1, 102));
  EXPECT_EQ(alone.results[0].tokens, four.results[2].tokens);
  EXPECT_EQ((*s)->stats().pool.used_pages, 0);
  EXPECT_TRUE((*s)->pool().check_consistency().ok());
}

TEST(Choices, CancelledBeforeForkingReportsEveryChoice) {
  TestModel tm = synth_model("tiny-qwen3");
  ASSERT_TRUE(tm.model && tm.tokenizer);
  ThreadPool pool(2);
  auto s = Scheduler::create(*tm.model, *tm.tokenizer, pool, choice_options());
  ASSERT_TRUE(s.ok()) << s.message();
  Request r = greedy_request(prompt_of(12, 3, tm.model->config().vocab), 5);
  r.n = 3;
  Choices c;
  r.on_finish = [&c](const RequestResult& res) {
    c.results[res.choice] = res;
    ++c.finishes;
  };
  auto id = (*s)->submit(std::move(r));
  ASSERT_TRUE(id.ok());
  EXPECT_TRUE((*s)->cancel(*id));
  EXPECT_EQ(c.finishes, 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.results[i].finish, FinishReason::Cancelled);
  // Cancelled while decoding: every fork ends, every page comes back.
  Request d = greedy_request(prompt_of(12, 4, tm.model->config().vocab), 50);
  d.n = 3;
  Choices running;
  d.on_finish = [&running](const RequestResult& res) {
    ++running.finishes;
    running.results[res.choice] = res;
  };
  auto id2 = (*s)->submit(std::move(d));
  ASSERT_TRUE(id2.ok());
  for (int i = 0; i < 4; ++i) (*s)->step();
  EXPECT_TRUE((*s)->cancel(*id2));
  EXPECT_EQ(running.finishes, 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(running.results[i].finish, FinishReason::Cancelled);
  EXPECT_TRUE((*s)->idle());
  EXPECT_EQ((*s)->stats().pool.used_pages, 0);
  EXPECT_TRUE((*s)->pool().check_consistency().ok());
}

TEST(Choices, OutOfRangeNAndSessionsAreRefused) {
  TestModel tm = synth_model("tiny-qwen3");
  ASSERT_TRUE(tm.model && tm.tokenizer);
  ThreadPool pool(2);
  auto s = Scheduler::create(*tm.model, *tm.tokenizer, pool, choice_options());
  ASSERT_TRUE(s.ok()) << s.message();
  Request r = greedy_request(prompt_of(5, 1, tm.model->config().vocab), 2);
  for (const int n : {0, -1, kMaxChoices + 1}) {
    r.n = n;
    EXPECT_FALSE((*s)->validate(r).ok()) << n;
  }
  r.n = kMaxChoices;
  EXPECT_TRUE((*s)->validate(r).ok());
}

// A session continues with choice 0: its KV (prompt and choice 0's reply) stays resident under
// the session's id, and the next turn that extends choice 0 reuses it.
TEST(Choices, SessionContinuesWithChoiceZero) {
  TestModel tm = synth_model("tiny-qwen3");
  ASSERT_TRUE(tm.model && tm.tokenizer);
  ThreadPool pool(2);
  SchedulerOptions o = choice_options();
  o.keep_sessions = true;
  auto s = Scheduler::create(*tm.model, *tm.tokenizer, pool, o);
  ASSERT_TRUE(s.ok()) << s.message();
  Request r = greedy_request(prompt_of(17, 5, tm.model->config().vocab), 6);
  r.n = 2;
  r.session_id = "chat";
  Choices c = run_choices(**s, r);
  ASSERT_EQ(c.results.size(), 2u);
  EXPECT_EQ(c.results[0].session_id, "chat");
  EXPECT_NE(c.results[1].session_id, "chat");
  Request next = greedy_request(r.prompt, 3);
  next.prompt.insert(next.prompt.end(), c.results[0].tokens.begin(), c.results[0].tokens.end());
  next.prompt.push_back(5);
  next.session_id = "chat";
  Choices turn2 = run_choices(**s, next);
  EXPECT_EQ(turn2.results[0].usage.cached_tokens, 17 + 6 - 1);  // the last sampled token never ran
  EXPECT_TRUE((*s)->pool().check_consistency().ok());
}

}  // namespace
}  // namespace tangram::testing
