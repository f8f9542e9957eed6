#include "engine/engine.h"

#include <future>

namespace tangram {

Result<std::unique_ptr<Engine>> Engine::create(Model& model, const Tokenizer& tokenizer,
                                               const EngineOptions& options) {
  std::unique_ptr<Engine> e(new Engine(options.threads));
  TG_ASSIGN(e->scheduler_, Scheduler::create(model, tokenizer, e->pool_, options.scheduler));
  e->stats_ = e->scheduler_->stats();
  e->worker_ = std::thread([raw = e.get()] { raw->loop(); });
  return e;
}

Engine::~Engine() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
}

Result<RequestId> Engine::submit(Request request) {
  TG_TRY(scheduler_->validate(request));  // reads only state fixed at creation
  const RequestId id = next_id_.fetch_add(1);
  {
    std::lock_guard lock(mu_);
    if (stop_) return make_error("the engine is shutting down");
    inbox_.emplace_back(id, std::move(request));
    idle_now_ = false;
  }
  wake_.notify_all();
  return id;
}

Result<std::vector<RequestId>> Engine::submit_batch(std::vector<Request> requests) {
  for (const Request& r : requests) TG_TRY(scheduler_->validate(r));
  std::vector<RequestId> ids;
  {
    std::lock_guard lock(mu_);
    if (stop_) return make_error("the engine is shutting down");
    for (Request& r : requests) {
      ids.push_back(next_id_.fetch_add(1));
      inbox_.emplace_back(ids.back(), std::move(r));
    }
    idle_now_ = requests.empty() && idle_now_;
  }
  wake_.notify_all();
  return ids;
}

void Engine::cancel(RequestId id) {
  {
    std::lock_guard lock(mu_);
    cancels_.push_back(id);
  }
  wake_.notify_all();
}

Result<RequestResult> Engine::generate(Request request) {
  auto done = std::make_shared<std::promise<RequestResult>>();
  std::future<RequestResult> result = done->get_future();
  auto user_finish = std::move(request.on_finish);
  request.on_finish = [done, user_finish](const RequestResult& r) {
    if (user_finish) user_finish(r);
    done->set_value(r);
  };
  TG_TRY(submit(std::move(request)));
  return result.get();
}

SchedulerStats Engine::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Engine::wait_idle() {
  std::unique_lock lock(mu_);
  idle_.wait(lock, [&] { return idle_now_ || stop_; });
}

void Engine::evict_idle_sessions() {
  std::unique_lock lock(mu_);
  const uint64_t target = evictions_done_ + 1;
  evict_requested_ = true;
  wake_.notify_all();
  evicted_.wait(lock, [&] { return evictions_done_ >= target || stop_; });
}

void Engine::loop() {
  std::vector<std::pair<RequestId, Request>> inbox;
  std::vector<RequestId> cancels;
  for (;;) {
    bool evict = false;
    bool stopping = false;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] {
        return stop_ || !inbox_.empty() || !cancels_.empty() || evict_requested_ || !scheduler_->idle();
      });
      inbox.swap(inbox_);
      cancels.swap(cancels_);
      evict = std::exchange(evict_requested_, false);
      stopping = stop_;
    }
    for (auto& [id, req] : inbox) {
      Request keep_callbacks = req;  // submit_with_id consumes the request even on error
      if (Status st = scheduler_->submit_with_id(id, std::move(req)); !st.ok()) {
        // Checked in submit(); reaching here means a duplicate id, which cannot happen.
        RequestResult r;
        r.id = id;
        r.finish = FinishReason::Error;
        r.error = st.message();
        if (keep_callbacks.on_finish) keep_callbacks.on_finish(r);
      }
    }
    inbox.clear();
    for (RequestId id : cancels) scheduler_->cancel(id);
    cancels.clear();
    if (evict) scheduler_->evict_idle_sessions();
    if (stopping) {
      // Every request still pending gets its on_finish (Cancelled) before the engine goes.
      scheduler_->cancel_all();
      std::lock_guard lock(mu_);
      stats_ = scheduler_->stats();
      ++evictions_done_;
      evicted_.notify_all();
      idle_now_ = true;
      idle_.notify_all();
      return;
    }
    if (!scheduler_->idle()) scheduler_->step();
    std::lock_guard lock(mu_);
    stats_ = scheduler_->stats();
    idle_now_ = scheduler_->idle() && inbox_.empty();
    if (idle_now_) idle_.notify_all();
    if (evict) {
      ++evictions_done_;
      evicted_.notify_all();
    }
  }
}

}  // namespace tangram
