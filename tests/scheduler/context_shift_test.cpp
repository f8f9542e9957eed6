// Context shift in the scheduler: a prompt that continues a session with a range of it left out
// (the server's oldest turns dropped) keeps the session's KV after the range, moved down and
// re-rotated, instead of recomputing it. Checked: where the range is found (and where not), the
// scheduler's answer equals the same shift done by hand on a paged cache (Model::forward,
// remove_positions, greedy), the usage it reports, that nothing moves without
// Request::context_shift, and a conversation of three contexts under a compressing policy that
// keeps answering within its pages.
#include <gtest/gtest.h>

#include <map>

#include "scheduler/context_shift.h"
#include "scheduler_test_util.h"

namespace tangram::testing {
namespace {

std::vector<int32_t> concat(std::initializer_list<std::span<const int32_t>> parts) {
  std::vector<int32_t> out;
  for (auto p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(FindContextShift, FindsTheRemovedRangeAndNothingElse) {
  const std::vector<int32_t> held = {1, 2, 3, 7, 7, 7, 4, 5, 6, 8};
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 8, 9, 9};
  auto s = find_context_shift(held, prompt, 3, 1);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->from, 3);
  EXPECT_EQ(s->to, 6);
  EXPECT_EQ(s->kept, 4);
  EXPECT_FALSE(find_context_shift(held, prompt, 3, 5));  // keeps too little
  // A token after the range that differs (a reply that tokenizes otherwise) ends what is kept.
  const std::vector<int32_t> edited = {1, 2, 3, 4, 5, 0, 8, 9};
  s = find_context_shift(held, edited, 3, 1);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->to, 6);
  EXPECT_EQ(s->kept, 2);
  EXPECT_FALSE(find_context_shift(held, edited, 3, 3));
  // Nothing held past the common prefix, or a prompt that is the held tokens: nothing to find.
  EXPECT_FALSE(find_context_shift(std::vector<int32_t>{1, 2, 3}, prompt, 3, 1));
  // A held sequence of one repeated token against a prompt of it: bounded, and the smallest cut.
  const std::vector<int32_t> same(5000, 4);
  std::vector<int32_t> p2 = {1};
  p2.insert(p2.end(), 100, 4);
  std::vector<int32_t> h2 = {1};
  h2.insert(h2.end(), same.begin(), same.end());
  const auto r = find_context_shift(h2, p2, 101, 1);  // common covers the prompt: nothing
  EXPECT_FALSE(r);
}

struct Shifted {
  RequestResult first, second;
};

// Turn 1: `prompt1` with 10 greedy tokens in session "c"; turn 2: `prompt2` (context_shift as
// given) with 8 greedy tokens.
Shifted two_turns(Scheduler& s, const std::vector<int32_t>& prompt1,
                  const std::function<std::vector<int32_t>(const std::vector<int32_t>&)>& second,
                  bool shift) {
  Shifted out;
  Request a = greedy_request(prompt1, 10);
  a.session_id = "c";
  a.on_finish = [&](const RequestResult& r) { out.first = r; };
  EXPECT_TRUE(s.submit(std::move(a)).ok());
  s.run_until_idle();
  std::vector<int32_t> held = prompt1;
  held.insert(held.end(), out.first.tokens.begin(), out.first.tokens.end());
  Request b = greedy_request(second(held), 8);
  b.session_id = "c";
  b.context_shift = shift;
  b.on_finish = [&](const RequestResult& r) { out.second = r; };
  EXPECT_TRUE(s.submit(std::move(b)).ok());
  s.run_until_idle();
  return out;
}

SchedulerOptions f32_options() {
  SchedulerOptions o;
  o.kv_memory = 32u << 20;
  o.kv_type = KvType::F32;
  o.prefault = false;
  o.page_tokens = 16;
  o.prefill_chunk = 64;
  return o;
}

TEST(SchedulerContextShift, KeepsTheKvAfterTheRemovedRangeAsTheHandShiftDoes) {
  TestModel tm = synth_model("tiny-qwen3");
  ASSERT_TRUE(tm.model && tm.tokenizer);
  Model& model = *tm.model;
  ThreadPool pool(2);
  auto s = Scheduler::create(model, *tm.tokenizer, pool, f32_options());
  ASSERT_TRUE(s.ok()) << s.message();
  const auto prompt1 = prompt_of(200, 31, model.config().vocab);
  const auto news = prompt_of(15, 32, model.config().vocab);
  // Turn 2 leaves out held tokens [20, 100): the held KV covers 209 positions (the last token
  // generated was not run), so 109 of them are kept after the 20 in front.
  auto second = [&](const std::vector<int32_t>& held) {
    return concat({std::span(held).first(20), std::span(held).subspan(100, 110), news});
  };
  const Shifted got = two_turns(**s, prompt1, second, /*shift=*/true);
  ASSERT_EQ(got.second.finish, FinishReason::Length) << got.second.error;
  EXPECT_EQ(got.second.usage.cached_tokens, 20 + 109);
  EXPECT_EQ(got.second.usage.repositioned_tokens, 109);
  EXPECT_EQ((*s)->stats().context_shifts, 1);

  // The same by hand: the held KV, positions [20, 100) removed, the rest of the prompt run.
  std::vector<int32_t> held = prompt1;
  held.insert(held.end(), got.first.tokens.begin(), got.first.tokens.end());
  const auto prompt2 = second(held);
  const ModelConfig& c = model.config();
  PageGeometry geo{16, c.n_kv_head, c.head_dim, c.head_dim_v, KvType::F32};
  auto bp = BlockPool::create(geo, 8u << 20);
  ASSERT_TRUE(bp.ok());
  auto map = std::make_shared<const HeadGroupMap>(
      HeadGroupMap::contiguous(c.n_layers, c.n_kv_head, c.n_kv_head).value());
  auto cache = std::move(PagedKvCache::create(model.kv_shape(), 512, **bp, map).value());
  std::vector<float> logits(static_cast<size_t>(c.vocab));
  ASSERT_TRUE(model.forward(*cache, held.data(), 209, 0, nullptr, pool).ok());
  ASSERT_TRUE(cache->remove_positions(20, 100, key_rotation(model.rope(), c.head_dim)).ok());
  ASSERT_TRUE(model
                  .forward(*cache, prompt2.data() + 129, static_cast<int64_t>(prompt2.size()) - 129,
                           129, logits.data(), pool)
                  .ok());
  // Greedy as the request samples it: end-of-generation tokens banned (ignore_eos).
  const Reference ref = greedy_from(model, *tm.tokenizer, *cache, logits, 8, pool);
  expect_same_greedy(got.second.tokens, ref, "shifted turn");

  // Without context_shift the same prompt reuses only the common prefix.
  auto plain = Scheduler::create(model, *tm.tokenizer, pool, f32_options());
  ASSERT_TRUE(plain.ok());
  const Shifted unshifted = two_turns(**plain, prompt1, second, /*shift=*/false);
  EXPECT_EQ(unshifted.second.usage.cached_tokens, 20);
  EXPECT_EQ(unshifted.second.usage.repositioned_tokens, 0);
  EXPECT_EQ((*plain)->stats().context_shifts, 0);
}

// A conversation three times the context long, each turn keeping a system prompt and the
// latest turns that fit (as the server's drop-oldest does), under the tangram policy's
// compression: every turn answers, reuses the kept turns' KV, and the pool never runs short.
TEST(SchedulerContextShift, AConversationOfThreeContextsKeepsGoingWithinItsPages) {
  TestModel tm = synth_model("tiny-qwen3");
  ASSERT_TRUE(tm.model && tm.tokenizer);
  Model& model = *tm.model;
  ThreadPool pool(2);
  SchedulerOptions o = f32_options();
  o.kv_memory = 4u << 20;
  o.compression.policy = KvPolicy::Uniform;
  o.compression.ratio = 0.5;
  o.compression.sink = 4;
  o.compression.window = 16;
  o.compression.chunk = 128;
  auto s = Scheduler::create(model, *tm.tokenizer, pool, o);
  ASSERT_TRUE(s.ok()) << s.message();
  const int64_t ctx = (*s)->context();
  const auto system = prompt_of(24, 40, model.config().vocab);
  std::vector<std::vector<int32_t>> turns;  // each: a user turn, then the reply
  int64_t total = 0, shifts = 0, repositioned = 0;
  for (int t = 0; total < 3 * ctx; ++t) {
    turns.push_back(prompt_of(60, static_cast<uint32_t>(100 + t), model.config().vocab));
    // Drop the oldest turns until the prompt leaves 64 tokens of room.
    size_t first = 0;
    auto prompt_from = [&](size_t f) {
      std::vector<int32_t> p = system;
      for (size_t i = f; i < turns.size(); ++i) p.insert(p.end(), turns[i].begin(), turns[i].end());
      return p;
    };
    while (static_cast<int64_t>(prompt_from(first).size()) + 64 > ctx) ++first;
    Request r = greedy_request(prompt_from(first), 20);
    r.session_id = "long";
    r.context_shift = true;
    RequestResult res;
    r.on_finish = [&](const RequestResult& x) { res = x; };
    ASSERT_TRUE((*s)->submit(std::move(r)).ok());
    (*s)->run_until_idle();
    ASSERT_EQ(res.finish, FinishReason::Length) << "turn " << t << ": " << res.error;
    ASSERT_EQ(res.tokens.size(), 20u);
    turns.back().insert(turns.back().end(), res.tokens.begin(), res.tokens.end());
    total += 80;
    repositioned += res.usage.repositioned_tokens;
    if (first > 0) {
      EXPECT_GT(res.usage.cached_tokens, 24) << "turn " << t << " reused only the system prompt";
    }
    EXPECT_LE((*s)->stats().pool.used_pages, (*s)->stats().pool.total_pages);
  }
  shifts = (*s)->stats().context_shifts;
  EXPECT_GT(shifts, 3);
  EXPECT_GT(repositioned, 3 * 60);
}

}  // namespace
}  // namespace tangram::testing
