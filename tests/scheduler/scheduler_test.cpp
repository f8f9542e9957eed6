// The scheduler end to end on small models: batched decoding against the plain single-sequence
// reference, chunked prefill mixed with decode, sessions (reuse, eviction, recompute),
// preemption under a full pool, cancellation, priorities and refusals.
#include <gtest/gtest.h>

#include <map>

#include "scheduler_test_util.h"

namespace tangram::testing {
namespace {

SchedulerOptions small_options() {
  SchedulerOptions o;
  o.kv_memory = 16u << 20;
  o.kv_type = KvType::F32;  // the reference cache is F32 too
  o.prefault = false;
  return o;
}

struct Outcome {
  std::map<RequestId, RequestResult> results;
  std::map<RequestId, std::vector<int32_t>> streamed;
};

// Submits every request, steps until idle, collects results and streamed tokens.
Outcome run_all(Scheduler& s, std::vector<Request> requests,
                std::vector<RequestId>* ids = nullptr) {
  Outcome run;
  for (auto& r : requests) {
    auto* out = &run;
    r.on_finish = [out](const RequestResult& res) { out->results[res.id] = res; };
    r.on_token = [out](const TokenEvent& e) { out->streamed[e.id].push_back(e.token); };
    auto id = s.submit(std::move(r));
    EXPECT_TRUE(id.ok()) << id.message();
    if (ids != nullptr && id.ok()) ids->push_back(*id);
  }
  s.run_until_idle();
  return run;
}

struct BatchCase {
  const char* model;
  int n_seqs;
  int64_t step_tokens;
  int64_t prefill_chunk;
  int page_tokens;
  int group_size;
};

class BatchedGreedy : public ::testing::TestWithParam<BatchCase> {};

// N sequences decoded together give the tokens each gives alone (the plain reference), with
// prompts of different lengths read in chunks while the others decode.
TEST_P(BatchedGreedy, MatchesEachSequenceAlone) {
  const BatchCase bc = GetParam();
  TestModel tm = synth_model(bc.model);
  ASSERT_TRUE(tm.model && tm.tokenizer);
  ThreadPool pool(2);
  SchedulerOptions o = small_options();
  o.step_tokens = bc.step_tokens;
  o.prefill_chunk = bc.prefill_chunk;
  o.page_tokens = bc.page_tokens;
  o.page_group_size = bc.group_size;
  auto s = Scheduler::create(*tm.model, *tm.tokenizer, pool, o);
  ASSERT_TRUE(s.ok()) << s.message();
  const int n_gen = 12;
  std::vector<Request> reqs;
  std::vector<Reference> refs;
  for (int i = 0; i < bc.n_seqs; ++i) {
    auto prompt = prompt_of(5 + 11 * i, static_cast<uint32_t>(100 + i), tm.model->config().vocab);
    refs.push_back(reference_greedy(*tm.model, *tm.tokenizer, prompt, n_gen, pool));
    reqs.push_back(greedy_request(prompt, n_gen));
  }
  std::vector<RequestId> ids;
  Outcome run = run_all(**s, std::move(reqs), &ids);
  ASSERT_EQ(run.results.size(), static_cast<size_t>(bc.n_seqs));
  for (int i = 0; i < bc.n_seqs; ++i) {
    const RequestResult& r = run.results[ids[static_cast<size_t>(i)]];
    EXPECT_EQ(r.finish, FinishReason::Length) << r.error;
    EXPECT_EQ(r.usage.completion_tokens, n_gen);
    EXPECT_EQ(run.streamed[r.id], r.tokens) << "streamed tokens differ from the result";
    expect_same_greedy(r.tokens, refs[static_cast<size_t>(i)], "sequence " + std::to_string(i));
  }
  const SchedulerStats st = (*s)->stats();
  EXPECT_EQ(st.running, 0);
  EXPECT_EQ(st.waiting, 0);
  EXPECT_TRUE((*s)->pool().check_consistency().ok());
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BatchedGreedy,
    ::testing::Values(BatchCase{"tiny-qwen3", 1, 512, 512, 16, 4},
                      BatchCase{"tiny-qwen3", 2, 512, 512, 16, 4},
                      BatchCase{"tiny-qwen3", 5, 24, 7, 16, 4},  // prefill chunks beside decode
                      BatchCase{"tiny-qwen3", 8, 40, 16, 8, 1},
                      BatchCase{"tiny-llama", 8, 512, 512, 16, 0},  // unified pages
                      BatchCase{"tiny-qwen2", 4, 9, 3, 4, 2}),
    [](const auto& tinfo) {
      const BatchCase& b = tinfo.param;
      std::string name = std::string(b.model) + "_n" + std::to_string(b.n_seqs) + "_step" +
                         std::to_string(b.step_tokens) + "_chunk" +
                         std::to_string(b.prefill_chunk) + "_P" + std::to_string(b.page_tokens) +
                         "_G" + std::to_string(b.group_size);
      for (char& ch : name)
        if (ch == '-') ch = '_';
      return name;
    });

// A session's second turn runs on its resident cache and gives the logits a fresh prefill of the
// whole conversation gives; so does a turn after the session was evicted (recomputed).
TEST(Sessions, SecondTurnOnResidentCacheMatchesFreshPrefill) {
  TestModel tm = synth_model("tiny-qwen3");
  ASSERT_TRUE(tm.model && tm.tokenizer);
  ThreadPool pool(2);
  auto s = Scheduler::create(*tm.model, *tm.tokenizer, pool, small_options());
  ASSERT_TRUE(s.ok()) << s.message();
  const int64_t V = tm.model->config().vocab;

  auto turn1 = prompt_of(40, 1, V);
  Request r1 = greedy_request(turn1, 6);
  r1.session_id = "chat";
  Outcome a = run_all(**s, {r1});
  ASSERT_EQ(a.results.size(), 1u);
  const RequestResult& t1 = a.results.begin()->second;
  EXPECT_EQ(t1.session_id, "chat");
  EXPECT_EQ(t1.usage.cached_tokens, 0);
  const Session* ses = (*s)->sessions().find("chat");
  ASSERT_NE(ses, nullptr);
  ASSERT_TRUE(ses->cache);
  // The last generated token was never fed back, so the cache holds prompt + 5 tokens.
  EXPECT_EQ(ses->tokens.size(), turn1.size() + 5);

  // Turn 2: the whole conversation (prompt, answer, a new user message).
  std::vector<int32_t> turn2 = turn1;
  turn2.insert(turn2.end(), t1.tokens.begin(), t1.tokens.end());
  const auto extra = prompt_of(17, 2, V);
  turn2.insert(turn2.end(), extra.begin(), extra.end());
  const Reference fresh = reference_greedy(*tm.model, *tm.tokenizer, turn2, 8, pool);
  Request r2 = greedy_request(turn2, 8);
  r2.session_id = "chat";
  r2.keep_first_logits = true;
  Outcome b = run_all(**s, {r2});
  const RequestResult& t2 = b.results.begin()->second;
  EXPECT_EQ(t2.usage.cached_tokens, static_cast<int64_t>(turn1.size() + 5));
  EXPECT_LT(max_abs_diff(t2.first_logits, fresh.first_logits), 1e-3f);
  expect_same_greedy(t2.tokens, fresh, "second turn");

  // Evicted, then turn 3 is recomputed from the full prompt and still matches.
  EXPECT_GT((*s)->sessions().evict_idle(), 0);
  EXPECT_FALSE((*s)->sessions().find("chat")->cache);
  Request r3 = greedy_request(turn2, 8);
  r3.session_id = "chat";
  r3.keep_first_logits = true;
  Outcome c = run_all(**s, {r3});
  const RequestResult& t3 = c.results.begin()->second;
  EXPECT_EQ(t3.usage.cached_tokens, 0);
  EXPECT_LT(max_abs_diff(t3.first_logits, fresh.first_logits), 1e-3f);
  expect_same_greedy(t3.tokens, fresh, "turn after eviction");
  EXPECT_EQ((*s)->stats().session_evictions, 1);
}

// Each generated token's log-probability is the model's own (the raw logits, not the penalised
// ones), and greedy picks the most likely alternative.
TEST(Requests, LogprobsAreTheModelsOwnAndGreedyPicksTheTop) {
  TestModel tm = synth_model("tiny-qwen3");
  ASSERT_TRUE(tm.model && tm.tokenizer);
  ThreadPool pool(2);
  auto s = Scheduler::create(*tm.model, *tm.tokenizer, pool, small_options());
  ASSERT_TRUE(s.ok()) << s.message();
  const int64_t V = tm.model->config().vocab;
  Request r = greedy_request(prompt_of(30, 3, V), 6);
  r.params.repetition_penalty = 1.5f;  // changes the sampled logits, not the reported ones
  r.keep_first_logits = true;
  r.top_logprobs = 3;
  std::vector<TokenLogprob> seen;
  r.on_token = [&](const TokenEvent& e) {
    ASSERT_NE(e.logprob, nullptr);
    seen.push_back(*e.logprob);
  };
  RequestResult res;
  r.on_finish = [&](const RequestResult& x) { res = x; };
  ASSERT_TRUE((*s)->submit(std::move(r)).ok());
  while (!(*s)->idle()) (*s)->step();
  ASSERT_EQ(res.tokens.size(), 6u);
  ASSERT_EQ(seen.size(), res.tokens.size());
  const TokenLogprob first = token_logprob(res.first_logits, res.tokens[0], 3);
  EXPECT_FLOAT_EQ(seen[0].logprob, first.logprob);
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].token, res.tokens[i]);
    ASSERT_EQ(seen[i].top.size(), 3u);
    EXPECT_LE(seen[i].logprob, 0.0f);
    EXPECT_GE(seen[i].top[0].second, seen[i].top[1].second);
  }
  EXPECT_EQ(seen[0].top[0].first,
            res.tokens[0]);  // no penalty on the first token: greedy is the top
  Request bad = greedy_request(prompt_of(5, 1, V), 2);
  bad.top_logprobs = kMaxTopLogprobs + 1;
  EXPECT_FALSE((*s)->submit(std::move(bad)).ok());
}

// A constraint by rule: ids with id % modulus == remainder, and the output is whole after
// `length` tokens.
class EveryNthToken final : public TokenConstraint {
 public:
  EveryNthToken(int32_t modulus, int length, int32_t remainder = 0)
      : modulus_(modulus), remainder_(remainder), left_(length) {}
  std::unique_ptr<TokenConstraint> clone() const override {
    return std::make_unique<EveryNthToken>(*this);
  }
  bool allows(int32_t token) const override { return left_ > 0 && token % modulus_ == remainder_; }
  void accept(int32_t) override { --left_; }
  bool must_end() const override { return left_ == 0; }

 private:
  int32_t modulus_;
  int32_t remainder_;
  int left_;
};

// A constrained sequence keeps to its constraint (greedy: the most likely allowed token, the
// masked row's argmax) and ends when it says so; a sequence decoded beside it is untouched.
TEST(Requests, ConstraintHoldsPerSequenceAndEndsTheOutput) {
  TestModel tm = synth_model("tiny-qwen3");
  ASSERT_TRUE(tm.model && tm.tokenizer);
  ThreadPool pool(2);
  auto s = Scheduler::create(*tm.model, *tm.tokenizer, pool, small_options());
  ASSERT_TRUE(s.ok()) << s.message();
  const int64_t V = tm.model->config().vocab;
  Request free_alone = greedy_request(prompt_of(20, 9, V), 8);
  const Outcome alone = run_all(**s, {free_alone});
  Request constrained = greedy_request(prompt_of(24, 4, V), 20);
  constrained.constraint = std::make_shared<const EveryNthToken>(7, 5);
  constrained.keep_first_logits = true;
  std::vector<RequestId> ids;
  const Outcome both = run_all(**s, {constrained, greedy_request(prompt_of(20, 9, V), 8)}, &ids);
  ASSERT_EQ(ids.size(), 2u);
  const RequestResult& c = both.results.at(ids[0]);
  EXPECT_EQ(c.finish, FinishReason::Stop);
  ASSERT_EQ(c.tokens.size(), 5u);
  for (int32_t t : c.tokens) EXPECT_EQ(t % 7, 0) << t;
  int32_t best = 0;
  for (int32_t id = 0; id < static_cast<int32_t>(c.first_logits.size()); id += 7)
    if (c.first_logits[static_cast<size_t>(id)] > c.first_logits[static_cast<size_t>(best)])
      best = id;
  EXPECT_EQ(c.tokens[0], best);
  EXPECT_EQ(both.results.at(ids[1]).tokens, alone.results.begin()->second.tokens);
  // A constraint no token satisfies ends the sequence with an error, not a crash or a stray token.
  Request impossible = greedy_request(prompt_of(10, 2, V), 4);
  impossible.constraint = std::make_shared<const EveryNthToken>(static_cast<int32_t>(V) + 1, 3,
                                                                static_cast<int32_t>(V));
  impossible.params.ignore_eos = true;
  std::vector<RequestId> bad_id;
  const Outcome failed = run_all(**s, {impossible}, &bad_id);
  ASSERT_EQ(bad_id.size(), 1u);
  EXPECT_EQ(failed.results.at(bad_id[0]).finish, FinishReason::Error);
  EXPECT_NE(failed.results.at(bad_id[0]).error.find("constrained"), std::string::npos);
}

TEST(Sessions, RequestWithoutIdContinuesTheSessionItExtends) {
  TestModel tm = synth_model("tiny-llama");
  ASSERT_TRUE(tm.model && tm.tokenizer);
  ThreadPool pool(2);
  auto s = Scheduler::create(*tm.model, *tm.tokenizer, pool, small_options());
  ASSERT_TRUE(s.ok()) << s.message();
  const int64_t V = tm.model->config().vocab;
  auto p1 = prompt_of(50, 3, V);
  Outcome a = run_all(**s, {greedy_request(p1, 4)});
  const RequestResult& t1 = a.results.begin()->second;
  EXPECT_FALSE(t1.session_id.empty());  // an anonymous session keeps the KV

  std::vector<int32_t> p2 = p1;
  p2.insert(p2.end(), t1.tokens.begin(), t1.tokens.end());
  p2.push_back(42);
  Outcome b = run_all(**s, {greedy_request(p2, 4)});
  const RequestResult& t2 = b.results.begin()->second;
  EXPECT_EQ(t2.session_id, t1.session_id);
  EXPECT_EQ(t2.usage.cached_tokens, static_cast<int64_t>(p1.size() + 3));
  expect_same_greedy(t2.tokens, reference_greedy(*tm.model, *tm.tokenizer, p2, 4, pool),
                     "continued");

  // An unrelated prompt shares nothing and starts a session of its own.
  Outcome c = run_all(**s, {greedy_request(prompt_of(30, 99, V), 2)});
  EXPECT_EQ(c.results.begin()->second.usage.cached_tokens, 0);
  EXPECT_NE(c.results.begin()->second.session_id, t1.session_id);
}

// A pool too small for all sequences at once: sequences are preempted and recomputed, nothing
// is corrupted, every result equals the reference, and every page is accounted for.
TEST(Memory, FullPoolPreemptsAndRecomputes) {
  TestModel tm = synth_model("tiny-qwen3");
  ASSERT_TRUE(tm.model && tm.tokenizer);
  ThreadPool pool(2);
  SchedulerOptions o = small_options();
  o.page_tokens = 8;
  o.page_group_size = 1;
  o.keep_sessions = false;
  const ModelConfig& c = tm.model->config();
  // Pages for about 2.5 sequences of 60 positions.
  const size_t page_bytes =
      8 * (static_cast<size_t>(c.head_dim) + static_cast<size_t>(c.head_dim_v)) * 4;
  const int64_t pages_per_seq = (60 + 7) / 8 * c.n_layers * c.n_kv_head;
  o.kv_memory = page_bytes * static_cast<size_t>(pages_per_seq * 5 / 2);
  auto s = Scheduler::create(*tm.model, *tm.tokenizer, pool, o);
  ASSERT_TRUE(s.ok()) << s.message();
  std::vector<Request> reqs;
  std::vector<Reference> refs;
  for (int i = 0; i < 6; ++i) {
    auto p = prompt_of(20 + 3 * i, static_cast<uint32_t>(200 + i), c.vocab);
    refs.push_back(reference_greedy(*tm.model, *tm.tokenizer, p, 30, pool));
    reqs.push_back(greedy_request(p, 30));
  }
  std::vector<RequestId> ids;
  Outcome run = run_all(**s, std::move(reqs), &ids);
  ASSERT_EQ(run.results.size(), 6u);
  for (size_t i = 0; i < ids.size(); ++i) {
    const RequestResult& r = run.results[ids[i]];
    EXPECT_EQ(r.finish, FinishReason::Length) << r.error;
    expect_same_greedy(r.tokens, refs[i], "sequence " + std::to_string(i));
  }
  const SchedulerStats st = (*s)->stats();
  EXPECT_GT(st.preemptions, 0);
  EXPECT_EQ(st.pool.used_pages, 0);  // no sessions kept: everything returned
  EXPECT_EQ(st.pool.used_slots, 0);
  EXPECT_TRUE((*s)->pool().check_consistency().ok());
}

// Idle sessions are evicted least recently used first when a new request needs their pages.
TEST(Memory, IdleSessionsEvictedLeastRecentlyUsedFirst) {
  TestModel tm = synth_model("tiny-llama");
  ASSERT_TRUE(tm.model && tm.tokenizer);
  ThreadPool pool(2);
  SchedulerOptions o = small_options();
  const ModelConfig& c = tm.model->config();
  const int G = std::min(4, c.n_kv_head);
  const size_t page_bytes = 16 *
                            (static_cast<size_t>(c.head_dim) + static_cast<size_t>(c.head_dim_v)) *
                            4 * static_cast<size_t>(G);
  const int64_t groups = c.n_layers * ((c.n_kv_head + G - 1) / G);
  o.kv_memory = page_bytes * static_cast<size_t>(groups * 9);  // 144 positions per layer
  auto s = Scheduler::create(*tm.model, *tm.tokenizer, pool, o);
  ASSERT_TRUE(s.ok()) << s.message();
  for (const char* id : {"a", "b", "c"}) {
    Request r = greedy_request(prompt_of(30, static_cast<uint32_t>(id[0]), c.vocab), 2);
    r.session_id = id;
    run_all(**s, {r});
  }
  // 3 sessions x 2 pages per group (31 positions each) leave 3 of 9 free; a 60-token request
  // needs 4: evicting "a" (the least recently used) is enough.
  Request r = greedy_request(prompt_of(60, 5, c.vocab), 2);
  r.session_id = "d";
  Outcome run = run_all(**s, {r});
  EXPECT_EQ(run.results.begin()->second.finish, FinishReason::Length);
  EXPECT_FALSE((*s)->sessions().find("a")->cache);
  EXPECT_TRUE((*s)->sessions().find("b")->cache);
  EXPECT_TRUE((*s)->sessions().find("c")->cache);
  EXPECT_TRUE((*s)->sessions().find("d")->cache);
}

TEST(Requests, CancelReturnsEveryPage) {
  TestModel tm = synth_model("tiny-qwen3");
  ASSERT_TRUE(tm.model && tm.tokenizer);
  ThreadPool pool(2);
  SchedulerOptions o = small_options();
  o.keep_sessions = false;
  auto s = Scheduler::create(*tm.model, *tm.tokenizer, pool, o);
  ASSERT_TRUE(s.ok()) << s.message();
  std::vector<RequestResult> done;
  std::vector<RequestId> ids;
  for (int i = 0; i < 3; ++i) {
    Request r =
        greedy_request(prompt_of(30, static_cast<uint32_t>(i), tm.model->config().vocab), 100);
    r.on_finish = [&done](const RequestResult& res) { done.push_back(res); };
    ids.push_back(*(*s)->submit(std::move(r)));
  }
  for (int i = 0; i < 5; ++i) (*s)->step();
  EXPECT_GT((*s)->pool().used_pages(), 0);
  EXPECT_TRUE((*s)->cancel(ids[1]));
  EXPECT_FALSE((*s)->cancel(ids[1]));  // already gone
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].finish, FinishReason::Cancelled);
  EXPECT_GT(done[0].usage.completion_tokens, 0);
  (*s)->cancel_all();
  EXPECT_EQ(done.size(), 3u);
  EXPECT_TRUE((*s)->idle());
  EXPECT_EQ((*s)->pool().used_pages(), 0);
  EXPECT_TRUE((*s)->pool().check_consistency().ok());
}

TEST(Requests, HigherPriorityRunsFirst) {
  TestModel tm = synth_model("tiny-llama");
  ASSERT_TRUE(tm.model && tm.tokenizer);
  ThreadPool pool(1);
  SchedulerOptions o = small_options();
  o.max_running = 1;
  auto s = Scheduler::create(*tm.model, *tm.tokenizer, pool, o);
  ASSERT_TRUE(s.ok()) << s.message();
  std::vector<RequestId> order;
  std::vector<Request> reqs;
  for (int prio : {0, 5, 1}) {
    Request r =
        greedy_request(prompt_of(10, static_cast<uint32_t>(prio), tm.model->config().vocab), 3);
    r.priority = prio;
    reqs.push_back(std::move(r));
  }
  for (auto& r : reqs) {
    r.on_finish = [&order](const RequestResult& res) { order.push_back(res.id); };
    ASSERT_TRUE((*s)->submit(std::move(r)).ok());
  }
  (*s)->run_until_idle();
  EXPECT_EQ(order, (std::vector<RequestId>{2, 3, 1}));
}

TEST(Requests, BadRequestsAreRefusedWithAReason) {
  TestModel tm = synth_model("tiny-llama");
  ASSERT_TRUE(tm.model && tm.tokenizer);
  ThreadPool pool(1);
  SchedulerOptions o = small_options();
  o.kv_memory = 64u << 10;  // tiny-llama, P16 G2, F32: 8 pages, 64 positions per layer
  auto s = Scheduler::create(*tm.model, *tm.tokenizer, pool, o);
  ASSERT_TRUE(s.ok()) << s.message();
  const int64_t V = tm.model->config().vocab;
  EXPECT_FALSE((*s)->submit(greedy_request({}, 4)).ok());
  EXPECT_FALSE((*s)->submit(greedy_request({1, static_cast<int32_t>(V)}, 4)).ok());
  auto too_long = (*s)->submit(greedy_request(prompt_of(600, 1, V), 4));
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.message().find("context"), std::string::npos) << too_long.message();
  Request bad = greedy_request({1, 2, 3}, 4);
  bad.params.top_p = 2.0f;
  EXPECT_FALSE((*s)->submit(std::move(bad)).ok());
  // A prompt whose KV can never fit the pool names the flag to change.
  auto huge = (*s)->submit(greedy_request(prompt_of(100, 1, V), 4));
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.message().find("--kv-memory"), std::string::npos) << huge.message();
  EXPECT_TRUE((*s)->idle());
  // Too small an arena for one page per group.
  SchedulerOptions tiny = small_options();
  tiny.kv_memory = 1024;
  auto t = Scheduler::create(*tm.model, *tm.tokenizer, pool, tiny);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.message().find("--kv-memory"), std::string::npos) << t.message();
}

}  // namespace
}  // namespace tangram::testing
