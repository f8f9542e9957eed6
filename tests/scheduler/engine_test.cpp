// The threaded Engine: submissions from many threads, blocking generate(), cancellation from
// another thread while tokens stream, and shutdown with requests still pending.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "engine/engine.h"
#include "scheduler_test_util.h"

namespace tangram::testing {
namespace {

EngineOptions engine_options() {
  EngineOptions o;
  o.threads = 2;
  o.scheduler.kv_memory = 16u << 20;
  o.scheduler.kv_type = KvType::F32;
  o.scheduler.prefault = false;
  return o;
}

TEST(Engine, ConcurrentClientsGetTheirOwnResults) {
  TestModel tm = synth_model("tiny-qwen3");
  ASSERT_TRUE(tm.model && tm.tokenizer);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<Reference> refs;
  {
    ThreadPool pool(2);
    for (int i = 0; i < 6; ++i) {
      prompts.push_back(
          prompt_of(8 + 9 * i, static_cast<uint32_t>(300 + i), tm.model->config().vocab));
      refs.push_back(reference_greedy(*tm.model, *tm.tokenizer, prompts.back(), 10, pool));
    }
  }
  auto engine = Engine::create(*tm.model, *tm.tokenizer, engine_options());
  ASSERT_TRUE(engine.ok()) << engine.message();
  std::vector<std::future<Result<RequestResult>>> futures;
  for (size_t i = 0; i < prompts.size(); ++i)
    futures.push_back(std::async(std::launch::async, [&, i] {
      return (*engine)->generate(greedy_request(prompts[i], 10));
    }));
  for (size_t i = 0; i < futures.size(); ++i) {
    Result<RequestResult> r = futures[i].get();
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(r->finish, FinishReason::Length);
    expect_same_greedy(r->tokens, refs[i], "client " + std::to_string(i));
    EXPECT_GE(r->timing.total_seconds, r->timing.decode_seconds);
  }
  (*engine)->wait_idle();
  const SchedulerStats st = (*engine)->stats();
  EXPECT_EQ(st.finished, 6);
  EXPECT_EQ(st.running + st.waiting, 0);
}

TEST(Engine, CancelFromAnotherThreadWhileStreaming) {
  TestModel tm = synth_model("tiny-llama");
  ASSERT_TRUE(tm.model && tm.tokenizer);
  auto engine = Engine::create(*tm.model, *tm.tokenizer, engine_options());
  ASSERT_TRUE(engine.ok()) << engine.message();
  std::atomic<int> streamed{0};
  std::promise<void> started;
  Request r = greedy_request(prompt_of(20, 1, tm.model->config().vocab), 400);
  r.on_token = [&](const TokenEvent&) {
    if (streamed.fetch_add(1) == 3) started.set_value();
  };
  std::promise<RequestResult> done;
  r.on_finish = [&](const RequestResult& res) { done.set_value(res); };
  auto id = (*engine)->submit(std::move(r));
  ASSERT_TRUE(id.ok()) << id.message();
  started.get_future().wait();
  (*engine)->cancel(*id);
  const RequestResult res = done.get_future().get();
  EXPECT_EQ(res.finish, FinishReason::Cancelled);
  EXPECT_LT(res.usage.completion_tokens, 400);
  EXPECT_GE(res.usage.completion_tokens, 4);
}

TEST(Engine, SubmitBatchQueuesAllOrNothing) {
  TestModel tm = synth_model("tiny-llama");
  ASSERT_TRUE(tm.model && tm.tokenizer);
  auto engine = Engine::create(*tm.model, *tm.tokenizer, engine_options());
  ASSERT_TRUE(engine.ok()) << engine.message();
  std::atomic<int> finished{0};
  auto make = [&](int64_t n) {
    Request r = greedy_request(prompt_of(n, static_cast<uint32_t>(n), tm.model->config().vocab), 4);
    r.on_finish = [&](const RequestResult&) { finished.fetch_add(1); };
    return r;
  };
  std::vector<Request> bad;
  bad.push_back(make(10));
  bad.push_back(greedy_request({}, 4));  // empty prompt: the whole batch is refused
  EXPECT_FALSE((*engine)->submit_batch(std::move(bad)).ok());
  std::vector<Request> good;
  for (int64_t n : {5, 9, 13}) good.push_back(make(n));
  auto ids = (*engine)->submit_batch(std::move(good));
  ASSERT_TRUE(ids.ok()) << ids.message();
  EXPECT_EQ(ids->size(), 3u);
  (*engine)->wait_idle();
  EXPECT_EQ(finished.load(), 3);
  EXPECT_EQ((*engine)->stats().finished, 3);
}

TEST(Engine, ShutdownFinishesPendingRequests) {
  TestModel tm = synth_model("tiny-llama");
  ASSERT_TRUE(tm.model && tm.tokenizer);
  std::atomic<int> finished{0};
  {
    auto engine = Engine::create(*tm.model, *tm.tokenizer, engine_options());
    ASSERT_TRUE(engine.ok()) << engine.message();
    for (int i = 0; i < 4; ++i) {
      Request r =
          greedy_request(prompt_of(20, static_cast<uint32_t>(i), tm.model->config().vocab), 100000);
      r.on_finish = [&](const RequestResult&) { finished.fetch_add(1); };
      ASSERT_TRUE((*engine)->submit(std::move(r)).ok());
    }
    // A bad request is refused at submit, on the caller's thread.
    EXPECT_FALSE((*engine)->submit(greedy_request({}, 1)).ok());
  }
  EXPECT_EQ(finished.load(), 4);
}

}  // namespace
}  // namespace tangram::testing
